package io.github.turnstile;

import static io.github.turnstile.TestSupport.awaitWaiting;
import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.start;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * The {@link java.util.concurrent.locks.ReentrantLock} contract, in the manner of the JSR-166 TCK's
 * {@code ReentrantLockTest}, checked against a real Redis. "Another client" is a second Turnstile
 * (its own connections and client id), standing in for another JVM.
 */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DistributedLockContractTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  DistributedLockContractTest(TestRedis redis) {
    this.redis = redis;
  }

  /** The options of the clients under test (the defaults, lock caching on; a subclass runs the suite with it off). */
  TurnstileOptions options() {
    return TurnstileOptions.builder().build();
  }

  @BeforeAll
  void connect() {
    t1 = Turnstile.connect(redis.uri(), options());
    t2 = Turnstile.connect(redis.uri(), options());
  }

  @AfterAll
  void close() {
    t1.close();
    t2.close();
  }

  /** lock() then unlock() leaves the lock free, visible to another client. */
  @Test
  void lockAndUnlock() {
    String name = unique("basic");
    DistributedLock lock = t1.lock(name);
    lock.lock();
    assertTrue(lock.isLocked());
    assertTrue(t2.lock(name).isLocked(), "another client sees it locked");
    lock.unlock();
    assertFalse(lock.isLocked());
    assertFalse(t2.lock(name).isLocked());
  }

  /** unlock() by a thread that does not hold the lock throws IllegalMonitorStateException. */
  @Test
  void unlockByNonOwnerThrowsIMSE() throws Exception {
    DistributedLock lock = t1.lock(unique("imse"));
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "never locked");
    lock.lock();
    AtomicReference<Throwable> seen = new AtomicReference<>();
    Thread other = start("other", () -> {
      try {
        lock.unlock();
      } catch (Throwable e) {
        seen.set(e);
      }
    });
    other.join();
    assertEquals(IllegalMonitorStateException.class, seen.get().getClass());
    assertTrue(lock.isHeldByCurrentThread(), "a failed foreign unlock changes nothing");
    lock.unlock();
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "hold count already zero");
  }

  /** tryLock() succeeds on a free lock and fails, without waiting, when another client holds it. */
  @Test
  void tryLock() {
    String name = unique("try");
    DistributedLock mine = t1.lock(name);
    DistributedLock theirs = t2.lock(name);
    assertTrue(mine.tryLock());
    long start = System.nanoTime();
    assertFalse(theirs.tryLock());
    assertTrue(millisSince(start) < Bounds.OVERRUN_MS, "tryLock() does not wait: " + millisSince(start) + " ms");
    mine.unlock();
    assertTrue(theirs.tryLock());
    theirs.unlock();
  }

  /** tryLock() fails when another thread of the same client holds the lock. */
  @Test
  void tryLockHeldByAnotherLocalThread() throws Exception {
    DistributedLock lock = t1.lock(unique("try-local"));
    lock.lock();
    AtomicBoolean got = new AtomicBoolean(true);
    start("other", () -> got.set(lock.tryLock())).join();
    assertFalse(got.get());
    lock.unlock();
  }

  /** Timed tryLock times out when the lock stays held, after about the given time, not much more. */
  @Test
  void timedTryLockTimesOut() throws Exception {
    String name = unique("timeout");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    DistributedLock lock = t1.lock(name);
    for (long timeoutMs : new long[] {0, 50, 300}) {
      long start = System.nanoTime();
      assertFalse(lock.tryLock(timeoutMs, TimeUnit.MILLISECONDS));
      long elapsed = millisSince(start);
      assertTrue(elapsed >= timeoutMs, "waited at least the timeout: " + elapsed);
      assertTrue(elapsed < timeoutMs + Bounds.OVERRUN_MS, "did not wait notably longer: " + elapsed + " ms for " + timeoutMs);
    }
    assertFalse(lock.tryLock(-5, TimeUnit.SECONDS), "negative timeout: no wait");
    for (long extreme : new long[] {Long.MIN_VALUE, -Long.MAX_VALUE}) {
      long start = System.nanoTime();
      assertFalse(lock.tryLock(extreme, TimeUnit.NANOSECONDS), "extreme negative timeout: no wait");
      assertFalse(lock.tryLock(extreme, TimeUnit.DAYS));
      assertTrue(millisSince(start) < Bounds.OVERRUN_MS, "no overflow into a long wait");
    }
    assertEquals(0, lock.getHoldCount());
    holder.unlock();
  }

  /** Timed tryLock succeeds when the lock is released during the wait. */
  @Test
  void timedTryLockAcquiresOnRelease() throws Exception {
    String name = unique("timed-acquire");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    AtomicLong waited = new AtomicLong(-1);
    DistributedLock lock = t1.lock(name);
    Thread waiter = start("waiter", () -> {
      long s = System.nanoTime();
      assertTrue(lock.tryLock(10, TimeUnit.SECONDS));
      waited.set(millisSince(s));
      lock.unlock();
    });
    Thread.sleep(200);
    holder.unlock();
    waiter.join(20_000);
    assertTrue(waited.get() >= 150 && waited.get() < Bounds.PROMPT_MS, "woken by the release: " + waited.get());
  }

  /** Hold count rises with each reentrant acquisition and falls with each unlock. */
  @Test
  void getHoldCount() throws Exception {
    DistributedLock lock = t1.lock(unique("holds"));
    for (int i = 1; i <= 5; i++) {
      if (i % 2 == 0) {
        lock.lock();
      } else {
        assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
      }
      assertEquals(i, lock.getHoldCount());
    }
    assertTrue(lock.tryLock());
    assertEquals(6, lock.getHoldCount());
    for (int i = 6; i > 0; i--) {
      lock.unlock();
      assertEquals(i - 1, lock.getHoldCount());
    }
    assertFalse(lock.isLocked());
  }

  /** Re-entering a held lock costs no Redis command at all. */
  @Test
  void reentryCostsZeroRoundTrips() {
    DistributedLock lock = t1.lock(unique("reentry-free"));
    lock.lock();
    Map<String, Long> before = TestSupport.commandStats(redis);
    for (int i = 0; i < 1000; i++) {
      lock.lock();
      assertTrue(lock.tryLock());
      lock.unlock();
      lock.unlock();
    }
    Map<String, Long> after = TestSupport.commandStats(redis);
    long scripts = TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval");
    // 2000 re-entries; the only scripts allowed are other tests' watchdog renewals.
    assertTrue(scripts < 5, "re-entry ran scripts: " + scripts);
    lock.unlock();
  }

  /** isHeldByCurrentThread is true only for the owner. */
  @Test
  void isHeldByCurrentThread() throws Exception {
    DistributedLock lock = t1.lock(unique("held"));
    assertFalse(lock.isHeldByCurrentThread());
    lock.lock();
    assertTrue(lock.isHeldByCurrentThread());
    AtomicBoolean otherSees = new AtomicBoolean(true);
    start("other", () -> otherSees.set(lock.isHeldByCurrentThread())).join();
    assertFalse(otherSees.get());
    lock.unlock();
    assertFalse(lock.isHeldByCurrentThread());
  }

  /** lockInterruptibly() throws at once, holding nothing, if the thread is already interrupted. */
  @Test
  void lockInterruptiblyPreInterrupted() {
    DistributedLock lock = t1.lock(unique("pre-interrupt"));
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, lock::lockInterruptibly);
    assertFalse(Thread.interrupted(), "interrupt status cleared");
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, () -> lock.tryLock(1, TimeUnit.SECONDS));
    assertFalse(lock.isLocked());
  }

  /** lockInterruptibly() succeeds on a free lock. */
  @Test
  void lockInterruptiblySucceeds() throws Exception {
    DistributedLock lock = t1.lock(unique("li"));
    lock.lockInterruptibly();
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock();
  }

  /**
   * A thread waiting inside Redis in lockInterruptibly() or tryLock(t) responds to interrupt
   * promptly (well under 100 ms), and leaves no hold and no blocked connection behind.
   */
  @Test
  void interruptWhileWaitingRemotelyIsPrompt() throws Exception {
    String name = unique("interrupt");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    DistributedLock lock = t1.lock(name);
    for (boolean timed : new boolean[] {false, true}) {
      AtomicLong reactedNanos = new AtomicLong();
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      Thread waiter = start("waiter", () -> {
        try {
          if (timed) {
            lock.tryLock(30, TimeUnit.SECONDS);
          } else {
            lock.lockInterruptibly();
          }
        } catch (Throwable e) {
          thrown.set(e);
        }
        reactedNanos.set(System.nanoTime());
      });
      awaitWaiting(waiter);
      Thread.sleep(300); // make sure it is blocked in BLPOP by now
      assertBlockedClients(1);
      long interruptedAt = System.nanoTime();
      waiter.interrupt();
      waiter.join(10_000);
      long reactionMs = TimeUnit.NANOSECONDS.toMillis(reactedNanos.get() - interruptedAt);
      assertTrue(thrown.get() instanceof InterruptedException, "threw " + thrown.get());
      assertTrue(reactionMs < Bounds.OVERRUN_MS, "reacted to interrupt in " + reactionMs + " ms");
      assertBlockedClients(0);
    }
    assertFalse(lock.isHeldByCurrentThread());
    holder.unlock();
    // the lock is still usable and was not left held by the interrupted waiters
    assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
    lock.unlock();
  }

  private void assertBlockedClients(int expected) {
    TestSupport.await("blocked_clients:" + expected, java.time.Duration.ofSeconds(2),
        () -> redis.infoSum("clients", "blocked_clients") == expected);
  }

  /** lock() is not interruptible: an interrupted waiter keeps waiting, acquires, and keeps its interrupt status. */
  @Test
  void lockIsUninterruptible() throws Exception {
    String name = unique("uninterruptible");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    DistributedLock lock = t1.lock(name);
    AtomicBoolean acquiredAndInterrupted = new AtomicBoolean();
    Thread waiter = start("waiter", () -> {
      lock.lock();
      acquiredAndInterrupted.set(Thread.currentThread().isInterrupted() && lock.isHeldByCurrentThread());
      lock.unlock();
    });
    awaitWaiting(waiter);
    Thread.sleep(100);
    waiter.interrupt();
    Thread.sleep(200);
    assertTrue(waiter.isAlive(), "still waiting after interrupt");
    holder.unlock();
    waiter.join(5000);
    assertTrue(acquiredAndInterrupted.get());
  }

  /**
   * lock() entered with the interrupt status already set still waits and acquires, even when the
   * wait has to open the client's first blocking connection (Lettuce's connect is interruptible;
   * Turnstile must not let that leak into an uninterruptible lock()).
   */
  @Test
  void lockWithInterruptAlreadySetStillWaits() throws Exception {
    String name = unique("pre-interrupted-lock");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    try (Turnstile fresh = Turnstile.connect(redis.uri(), options())) {
      assertEquals(0, fresh.engine().pool.openConnections());
      DistributedLock lock = fresh.lock(name);
      AtomicReference<Throwable> error = new AtomicReference<>();
      AtomicBoolean acquiredWithStatus = new AtomicBoolean();
      Thread waiter = start("waiter", () -> {
        Thread.currentThread().interrupt();
        try {
          lock.lock();
          acquiredWithStatus.set(Thread.currentThread().isInterrupted());
          lock.unlock();
        } catch (Throwable e) {
          error.set(e);
        }
      });
      Thread.sleep(300);
      holder.unlock();
      waiter.join(5000);
      assertEquals(null, error.get());
      assertTrue(acquiredWithStatus.get(), "acquired, interrupt status kept");
    }
  }

  /** isLocked reflects holds by any client. */
  @Test
  void isLocked() throws Exception {
    String name = unique("is-locked");
    DistributedLock lock = t1.lock(name);
    assertFalse(lock.isLocked());
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Thread other = start("other-client", () -> {
      DistributedLock theirs = t2.lock(name);
      theirs.lock();
      held.countDown();
      release.await();
      theirs.unlock();
    });
    held.await();
    assertTrue(lock.isLocked());
    assertFalse(lock.isHeldByCurrentThread());
    release.countDown();
    other.join();
    assertFalse(lock.isLocked());
  }

  /** Fencing tokens strictly increase over acquisitions by any client; re-entry keeps the token. */
  @Test
  void fencingTokensStrictlyIncrease() {
    String name = unique("fence");
    List<Long> tokens = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      DistributedLock lock = (i % 2 == 0 ? t1 : t2).lock(name);
      lock.lock();
      long token = lock.fencingToken();
      lock.lock();
      assertEquals(token, lock.fencingToken(), "re-entry keeps the token");
      lock.unlock();
      lock.unlock();
      tokens.add(token);
    }
    for (int i = 1; i < tokens.size(); i++) {
      assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens " + tokens);
    }
  }

  /** fencingToken() without holding the lock throws IllegalMonitorStateException. */
  @Test
  void fencingTokenRequiresHold() {
    DistributedLock lock = t1.lock(unique("fence-imse"));
    assertThrows(IllegalMonitorStateException.class, lock::fencingToken);
  }

  /** newCondition() is unsupported. */
  @Test
  void newConditionUnsupported() {
    assertThrows(UnsupportedOperationException.class, () -> t1.lock(unique("cond")).newCondition());
  }

  /** toString shows whether the lock is held. */
  @Test
  void toStringShowsState() {
    DistributedLock lock = t1.lock(unique("tostring"));
    assertTrue(lock.toString().contains("not held"));
    lock.lock();
    assertTrue(lock.toString().contains("held by thread " + Thread.currentThread().getName()));
    lock.unlock();
  }

  /** Null and blank names are refused with a clear error. */
  @Test
  void badNames() {
    NullPointerException npe = assertThrows(NullPointerException.class, () -> t1.lock(null));
    assertTrue(npe.getMessage().contains("name"));
    assertThrows(IllegalArgumentException.class, () -> t1.lock(""));
    assertThrows(IllegalArgumentException.class, () -> t1.lock("  "));
  }

  /** The registry returns the same instance for a name while it is referenced. */
  @Test
  void sameInstancePerName() {
    String name = unique("same");
    DistributedLock a = t1.lock(name);
    assertSame(a, t1.lock(name));
    assertNotSame(a, t2.lock(name), "different clients, different instances");
  }

  /** A held lock stays reachable through the registry even if the caller dropped its reference. */
  @Test
  void heldLockSurvivesGc() {
    String name = unique("gc-held");
    t1.lock(name).lock();
    for (int i = 0; i < 3; i++) {
      System.gc();
    }
    DistributedLock again = t1.lock(name);
    assertTrue(again.isHeldByCurrentThread());
    again.unlock();
  }

  /** Names with braces still keep every key of the lock in one hash slot. */
  @Test
  void namesWithBraces() {
    for (String name : new String[] {"}", "{", "{}", "a}b{c", "}{"}) {
      RedisLock lock = (RedisLock) t1.lock(unique(name));
      String slot1 = redis.command("CLUSTER", "KEYSLOT", lock.lockKey);
      // CLUSTER KEYSLOT works on a non-cluster server too
      assertEquals(slot1, redis.command("CLUSTER", "KEYSLOT", lock.fenceKey));
      assertEquals(slot1, redis.command("CLUSTER", "KEYSLOT", lock.wakeKey));
      lock.lock();
      lock.unlock();
    }
  }
}
