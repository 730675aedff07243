package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lettuce re-sends in-flight commands after a reconnect, so every script runs at least once and
 * maybe twice. A re-sent acquire must not hand out a second token or count a second hold; a
 * re-sent release must not fail the true owner nor release someone else's lock.
 */
@ExtendWith(RedisExtension.class)
class ReplayIdempotencyTest {

  /** Script level: the same request twice gives the same token and issues one token only. */
  @Test
  void acquireAndReleaseScriptsAreIdempotent(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("idem"));
      Engine engine = turnstile.engine();
      String req = engine.newRequestId();
      Attempt a1 = engine.awaitQuietly(attempt(engine, lock, req), "a1");
      String fenceAfterFirst = redis.command("GET", lock.fenceKey);
      Attempt a2 = engine.awaitQuietly(attempt(engine, lock, req), "a2");
      assertTrue(a1.acquired && a2.acquired);
      assertEquals(a1.token, a2.token, "replayed acquire returns the same token");
      assertEquals(fenceAfterFirst, redis.command("GET", lock.fenceKey), "no second token issued");
      assertEquals(Long.toString(a1.token), redis.command("HGET", lock.lockKey, "t"), "no second token issued");

      assertEquals(1L, release(engine, lock, req, a1.token), "r1");
      assertEquals(2L, release(engine, lock, req, a1.token), "replayed release is recognised as already done");
      assertEquals(0L, release(engine, lock, "someone:else", 0), "a release of a request that never held it is refused");
      // a new owner's lock survives a replay of the previous owner's release
      String other = engine.newRequestId();
      Attempt a3 = engine.awaitQuietly(attempt(engine, lock, other), "a3");
      assertTrue(a3.acquired);
      assertTrue(a3.token > a1.token);
      assertEquals(2L, release(engine, lock, req, a1.token), "r4");
      assertEquals(other, redis.command("HGET", lock.lockKey, "r"), "new owner still holds it");
      assertEquals("1", redis.command("HEXISTS", lock.lockKey, "o"), "new owner still holds it");
      // and once the new owner has released too (the record names it now), the replay is still
      // recognised: by its token, below the record's and not below the expiry mark
      assertEquals(1L, release(engine, lock, other, a3.token), "r5");
      assertEquals(other, redis.command("HGET", lock.lockKey, "r"));
      assertEquals(2L, release(engine, lock, req, a1.token), "a replayed release is recognised after later releases");
    }
  }

  /**
   * Script level: a hold whose lease ran out is not taken for released, even after the lock moved
   * on and was released again. The grant that found the record gone marks every lower token as
   * possibly expired (field e), so the late release of the expired hold answers "not held" and its
   * owner is told of the loss.
   */
  @Test
  void releaseOfAnExpiredHoldIsNotTakenForAReplay(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("idem-expired"));
      Engine engine = turnstile.engine();
      String first = engine.newRequestId();
      Attempt a1 = engine.awaitQuietly(attempt(engine, lock, first), "a1");
      assertEquals(1L, release(engine, lock, first, a1.token));
      String expired = engine.newRequestId();
      Attempt a2 = engine.awaitQuietly(attempt(engine, lock, expired), "a2");
      assertTrue(a2.acquired);
      redis.command("DEL", lock.lockKey); // its lease runs out in Redis
      String next = engine.newRequestId();
      Attempt a3 = engine.awaitQuietly(attempt(engine, lock, next), "a3");
      assertTrue(a3.acquired && a3.token > a2.token, "tokens go on above the expired hold's");
      assertEquals(1L, release(engine, lock, next, a3.token));
      assertEquals(0L, release(engine, lock, expired, a2.token), "the expired hold was not released");
      assertEquals(0L, release(engine, lock, first, a1.token), "nor can a hold before it be told apart");
      String last = engine.newRequestId();
      Attempt a4 = engine.awaitQuietly(attempt(engine, lock, last), "a4");
      assertEquals(1L, release(engine, lock, last, a4.token));
      assertEquals(2L, release(engine, lock, next, a3.token), "a hold granted after the expiry is recognised");
    }
  }

  /**
   * Script level, read/write lock: a copy of a release sent again is recognised without a marker
   * key. A read release leaves its lease key (without r) until the lease ends; a write release
   * leaves the record (r, t), and a copy that finds a later writer answers by its token, unless the
   * hold it releases may have expired (below e).
   */
  @Test
  void readWriteReleaseScriptsRecogniseTheirOwnCopies(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      String name = unique("idem-rw");
      RedisReadWriteLock rw = (RedisReadWriteLock) turnstile.readWriteLock(name);
      Engine engine = turnstile.engine();
      String read = engine.newRequestId();
      assertEquals(1L, (Long) rwOp(engine, rw, "read", "c:1", read, 0).get(0));
      assertEquals(1L, (long) rwRelease(engine, rw, "runlock", read, 0), "read released");
      assertEquals(2L, (long) rwRelease(engine, rw, "runlock", read, 0), "a copy of the read release");
      assertEquals(0L, (long) rwRelease(engine, rw, "runlock", engine.newRequestId(), 0), "never held");

      String w1 = engine.newRequestId();
      long t1 = writeGrant(engine, rw, "c:1", w1);
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w1, t1));
      assertEquals(2L, (long) rwRelease(engine, rw, "wunlock", w1, t1), "a copy of the write release");
      String w2 = engine.newRequestId();
      long t2 = writeGrant(engine, rw, "c:2", w2);
      assertEquals(2L, (long) rwRelease(engine, rw, "wunlock", w1, t1), "moved on to another writer");
      assertEquals("1", redis.command("HEXISTS", "{turnstile:" + name + "}:rw:w", "o"), "still held by it");
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w2, t2));
      assertEquals(2L, (long) rwRelease(engine, rw, "wunlock", w1, t1), "after a later write release");

      String w3 = engine.newRequestId();
      long t3 = writeGrant(engine, rw, "c:3", w3);
      redis.command("DEL", "{turnstile:" + name + "}:rw:w"); // its lease runs out
      String w4 = engine.newRequestId();
      long t4 = writeGrant(engine, rw, "c:4", w4);
      assertTrue(t4 > t3);
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w4, t4));
      assertEquals(0L, (long) rwRelease(engine, rw, "wunlock", w3, t3), "the expired write hold was not released");
    }
  }

  /**
   * Script level, read/write lock: a read refused behind a waiting writer leaves a waiting entry,
   * which the grant of the same request removes, even with since = 0; a copy of that grant sent
   * again gets the same token and issues none. A read never refused is granted without making an
   * entry.
   */
  @Test
  void readGrantAfterARefusalDropsItsWaitingEntryAndAResendIssuesNoToken(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      String name = unique("idem-rwait");
      String rwait = "{turnstile:" + name + "}:rw:rwait";
      String fence = "{turnstile:" + name + "}:rw:fence";
      RedisReadWriteLock rw = (RedisReadWriteLock) turnstile.readWriteLock(name);
      Engine engine = turnstile.engine();
      String holder = engine.newRequestId();
      assertEquals(1L, (Long) read(engine, rw, "c:1", holder, 0).get(0));
      String writer = engine.newRequestId();
      assertEquals(0L, (Long) rwOp(engine, rw, "write", "c:2", writer, 0).get(0), "the writer waits");
      String reader = engine.newRequestId();
      List<Object> refusal = read(engine, rw, "c:3", reader, 0);
      assertEquals(0L, (Long) refusal.get(0), "a new reader waits behind the waiting writer");
      assertTrue((Long) refusal.get(1) > 0, "with a hint: the writer's entry ages out within a lease");
      assertEquals("1", redis.command("ZCARD", rwait), "its waiting entry");
      engine.awaitQuietly(rw.<Long>op(ScriptOutputType.INTEGER, "wcancel", "", writer, 0), "wcancel");
      List<Object> grant = read(engine, rw, "c:3", reader, 0);
      assertEquals(1L, (Long) grant.get(0), "granted once no writer waits");
      assertEquals("0", redis.command("ZCARD", rwait), "the grant removed its waiting entry");
      String fenceAfter = redis.command("GET", fence);
      List<Object> again = read(engine, rw, "c:3", reader, 0);
      assertEquals(1L, (Long) again.get(0));
      assertEquals(grant.get(1).toString(), again.get(1).toString(), "a copy gets the same token");
      assertEquals(fenceAfter, redis.command("GET", fence), "and issues none");
      assertEquals("2", redis.command("ZCARD", "{turnstile:" + name + "}:rw:readers"));
      String plain = engine.newRequestId();
      assertEquals(1L, (Long) read(engine, rw, "c:4", plain, 0).get(0));
      assertEquals("0", redis.command("EXISTS", rwait), "no waiting entry for a reader never refused");
    }
  }

  /**
   * Script level, read/write lock: a read refused behind a writer whose reply was lost (the
   * connection dropped; Lettuce sends the command again on the new one, and the copy is granted)
   * leaves no waiting entry behind. One left behind was a reader that would never come: every
   * write release within a lease admitted readers instead of waking the writer that waited, which
   * slept until its own hint (up to half a lease; 2 s where the client cannot unblock). Seen as a
   * 2,003 ms resume in the restricted-user fault loop (CHANGELOG.md).
   */
  @Test
  void aReadRefusalWhoseReplyWasLostLeavesNoReaderThatDelaysAWriter(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      String name = unique("rw-ghost");
      String rwait = "{turnstile:" + name + "}:rw:rwait";
      String wq = "{turnstile:" + name + "}:rw:wq";
      RedisReadWriteLock rw = (RedisReadWriteLock) turnstile.readWriteLock(name);
      Engine engine = turnstile.engine();
      String w1 = engine.newRequestId();
      long t1 = writeGrant(engine, rw, "c:1", w1);
      String reader = engine.newRequestId();
      assertEquals(0L, (Long) read(engine, rw, "c:3", reader, 0).get(0), "refused behind the writer (reply lost)");
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w1, t1));
      assertEquals(1L, (Long) read(engine, rw, "c:3", reader, 0).get(0), "the copy sent again is granted");
      assertEquals("0", redis.command("ZCARD", rwait), "and its waiting entry is gone");
      assertEquals(1L, (long) rwRelease(engine, rw, "runlock", reader, 0));
      String w2 = engine.newRequestId();
      long t2 = writeGrant(engine, rw, "c:1", w2);
      String w3 = engine.newRequestId();
      assertEquals(0L, (Long) rwOp(engine, rw, "write", "c:2", w3, 0).get(0), "a second writer waits");
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w2, t2));
      assertEquals("1", redis.command("LLEN", wq), "the write release woke the waiting writer");
    }
  }

  /**
   * Script level, read/write lock: a reader admitted by a write release past a waiting writer is
   * told so (the grant's 3rd element is 1), and a reader that has not waited is refused behind
   * that writer; a grant with no writer waiting says 0. The client sends its next readers to the
   * gate on a 1 (DESIGN §10, within a JVM).
   */
  @Test
  void aReadGrantSaysWhetherAWriterWaits(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisReadWriteLock rw = (RedisReadWriteLock) turnstile.readWriteLock(unique("rw-ahead"));
      Engine engine = turnstile.engine();
      String w1 = engine.newRequestId();
      long t1 = writeGrant(engine, rw, "c:1", w1);
      String reader = engine.newRequestId();
      List<Object> refusal = read(engine, rw, "c:3", reader, 0);
      assertEquals(0L, (Long) refusal.get(0), "behind the writer");
      long since = (Long) refusal.get(2);
      String w2 = engine.newRequestId();
      assertEquals(0L, (Long) rwOp(engine, rw, "write", "c:2", w2, 0).get(0), "a second writer waits");
      assertEquals(1L, (long) rwRelease(engine, rw, "wunlock", w1, t1), "admits the waiting reader");
      List<Object> admitted = read(engine, rw, "c:3", reader, since);
      assertEquals(1L, (Long) admitted.get(0), "admitted past the waiting writer");
      assertEquals(1L, (Long) admitted.get(2), "and told that a writer waits");
      assertEquals(0L, (Long) read(engine, rw, "c:4", engine.newRequestId(), 0).get(0),
          "a reader that has not waited is refused behind the writer");
      engine.awaitQuietly(rw.<Long>op(ScriptOutputType.INTEGER, "wcancel", "", w2, 0), "wcancel");
      List<Object> plain = read(engine, rw, "c:5", engine.newRequestId(), 0);
      assertEquals(1L, (Long) plain.get(0));
      assertEquals(0L, (Long) plain.get(2), "no writer waits");
    }
  }

  private static List<Object> read(Engine engine, RedisReadWriteLock rw, String owner, String request, long since) {
    return engine.awaitQuietly(rw.read(owner, request, since), "read");
  }

  private static List<Object> rwOp(Engine engine, RedisReadWriteLock rw, String op, String owner, String request,
      long number) {
    return engine.awaitQuietly(rw.<List<Object>>op(ScriptOutputType.MULTI, op, owner, request, number), op);
  }

  private static long writeGrant(Engine engine, RedisReadWriteLock rw, String owner, String request) {
    List<Object> reply = rwOp(engine, rw, "write", owner, request, 0);
    assertEquals(1L, (Long) reply.get(0), "granted: " + reply);
    return Long.parseLong(reply.get(1).toString());
  }

  private static Long rwRelease(Engine engine, RedisReadWriteLock rw, String op, String request, long token) {
    return engine.awaitQuietly(rw.<Long>op(ScriptOutputType.INTEGER, op, "", request, token), op);
  }

  private static long release(Engine engine, RedisLock lock, String request, long token) {
    return engine.awaitQuietly(engine.<Long>eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER,
        new String[] {lock.lockKey, lock.wakeKey}, request, Long.toString(token), "30000"), "release");
  }

  /** End to end: the acquire's reply is lost, the connection is cut, Lettuce re-sends it. */
  @Test
  void resentAcquireAfterReconnect(TestRedis redis) throws Exception {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile turnstile = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("replay-acquire"));
      AtomicBoolean acquired = new AtomicBoolean();
      AtomicReference<Long> token = new AtomicReference<>();
      proxy.setDropReplies(true);
      Thread t = TestSupport.start("acquirer", () -> {
        acquired.set(lock.tryLock(10, TimeUnit.SECONDS));
        token.set(lock.fencingToken());
        assertEquals(1, lock.getHoldCount());
        lock.unlock();
      });
      TestSupport.await("acquire reached Redis", java.time.Duration.ofSeconds(5),
          () -> "1".equals(redis.command("HEXISTS", lock.lockKey, "o")));
      String fenceAfterFirst = redis.command("GET", lock.fenceKey);
      String tokenAfterFirst = redis.command("HGET", lock.lockKey, "t");
      proxy.setDropReplies(false);
      proxy.cutAll();
      t.join(10_000);
      assertTrue(acquired.get());
      assertEquals(Long.parseLong(tokenAfterFirst), token.get(), "the re-sent acquire got the same token");
      assertEquals(tokenAfterFirst, redis.command("HGET", lock.lockKey, "t"), "only one token was issued");
      assertEquals(fenceAfterFirst, redis.command("GET", lock.fenceKey), "only one token was issued");
      assertEquals("0", redis.command("HEXISTS", lock.lockKey, "o"), "released");
    }
  }

  /**
   * End to end: the release's reply is lost; meanwhile another client takes the now free lock;
   * the re-sent release neither throws at the true owner nor frees the other client's lock.
   */
  @Test
  void resentReleaseAfterReconnect(TestRedis redis) throws Exception {
    String name = unique("replay-release");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisLock lock = (RedisLock) viaProxy.lock(name);
      Owner owner = Owner.start(lock);
      proxy.setDropReplies(true);
      owner.unlock();
      DistributedLock theirs = direct.lock(name);
      assertTrue(theirs.tryLock(5, TimeUnit.SECONDS), "release reached Redis");
      proxy.setDropReplies(false);
      proxy.cutAll();
      owner.thread.join(10_000);
      assertNull(owner.unlockError.get(), "true owner's unlock must not fail after a replay");
      assertTrue(owner.unlocked.get());
      assertTrue(theirs.isHeldByCurrentThread());
      assertEquals("1", redis.command("HEXISTS", lock.lockKey, "o"), "other client's lock untouched");
      theirs.unlock();
    }
  }

  /**
   * Semaphore: an acquire whose reply is lost reaches Redis; the connection is cut and Lettuce
   * re-sends it. The client must end up holding exactly the permit it was told of (no second
   * permit taken in Redis), and after its release every permit is free.
   */
  @Test
  void resentSemaphoreAcquireAfterReconnect(TestRedis redis) throws Exception {
    String name = unique("replay-sem-acquire");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedSemaphore sem = viaProxy.semaphore(name, 3);
      DistributedSemaphore observer = direct.semaphore(name, 3);
      AtomicBoolean acquired = new AtomicBoolean();
      proxy.setDropReplies(true);
      Thread t = TestSupport.start("acquirer", () -> acquired.set(sem.tryAcquire(10, TimeUnit.SECONDS)));
      TestSupport.await("acquire reached Redis", java.time.Duration.ofSeconds(5),
          () -> observer.availablePermits() == 2);
      proxy.setDropReplies(false);
      proxy.cutAll();
      t.join(10_000);
      assertTrue(acquired.get());
      assertEquals(1, sem.heldPermits());
      assertEquals(2, observer.availablePermits(), "the re-sent acquire took no second permit");
      sem.release();
      assertEquals(3, observer.availablePermits(), "every permit free after the release");
    }
  }

  /**
   * Semaphore: a release whose reply is lost is re-sent after a reconnect. It must give back one
   * permit, not two: the client still holds its other permit in Redis, so capacity is never
   * exceeded.
   */
  @Test
  void resentSemaphoreReleaseAfterReconnect(TestRedis redis) throws Exception {
    String name = unique("replay-sem-release");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedSemaphore sem = viaProxy.semaphore(name, 3);
      DistributedSemaphore observer = direct.semaphore(name, 3);
      assertTrue(sem.tryAcquire(2));
      AtomicReference<Throwable> error = new AtomicReference<>();
      proxy.setDropReplies(true);
      Thread t = TestSupport.start("releaser", () -> {
        try {
          sem.release();
        } catch (Throwable e) {
          error.set(e);
        }
      });
      TestSupport.await("release reached Redis", java.time.Duration.ofSeconds(5),
          () -> observer.availablePermits() == 2);
      proxy.setDropReplies(false);
      proxy.cutAll();
      t.join(10_000);
      assertNull(error.get(), "release succeeded");
      assertEquals(1, sem.heldPermits());
      Thread.sleep(200);
      assertEquals(2, observer.availablePermits(), "the re-sent release gave back no second permit");
      sem.release();
      assertEquals(3, observer.availablePermits());
    }
  }

  /** Read/write lock: a write acquire re-sent after a lost reply gets the same single hold. */
  @Test
  void resentWriteLockAcquireAfterReconnect(TestRedis redis) throws Exception {
    String name = unique("replay-rw");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedReadWriteLock rw = viaProxy.readWriteLock(name);
      DistributedReadWriteLock other = direct.readWriteLock(name);
      AtomicBoolean acquired = new AtomicBoolean();
      AtomicReference<Throwable> error = new AtomicReference<>();
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      // load the script first: a dropped NOSCRIPT reply would stop the EVAL fallback, not test a re-send
      rw.writeLock().lock();
      rw.writeLock().unlock();
      proxy.setDropReplies(true);
      Thread t = TestSupport.start("writer", () -> {
        try {
          acquired.set(rw.writeLock().tryLock(10, TimeUnit.SECONDS));
          assertEquals(1, rw.writeLock().getHoldCount());
          go.await();
          rw.writeLock().unlock();
        } catch (Throwable e) {
          error.set(e);
        }
      });
      TestSupport.await("acquire reached Redis", java.time.Duration.ofSeconds(5), () -> other.writeLock().isLocked());
      proxy.setDropReplies(false);
      proxy.cutAll();
      TestSupport.await("acquired", java.time.Duration.ofSeconds(10), acquired::get);
      assertFalse(other.readLock().tryLock(), "written: no reader gets in");
      go.countDown();
      t.join(10_000);
      assertNull(error.get());
      assertTrue(other.writeLock().tryLock(2, TimeUnit.SECONDS), "free after the single release");
      other.writeLock().unlock();
    }
  }
  /**
   * The release's reply is lost; another client then takes the lock <em>and releases it</em>
   * before the release is re-sent. The re-sent release must still be recognised as this
   * request's (answer "already released"), not reported as a lost lease. Before per-request
   * release markers the lock kept only the last released request (field {@code x}), so the
   * other client's release overwrote it and the true owner got a {@code LockLostException}
   * (found as 2 unexplained read/write leases lost in the {@code CLIENT KILL} fault loop).
   */
  @Test
  void resentReleaseAfterAnotherClientTookAndReleasedTheLock(TestRedis redis) throws Exception {
    String name = unique("replay-release-x");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock mine = viaProxy.lock(name);
      resentReleaseAfterTakeover(proxy, mine, direct.lock(name));
    }
  }

  /** As {@link #resentReleaseAfterAnotherClientTookAndReleasedTheLock}, for the write lock. */
  @Test
  void resentWriteReleaseAfterAnotherClientTookAndReleasedTheLock(TestRedis redis) throws Exception {
    String name = unique("replay-wrelease-x");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri(), TestSupport.UNCACHED);
        Turnstile direct = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      resentReleaseAfterTakeover(proxy, viaProxy.readWriteLock(name).writeLock(),
          direct.readWriteLock(name).writeLock());
    }
  }

  private static void resentReleaseAfterTakeover(TcpProxy proxy, DistributedLock mine, DistributedLock theirs)
      throws Exception {
    java.util.concurrent.atomic.AtomicInteger lost = new java.util.concurrent.atomic.AtomicInteger();
    mine.addLeaseLossListener(e -> lost.incrementAndGet());
    // load the scripts first: a dropped NOSCRIPT reply would stop the EVAL fallback, not test a re-send
    mine.lock();
    mine.unlock();
    Owner owner = Owner.start(mine);
    proxy.setDropReplies(true);
    owner.unlock();
    assertTrue(theirs.tryLock(5, TimeUnit.SECONDS), "the release reached Redis");
    theirs.unlock(); // the last release is now the other client's
    proxy.setDropReplies(false);
    proxy.cutAll(); // the release is sent again on a new connection
    owner.thread.join(10_000);
    assertFalse(owner.thread.isAlive(), "unlock() returned");
    assertNull(owner.unlockError.get(), "the true owner's unlock must not fail after a replay");
    assertTrue(owner.unlocked.get());
    // a release finished locally reports a late loss through the listeners: give it time to arrive
    assertTrue(theirs.tryLock(5, TimeUnit.SECONDS));
    Thread.sleep(500);
    assertEquals(0, lost.get(), "no lease loss reported: the release was this request's");
    theirs.unlock();
  }

  /** A thread that takes a lock, then unlocks it (as its true owner) when told to, and records the outcome. */
  private static final class Owner {
    final AtomicReference<Throwable> unlockError = new AtomicReference<>();
    final AtomicBoolean unlocked = new AtomicBoolean();
    final java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
    Thread thread;

    /** Starts the owner and returns once it holds {@code lock}. */
    static Owner start(DistributedLock lock) throws InterruptedException {
      Owner o = new Owner();
      java.util.concurrent.CountDownLatch locked = new java.util.concurrent.CountDownLatch(1);
      o.thread = TestSupport.start("owner", () -> {
        lock.lock();
        locked.countDown();
        o.go.await();
        try {
          lock.unlock(); // same thread as lock(): the true owner
          o.unlocked.set(true);
        } catch (Throwable e) {
          o.unlockError.set(e);
        }
      });
      locked.await();
      return o;
    }

    /** Lets the owner call unlock(); returns at once. */
    void unlock() {
      go.countDown();
    }
  }

  /**
   * Semaphore: the releases a client keeps to send again after a recovery (a failover may have lost
   * them) are sent after their memo slot was freed. Such a copy must not take the slot back and
   * free it a second time: the first version did, so two later calls shared one slot, one got the
   * other's stored reply, and a grant nobody counted stayed attributed to the client (the randomized
   * fault run found permits stranded that way for many seconds). Every recovery event sends them.
   */
  @Test
  void semaphoreReplayAfterARecoveryNeverFreesASlotTwice(TestRedis redis) throws Exception {
    String name = unique("replay-sem-slots");
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisSemaphore sem = (RedisSemaphore) t.semaphore(name, 4);
      for (int i = 0; i < 20; i++) {
        assertTrue(sem.tryAcquire(2));
        sem.release(2);
      }
      int[] before = sem.slots();
      assertTrue(before[1] <= before[0], "free slots " + before[1] + " of " + before[0]);
      for (int round = 0; round < 3; round++) {
        redis.command("CLIENT", "KILL", "TYPE", "normal"); // a recovery event: the kept releases are sent again
        TestSupport.await("reconnected", java.time.Duration.ofSeconds(10), () -> {
          try {
            return sem.availablePermits() == 4;
          } catch (TurnstileException e) {
            return false;
          }
        });
        Thread.sleep(200); // the re-sent releases answered
        int[] after = sem.slots();
        assertTrue(after[1] <= after[0], "round " + round + ": " + after[1] + " slots free of " + after[0]
            + " used: a slot was freed twice");
      }
      // and the calls that follow, concurrent, each with its own slot, keep the books exact
      Thread[] threads = new Thread[4];
      for (int i = 0; i < threads.length; i++) {
        threads[i] = TestSupport.start("pair-" + i, () -> {
          for (int k = 0; k < 50; k++) {
            if (sem.tryAcquire()) {
              sem.release();
            }
          }
        });
      }
      for (Thread th : threads) {
        th.join(30_000);
      }
      assertEquals(0, sem.heldPermits());
      assertEquals(4, sem.availablePermits(), "nothing stranded: " + sem.books());
    }
  }

  /**
   * Script level, the semaphore's fast path: a call is taken for new there when its sequence number
   * is above the client's high-water mark {@code s:<client>}, without reading its memo. Every copy
   * of a call that ran must still be answered from the memo: copies of fast-path grants and
   * releases, a call overtaken by a later one of the same client, and an acquire whose cancel ran.
   */
  @Test
  void semaphoreFastPathCopiesAreAnsweredFromTheirMemo(TestRedis redis) throws Exception {
    String name = unique("replay-sem-fast");
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisSemaphore sem = (RedisSemaphore) t.semaphore(name, 4);
      Engine e = t.engine();
      SemaphoreRequests.Req r1 = sem.requests.new Req(1, 't', false);
      List<Object> g1 = e.awaitQuietly(sem.requests.eval("acquire", r1, 1, "", 't', 0, 0), "r1");
      assertEquals(1L, g1.get(0));
      long epoch = (Long) g1.get(2);
      assertEquals(g1, e.awaitQuietly(sem.requests.eval("acquire", r1, 1, "", 't', epoch, 0), "r1 copy"));
      assertEquals(3, sem.state()[4], "one permit taken");

      SemaphoreRequests.Req r2 = sem.requests.new Req(1, 't', false); // the fast path: a registration, nobody waits
      List<Object> g2 = e.awaitQuietly(sem.requests.eval("acquire", r2, 1, "", 't', epoch, 0), "r2");
      assertEquals(List.of(1L, 1L, epoch, 0L, 0L), g2);
      assertEquals(g2, e.awaitQuietly(sem.requests.eval("acquire", r2, 1, "", 't', epoch, 0), "r2 copy"));
      assertEquals(2, sem.state()[4], "a copy of a fast-path grant takes nothing");

      SemaphoreRequests.Req r3 = sem.requests.new Req(1, 't', false);
      SemaphoreRequests.Req r4 = sem.requests.new Req(1, 't', false);
      assertEquals(1L, e.awaitQuietly(sem.requests.eval("acquire", r4, 1, "", 't', epoch, 0), "r4").get(0));
      List<Object> g3 = e.awaitQuietly(sem.requests.eval("acquire", r3, 1, "", 't', epoch, 0), "r3, overtaken by r4");
      assertEquals(1L, g3.get(0), "a call below the mark that never ran is new");
      assertEquals(0, sem.state()[4]);
      assertEquals(g3, e.awaitQuietly(sem.requests.eval("acquire", r3, 1, "", 't', epoch, 0), "r3 copy"));
      assertEquals(0, sem.state()[4]);

      assertEquals(List.of(1L), e.awaitQuietly(sem.requests.eval("cancel", r3, 0, "", 't', 0, 0), "cancel r3"));
      assertEquals(1, sem.state()[4], "the cancel gave r3's permit back");
      assertEquals(0L, e.awaitQuietly(sem.requests.eval("acquire", r3, 1, "", 't', epoch, 0), "r3 after its cancel").get(0),
          "a copy of a cancelled acquire is refused");
      assertEquals(1, sem.state()[4]);

      SemaphoreRequests.Req r5 = sem.requests.new Req(1, 't', false);
      List<Object> rel = e.awaitQuietly(sem.requests.eval("release", r5, 1, "", 't', epoch, 0), "r5");
      assertEquals(List.of(1L, 1L, 2L), rel);
      assertEquals(rel, e.awaitQuietly(sem.requests.eval("release", r5, 1, "", 't', epoch, 0), "r5 copy"));
      assertEquals(2, sem.state()[4], "a copy of a fast-path release gives nothing back");
      assertTrue(redis.command("HGET", "{turnstile:" + name + "}:s", "s:" + e.clientId).trim()
          .equals(Long.toString(r5.seq)), "the mark is the highest call that ran");
    }
  }

  /**
   * Script level, semaphore_fast.lua: Lettuce re-sends the very same command after a reconnect, so
   * a fast-path acquire or release can run twice. The second run must change nothing and answer
   * -3 (its sequence number is no longer above the high-water mark), and the general script, to
   * which the client then sends the same call, must answer it from the memo the fast run wrote
   * into the state hash: one permit taken, one given back.
   */
  @Test
  void aResentFastPathCallIsAppliedOnce(TestRedis redis) throws Exception {
    String name = unique("replay-sem-fastscript");
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisSemaphore sem = (RedisSemaphore) t.semaphore(name, 4);
      Engine e = t.engine();
      String state = "{turnstile:" + name + "}:s";
      SemaphoreRequests.Req r1 = sem.requests.new Req(1, 't', false);
      List<Object> g1 = e.awaitQuietly(sem.requests.general("acquire", r1, 1, "", 't', 0, 0), "r1 (registers)");
      assertEquals(1L, g1.get(0));
      long epoch = (Long) g1.get(2);
      assertEquals(3, sem.state()[4]);

      SemaphoreRequests.Req r2 = sem.requests.new Req(1, 't', false);
      String[] acquire = {"a", e.clientId, Integer.toString(r2.slot), Long.toString(r2.seq), "1", Long.toString(epoch)};
      List<Object> first = e.awaitQuietly(fast(e, state, acquire), "r2");
      assertEquals(List.of(1L, 1L, epoch, 0L, 0L), first, "the fast path grants");
      assertEquals(2, sem.state()[4]);
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, state, acquire), "r2, the same command again"),
          "a second run of the same fast acquire is not decided there");
      assertEquals(2, sem.state()[4], "and takes nothing");
      assertEquals(first, e.awaitQuietly(sem.requests.general("acquire", r2, 1, "", 't', epoch, 0), "r2 in semaphore.lua"),
          "the general script answers it from the fast run's memo");
      assertEquals(first, e.awaitQuietly(sem.requests.eval("acquire", r2, 1, "", 't', epoch, 0), "r2 as the client sends it"));
      assertEquals(2, sem.state()[4], "still one permit taken by r2");

      SemaphoreRequests.Req r3 = sem.requests.new Req(1, 't', false);
      String[] release = {"r", e.clientId, Integer.toString(r3.slot), Long.toString(r3.seq), "1", Long.toString(epoch)};
      List<Object> rel = e.awaitQuietly(fast(e, state, release), "r3");
      assertEquals(List.of(1L, 1L, 3L), rel, "the fast path releases");
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, state, release), "r3, the same command again"));
      assertEquals(rel, e.awaitQuietly(sem.requests.eval("release", r3, 1, "", 't', epoch, 0), "r3 as the client sends it"));
      assertEquals(3, sem.state()[4], "one permit given back, not two");
      assertEquals("1", redis.command("HGET", state, "c:" + e.clientId).trim(), "the client holds r1's permit");

      // a cancel of a fast-path grant gives it back once, and a late copy of the grant is refused
      SemaphoreRequests.Req r4 = sem.requests.new Req(1, 't', false);
      String[] acquire4 = {"a", e.clientId, Integer.toString(r4.slot), Long.toString(r4.seq), "1", Long.toString(epoch)};
      assertEquals(1L, e.awaitQuietly(fast(e, state, acquire4), "r4").get(0));
      assertEquals(List.of(1L), e.awaitQuietly(sem.requests.eval("cancel", r4, 0, "", 't', 0, 0), "cancel r4"));
      assertEquals(List.of(0L), e.awaitQuietly(sem.requests.eval("cancel", r4, 0, "", 't', 0, 0), "cancel r4 again"),
          "a copy of the cancel gives nothing back");
      assertEquals(3, sem.state()[4], "r4's permit is back, once");
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, state, acquire4), "r4's copy"));
      assertEquals(0L, e.awaitQuietly(sem.requests.eval("acquire", r4, 1, "", 't', epoch, 0), "r4's copy").get(0),
          "a copy of a cancelled fast-path grant is refused");
      assertEquals(3, sem.state()[4]);
    }
  }

  /**
   * Script level, semaphore_fast.lua in counting mode, whose memo is semaphore.lua's memo key (no
   * registration bounds a field per client): a re-sent fast acquire or release changes nothing
   * and answers -3, and semaphore.lua answers the same call from that memo; a cancel of a fast
   * grant gives it back once and a late copy is refused; a release that would pass
   * {@code Integer.MAX_VALUE} free permits is not decided there, and semaphore.lua refuses it.
   */
  @Test
  void aResentCountingFastPathCallIsAppliedOnce(TestRedis redis) throws Exception {
    String name = unique("replay-csem-fastscript");
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      RedisSemaphore sem = (RedisSemaphore) t.countingSemaphore(name, 4);
      Engine e = t.engine();
      String state = "{turnstile:" + name + "}:s";
      assertEquals(4, sem.availablePermits());

      SemaphoreRequests.Req r1 = sem.requests.new Req(2, 't', false);
      String[] acquire = countingFast(sem, "A", r1, 2);
      List<Object> first = e.awaitQuietly(fast(e, sem, acquire), "r1");
      assertEquals(List.of(1L, 2L, 0L, 0L, 0L), first, "the fast path grants");
      assertEquals(2, sem.availablePermits());
      assertEquals(r1.seq + "|1,2,0,0,0", redis.command("GET", sem.memoPrefix + r1.slot).trim(), "the memo key");
      assertTrue(Long.parseLong(redis.command("PTTL", sem.memoPrefix + r1.slot).trim()) > 0, "the memo expires");
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, sem, acquire), "r1, the same command again"),
          "a second run of the same fast acquire is not decided there");
      assertEquals(2, sem.availablePermits(), "and takes nothing");
      assertEquals(r1.seq + "|1,2,0,0,0", redis.command("GET", sem.memoPrefix + r1.slot).trim(), "the memo put back");
      assertEquals(first, e.awaitQuietly(sem.requests.eval("acquire", r1, 2, "", 't', 0, 0), "r1 as the client sends it"),
          "semaphore.lua answers it from the fast run's memo");
      assertEquals(2, sem.availablePermits(), "two permits taken by r1, once");

      SemaphoreRequests.Req r2 = sem.requests.new Req(1, 't', false);
      String[] release = countingFast(sem, "R", r2, 1);
      List<Object> rel = e.awaitQuietly(fast(e, sem, release), "r2");
      assertEquals(List.of(1L, 1L, 3L), rel, "the fast path releases");
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, sem, release), "r2, the same command again"));
      assertEquals(rel, e.awaitQuietly(sem.requests.eval("release", r2, 1, "", 't', 0, 0), "r2 as the client sends it"));
      assertEquals(3, sem.availablePermits(), "one permit given back, not two");

      // a cancel of a fast-path grant gives it back once, and a late copy of the grant is refused
      SemaphoreRequests.Req r3 = sem.requests.new Req(1, 't', false);
      String[] acquire3 = countingFast(sem, "A", r3, 1);
      assertEquals(1L, e.awaitQuietly(fast(e, sem, acquire3), "r3").get(0));
      assertEquals(2, sem.availablePermits());
      assertEquals(List.of(1L), e.awaitQuietly(sem.requests.eval("cancel", r3, 0, "", 't', 0, 0), "cancel r3"));
      assertEquals(List.of(0L), e.awaitQuietly(sem.requests.eval("cancel", r3, 0, "", 't', 0, 0), "cancel r3 again"),
          "a copy of the cancel gives nothing back");
      assertEquals(3, sem.availablePermits(), "r3's permit is back, once");
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, sem, acquire3), "r3's copy"));
      assertEquals(0L, e.awaitQuietly(sem.requests.eval("acquire", r3, 1, "", 't', 0, 0), "r3's copy").get(0),
          "a copy of a cancelled fast-path grant is refused");
      assertEquals(3, sem.availablePermits());

      // too few permits, or past Integer.MAX_VALUE: not decided here, and nothing changed
      SemaphoreRequests.Req r4 = sem.requests.new Req(4, 't', false);
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, sem, countingFast(sem, "A", r4, 4)), "r4: 4 of 3"));
      SemaphoreRequests.Req r5 = sem.requests.new Req(1, 't', false);
      String[] overflow = countingFast(sem, "R", r5, Integer.MAX_VALUE - 2);
      assertEquals(List.of(-3L), e.awaitQuietly(fast(e, sem, overflow), "r5: past Integer.MAX_VALUE"));
      assertEquals(3, sem.availablePermits());
      assertEquals(List.of(-2L), e.awaitQuietly(sem.requests.eval("release", r5, Integer.MAX_VALUE - 2, "", 't', 0, 0),
          "r5 as the client sends it"), "semaphore.lua refuses the overflow");
      assertEquals(3, sem.availablePermits());
      assertTrue(redis.command("HKEYS", state).lines().noneMatch(f -> f.trim().startsWith("q:")),
          "counting mode writes no memo field into the state hash: " + redis.command("HKEYS", state));
    }
  }

  /** The arguments of semaphore_fast.lua for a counting-mode call, as SemaphoreRequests.eval sends them. */
  private static String[] countingFast(RedisSemaphore sem, String op, SemaphoreRequests.Req r, int n) {
    return new String[] {op, sem.engine.clientId, Integer.toString(r.slot), Long.toString(r.seq), Integer.toString(n),
        "0", sem.leaseMs};
  }

  /** Runs semaphore_fast.lua with a counting-mode call's keys (the state hash, the call's memo key). */
  private static java.util.concurrent.CompletableFuture<List<Object>> fast(Engine e, RedisSemaphore sem, String... args) {
    return e.eval(Script.SEMAPHORE_FAST, ScriptOutputType.MULTI, new String[] {sem.stateKey, sem.memoPrefix + args[2]},
        args);
  }

  /** Runs semaphore_fast.lua with {@code args}, as SemaphoreRequests.eval sends it. */
  static java.util.concurrent.CompletableFuture<List<Object>> fast(Engine e, String state, String... args) {
    return e.eval(Script.SEMAPHORE_FAST, ScriptOutputType.MULTI, new String[] {state}, args);
  }

  /** One run of lock_acquire.lua for {@code request}, owned by the calling thread. */
  private static java.util.concurrent.CompletableFuture<Attempt> attempt(Engine engine, RedisLock lock,
      String request) {
    return lock.acquireCall(engine.ownerId(Thread.currentThread()), request, "").thenApply(RedisLock::parseAttempt);
  }
}
