package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.Bounds;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lock caching ({@link TurnstileOptions.Builder#lockCaching}): a JVM keeps an idle lock's grant
 * until another client asks for it (docs/DESIGN.md §17). Against a real Redis; "another client"
 * is a second Turnstile.
 */
@ExtendWith(RedisExtension.class)
class LockCachingTest {
  private final TestRedis redis;

  LockCachingTest(TestRedis redis) {
    this.redis = redis;
  }

  private static TurnstileOptions caching() {
    return TurnstileOptions.builder().lockCaching(true).build();
  }

  /**
   * A client with {@code options} whose subscriber connection is open: a release caches a grant
   * only then (else it opens the connection and releases in Redis), so its first unlock caches.
   */
  private Turnstile connectCaching(TurnstileOptions options) {
    Turnstile t = Turnstile.connect(redis.uri(), options);
    TestSupport.await("the subscriber connection open", Duration.ofMillis(Bounds.PROMPT_MS),
        () -> t.engine().subscriberOpen("{warm-up}"));
    return t;
  }

  private String lockKey(String name) {
    return "{turnstile:" + name + "}:lock";
  }

  private String field(String name, String f) {
    String v = redis.command("HGET", lockKey(name), f);
    return v == null ? "" : v.trim();
  }

  /** Takes and releases {@code name} on {@code t}, and waits until its grant is cached idle. */
  private static RedisLock cachedIdle(Turnstile t, String name) {
    RedisLock lock = (RedisLock) t.lock(name);
    lock.lock();
    lock.unlock();
    awaitCachedIdle(lock);
    return lock;
  }

  /**
   * A cache for {@code lock} whose first {@code ~} renewal (marking the grant cached) waits in
   * {@code start} until the test runs it; everything else goes to Redis as usual.
   */
  private static LockCache holdingBackStart(RedisLock lock, java.util.List<Runnable> start) {
    LockCache.Io io = LockCache.onRedis(lock);
    LockCache.Io held = (LockCache.Io) java.lang.reflect.Proxy.newProxyInstance(LockCache.Io.class.getClassLoader(),
        new Class<?>[] {LockCache.Io.class}, (proxy, m, args) -> {
          if (!m.getName().equals("markCached")) {
            try {
              return m.invoke(io, args);
            } catch (java.lang.reflect.InvocationTargetException e) {
              throw e.getCause();
            }
          }
          java.util.concurrent.CompletableFuture<Object> reply = new java.util.concurrent.CompletableFuture<>();
          start.add(() -> io.markCached((String) args[0]).whenComplete((r, e) -> {
            if (e != null) {
              reply.completeExceptionally(e);
            } else {
              reply.complete(r);
            }
          }));
          return reply;
        });
    return new LockCache(lock.lockKey, lock.fenceKey, lock.engine.leaseMillis, held, lock.engine.lockCaches);
  }

  /** Waits until {@code lock}'s grant is cached idle in this JVM (its first ~ renewal answered). */
  private static void awaitCachedIdle(RedisLock lock) {
    TestSupport.await("the grant cached idle", Duration.ofMillis(Bounds.PROMPT_MS),
        () -> lock.cache.idleHere() && lock.cache.starting() == null);
  }

  /** Repeated pairs from one thread take the cached grant: nothing is sent to Redis, and every token is larger. */
  /**
   * A short {@code tryLockAsync} (under the revocation's bound, so wrapped) whose returned future
   * is cancelled just as its acquisition was granted: the hold nobody can see any more is released,
   * not left held and renewed. The seam cancels the caller's future between the grant and its
   * delivery to that future.
   */
  @Test
  void aShortTryLockAsyncCancelledAsItIsGrantedLeavesNothingHeld() throws Exception {
    String name = unique("cache-async-cancel");
    try (Turnstile a = connectCaching(caching()); Turnstile b = Turnstile.connect(redis.uri())) {
      RedisLock lock = (RedisLock) a.lock(name);
      java.util.concurrent.atomic.AtomicReference<java.util.concurrent.CompletableFuture<LockHold>> caller =
          new java.util.concurrent.atomic.AtomicReference<>();
      CountDownLatch returned = new CountDownLatch(1);
      lock.beforeTryLockAsyncOutcome = () -> {
        try {
          assertTrue(returned.await(30, TimeUnit.SECONDS), "the caller has the future");
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        caller.get().cancel(false);
      };
      // Redis holds the attempt back for 30 ms, within the 90 ms timeout: its grant arrives after
      // tryLockAsync returned, on the connection's thread (fails without the release: checked)
      redis.command("CLIENT", "PAUSE", "30", "WRITE");
      caller.set(lock.tryLockAsync(90, TimeUnit.MILLISECONDS));
      returned.countDown();
      TestSupport.await("the caller's future ended", Duration.ofSeconds(30), () -> caller.get().isDone());
      lock.beforeTryLockAsyncOutcome = null;
      assertTrue(caller.get().isCancelled());
      DistributedLock other = b.lock(name);
      assertTrue(other.tryLock(10, TimeUnit.SECONDS), "the hold the cancelled call was granted was released");
      other.unlock();
    }
  }

  @Test
  void repeatedPairsSendNothingToRedis() {
    try (Turnstile t = connectCaching(caching())) {
      String name = unique("cache-pairs");
      RedisLock lock = (RedisLock) t.lock(name);
      lock.lock();
      long last = lock.fencingToken();
      lock.unlock();
      awaitCachedIdle(lock);
      assertEquals(t.clientId(), field(name, "c"), "Redis says which client caches the grant");
      Map<String, Long> before = TestSupport.commandStats(redis);
      for (int i = 0; i < 1000; i++) {
        lock.lock();
        long token = lock.fencingToken();
        assertTrue(token > last, "token " + token + " after " + last);
        last = token;
        lock.unlock();
      }
      Map<String, Long> after = TestSupport.commandStats(redis);
      long scripts = TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval");
      assertTrue(scripts <= 2, scripts + " scripts for 1,000 pairs (a renewal may fall in the loop)");
      assertFalse(lock.isLocked(), "cached idle: no thread holds it");
    }
  }

  /**
   * Another client's lock() on a lock cached idle revokes the cache and acquires it, with a token
   * above every token the caching JVM issued; the caching JVM then waits in Redis as anyone.
   */
  @Test
  void anotherClientRevokesAnIdleCache() throws Exception {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = connectCaching(caching())) {
      String name = unique("cache-revoke");
      RedisLock mine = (RedisLock) a.lock(name);
      long last = 0;
      for (int i = 0; i < 5; i++) {
        mine.lock();
        last = mine.fencingToken();
        mine.unlock();
      }
      awaitCachedIdle(mine);
      DistributedLock theirs = b.lock(name);
      long start = System.nanoTime();
      assertTrue(theirs.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertTrue(theirs.fencingToken() > last, theirs.fencingToken() + " after the cache's " + last);
      assertFalse(mine.cache.idleHere(), "the cache gave the grant up (" + ms + " ms)");
      assertFalse(mine.tryLock(), "held by the other client");
      assertTrue(mine.isLocked());
      theirs.unlock();
      assertTrue(mine.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
      assertTrue(mine.fencingToken() > last);
      mine.unlock();
      assertEquals("", field(name, "o"), "contended lately: released in Redis, not cached");
    }
  }

  /** A revocation while a thread of the caching JVM holds the lock takes effect at its unlock. */
  @Test
  void aRevocationWaitsForTheCurrentHold() throws Exception {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-held");
      RedisLock mine = cachedIdle(a, name);
      mine.lock(); // a take: no round trip
      long held = mine.fencingToken();
      DistributedLock theirs = b.lock(name);
      AtomicLong got = new AtomicLong();
      CountDownLatch acquired = new CountDownLatch(1);
      Thread waiter = TestSupport.start("other client", () -> {
        theirs.lock();
        got.set(theirs.fencingToken());
        acquired.countDown();
        theirs.unlock();
      });
      assertFalse(acquired.await(300, TimeUnit.MILLISECONDS), "the hold is not cut short");
      mine.unlock(); // revoked: released in Redis
      assertTrue(acquired.await(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
      waiter.join(Bounds.PROMPT_MS);
      assertTrue(got.get() > held, got.get() + " after " + held);
    }
  }

  /**
   * tryLock() and isLocked() from another client on a grant that a thread of the caching JVM uses:
   * the cache answers "in use" through Redis (lock_busy.lua, field b), so tryLock() returns false
   * at that answer rather than at the revocation's bound, and isLocked() is true; at the thread's
   * unlock the grant is released, b with it, and the other client takes the lock.
   */
  @Test
  void aGrantInUseElsewhereIsAnsweredHeldWithoutWaitingTheBound() throws Exception {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-in-use");
      RedisLock mine = cachedIdle(a, name);
      mine.lock(); // a take: no round trip
      DistributedLock theirs = b.lock(name);
      long start = System.nanoTime();
      assertFalse(theirs.tryLock(), "held by a thread of the caching JVM");
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      System.out.println("tryLock() on a grant in use elsewhere: false after " + ms + " ms");
      assertEquals("1", field(name, "b"), "the cache answered: in use");
      assertTrue(ms < LockCache.REVOCATION_WAIT_MILLIS, "answered, not timed out: " + ms + " ms");
      assertTrue(theirs.isLocked());
      assertFalse(theirs.tryLock(5, TimeUnit.MILLISECONDS), "a short timed tryLock too");
      java.util.concurrent.CompletableFuture<LockHold> async = theirs.tryLockAsync(5, TimeUnit.MILLISECONDS);
      java.util.concurrent.ExecutionException refused = org.junit.jupiter.api.Assertions.assertThrows(
          java.util.concurrent.ExecutionException.class, () -> async.get(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS),
          "and a short tryLockAsync");
      assertTrue(refused.getCause() instanceof java.util.concurrent.TimeoutException, refused.toString());
      assertTrue(mine.isHeldByCurrentThread(), "the hold is not cut short");
      mine.unlock(); // revoked: released in Redis
      assertEquals("", field(name, "b"));
      assertEquals("", field(name, "c"));
      assertTrue(theirs.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
      theirs.unlock();
    }
  }

  /**
   * A {@code tryLock()} that waits for a cache's answer ends at the first refusal by a hold, as a
   * {@code tryLock()} ends at a held lock; and with no answer at all it ends at the bound, never
   * before. The caching client is a stand-in written into Redis (fields o, r, t, c of client
   * "x"), which no JVM answers for: the test plays its cache. Before, a wait stretched for the
   * answer went on waiting while a thread held the lock in Redis, and took the lock when that
   * thread let go within the bound: a ShedLock job ran twice in one period across two nodes.
   */
  @Test
  void aTryLockWaitingForACachesAnswerEndsAtAHold() throws Exception {
    try (Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-answer");
      String lockKey = lockKey(name);
      String wakeKey = "{turnstile:" + name + "}:wake";
      DistributedLock theirs = b.lock(name);
      // no answer: refused at the bound, not before
      redis.command("HSET", lockKey, "o", "x:1", "r", "x:7", "t", "1000", "c", "x");
      redis.command("PEXPIRE", lockKey, "30000");
      long start = System.nanoTime();
      assertFalse(theirs.tryLock());
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertTrue(ms >= LockCache.REVOCATION_WAIT_MILLIS, "waited the bound for an answer: " + ms + " ms");
      // the cache gives the grant up and a thread of x takes the lock in Redis (c goes), waking the
      // waiter; the thread lets go 600 ms later. The waiting tryLock() must end refused at once
      java.util.concurrent.atomic.AtomicReference<Boolean> got = new java.util.concurrent.atomic.AtomicReference<>();
      CountDownLatch done = new CountDownLatch(1);
      Thread waiter = TestSupport.start("tryLock", () -> {
        got.set(theirs.tryLock());
        done.countDown();
      });
      TestSupport.await("the tryLock() waiting in Redis", Duration.ofMillis(Bounds.PROMPT_MS),
          () -> !field(name, "q").isEmpty());
      redis.command("HDEL", lockKey, "c");
      redis.command("RPUSH", wakeKey, "1");
      done.await(600, TimeUnit.MILLISECONDS);
      redis.command("HDEL", lockKey, "o"); // the thread lets go
      redis.command("RPUSH", wakeKey, "1");
      waiter.join(Bounds.PROMPT_MS);
      assertEquals(Boolean.FALSE, got.get(), "refused by the hold, not given the lock after it");
    }
  }

  /**
   * A grant revoked while it is being cached (another client waits already: the first ~ renewal
   * answers that a waiting mark exists) is released, and a thread of this JVM that arrived
   * meanwhile, waiting for the cache, attempts in Redis after that release. Before, that thread
   * waited for a cache that never came, up to a lease (the hot lock with caching: a drain of 26 s).
   */
  @Test
  void aHeadWaitingForACacheRevokedAsItStartsAttemptsInRedis() throws Exception {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-revoked-starting");
      RedisLock mine = (RedisLock) a.lock(name);
      mine.lock();
      DistributedLock theirs = b.lock(name);
      CountDownLatch theirsHeld = new CountDownLatch(1);
      CountDownLatch theirsGo = new CountDownLatch(1);
      Thread other = TestSupport.start("other client", () -> {
        theirs.lock(); // waits in Redis, marked
        theirsHeld.countDown();
        theirsGo.await();
        theirs.unlock();
      });
      TestSupport.await("the other client waiting", Duration.ofMillis(Bounds.PROMPT_MS),
          () -> !field(name, "q").isEmpty());
      java.util.List<Runnable> start = new java.util.concurrent.CopyOnWriteArrayList<>();
      mine.cache = holdingBackStart(mine, start);
      mine.unlock(); // kept: being cached (returns after a short patience: the caching is held back)
      TestSupport.await("the grant being cached", Duration.ofMillis(Bounds.PROMPT_MS), () -> !start.isEmpty());
      java.util.concurrent.atomic.AtomicLong got = new java.util.concurrent.atomic.AtomicLong();
      Thread second = TestSupport.start("second thread", () -> {
        mine.lock(); // waits for the cache
        got.set(System.nanoTime());
        mine.unlock();
      });
      Thread.sleep(100);
      start.forEach(Runnable::run); // answers: someone waits; the cache gives the grant up
      assertTrue(theirsHeld.await(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS), "the other client got it");
      theirsGo.countDown();
      second.join(Bounds.PROMPT_MS);
      other.join(Bounds.PROMPT_MS);
      assertTrue(got.get() != 0, "the second thread acquired within " + Bounds.PROMPT_MS
          + " ms of the other client's unlock (the lease is 30 s)");
    }
  }

  /**
   * A take's release that gives the grant up (it was revoked) races another thread's lock(): that
   * thread must not take the grant being given up. Before, the release marked the grant idle just
   * before giving it up; a thread that took it in between ended the releasing hold's lease, whose
   * unlock() then threw LockLostException ("lost: released"; in the fault loops with caching, about
   * 1,190 such unlocks per lease, with no fault at all).
   */
  @Test
  void aTakeNeverStartsOnAGrantBeingGivenUp() throws Exception {
    try (Turnstile a = connectCaching(caching())) {
      String name = unique("cache-giving-up");
      RedisLock mine = cachedIdle(a, name);
      mine.lock(); // a take
      mine.cache.revoke(); // as another client's attempt would: given up at the end of this hold
      CountDownLatch atSeam = new CountDownLatch(1);
      mine.cache.beforeReleaseAtEndOfTake = () -> {
        atSeam.countDown();
        try {
          Thread.sleep(300); // the other thread's lock() runs meanwhile
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      };
      java.util.concurrent.atomic.AtomicLong secondToken = new java.util.concurrent.atomic.AtomicLong();
      Thread second = TestSupport.start("second thread", () -> {
        atSeam.await();
        mine.lock();
        secondToken.set(mine.fencingToken());
        mine.unlock();
      });
      long first = mine.fencingToken();
      try {
        mine.unlock(); // threw LockLostException before
      } finally {
        mine.cache.beforeReleaseAtEndOfTake = null;
      }
      second.join(Bounds.PROMPT_MS);
      assertFalse(second.isAlive(), "the second thread got the lock");
      assertTrue(secondToken.get() > first, secondToken.get() + " after " + first);
    }
  }

  /** tryLock() from another client takes a lock cached idle: no thread holds it. So does isLocked() see it free. */
  @Test
  void tryLockAndIsLockedFromAnotherClientSeeACachedIdleLockFree() {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-trylock");
      RedisLock mine = cachedIdle(a, name);
      assertFalse(b.lock(name).isLocked(), "cached idle is free");
      mine.lock();
      mine.unlock();
      // isLocked() asked for it: revoked; cache it again after the back-off
      DistributedLock theirs = b.lock(name);
      assertTrue(theirs.tryLock());
      theirs.unlock();
      mine.lock();
      assertTrue(b.lock(name).isLocked(), "held by a thread of the caching JVM");
      mine.unlock();
    }
  }

  /** inspect() shows a cached grant as cached, naming the client, with no thread (only that client knows). */
  @Test
  void inspectShowsACachedGrant() {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-inspect");
      RedisLock mine = cachedIdle(a, name);
      Inspection seen = b.inspect(Inspection.Kind.LOCK, name);
      assertEquals(1, seen.holders().size(), seen.toString());
      Inspection.Holder h = seen.holders().get(0);
      assertTrue(h.cached(), seen.toString());
      assertEquals(a.clientId(), h.clientId());
      assertEquals(null, h.owner());
      assertEquals(0, seen.waiting(), "c is no waiting mark: " + seen);
      assertTrue(seen.toString().contains("(cached)"), seen.toString());
      assertTrue(mine.cache.idleHere(), "an inspection changes nothing");
    }
  }

  /**
   * A revocation message the caching JVM misses (here: a waiting mark written without one) is
   * caught by its next renewal, whose reply says that someone waits.
   */
  @Test
  void aMissedRevocationIsCaughtByTheRenewal() {
    try (Turnstile a = connectCaching(TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(3)).lockCaching(true).build())) {
      String name = unique("cache-missed");
      RedisLock mine = cachedIdle(a, name);
      redis.command("HSET", lockKey(name), "w:0000000000000000", "1", "q", "1");
      TestSupport.await("released at the next renewal (1 s)", Duration.ofMillis(Bounds.PROMPT_MS),
          () -> field(name, "o").isEmpty());
      assertFalse(mine.cache.idleHere());
    }
  }

  /** An idle grant is released after the idle time; at most maxIdle are kept. */
  @Test
  void idleGrantsAreBounded() {
    try (Turnstile a = connectCaching(TurnstileOptions.builder()
        .lockCaching(2, Duration.ofMillis(300)).build())) {
      String[] names = {unique("cache-bound"), unique("cache-bound"), unique("cache-bound")};
      for (String n : names) {
        RedisLock l = (RedisLock) a.lock(n);
        l.lock();
        l.unlock();
        awaitCachedIdle(l);
      }
      TestSupport.await("two idle grants at most", Duration.ofMillis(Bounds.PROMPT_MS),
          () -> a.engine().lockCaches.idleCount() <= 2);
      TestSupport.await("all released after the idle time", Duration.ofMillis(Bounds.PROMPT_MS), () -> {
        for (String n : names) {
          if (!field(n, "o").isEmpty()) {
            return false;
          }
        }
        return true;
      });
    }
  }

  /** close() releases the cached grants: another client need not wait for their leases. */
  @Test
  void closeReleasesCachedGrants() throws Exception {
    String name = unique("cache-close");
    try (Turnstile b = Turnstile.connect(redis.uri())) {
      Turnstile a = connectCaching(caching());
      RedisLock mine = cachedIdle(a, name);
      a.close();
      assertEquals("", field(name, "o"), "released at close");
      assertTrue(b.lock(name).tryLock());
      b.lock(name).unlock();
    }
  }

  /**
   * Tokens stay strict when the caching JVM's clock runs ahead of the server's: its local tokens
   * (anchor + local µs) then pass the server's time. A release of the cached grant carries the
   * last one (lock_release.lua raises the record's token to it), so another client's next grant
   * is above it; and if the grant vanished without a release (its record expired: a crash), the
   * next grant is above the fence, which the cache's renewal raised a lease past its anchor.
   * Here the caching JVM's ticker jumps 2 s ahead (less than half its 30 s lease).
   */
  @Test
  void tokensStayAboveTheCachesWhenItsClockRunsAhead() throws Exception {
    for (boolean crash : new boolean[] {false, true}) {
      try (Turnstile a = connectCaching(caching());
          Turnstile b = Turnstile.connect(redis.uri())) {
        String name = unique(crash ? "cache-crash" : "cache-ahead");
        RedisLock mine = (RedisLock) a.lock(name);
        mine.lock();
        mine.unlock();
        awaitCachedIdle(mine);
        long ahead = TimeUnit.SECONDS.toNanos(2);
        a.engine().ticker = () -> System.nanoTime() + ahead;
        mine.lock();
        long last = mine.fencingToken();
        mine.unlock();
        assertTrue(mine.cache.idleHere(), "still cached");
        if (crash) {
          redis.command("DEL", lockKey(name)); // as its expiry would, after a crash
        }
        DistributedLock theirs = b.lock(name);
        assertTrue(theirs.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
        assertTrue(theirs.fencingToken() > last, (crash ? "after the record expired: " : "after a revocation: ")
            + theirs.fencingToken() + " after the cache's " + last);
        theirs.unlock();
        a.engine().ticker = Ticker.SYSTEM;
      }
    }
  }

  /**
   * A JVM paused past its lease (here: its ticker jumps a lease and a second ahead) never takes
   * from its cache: the lease is over by its own clock. Its next lock() goes to Redis (the cached
   * grant is given up first, if Redis still has it).
   */
  @Test
  void noTakeFromTheCachePastTheLease() throws Exception {
    try (Turnstile a = connectCaching(caching())) {
      String name = unique("cache-paused");
      RedisLock mine = cachedIdle(a, name);
      long takes = mine.cache.takes.get();
      long ahead = TimeUnit.MILLISECONDS.toNanos(a.engine().leaseMillis + 1000);
      a.engine().ticker = () -> System.nanoTime() + ahead;
      try {
        assertTrue(mine.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
        assertEquals(takes, mine.cache.takes.get(), "not taken from the cache");
        mine.unlock();
      } finally {
        a.engine().ticker = Ticker.SYSTEM;
      }
    }
  }

  /**
   * A cached grant used again and again outlives its lease: each renewal confirms the grant's
   * current lease, whichever take's lease object it was sent for (every take has its own).
   */
  @Test
  void aCachedGrantInUseOutlivesItsLease() throws Exception {
    try (Turnstile a = connectCaching(TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(2)).lockCaching(true).build())) {
      String name = unique("cache-outlives");
      RedisLock mine = cachedIdle(a, name);
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      long pairs = 0;
      while (System.nanoTime() - until < 0) {
        mine.lock();
        Thread.sleep(1);
        mine.unlock(); // throws LockLostException once the grant's lease is past by the local clock
        pairs++;
      }
      assertTrue(mine.cache.takes.get() >= pairs - 10, mine.cache.takes.get() + " takes from the cache in " + pairs
          + " pairs: the cache stayed usable for 2.5 leases");
    }
  }

  /** After a revocation the lock is not cached again at once (back-off): its next release goes to Redis. */
  @Test
  void noCachingRightAfterARevocation() throws Exception {
    try (Turnstile a = connectCaching(caching());
        Turnstile b = Turnstile.connect(redis.uri())) {
      String name = unique("cache-backoff");
      RedisLock mine = cachedIdle(a, name);
      DistributedLock theirs = b.lock(name);
      assertTrue(theirs.tryLock(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS));
      theirs.unlock();
      mine.lock();
      mine.unlock();
      assertFalse(mine.cache.idleHere(), "not cached within the back-off");
      assertEquals("", field(name, "o"));
    }
  }

  /**
   * A release caches the grant only once the subscriber connection that carries revocations is
   * open: the first unlock of a fresh client releases in Redis (one round trip, no connection's
   * set-up on the unlock's path) and starts opening it; a later unlock caches.
   */
  @Test
  void theFirstReleaseOpensTheSubscriberConnectionAndGoesToRedis() {
    try (Turnstile t = Turnstile.connect(redis.uri(), caching())) {
      String name = unique("cache-first");
      RedisLock lock = (RedisLock) t.lock(name);
      lock.lock();
      lock.unlock();
      assertEquals("", field(name, "o"), "released in Redis");
      assertFalse(lock.cache.idleHere());
      TestSupport.await("the subscriber connection open", Duration.ofMillis(Bounds.PROMPT_MS),
          () -> t.engine().subscriberOpen(lock.channel));
      lock.lock();
      lock.unlock();
      awaitCachedIdle(lock);
      assertEquals(t.clientId(), field(name, "c"));
    }
  }

  /**
   * {@link Turnstile#activity()} lists a cached grant while a thread holds it (by that thread's
   * name), and not while it is idle, which no thread holds: as {@code isLocked()} says.
   */
  @Test
  void activityListsATakenGrantNotAnIdleOne() {
    String name = unique("cache-activity");
    try (Turnstile a = connectCaching(caching())) {
      RedisLock lock = cachedIdle(a, name);
      assertTrue(a.activity().stream().noneMatch(x -> name.equals(x.name())), a.activity().toString());
      lock.lock();
      try {
        java.util.List<Activity> mine = a.activity().stream().filter(x -> name.equals(x.name())).toList();
        assertEquals(1, mine.size(), mine.toString());
        assertTrue(mine.get(0).isHeld());
        assertEquals(Thread.currentThread().getName(), mine.get(0).thread());
        assertEquals(lock.fencingToken(), mine.get(0).fencingToken());
      } finally {
        lock.unlock();
      }
      assertTrue(a.activity().stream().noneMatch(x -> name.equals(x.name())), a.activity().toString());
    }
  }

  /**
   * Caching is on by default, off when replica acknowledgement is set (which it cannot serve), off
   * when turned off; turned on explicitly beside replica acknowledgement, it is a clear error.
   */
  @Test
  void onByDefaultExceptWithReplicaAcks() {
    assertTrue(TurnstileOptions.defaults().lockCaching());
    assertTrue(TurnstileOptions.builder().build().lockCaching());
    assertFalse(TurnstileOptions.builder().lockCaching(false).build().lockCaching());
    assertFalse(TurnstileOptions.builder().replicaAcks(1, Duration.ofSeconds(1)).build().lockCaching());
    assertTrue(TurnstileOptions.builder().replicaAcks(1, Duration.ofSeconds(1)).replicaAcks(0, Duration.ZERO)
        .build().lockCaching());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> TurnstileOptions.builder().lockCaching(true).replicaAcks(1, Duration.ofSeconds(1)).build());
    assertTrue(e.getMessage().contains("lockCaching cannot be combined with replicaAcks"), e.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> TurnstileOptions.builder().replicaAcks(1, Duration.ofSeconds(1)).lockCaching(4, Duration.ofSeconds(1)).build());
  }

}
