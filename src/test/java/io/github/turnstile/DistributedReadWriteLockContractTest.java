package io.github.turnstile;

import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.unique;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * The {@link java.util.concurrent.locks.ReentrantReadWriteLock} contract, in the manner of the
 * JSR-166 TCK's {@code ReentrantReadWriteLockTest}, plus the documented deviations of
 * {@link DistributedReadWriteLock} (phase-fair policy, upgrade refused at once, reading threads
 * counted once), checked against a real Redis. Three Turnstile instances stand in for three JVMs
 * (clients A, B and C).
 *
 * <p>Locks are owned by threads, so every "other party" runs on its own thread: an {@link Actor},
 * one long-lived thread that runs the tasks given to it in order, so that it can acquire in one
 * step and release in a later one, always on the thread that acquired.
 */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DistributedReadWriteLockContractTest {
  /** Upper bound for any single step an actor is asked to do. */
  private static final long STEP_SECONDS = 10;

  private final TestRedis redis;
  private Turnstile a;
  private Turnstile b;
  private Turnstile c;
  private final List<Actor> actors = new CopyOnWriteArrayList<>();
  /** Clients blocked in Redis when the test began (left over by a failed test, say). */
  private int blockedBefore;

  DistributedReadWriteLockContractTest(TestRedis redis) {
    this.redis = redis;
  }

  @BeforeAll
  void connect() {
    a = Turnstile.connect(redis.uri());
    b = Turnstile.connect(redis.uri());
    c = Turnstile.connect(redis.uri());
  }

  @AfterAll
  void close() {
    a.close();
    b.close();
    c.close();
  }

  @BeforeEach
  void countBlockedClients() throws InterruptedException {
    // Blocked commands that the previous test abandoned (its actors were interrupted) may still be
    // unblocking; counted now and gone a moment later, they would throw the counts below off.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
    while (blockedClients() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    blockedBefore = blockedClients();
  }

  @AfterEach
  void stopActors() {
    for (Actor actor : actors) {
      actor.executor.shutdownNow();
    }
    actors.clear();
  }

  // ============================================================== readers share

  /** The read lock is shared: threads of several clients hold it at once, each thread counted once. */
  @Test
  void readersShare() throws Exception {
    String name = unique("rw-share");
    DistributedReadWriteLock mine = a.readWriteLock(name);
    mine.readLock().lock();
    mine.readLock().lock();
    assertEquals(2, mine.getReadHoldCount());

    Actor otherClient = actor("reader-B");
    DistributedReadWriteLock theirs = b.readWriteLock(name);
    assertTrue(otherClient.call(() -> theirs.readLock().tryLock()), "reader of B enters while A reads");
    assertEquals(1, otherClient.call(theirs::getReadHoldCount));
    assertEquals(2, mine.getReadHoldCount(), "hold counts are per thread");
    assertEquals(2, c.readWriteLock(name).getReadLockCount(), "two reading threads; reentrant holds count once");

    Actor sameClient = actor("reader-A2");
    assertTrue(sameClient.call(() -> mine.readLock().tryLock(1, SECONDS)), "second reading thread of A enters");
    assertEquals(1, sameClient.call(mine::getReadHoldCount));
    assertEquals(3, b.readWriteLock(name).getReadLockCount(), "two threads of one client count twice");
    assertFalse(c.readWriteLock(name).isWriteLocked());
    assertEquals(0, c.readWriteLock(name).getReadHoldCount(), "a thread that does not read holds nothing");

    sameClient.run(() -> mine.readLock().unlock());
    otherClient.run(() -> theirs.readLock().unlock());
    assertEquals(1, c.readWriteLock(name).getReadLockCount());
    mine.readLock().unlock();
    assertEquals(1, mine.getReadHoldCount());
    assertEquals(1, mine.getReadLockCount());
    mine.readLock().unlock();
    assertEquals(0, mine.getReadHoldCount());
    assertFree(name);
  }

  /** Re-entering a held read (or write) lock runs no script in Redis. */
  @Test
  void reentryCostsZeroScripts() {
    DistributedReadWriteLock rw = a.readWriteLock(unique("rw-reentry-free"));
    rw.readLock().lock();
    Map<String, Long> before = TestSupport.commandStats(redis);
    for (int i = 0; i < 1000; i++) {
      rw.readLock().lock();
      assertTrue(rw.readLock().tryLock());
      assertEquals(3, rw.getReadHoldCount());
      rw.readLock().unlock();
      rw.readLock().unlock();
    }
    long scripts = scriptsSince(before);
    assertTrue(scripts < 5, "read re-entry ran scripts: " + scripts);
    rw.readLock().unlock();

    rw.writeLock().lock();
    before = TestSupport.commandStats(redis);
    for (int i = 0; i < 1000; i++) {
      rw.writeLock().lock();
      assertTrue(rw.writeLock().tryLock());
      assertEquals(3, rw.getWriteHoldCount());
      rw.writeLock().unlock();
      rw.writeLock().unlock();
    }
    scripts = scriptsSince(before);
    assertTrue(scripts < 5, "write re-entry ran scripts: " + scripts);
    rw.writeLock().unlock();
    assertFree(rw.name());
  }

  // ============================================================== writer excludes

  /** While a writer holds, no other thread of any client can read or write; the queries say who holds. */
  @Test
  void writerExcludesEveryone() throws Exception {
    String name = unique("rw-writer");
    Actor writer = actor("writer-A");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    writer.run(() -> {
      rwA.writeLock().lock();
      rwA.writeLock().lock();
    });
    assertEquals(2, writer.call(rwA::getWriteHoldCount));
    assertTrue(writer.call(rwA::isWriteLockedByCurrentThread));
    assertTrue(writer.call(rwA::isWriteLocked));

    for (Turnstile t : List.of(a, b, c)) {
      DistributedReadWriteLock rw = t.readWriteLock(name);
      assertTrue(rw.isWriteLocked(), "every client sees the write lock held");
      assertTrue(rw.writeLock().isLocked());
      assertFalse(rw.isWriteLockedByCurrentThread(), "only the writer thread holds it");
      assertEquals(0, rw.getWriteHoldCount());
      assertFalse(rw.readLock().tryLock(), "no reader enters while a writer holds");
      assertFalse(rw.writeLock().tryLock(), "no second writer enters");
      assertEquals(0, rw.getReadHoldCount());
      assertEquals(0, rw.getReadLockCount());
    }

    writer.run(() -> rwA.writeLock().unlock());
    assertTrue(b.readWriteLock(name).isWriteLocked(), "one hold left");
    writer.run(() -> rwA.writeLock().unlock());
    assertFalse(writer.call(rwA::isWriteLockedByCurrentThread));
    assertFree(name);
  }

  /** While readers hold, no thread of any client can take the write lock. */
  @Test
  void readersExcludeWriters() throws Exception {
    String name = unique("rw-readers-exclude");
    Actor reader1 = actor("reader-A");
    Actor reader2 = actor("reader-B");
    reader1.run(() -> a.readWriteLock(name).readLock().lock());
    reader2.run(() -> b.readWriteLock(name).readLock().lock());
    for (Turnstile t : List.of(a, b, c)) {
      DistributedReadWriteLock rw = t.readWriteLock(name);
      assertFalse(rw.writeLock().tryLock(), "no writer enters while readers hold");
      assertFalse(rw.isWriteLocked());
      assertEquals(2, rw.getReadLockCount());
    }
    reader1.run(() -> a.readWriteLock(name).readLock().unlock());
    assertFalse(c.readWriteLock(name).writeLock().tryLock(), "one reader still holds");
    reader2.run(() -> b.readWriteLock(name).readLock().unlock());
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    assertTrue(rwC.writeLock().tryLock(), "free once the last reader left");
    rwC.writeLock().unlock();
    assertFree(name);
  }

  /** The write lock is reentrant: n acquisitions give hold count n and need n unlocks. */
  @Test
  void writeLockReentrant() throws Exception {
    String name = unique("rw-write-reentrant");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    Lock w = rw.writeLock();
    w.lock();
    long token = rw.writeLock().fencingToken();
    for (int i = 2; i <= 6; i++) {
      switch (i % 4) {
        case 0 -> w.lock();
        case 1 -> assertTrue(w.tryLock());
        case 2 -> assertTrue(w.tryLock(1, SECONDS));
        default -> w.lockInterruptibly();
      }
      assertEquals(i, rw.getWriteHoldCount());
      assertTrue(rw.isWriteLockedByCurrentThread());
    }
    assertEquals(token, rw.writeLock().fencingToken(), "re-entry keeps the token");
    for (int i = 6; i > 0; i--) {
      assertTrue(b.readWriteLock(name).isWriteLocked());
      w.unlock();
      assertEquals(i - 1, rw.getWriteHoldCount());
    }
    assertFalse(rw.isWriteLockedByCurrentThread());
    assertThrows(IllegalMonitorStateException.class, w::unlock, "hold count already zero");
    assertFree(name);
  }

  // ============================================================== unlock by non-holder

  /** unlock() of the read or write lock by a thread that does not hold it throws IllegalMonitorStateException. */
  @Test
  void unlockByNonHolderThrowsIMSE() throws Exception {
    String name = unique("rw-imse");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock, "read never locked");
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::unlock, "write never locked");

    rw.readLock().lock();
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::unlock, "holding read does not allow a write unlock");
    rw.readLock().unlock();

    rw.writeLock().lock();
    rw.readLock().lock(); // allowed while holding the write lock
    Actor sameClient = actor("other-thread-A");
    Actor otherClient = actor("other-client-B");
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    assertThrows(IllegalMonitorStateException.class, () -> sameClient.run(() -> rw.readLock().unlock()));
    assertThrows(IllegalMonitorStateException.class, () -> sameClient.run(() -> rw.writeLock().unlock()));
    assertThrows(IllegalMonitorStateException.class, () -> otherClient.run(() -> rwB.readLock().unlock()));
    assertThrows(IllegalMonitorStateException.class, () -> otherClient.run(() -> rwB.writeLock().unlock()));

    assertEquals(1, rw.getReadHoldCount(), "failed foreign unlocks change nothing");
    assertEquals(1, rw.getWriteHoldCount());
    assertTrue(rwB.isWriteLocked());
    assertEquals(1, rwB.getReadLockCount());
    rw.readLock().unlock();
    rw.writeLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::unlock);
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::unlock);
    assertFree(name);
  }

  // ============================================================== downgrade / upgrade

  /** Downgrade: write, then read, then release write leaves a read hold that admits readers and stops writers. */
  @Test
  void downgrade() throws Exception {
    String name = unique("rw-downgrade");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    rw.writeLock().lock();
    long writeToken = rw.writeLock().fencingToken();
    rw.readLock().lock();
    assertEquals(1, rw.getReadHoldCount());
    assertTrue(rw.readLock().fencingToken() > writeToken, "the read acquisition gets a newer token");
    rw.writeLock().unlock();
    assertEquals(1, rw.getReadHoldCount());
    assertEquals(0, rw.getWriteHoldCount());
    assertFalse(rw.isWriteLocked());
    assertFalse(b.readWriteLock(name).isWriteLocked());
    assertEquals(1, b.readWriteLock(name).getReadLockCount());

    Actor readerB = actor("reader-B");
    Actor writerC = actor("writer-C");
    Actor readerA = actor("reader-A2");
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    assertTrue(readerB.call(() -> rwB.readLock().tryLock()), "another client's reader enters after the downgrade");
    assertTrue(readerA.call(() -> rw.readLock().tryLock()), "another thread of the same client reads too");
    assertEquals(3, rwC.getReadLockCount());
    assertFalse(writerC.call(() -> rwC.writeLock().tryLock()), "a writer cannot enter while the downgraded hold lasts");
    readerB.run(() -> rwB.readLock().unlock());
    readerA.run(() -> rw.readLock().unlock());
    assertFalse(writerC.call(() -> rwC.writeLock().tryLock(100, MILLISECONDS)), "the downgraded reader alone still keeps writers out");

    rw.readLock().unlock();
    assertFree(name);
    assertTrue(writerC.call(() -> rwC.writeLock().tryLock(1, SECONDS)), "free after the last read hold");
    writerC.run(() -> rwC.writeLock().unlock());
    assertTrue(readerB.call(() -> rwB.readLock().tryLock()));
    readerB.run(() -> rwB.readLock().unlock());
    assertFree(name);
  }

  /**
   * The TCK's {@code testReadHoldingWriteLock2}: the writer downgrades while other threads of its
   * own client wait for the read lock. They wait at this JVM's read gate, behind the writer in
   * Redis; the writer's {@code readLock().lock()} used to queue at that gate behind them, and so
   * waited forever for its own write lock to go. Now the writer takes the read lock at once (Redis
   * grants it to the write owner), its {@code tryLock()} too, and the waiting readers are admitted
   * when it releases the write lock. The writer runs on an actor, so that a deadlock fails the
   * step instead of hanging the suite.
   */
  @Test
  void downgradeWhileReadersOfTheSameClientWait() throws Exception {
    String name = unique("rw-downgrade-waiting");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    Actor writer = actor("writer-A");
    writer.run(() -> rw.writeLock().lock());
    Actor reader1 = actor("reader-A1");
    Actor reader2 = actor("reader-A2");
    Future<Void> read1 = reader1.submit(() -> rw.readLock().lock());
    Future<Void> read2 = reader2.submit(() -> rw.readLock().lock());
    awaitBlockedClients(1); // the gate holder waits in Redis (subscribed), the other at the gate
    TestSupport.awaitWaiting(reader1.thread);
    TestSupport.awaitWaiting(reader2.thread);

    writer.run(() -> {
      rw.readLock().lock();
      assertTrue(rw.readLock().tryLock(), "tryLock() of the read lock by the writer");
      rw.readLock().unlock();
      rw.readLock().unlock();
    });
    assertFalse(read1.isDone() || read2.isDone(), "readers still wait for the write lock");
    writer.run(() -> {
      rw.readLock().lock(); // downgrade: read, then release the write lock
      rw.writeLock().unlock();
    });
    get(read1);
    get(read2);
    assertEquals(3, b.readWriteLock(name).getReadLockCount(), "the downgraded writer and both readers read");
    writer.run(() -> rw.readLock().unlock());
    reader1.run(() -> rw.readLock().unlock());
    reader2.run(() -> rw.readLock().unlock());
    assertFree(name);
  }

  /**
   * The TCK's {@code testReadTryLockBarging}: {@code readLock().tryLock()} takes the read lock when
   * no writer holds it, whether or not writers or readers wait, as {@code ReentrantReadWriteLock}'s
   * does even in fair mode. A reader holds it; a writer waits (so new readers queue: phase-fair), a
   * reader of the same client waits behind that writer; a third thread of that client, and a
   * thread of another client, each get it with {@code tryLock()}. The waiters keep waiting, and
   * are served in policy order once the readers leave. (It returned false before: the first thread
   * found the local read gate taken by the waiting reader, the second was held back by the
   * waiting writer.)
   */
  @Test
  void readTryLockBarges() throws Exception {
    String name = unique("rw-barge");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    Actor holder = actor("reader-A");
    holder.run(() -> rw.readLock().lock());
    Actor writer = actor("writer-A");
    Future<Void> writing = writer.submit(() -> rw.writeLock().lock());
    awaitBlockedClients(1);
    Actor waitingReader = actor("reader-A2");
    Future<Void> reading = waitingReader.submit(() -> rw.readLock().lock());
    awaitBlockedClients(2);
    TestSupport.awaitWaiting(waitingReader.thread);

    Actor barger = actor("reader-A3");
    assertTrue(barger.call(() -> rw.readLock().tryLock()), "tryLock() of a thread of the waiters' client");
    Actor bargerB = actor("reader-B");
    assertTrue(bargerB.call(() -> rwB.readLock().tryLock()), "tryLock() of another client");
    assertEquals(3, rwB.getReadLockCount());
    barger.run(() -> rw.readLock().unlock());
    bargerB.run(() -> rwB.readLock().unlock());
    assertFalse(writing.isDone(), "the writer still waits");
    assertFalse(reading.isDone(), "the reader behind the writer still waits");

    holder.run(() -> rw.readLock().unlock());
    get(writing);
    assertFalse(reading.isDone(), "the reader queued behind the writer");
    writer.run(() -> rw.writeLock().unlock());
    get(reading);
    waitingReader.run(() -> rw.readLock().unlock());
    assertFree(name);
  }

  /** Upgrade is refused at once: a reader asking for the write lock gets IllegalMonitorStateException, and nothing changes. */
  @Test
  void upgradeFailsFast() throws Exception {
    String name = unique("rw-upgrade");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    Lock w = rw.writeLock();
    // the reader is an actor, so that an upgrade that blocks (instead of failing) cannot hang the suite
    Actor reader = actor("reader-A");
    reader.run(() -> {
      rw.readLock().lock();
      rw.readLock().lock();
    });
    long readToken = reader.call(rw.readLock()::fencingToken);
    List<TestSupport.ThrowingRunnable> attempts = List.of(
        w::lock, w::lockInterruptibly, w::tryLock, () -> w.tryLock(1, SECONDS));
    for (TestSupport.ThrowingRunnable attempt : attempts) {
      Future<Long> refused = reader.submit(() -> {
        long start = System.nanoTime();
        try {
          attempt.run();
        } catch (IllegalMonitorStateException e) {
          return millisSince(start);
        }
        return fail("upgrade was not refused; write holds: " + rw.getWriteHoldCount());
      });
      long ms = get(refused);
      assertTrue(ms < Bounds.OVERRUN_MS, "upgrade refused in " + ms + " ms");
      assertEquals(2, reader.call(rw::getReadHoldCount), "read holds unchanged");
      assertEquals(readToken, reader.call(rw.readLock()::fencingToken));
      assertEquals(0, reader.call(rw::getWriteHoldCount));
      assertFalse(reader.<Boolean>call(rw::isWriteLockedByCurrentThread));
      assertFalse(rw.isWriteLocked());
      assertFalse(b.readWriteLock(name).isWriteLocked());
      assertEquals(1, b.readWriteLock(name).getReadLockCount());
    }
    // the refused upgrades left no waiting writer behind that would hold new readers back
    Actor readerB = actor("reader-B");
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    // 1 s, not 0: a zero timeout gives the reply 20 ms (Call.MIN_REPLY_NANOS), which a loaded
    // server matrix once missed; a waiting writer left behind would hold readers back for a lease (30 s)
    assertTrue(readerB.call(() -> rwB.readLock().tryLock(1, SECONDS)), "new readers still enter");
    readerB.run(() -> rwB.readLock().unlock());
    reader.run(() -> {
      rw.readLock().unlock();
      rw.readLock().unlock();
    });
    assertFree(name);
    // with the read lock released, the same thread may write
    assertTrue(reader.call(() -> w.tryLock()));
    reader.run(w::unlock);
    assertFree(name);
  }

  // ============================================================== phase-fair policy

  /** No writer starvation: once a writer waits, new readers queue behind it; the last reader out lets it in. */
  @Test
  void waitingWriterStopsNewReaders() throws Exception {
    String name = unique("rw-no-starve");
    Actor readerA = actor("reader-A");
    Actor writerB = actor("writer-B");
    Actor readerC = actor("reader-C");
    Actor readerA2 = actor("reader-A2");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    readerA.run(() -> rwA.readLock().lock());

    AtomicLong writerAcquiredAt = new AtomicLong();
    Future<Void> writing = writerB.submit(() -> {
      rwB.writeLock().lock();
      writerAcquiredAt.set(System.nanoTime());
    });
    awaitBlockedClients(1); // the writer waits inside Redis
    assertFalse(writing.isDone());

    long start = System.nanoTime();
    assertFalse(readerC.call(() -> rwC.readLock().tryLock(200, MILLISECONDS)),
        "a new reader queues behind the waiting writer");
    assertTrue(millisSince(start) >= 200);
    // tryLock(0, unit) keeps the policy (tryLock() barges, as the JDK's does: readTryLockBarges)
    assertFalse(readerC.call(() -> rwC.readLock().tryLock(0, SECONDS)));
    assertFalse(readerA2.call(() -> rwA.readLock().tryLock(0, SECONDS)), "also a new reader of the reading client");
    assertEquals(1, rwC.getReadLockCount());
    assertFalse(writing.isDone(), "the writer still waits for the first reader");

    long releasedAt = System.nanoTime();
    readerA.run(() -> rwA.readLock().unlock());
    get(writing);
    long ms = TimeUnit.NANOSECONDS.toMillis(writerAcquiredAt.get() - releasedAt);
    assertTrue(ms < Bounds.PROMPT_MS, "writer got the lock " + ms + " ms after the last reader left");
    assertTrue(writerB.call(rwB::isWriteLockedByCurrentThread));
    assertTrue(rwC.isWriteLocked());
    writerB.run(() -> rwB.writeLock().unlock());
    assertFree(name);
    awaitBlockedClients(0);
  }

  /**
   * When a writer releases, every reader already waiting is admitted at once, even ahead of a
   * writer that was queued before the release; that writer gets the lock when the readers leave.
   */
  @Test
  void waitingReadersAdmittedTogetherAheadOfQueuedWriter() throws Exception {
    String name = unique("rw-admit");
    Actor writerA = actor("writer-A");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    writerA.run(() -> rwA.writeLock().lock());

    CountDownLatch allReading = new CountDownLatch(3);
    CountDownLatch leave = new CountDownLatch(1);
    AtomicReference<Throwable> readerFailure = new AtomicReference<>();
    List<Future<Void>> reading = new ArrayList<>();
    Turnstile[] clients = {b, b, c};
    for (int i = 0; i < 3; i++) {
      DistributedReadWriteLock rw = clients[i].readWriteLock(name);
      reading.add(actor("reader-" + i).submit(() -> {
        rw.readLock().lock();
        try {
          allReading.countDown();
          if (!allReading.await(2, SECONDS)) {
            readerFailure.compareAndSet(null, new AssertionError("readers were not all in at once"));
          }
          if (!leave.await(STEP_SECONDS, SECONDS)) {
            readerFailure.compareAndSet(null, new AssertionError("never told to leave"));
          }
        } catch (Throwable e) {
          readerFailure.compareAndSet(null, e);
        } finally {
          rw.readLock().unlock();
        }
      }));
    }
    // one reader per client waits in Redis; B's second reader waits behind its first in B
    awaitBlockedClients(2);
    Thread.sleep(300);

    Actor writerC = actor("writer-C");
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    AtomicLong writerCAcquiredAt = new AtomicLong();
    Future<Void> writing = writerC.submit(() -> {
      rwC.writeLock().lock();
      writerCAcquiredAt.set(System.nanoTime());
    });
    awaitBlockedClients(3);
    assertEquals(3, allReading.getCount(), "no reader gets past the writer");

    writerA.run(() -> rwA.writeLock().unlock());
    assertTrue(allReading.await(2, SECONDS),
        "all waiting readers admitted together; still waiting: " + allReading.getCount());
    assertEquals(3, b.readWriteLock(name).getReadLockCount());
    assertFalse(writing.isDone(), "the queued writer waits for the admitted readers");
    assertFalse(rwA.isWriteLocked());

    long leftAt = System.nanoTime();
    leave.countDown();
    for (Future<Void> f : reading) {
      get(f);
    }
    assertNull(readerFailure.get());
    get(writing);
    long ms = TimeUnit.NANOSECONDS.toMillis(writerCAcquiredAt.get() - leftAt);
    assertTrue(ms < Bounds.PROMPT_MS, "queued writer got the lock " + ms + " ms after the readers left");
    writerC.run(() -> rwC.writeLock().unlock());
    assertFree(name);
    awaitBlockedClients(0);
  }

  /** A writer that gives up waiting (timed out) no longer holds new readers back. */
  @Test
  void writerThatGaveUpDoesNotBlockReaders() throws Exception {
    String name = unique("rw-gave-up");
    Actor readerA = actor("reader-A");
    Actor writerB = actor("writer-B");
    Actor readerC = actor("reader-C");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    readerA.run(() -> rwA.readLock().lock());

    Future<Boolean> writing = writerB.submit(() -> rwB.writeLock().tryLock(600, MILLISECONDS));
    awaitBlockedClients(1);
    assertFalse(readerC.call(() -> rwC.readLock().tryLock(0, SECONDS)), "while the writer waits, new readers queue");
    assertFalse(get(writing), "the writer times out");
    assertEquals(0, writerB.call(rwB::getWriteHoldCount));

    // within 1 s, not 0: the withdrawal may land after the 20 ms gaveUp waits for it (see interruptBlockedWriter)
    assertTrue(readerC.call(() -> rwC.readLock().tryLock(1, SECONDS)), "after the writer gave up, a new reader enters");
    assertEquals(2, rwA.getReadLockCount());
    readerC.run(() -> rwC.readLock().unlock());
    readerA.run(() -> rwA.readLock().unlock());
    assertFree(name);
  }

  // ============================================================== timed tryLock

  /** Timed tryLock returns false after about the timeout when blocked, on both sides; 0 and negative do not wait. */
  @Test
  void timedTryLockTimesOut() throws Exception {
    String name = unique("rw-timeout");
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    Actor holder = actor("holder-A");
    DistributedReadWriteLock rwA = a.readWriteLock(name);

    holder.run(() -> rwA.writeLock().lock());
    checkTimesOut("read behind a writer", rwB.readLock());
    checkTimesOut("write behind a writer", rwB.writeLock());
    holder.run(() -> rwA.writeLock().unlock());

    holder.run(() -> rwA.readLock().lock());
    checkTimesOut("write behind a reader", rwB.writeLock());
    holder.run(() -> rwA.readLock().unlock());
    assertEquals(0, rwB.getReadHoldCount());
    assertEquals(0, rwB.getWriteHoldCount());
    assertFree(name);
  }

  private static void checkTimesOut(String what, Lock lock) throws InterruptedException {
    for (long timeoutMs : new long[] {0, 50, 300}) {
      long start = System.nanoTime();
      assertFalse(lock.tryLock(timeoutMs, MILLISECONDS), what);
      long elapsed = millisSince(start);
      assertTrue(elapsed >= timeoutMs, what + ": waited at least the timeout: " + elapsed);
      assertTrue(elapsed < timeoutMs + Bounds.OVERRUN_MS, what + ": not much longer: " + elapsed + " ms for " + timeoutMs);
    }
    for (long negative : new long[] {-1, -5_000, Long.MIN_VALUE}) {
      long start = System.nanoTime();
      assertFalse(lock.tryLock(negative, MILLISECONDS), what + ": negative timeout");
      assertTrue(millisSince(start) < Bounds.OVERRUN_MS, what + ": negative timeout does not wait");
    }
  }

  /** Timed tryLock succeeds, woken promptly, when the blocking side releases during the wait (both sides, across and within clients). */
  @Test
  void timedTryLockAcquiresOnRelease() throws Exception {
    checkAcquiresOnRelease(true, b, false); // reader waits for a writer of another client
    checkAcquiresOnRelease(false, b, true); // writer waits for a reader of another client
    checkAcquiresOnRelease(false, a, true); // writer waits for a reader of its own client
    checkAcquiresOnRelease(false, b, false); // writer waits for a writer of another client
    checkAcquiresOnRelease(true, a, false); // reader waits for a writer of its own client
  }

  private void checkAcquiresOnRelease(boolean waiterReads, Turnstile waiterClient, boolean holderReads)
      throws Exception {
    String what = (waiterReads ? "reader" : "writer") + (waiterClient == a ? " of the same client" : " of another client")
        + " waiting for a " + (holderReads ? "reader" : "writer");
    String name = unique("rw-timed-acquire");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwW = waiterClient.readWriteLock(name);
    Lock held = holderReads ? rwA.readLock() : rwA.writeLock();
    Lock wanted = waiterReads ? rwW.readLock() : rwW.writeLock();
    Actor holder = actor("holder");
    Actor waiter = actor("waiter");
    holder.run(held::lock);
    AtomicLong acquiredAt = new AtomicLong();
    Future<Boolean> waiting = waiter.submit(() -> {
      boolean got = wanted.tryLock(10, SECONDS);
      acquiredAt.set(System.nanoTime());
      return got;
    });
    Thread.sleep(300);
    assertFalse(waiting.isDone(), what + ": waits while held");
    long releasedAt = System.nanoTime();
    holder.run(held::unlock);
    assertTrue(get(waiting), what + ": acquired");
    long ms = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - releasedAt);
    assertTrue(ms < Bounds.PROMPT_MS, what + ": woken " + ms + " ms after the release");
    waiter.run(wanted::unlock);
    assertFree(name);
  }

  // ============================================================== interrupts

  /** lockInterruptibly() and tryLock(t) throw InterruptedException at once on both sides if the thread is already interrupted. */
  @Test
  void preInterrupted() {
    String name = unique("rw-pre-interrupt");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    for (Lock lock : List.of(rw.readLock(), rw.writeLock())) {
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, lock::lockInterruptibly);
      assertFalse(Thread.interrupted(), "interrupt status cleared");
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, () -> lock.tryLock(1, SECONDS));
      assertFalse(Thread.interrupted(), "interrupt status cleared");
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, () -> lock.tryLock(0, SECONDS));
      assertFalse(Thread.interrupted(), "interrupt status cleared");
    }
    assertEquals(0, rw.getReadHoldCount());
    assertEquals(0, rw.getWriteHoldCount());
    assertFree(name);
  }

  /** A reader blocked in lockInterruptibly() behind a writer reacts to interrupt within 100 ms and holds nothing. */
  @Test
  void interruptBlockedReader() throws Exception {
    String name = unique("rw-interrupt-reader");
    Actor writer = actor("writer-A");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    writer.run(() -> rwA.writeLock().lock());
    checkInterruptPrompt("reader", () -> {
      rwB.readLock().lockInterruptibly();
      return rwB.getReadHoldCount();
    }, rwB::getReadHoldCount);
    assertEquals(0, rwB.getReadLockCount());
    writer.run(() -> rwA.writeLock().unlock());
    assertFree(name);
    // the lock works normally for the interrupted reader's client afterwards
    assertTrue(rwB.readLock().tryLock(1, SECONDS));
    rwB.readLock().unlock();
    assertFree(name);
  }

  /** A writer blocked in tryLock(30 s) behind a reader reacts to interrupt within 100 ms, holds nothing, and holds no reader back. */
  @Test
  void interruptBlockedWriter() throws Exception {
    String name = unique("rw-interrupt-writer");
    Actor reader = actor("reader-A");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    reader.run(() -> rwA.readLock().lock());
    checkInterruptPrompt("writer", () -> rwB.writeLock().tryLock(30, SECONDS) ? rwB.getWriteHoldCount() : -1,
        rwB::getWriteHoldCount);
    assertFalse(rwB.isWriteLocked());
    Actor readerC = actor("reader-C");
    DistributedReadWriteLock rwC = c.readWriteLock(name);
    // The writer's withdrawal is awaited for at most 20 ms (WriteSide.gaveUp); under load it may land
    // a little later, and its wake-up then admits the reader: so the reader may wait 1 s (a writer
    // that had not withdrawn would hold it back for its entry's whole lease, 30 s). With tryLock()
    // this was a race on a loaded machine (failed once on Sentinel, load 12).
    assertTrue(readerC.call(() -> rwC.readLock().tryLock(1, SECONDS)), "the interrupted writer holds no reader back");
    readerC.run(() -> rwC.readLock().unlock());
    reader.run(() -> rwA.readLock().unlock());
    assertFree(name);
  }

  /**
   * Runs {@code blocked} on a new thread, which must block inside Redis, interrupts it, and checks
   * that it threw InterruptedException within 100 ms, that {@code holds} is then 0 on that thread,
   * and that no blocked Redis connection is left.
   */
  private void checkInterruptPrompt(String what, Callable<Integer> blocked, Callable<Integer> holds) throws Exception {
    AtomicLong reactedAt = new AtomicLong();
    AtomicReference<Object> outcome = new AtomicReference<>();
    AtomicReference<Integer> holdsAfter = new AtomicReference<>();
    Thread t = TestSupport.start(what + "-waiter", () -> {
      try {
        outcome.set("returned " + blocked.call());
      } catch (Throwable e) {
        outcome.set(e);
      }
      reactedAt.set(System.nanoTime());
      holdsAfter.set(holds.call());
    });
    awaitBlockedClients(1);
    Thread.sleep(100);
    assertTrue(t.isAlive());
    long interruptedAt = System.nanoTime();
    t.interrupt();
    t.join(10_000);
    assertFalse(t.isAlive(), what + " still waiting 10 s after interrupt");
    assertTrue(outcome.get() instanceof InterruptedException, what + ": " + outcome.get());
    long ms = TimeUnit.NANOSECONDS.toMillis(reactedAt.get() - interruptedAt);
    assertTrue(ms < Bounds.OVERRUN_MS, what + " reacted to interrupt in " + ms + " ms");
    assertEquals(0, holdsAfter.get(), what + " holds nothing");
    awaitBlockedClients(0);
  }

  /** lock() is uninterruptible on both sides: an interrupted waiter keeps waiting, acquires on release, and keeps its interrupt status. */
  @Test
  void lockIsUninterruptible() throws Exception {
    checkUninterruptible(false); // writer behind a reader
    checkUninterruptible(true); // reader behind a writer
  }

  private void checkUninterruptible(boolean waiterReads) throws Exception {
    String name = unique("rw-uninterruptible");
    DistributedReadWriteLock rwA = a.readWriteLock(name);
    DistributedReadWriteLock rwB = b.readWriteLock(name);
    Lock held = waiterReads ? rwA.writeLock() : rwA.readLock();
    Lock wanted = waiterReads ? rwB.readLock() : rwB.writeLock();
    Actor holder = actor("holder-A");
    holder.run(held::lock);
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicReference<String> result = new AtomicReference<>();
    Thread waiter = TestSupport.start("waiter-B", () -> {
      try {
        wanted.lock();
        try {
          result.set("interrupted=" + Thread.currentThread().isInterrupted()
              + " held=" + (waiterReads ? rwB.getReadHoldCount() : rwB.getWriteHoldCount()));
        } finally {
          wanted.unlock();
        }
      } catch (Throwable e) {
        error.set(e);
      }
    });
    awaitBlockedClients(1);
    waiter.interrupt();
    Thread.sleep(300);
    assertTrue(waiter.isAlive(), "still waiting after interrupt");
    holder.run(held::unlock);
    waiter.join(2000);
    assertFalse(waiter.isAlive(), "acquired after the release");
    assertNull(error.get());
    assertEquals("interrupted=true held=1", result.get());
    assertFree(name);
    awaitBlockedClients(0);
  }

  // ============================================================== fencing

  /** Fencing tokens strictly increase over read and write acquisitions by any client; re-entry keeps the token. */
  @Test
  void fencingTokensStrictlyIncrease() throws Exception {
    String name = unique("rw-fence");
    List<Long> tokens = new ArrayList<>();
    Turnstile[] clients = {a, b, c};
    for (int i = 0; i < 12; i++) {
      DistributedReadWriteLock rw = clients[i % 3].readWriteLock(name);
      DistributedLock lock = (i / 3) % 2 == 0 ? rw.writeLock() : rw.readLock();
      lock.lock();
      long token = lock.fencingToken();
      lock.lock();
      assertEquals(token, lock.fencingToken(), "re-entry keeps the token");
      lock.unlock();
      assertEquals(token, lock.fencingToken());
      lock.unlock();
      tokens.add(token);
    }
    // concurrent readers: each reading thread gets its own, newer token
    Actor r1 = actor("reader-A");
    Actor r2 = actor("reader-B");
    r1.run(() -> a.readWriteLock(name).readLock().lock());
    tokens.add(r1.call(() -> a.readWriteLock(name).readLock().fencingToken()));
    r2.run(() -> b.readWriteLock(name).readLock().lock());
    tokens.add(r2.call(() -> b.readWriteLock(name).readLock().fencingToken()));
    DistributedLock mine = c.readWriteLock(name).readLock();
    mine.lock();
    tokens.add(mine.fencingToken());
    mine.unlock();
    r1.run(() -> a.readWriteLock(name).readLock().unlock());
    r2.run(() -> b.readWriteLock(name).readLock().unlock());
    DistributedLock w = b.readWriteLock(name).writeLock();
    w.lock();
    tokens.add(w.fencingToken());
    w.unlock();
    for (int i = 1; i < tokens.size(); i++) {
      assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens " + tokens);
    }
    assertFree(name);
  }

  /** fencingToken() without holding the lock throws IllegalMonitorStateException, on both sides. */
  @Test
  void fencingTokenRequiresHold() throws Exception {
    String name = unique("rw-fence-imse");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::fencingToken);
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::fencingToken);
    rw.readLock().lock();
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::fencingToken, "a read hold is not a write hold");
    Actor other = actor("other-thread");
    assertThrows(IllegalMonitorStateException.class, () -> other.call(rw.readLock()::fencingToken),
        "another thread does not hold it");
    rw.readLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.readLock()::fencingToken, "no longer held");
    rw.writeLock().lock();
    rw.writeLock().unlock();
    assertThrows(IllegalMonitorStateException.class, rw.writeLock()::fencingToken, "no longer held");
    assertFree(name);
  }

  // ============================================================== misc

  /** newCondition() is unsupported on both locks. */
  @Test
  void newConditionUnsupported() {
    DistributedReadWriteLock rw = a.readWriteLock(unique("rw-cond"));
    assertThrows(UnsupportedOperationException.class, () -> rw.readLock().newCondition());
    assertThrows(UnsupportedOperationException.class, () -> rw.writeLock().newCondition());
  }

  /** Null and blank names are refused. */
  @Test
  void badNames() {
    assertThrows(NullPointerException.class, () -> a.readWriteLock(null));
    assertThrows(IllegalArgumentException.class, () -> a.readWriteLock(""));
    assertThrows(IllegalArgumentException.class, () -> a.readWriteLock("   "));
  }

  /** The same Turnstile returns the same instance (and the same read and write locks) for a name while referenced. */
  @Test
  void sameInstancePerName() {
    String name = unique("rw-same");
    DistributedReadWriteLock rw = a.readWriteLock(name);
    assertSame(rw, a.readWriteLock(name));
    assertSame(rw.readLock(), rw.readLock());
    assertSame(rw.writeLock(), rw.writeLock());
    assertNotSame(rw.readLock(), rw.writeLock());
    assertEquals(name, rw.name());
    assertEquals(name, rw.readLock().name());
    assertEquals(name, rw.writeLock().name());
    assertNotSame(rw, b.readWriteLock(name), "different clients, different instances");
    assertNotSame(rw, a.readWriteLock(unique("rw-same")));
  }

  // ============================================================== helpers

  /** The lock is free as seen from every client. */
  private void assertFree(String name) {
    for (Turnstile t : List.of(a, b, c)) {
      DistributedReadWriteLock rw = t.readWriteLock(name);
      assertEquals(0, rw.getReadLockCount(), "no reader left");
      assertFalse(rw.isWriteLocked(), "no writer left");
    }
  }

  private long scriptsSince(Map<String, Long> before) {
    Map<String, Long> after = TestSupport.commandStats(redis);
    return TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval");
  }

  /** Waiters inside Redis: blocked in BLPOP (writers) or subscribed to a wake-up channel (readers, and writers past the pool). */
  private int blockedClients() {
    return (int) TestSupport.waitersInRedis(redis);
  }

  /** Waits until exactly {@code expected} waiters more than at the start of the test wait inside Redis. */
  private void awaitBlockedClients(int expected) {
    TestSupport.await(expected + " waiters in Redis (blocked or subscribed), besides " + blockedBefore + " from before the test"
        + " (when the wait began: " + blockedClients() + ")",
        Duration.ofSeconds(5), () -> blockedClients() == blockedBefore + expected);
  }

  private Actor actor(String name) {
    Actor actor = new Actor(name);
    actors.add(actor);
    return actor;
  }

  /** Waits for a task's result, rethrowing what it threw; never waits longer than one step. */
  private static <T> T get(Future<T> f) throws Exception {
    try {
      return f.get(STEP_SECONDS, SECONDS);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof Exception) {
        throw (Exception) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw e;
    } catch (TimeoutException e) {
      f.cancel(true);
      return fail("task did not finish within " + STEP_SECONDS + " s", e);
    }
  }

  /** One thread that runs the tasks given to it in order, so it can acquire in one task and release in another. */
  private static final class Actor {
    final ExecutorService executor;
    volatile Thread thread;

    Actor(String name) {
      executor = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        thread = t;
        return t;
      });
    }

    <T> Future<T> submit(Callable<T> task) {
      return executor.submit(task);
    }

    Future<Void> submit(TestSupport.ThrowingRunnable task) {
      return executor.submit(() -> {
        task.run();
        return null;
      });
    }

    <T> T call(Callable<T> task) throws Exception {
      return get(submit(task));
    }

    void run(TestSupport.ThrowingRunnable task) throws Exception {
      get(submit(task));
    }

    @Override
    public String toString() {
      return "Actor[" + (thread == null ? "not started" : thread.getName() + " " + thread.getState()) + "]";
    }
  }
}
