package io.github.turnstile;

import static io.github.turnstile.TestSupport.awaitWaiting;
import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.start;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The {@link Semaphore} contract (the properties the JSR-166 TCK checks for {@code Semaphore}),
 * adapted to the documented semantics of {@link DistributedSemaphore} and checked against a real
 * Redis. "Another client" is a second Turnstile (its own connections and client id), standing in
 * for another JVM.
 */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DistributedSemaphoreContractTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  DistributedSemaphoreContractTest(TestRedis redis) {
    this.redis = redis;
  }

  @BeforeAll
  void connect() {
    t1 = Turnstile.connect(redis.uri());
    t2 = Turnstile.connect(redis.uri());
  }

  @AfterAll
  void close() {
    t1.close();
    t2.close();
  }

  // ------------------------------------------------------------------ helpers

  /** Free + held by all clients equals the capacity, with no outstanding debt. */
  private static void assertConserved(DistributedSemaphore s) {
    long[] st = ((RedisSemaphore) s).state();
    String shown = "state {cap, debt, free, held, available} = " + Arrays.toString(st);
    assertEquals(0, st[1], "no debt: " + shown);
    assertEquals(st[0], st[2] + st[3], "free + held == capacity: " + shown);
    assertEquals(st[2], st[4], "available == free when there is no debt: " + shown);
  }

  private static long[] state(DistributedSemaphore s) {
    return ((RedisSemaphore) s).state();
  }

  private void assertBlockedClients(int expected) {
    TestSupport.await("blocked_clients:" + expected, Duration.ofSeconds(2),
        () -> redis.infoSum("clients", "blocked_clients") == expected);
  }

  private static void joinOrFail(Thread t, long millis) throws InterruptedException {
    t.join(millis);
    if (t.isAlive()) {
      fail("thread " + t.getName() + " did not finish within " + millis + " ms; stack: "
          + Arrays.toString(t.getStackTrace()));
    }
  }

  // ------------------------------------------------------------------ construction

  /** A negative capacity is refused with IllegalArgumentException. */
  @Test
  void negativeCapacityRefused() {
    String name = unique("neg-cap");
    assertThrows(IllegalArgumentException.class, () -> t1.semaphore(name, -1));
    assertThrows(IllegalArgumentException.class, () -> t1.semaphore(name, Integer.MIN_VALUE));
    // nothing was created: the name is still free to be created with any capacity
    DistributedSemaphore s = t1.semaphore(name, 2);
    assertEquals(2, s.availablePermits());
  }

  /** A null name gives NullPointerException, a blank one IllegalArgumentException. */
  @Test
  void badNames() {
    assertThrows(NullPointerException.class, () -> t1.semaphore(null, 1));
    assertThrows(IllegalArgumentException.class, () -> t1.semaphore("", 1));
    assertThrows(IllegalArgumentException.class, () -> t1.semaphore("   ", 1));
    assertThrows(IllegalArgumentException.class, () -> t1.semaphore("\t\n", 1));
  }

  /** Asking for an existing semaphore with another capacity fails with a message naming both numbers. */
  @Test
  void capacityMismatchRefused() {
    String name = unique("mismatch");
    DistributedSemaphore s = t1.semaphore(name, 7);
    IllegalArgumentException other =
        assertThrows(IllegalArgumentException.class, () -> t2.semaphore(name, 11));
    assertTrue(other.getMessage().contains("7") && other.getMessage().contains("11"),
        "message names both capacities: " + other.getMessage());
    IllegalArgumentException same =
        assertThrows(IllegalArgumentException.class, () -> t1.semaphore(name, 13));
    assertTrue(same.getMessage().contains("7") && same.getMessage().contains("13"),
        "message names both capacities: " + same.getMessage());
    assertEquals(7, s.availablePermits(), "the failed calls changed nothing");
    assertEquals(7, state(s)[0]);
  }

  /** The same name and capacity works again: same instance from the same client, another from another client. */
  @Test
  void sameCapacityReturnsSameInstance() throws Exception {
    String name = unique("same");
    DistributedSemaphore a = t1.semaphore(name, 3);
    assertSame(a, t1.semaphore(name, 3));
    DistributedSemaphore b = t2.semaphore(name, 3);
    assertNotSame(a, b, "different clients, different instances");
    assertEquals(name, a.name());
    a.acquire();
    assertEquals(2, b.availablePermits(), "both instances act on one shared semaphore");
    assertSame(a, t1.semaphore(name, 3), "still the same instance while permits are held");
    a.release();
    assertConserved(a);
  }

  // ------------------------------------------------------------------ basic acquire / release

  /** availablePermits reflects acquisitions and releases by any client. */
  @Test
  void availablePermitsSeesAllClients() throws Exception {
    String name = unique("available");
    DistributedSemaphore s1 = t1.semaphore(name, 3);
    DistributedSemaphore s2 = t2.semaphore(name, 3);
    assertEquals(3, s1.availablePermits());
    assertEquals(3, s2.availablePermits());
    s1.acquire();
    assertEquals(2, s1.availablePermits());
    assertEquals(2, s2.availablePermits());
    s2.acquire();
    assertEquals(1, s1.availablePermits());
    assertEquals(1, s2.availablePermits());
    s1.release();
    assertEquals(2, s2.availablePermits());
    s2.release();
    assertEquals(3, s1.availablePermits());
    assertConserved(s1);
  }

  /** tryAcquire() succeeds while permits are free and fails, without waiting, when none is. */
  @Test
  void tryAcquire() {
    String name = unique("try");
    DistributedSemaphore s1 = t1.semaphore(name, 2);
    DistributedSemaphore s2 = t2.semaphore(name, 2);
    assertTrue(s1.tryAcquire());
    assertTrue(s2.tryAcquire());
    long start = System.nanoTime();
    assertFalse(s1.tryAcquire());
    assertFalse(s2.tryAcquire());
    assertTrue(millisSince(start) < 1000, "no waiting: " + millisSince(start) + " ms");
    assertEquals(1, s1.heldPermits());
    assertEquals(1, s2.heldPermits());
    assertEquals(0, s1.availablePermits());
    s2.release();
    assertTrue(s1.tryAcquire());
    assertEquals(2, s1.heldPermits());
    s1.release(2);
    assertEquals(2, s2.availablePermits());
    assertConserved(s1);
  }

  /** tryAcquire(n) is all-or-nothing: it takes nothing when fewer than n permits are free. */
  @Test
  void tryAcquireNIsAllOrNothing() throws Exception {
    String name = unique("try-n");
    DistributedSemaphore s1 = t1.semaphore(name, 5);
    DistributedSemaphore s2 = t2.semaphore(name, 5);
    s2.acquire(3);
    assertFalse(s1.tryAcquire(3));
    assertEquals(0, s1.heldPermits(), "took nothing");
    assertEquals(2, s1.availablePermits(), "took nothing");
    assertTrue(s1.tryAcquire(2));
    assertEquals(2, s1.heldPermits());
    assertEquals(0, s2.availablePermits());
    assertFalse(s1.tryAcquire(1));
    s2.release(3);
    assertTrue(s1.tryAcquire(3));
    assertEquals(5, s1.heldPermits());
    s1.release(5);
    assertEquals(5, s2.availablePermits());
    assertConserved(s1);
  }

  /** acquire(n) and release(n) take and return exactly n permits. */
  @Test
  void acquireAndReleaseN() throws Exception {
    String name = unique("n");
    DistributedSemaphore s = t1.semaphore(name, 5);
    DistributedSemaphore other = t2.semaphore(name, 5);
    s.acquire(3);
    assertEquals(3, s.heldPermits());
    assertEquals(2, other.availablePermits());
    s.acquireUninterruptibly(2);
    assertEquals(5, s.heldPermits());
    assertEquals(0, other.availablePermits());
    s.release(2);
    assertEquals(3, s.heldPermits());
    assertEquals(2, other.availablePermits());
    assertTrue(s.tryAcquire(2, 1, TimeUnit.SECONDS));
    assertEquals(5, s.heldPermits());
    s.release(4);
    assertEquals(1, s.heldPermits());
    assertEquals(4, other.availablePermits());
    s.release();
    assertEquals(0, s.heldPermits());
    assertEquals(5, other.availablePermits());
    assertConserved(s);
  }

  /** Asking for more permits than the capacity is refused with IllegalArgumentException and takes nothing. */
  @Test
  void moreThanCapacityRefused() {
    String name = unique("over-cap");
    DistributedSemaphore s = t1.semaphore(name, 3);
    long start = System.nanoTime();
    assertThrows(IllegalArgumentException.class, () -> s.acquire(4));
    assertThrows(IllegalArgumentException.class, () -> s.acquireUninterruptibly(4));
    assertThrows(IllegalArgumentException.class, () -> s.tryAcquire(4));
    assertThrows(IllegalArgumentException.class, () -> s.tryAcquire(4, 1, TimeUnit.SECONDS));
    assertTrue(millisSince(start) < 1000, "refused at once, no waiting: " + millisSince(start) + " ms");
    assertEquals(0, s.heldPermits());
    assertEquals(3, s.availablePermits());
    assertEquals(0, s.waitingThreads());
    assertConserved(s);
  }

  /** Negative permit counts are refused with IllegalArgumentException by every method. */
  @Test
  void negativePermitsRefused() throws Exception {
    DistributedSemaphore s = t1.semaphore(unique("neg"), 2);
    assertThrows(IllegalArgumentException.class, () -> s.acquire(-1));
    assertThrows(IllegalArgumentException.class, () -> s.acquireUninterruptibly(-1));
    assertThrows(IllegalArgumentException.class, () -> s.tryAcquire(-1));
    assertThrows(IllegalArgumentException.class, () -> s.tryAcquire(-1, 1, TimeUnit.SECONDS));
    assertThrows(IllegalArgumentException.class, () -> s.release(-1));
    s.acquire();
    assertThrows(IllegalArgumentException.class, () -> s.release(-1), "even while holding permits");
    assertEquals(1, s.heldPermits());
    assertEquals(1, s.availablePermits());
    s.release();
    assertConserved(s);
  }

  /** acquire(0), tryAcquire(0) and release(0) are no-ops that return at once, even with no permit free. */
  @Test
  void zeroPermitsAreNoOps() throws Exception {
    String name = unique("zero");
    DistributedSemaphore s = t1.semaphore(name, 2);
    DistributedSemaphore other = t2.semaphore(name, 2);
    other.acquire(2);
    long start = System.nanoTime();
    s.acquire(0);
    s.acquireUninterruptibly(0);
    assertTrue(s.tryAcquire(0));
    assertTrue(s.tryAcquire(0, 5, TimeUnit.SECONDS));
    s.release(0);
    assertTrue(millisSince(start) < 500, "returned at once: " + millisSince(start) + " ms");
    assertEquals(0, s.heldPermits());
    assertEquals(0, s.availablePermits());
    assertEquals(2, other.heldPermits());
    other.release(2);
    assertEquals(2, s.availablePermits());
    assertConserved(s);
  }

  /** release() returns a permit this client holds, visible to another client. */
  @Test
  void releaseReturnsPermit() throws Exception {
    String name = unique("release");
    DistributedSemaphore s = t1.semaphore(name, 1);
    DistributedSemaphore other = t2.semaphore(name, 1);
    s.acquire();
    assertFalse(other.tryAcquire());
    s.release();
    assertEquals(0, s.heldPermits());
    assertTrue(other.tryAcquire());
    other.release();
    assertConserved(s);
  }

  /** Any thread of a client may release a permit that another thread of the same client acquired. */
  @Test
  void releaseByAnotherThreadOfSameClient() throws Exception {
    String name = unique("other-thread");
    DistributedSemaphore s = t1.semaphore(name, 2);
    Thread acquirer = start("acquirer", () -> s.acquire(2));
    joinOrFail(acquirer, 5000);
    assertEquals(2, s.heldPermits());
    assertEquals(0, s.availablePermits());
    s.release();
    assertEquals(1, s.availablePermits());
    AtomicReference<Throwable> error = new AtomicReference<>();
    Thread releaser = start("releaser", () -> {
      try {
        s.release();
      } catch (Throwable e) {
        error.set(e);
      }
    });
    joinOrFail(releaser, 5000);
    assertNull(error.get());
    assertEquals(0, s.heldPermits());
    assertEquals(2, s.availablePermits());
    assertConserved(s);
  }

  /** Releasing more than this client holds throws IllegalStateException and changes nothing, even when another client holds permits. */
  @Test
  void releaseMoreThanHeldChangesNothing() throws Exception {
    String name = unique("over-release");
    DistributedSemaphore s = t1.semaphore(name, 4);
    DistributedSemaphore other = t2.semaphore(name, 4);
    assertThrows(IllegalStateException.class, s::release, "holds nothing");
    assertEquals(4, s.availablePermits(), "no inflation");
    other.acquire(2);
    assertThrows(IllegalStateException.class, s::release, "another client's permits are not ours");
    assertThrows(IllegalStateException.class, () -> s.release(2));
    assertEquals(2, s.availablePermits());
    assertEquals(0, s.heldPermits());
    assertEquals(2, other.heldPermits());
    s.acquire();
    assertThrows(IllegalStateException.class, () -> s.release(2), "holds 1, releases 2");
    assertThrows(IllegalStateException.class, () -> s.release(3), "holds 1, releases 3 (as many as all clients hold)");
    assertEquals(1, s.heldPermits(), "nothing was released");
    assertEquals(1, s.availablePermits(), "nothing was released");
    assertEquals(2, other.heldPermits());
    long[] st = state(s);
    assertEquals(4, st[0], "capacity unchanged");
    assertEquals(3, st[3], "permits held by all clients unchanged");
    assertConserved(s);
    s.release();
    assertThrows(IllegalStateException.class, s::release);
    other.release(2);
    assertEquals(4, s.availablePermits());
    assertConserved(s);
  }

  /** heldPermits() tracks exactly the permits this client holds. */
  @Test
  void heldPermitsTracksThisClient() throws Exception {
    String name = unique("held");
    DistributedSemaphore s = t1.semaphore(name, 6);
    DistributedSemaphore other = t2.semaphore(name, 6);
    assertEquals(0, s.heldPermits());
    s.acquire();
    assertEquals(1, s.heldPermits());
    assertTrue(s.tryAcquire(2));
    assertEquals(3, s.heldPermits());
    other.acquire(2);
    assertEquals(3, s.heldPermits(), "another client's acquisitions do not count");
    assertEquals(2, other.heldPermits());
    assertTrue(s.tryAcquire(1, TimeUnit.SECONDS));
    assertEquals(4, s.heldPermits());
    assertFalse(s.tryAcquire(1));
    assertEquals(4, s.heldPermits(), "a failed attempt does not count");
    s.release(3);
    assertEquals(1, s.heldPermits());
    other.release(2);
    assertEquals(1, s.heldPermits());
    s.release();
    assertEquals(0, s.heldPermits());
    assertConserved(s);
  }

  // ------------------------------------------------------------------ waiting

  /** Timed tryAcquire times out when no permit comes, after about the timeout; 0 and negative timeouts do not wait. */
  @Test
  void timedTryAcquireTimesOut() throws Exception {
    String name = unique("timeout");
    DistributedSemaphore holder = t2.semaphore(name, 1);
    holder.acquire();
    DistributedSemaphore s = t1.semaphore(name, 1);
    for (long timeoutMs : new long[] {0, 50, 300}) {
      long start = System.nanoTime();
      assertFalse(s.tryAcquire(timeoutMs, TimeUnit.MILLISECONDS));
      long elapsed = millisSince(start);
      assertTrue(elapsed >= timeoutMs, "waited at least the timeout: " + elapsed + " ms for " + timeoutMs);
      assertTrue(elapsed < timeoutMs + 300, "did not wait notably longer: " + elapsed + " ms for " + timeoutMs);
    }
    long start = System.nanoTime();
    assertFalse(s.tryAcquire(-5, TimeUnit.SECONDS), "negative timeout");
    assertTrue(millisSince(start) < 300, "negative timeouts do not wait: " + millisSince(start) + " ms");
    assertEquals(0, s.heldPermits());
    assertEquals(0, s.waitingThreads());
    holder.release();
    assertEquals(1, s.availablePermits());
    assertConserved(s);
  }

  /** Timed tryAcquire with a very negative timeout (Long.MIN_VALUE ns, -Long.MAX_VALUE days) returns false at once instead of waiting. */
  @Test
  void extremeNegativeTimeoutsDoNotWait() throws Exception {
    String name = unique("min-timeout");
    DistributedSemaphore holder = t2.semaphore(name, 1);
    holder.acquire();
    DistributedSemaphore s = t1.semaphore(name, 1);
    long[][] cases = {{Long.MIN_VALUE, 0}, {-Long.MAX_VALUE, 1}};
    for (long[] c : cases) {
      TimeUnit unit = c[1] == 0 ? TimeUnit.NANOSECONDS : TimeUnit.DAYS;
      AtomicReference<Object> outcome = new AtomicReference<>();
      Thread caller = start("caller", () -> {
        try {
          outcome.set(s.tryAcquire(c[0], unit));
        } catch (Throwable e) {
          outcome.set(e);
        }
      });
      caller.join(1000);
      boolean hung = caller.isAlive();
      if (hung) {
        caller.interrupt(); // do not leave it blocked in Redis
        caller.join(2000);
      }
      assertFalse(hung, "tryAcquire(" + c[0] + ", " + unit + ") still waiting after 1 s");
      assertEquals(Boolean.FALSE, outcome.get(), "tryAcquire(" + c[0] + ", " + unit + ")");
    }
    assertEquals(0, s.heldPermits());
    holder.release();
    assertConserved(s);
  }

  /** Timed tryAcquire succeeds when another client releases during the wait, woken by the release (not by polling). */
  @Test
  void timedTryAcquireWokenByRelease() throws Exception {
    String name = unique("timed-wake");
    DistributedSemaphore holder = t2.semaphore(name, 1);
    holder.acquire();
    DistributedSemaphore s = t1.semaphore(name, 1);
    AtomicBoolean got = new AtomicBoolean();
    AtomicLong returnedAt = new AtomicLong();
    Thread waiter = start("waiter", () -> {
      got.set(s.tryAcquire(10, TimeUnit.SECONDS));
      returnedAt.set(System.nanoTime());
    });
    awaitWaiting(waiter);
    Thread.sleep(300);
    assertTrue(waiter.isAlive(), "still waiting while no permit is free");
    long releasedAt = System.nanoTime();
    holder.release();
    joinOrFail(waiter, 5000);
    assertTrue(got.get(), "acquired");
    long latencyMs = TimeUnit.NANOSECONDS.toMillis(returnedAt.get() - releasedAt);
    assertTrue(latencyMs < 1000, "woken promptly by the release: " + latencyMs + " ms");
    assertEquals(1, s.heldPermits());
    assertFalse(holder.tryAcquire());
    s.release();
    assertConserved(s);
  }

  /** acquire() blocks while no permit is free and returns, holding the permit, when another client releases. */
  @Test
  void acquireBlocksUntilRelease() throws Exception {
    String name = unique("blocks");
    DistributedSemaphore holder = t2.semaphore(name, 1);
    holder.acquire();
    DistributedSemaphore s = t1.semaphore(name, 1);
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicBoolean acquired = new AtomicBoolean();
    Thread waiter = start("waiter", () -> {
      try {
        s.acquire();
        acquired.set(true);
      } catch (Throwable e) {
        error.set(e);
      }
    });
    awaitWaiting(waiter);
    Thread.sleep(300);
    assertTrue(waiter.isAlive(), "blocked while the permit is held elsewhere");
    assertFalse(acquired.get());
    assertEquals(0, s.heldPermits());
    assertEquals(1, s.waitingThreads());
    long releasedAt = System.nanoTime();
    holder.release();
    joinOrFail(waiter, 5000);
    assertTrue(millisSince(releasedAt) < 1000, "woken promptly: " + millisSince(releasedAt) + " ms");
    assertNull(error.get());
    assertTrue(acquired.get());
    assertEquals(1, s.heldPermits(), "the blocked waiter got the permit");
    assertEquals(0, holder.availablePermits());
    assertFalse(holder.tryAcquire(), "the permit went to the waiter");
    s.release();
    assertConserved(s);
  }

  // ------------------------------------------------------------------ interrupts

  /** acquire() and tryAcquire(t) entered with the interrupt status set throw InterruptedException and take nothing. */
  @Test
  void preInterruptedAcquireThrows() {
    DistributedSemaphore s = t1.semaphore(unique("pre-interrupt"), 2);
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, s::acquire);
    assertFalse(Thread.interrupted(), "interrupt status cleared");
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, () -> s.acquire(2));
    assertFalse(Thread.interrupted(), "interrupt status cleared");
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, () -> s.tryAcquire(1, TimeUnit.SECONDS));
    assertFalse(Thread.interrupted(), "interrupt status cleared");
    Thread.currentThread().interrupt();
    assertThrows(InterruptedException.class, () -> s.tryAcquire(2, 1, TimeUnit.SECONDS));
    assertFalse(Thread.interrupted(), "interrupt status cleared");
    assertEquals(0, s.heldPermits(), "took nothing although permits were free");
    assertEquals(2, s.availablePermits());
    assertEquals(0, s.waitingThreads());
    assertConserved(s);
  }

  /** A thread blocked in Redis in acquire() or tryAcquire(30 s) reacts to interrupt in under 100 ms, takes nothing, leaves no blocked connection. */
  @Test
  void interruptWhileBlockedInRedis() throws Exception {
    String name = unique("interrupt");
    DistributedSemaphore holder = t2.semaphore(name, 2);
    holder.acquire(2);
    DistributedSemaphore s = t1.semaphore(name, 2);
    for (boolean timed : new boolean[] {false, true}) {
      AtomicLong reactedAt = new AtomicLong();
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicBoolean returnedNormally = new AtomicBoolean();
      Thread waiter = start("waiter-" + (timed ? "timed" : "untimed"), () -> {
        try {
          if (timed) {
            s.tryAcquire(30, TimeUnit.SECONDS);
          } else {
            s.acquire();
          }
          returnedNormally.set(true);
        } catch (Throwable e) {
          thrown.set(e);
        }
        reactedAt.set(System.nanoTime());
      });
      awaitWaiting(waiter);
      Thread.sleep(300); // by now it is blocked in BLMOVE
      assertBlockedClients(1);
      long interruptedAt = System.nanoTime();
      waiter.interrupt();
      joinOrFail(waiter, 2000);
      long reactionMs = TimeUnit.NANOSECONDS.toMillis(reactedAt.get() - interruptedAt);
      assertFalse(returnedNormally.get(), "timed=" + timed + ": returned instead of throwing");
      assertTrue(thrown.get() instanceof InterruptedException, "timed=" + timed + ": threw " + thrown.get());
      assertTrue(reactionMs < 100, "timed=" + timed + ": reacted to interrupt in " + reactionMs + " ms");
      assertEquals(0, s.heldPermits(), "timed=" + timed + ": took nothing");
      assertEquals(0, s.waitingThreads());
      assertBlockedClients(0);
      assertConserved(s);
      assertEquals(2, state(s)[3], "only the holder's permits are held");
    }
    holder.release(2);
    assertTrue(s.tryAcquire(2, 1, TimeUnit.SECONDS), "still usable after the interrupted waits");
    s.release(2);
    assertConserved(s);
  }

  /** acquireUninterruptibly() keeps waiting after an interrupt, acquires after a release, and returns with the interrupt status set. */
  @Test
  void acquireUninterruptiblyIgnoresInterrupt() throws Exception {
    String name = unique("uninterruptible");
    DistributedSemaphore holder = t2.semaphore(name, 1);
    holder.acquire();
    DistributedSemaphore s = t1.semaphore(name, 1);
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicBoolean acquired = new AtomicBoolean();
    AtomicBoolean interruptedOnReturn = new AtomicBoolean();
    Thread waiter = start("waiter", () -> {
      try {
        s.acquireUninterruptibly();
        acquired.set(true);
        interruptedOnReturn.set(Thread.currentThread().isInterrupted());
      } catch (Throwable e) {
        error.set(e);
      }
    });
    awaitWaiting(waiter);
    Thread.sleep(100);
    waiter.interrupt();
    Thread.sleep(300);
    assertTrue(waiter.isAlive(), "still waiting after the interrupt");
    assertEquals(0, s.heldPermits());
    holder.release();
    joinOrFail(waiter, 5000);
    assertNull(error.get());
    assertTrue(acquired.get());
    assertTrue(interruptedOnReturn.get(), "interrupt status set on return");
    assertEquals(1, s.heldPermits());
    s.release();
    assertConserved(s);
  }

  // ------------------------------------------------------------------ multi-permit

  /** acquire(3) on capacity 4 while another client holds 2 blocks, and completes when the other releases. */
  @Test
  void multiPermitAcquireWaitsForRelease() throws Exception {
    String name = unique("multi");
    DistributedSemaphore other = t2.semaphore(name, 4);
    other.acquire(2);
    DistributedSemaphore s = t1.semaphore(name, 4);
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicBoolean acquired = new AtomicBoolean();
    Thread waiter = start("waiter", () -> {
      try {
        s.acquire(3);
        acquired.set(true);
      } catch (Throwable e) {
        error.set(e);
      }
    });
    awaitWaiting(waiter);
    Thread.sleep(300);
    assertTrue(waiter.isAlive(), "blocked: only 2 of 3 permits are free");
    assertFalse(acquired.get());
    assertEquals(0, s.heldPermits(), "partial permits are not counted as held");
    long releasedAt = System.nanoTime();
    other.release(2);
    joinOrFail(waiter, 5000);
    assertTrue(millisSince(releasedAt) < 1000, "completed promptly: " + millisSince(releasedAt) + " ms");
    assertNull(error.get());
    assertTrue(acquired.get());
    assertEquals(3, s.heldPermits());
    assertEquals(1, other.availablePermits());
    assertConserved(s);
    s.release(3);
    assertEquals(4, other.availablePermits());
    assertConserved(s);
  }

  /** tryAcquire(3, 300 ms) that times out returns any permits collected along the way. */
  @Test
  void timedMultiPermitTimeoutReturnsPartialPermits() throws Exception {
    String name = unique("multi-timeout");
    DistributedSemaphore other = t2.semaphore(name, 4);
    other.acquire(2);
    DistributedSemaphore s = t1.semaphore(name, 4);
    long start = System.nanoTime();
    assertFalse(s.tryAcquire(3, 300, TimeUnit.MILLISECONDS));
    long elapsed = millisSince(start);
    assertTrue(elapsed >= 300 && elapsed < 600, "timed out after about 300 ms: " + elapsed);
    assertEquals(0, s.heldPermits());
    assertConserved(s);
    long[] st = state(s);
    assertEquals(2, st[2], "the 2 permits collected were returned: " + Arrays.toString(st));
    assertEquals(2, st[3], "only the other client's 2 permits are held: " + Arrays.toString(st));
    assertEquals(2, other.availablePermits(), "visible to the other client");
    // the collecting mutex was given up too: the other client can collect after us
    other.release(2);
    assertTrue(other.tryAcquire(3, 1, TimeUnit.SECONDS));
    other.release(3);
    assertTrue(s.tryAcquire(4, 1, TimeUnit.SECONDS));
    s.release(4);
    assertConserved(s);
  }

  /** Two clients each repeatedly doing acquire(3)/release(3) on capacity 4 both finish: no deadlock. */
  @Test
  void multiPermitAcquirersDoNotDeadlock() throws Exception {
    String name = unique("no-deadlock");
    DistributedSemaphore a = t1.semaphore(name, 4);
    DistributedSemaphore b = t2.semaphore(name, 4);
    AtomicReference<Throwable> error = new AtomicReference<>();
    CountDownLatch go = new CountDownLatch(1);
    List<Thread> threads = new ArrayList<>();
    for (DistributedSemaphore s : new DistributedSemaphore[] {a, b}) {
      threads.add(start("looper-" + (s == a ? "a" : "b"), () -> {
        try {
          go.await();
          for (int i = 0; i < 20; i++) {
            s.acquire(3);
            if (s.heldPermits() != 3) {
              throw new AssertionError("held " + s.heldPermits() + " after acquire(3)");
            }
            s.release(3);
          }
        } catch (Throwable e) {
          error.compareAndSet(null, e);
        }
      }));
    }
    go.countDown();
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
    for (Thread t : threads) {
      joinOrFail(t, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
    }
    assertNull(error.get(), () -> "a looper failed: " + error.get());
    assertEquals(0, a.heldPermits());
    assertEquals(0, b.heldPermits());
    assertEquals(4, a.availablePermits());
    assertConserved(a);
  }

  // ------------------------------------------------------------------ capacity changes

  /** drainPermits() takes all free permits for this client and returns how many; release(count) gives them back. */
  @Test
  void drainPermits() throws Exception {
    String name = unique("drain");
    DistributedSemaphore s = t1.semaphore(name, 5);
    DistributedSemaphore other = t2.semaphore(name, 5);
    other.acquire();
    assertEquals(4, s.drainPermits());
    assertEquals(4, s.heldPermits());
    assertEquals(0, s.availablePermits());
    assertEquals(0, other.availablePermits());
    assertFalse(other.tryAcquire());
    assertEquals(0, s.drainPermits(), "nothing left to drain");
    assertEquals(4, s.heldPermits());
    assertConserved(s);
    s.release(4);
    assertEquals(0, s.heldPermits());
    assertEquals(4, other.availablePermits());
    other.release();
    assertEquals(5, s.availablePermits());
    assertConserved(s);
  }

  /** reducePermits(k) shrinks capacity and availability at once. */
  @Test
  void reducePermitsShrinksCapacity() throws Exception {
    String name = unique("reduce");
    DistributedSemaphore s = t1.semaphore(name, 5);
    s.reducePermits(2);
    assertEquals(3, s.availablePermits());
    assertEquals(3, state(s)[0]);
    assertConserved(s);
    s.reducePermits(0);
    assertEquals(3, s.availablePermits());
    // the stored capacity changed: it is what other clients must now name
    assertEquals(3, t2.semaphore(name, 3).availablePermits());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t2.semaphore(name, 5));
    assertTrue(e.getMessage().contains("3") && e.getMessage().contains("5"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> s.acquire(4), "more than the new capacity");
    s.acquire(3);
    assertFalse(s.tryAcquire());
    s.release(3);
    assertConserved(s);
  }

  /** reducePermits(k) while permits are held makes availablePermits negative; releases pay the debt off. */
  @Test
  void reducePermitsWhileHeldLeavesDebtPaidByReleases() throws Exception {
    String name = unique("reduce-held");
    DistributedSemaphore s = t1.semaphore(name, 4);
    DistributedSemaphore other = t2.semaphore(name, 4);
    s.acquire(3);
    s.reducePermits(3); // removes the 1 free permit at once; 2 are owed by the holder
    assertEquals(-2, s.availablePermits());
    assertEquals(-2, other.availablePermits());
    long[] st = state(s);
    assertEquals(1, st[0], "capacity: " + Arrays.toString(st));
    assertEquals(2, st[1], "debt: " + Arrays.toString(st));
    assertFalse(other.tryAcquire(), "no permit while in debt");
    assertEquals(0, other.drainPermits(), "drain never goes negative");
    assertEquals(0, other.heldPermits());
    s.release();
    assertEquals(-1, other.availablePermits(), "a release pays the debt");
    assertFalse(other.tryAcquire());
    s.release();
    assertEquals(0, other.availablePermits(), "debt paid off");
    assertFalse(other.tryAcquire());
    assertEquals(1, s.heldPermits());
    s.release();
    assertEquals(1, other.availablePermits(), "the last release frees the one remaining permit");
    assertEquals(0, s.heldPermits());
    assertConserved(s);
    assertTrue(other.tryAcquire());
    other.release();
    assertConserved(s);
  }

  /** addPermits(k) grows capacity and availability, first paying off any debt. */
  @Test
  void addPermitsGrowsCapacity() throws Exception {
    String name = unique("add");
    DistributedSemaphore s = t1.semaphore(name, 2);
    DistributedSemaphore other = t2.semaphore(name, 2);
    s.addPermits(3);
    assertEquals(5, s.availablePermits());
    assertEquals(5, other.availablePermits());
    assertEquals(5, state(s)[0]);
    assertConserved(s);
    s.addPermits(0);
    assertEquals(5, s.availablePermits());
    assertSame(other, t2.semaphore(name, 5), "the stored capacity is now 5");
    other.acquire(5);
    assertEquals(0, s.availablePermits());
    // debt: reduce while held, then add pays it off first
    s.reducePermits(2);
    assertEquals(-2, s.availablePermits());
    s.addPermits(3);
    assertEquals(1, s.availablePermits(), "3 added, 2 of them paid the debt");
    assertEquals(6, state(s)[0]);
    other.release(5);
    assertEquals(6, s.availablePermits());
    assertConserved(s);
  }

  /** Negative arguments to reducePermits and addPermits are refused with IllegalArgumentException. */
  @Test
  void negativeCapacityChangesRefused() {
    DistributedSemaphore s = t1.semaphore(unique("neg-change"), 3);
    assertThrows(IllegalArgumentException.class, () -> s.reducePermits(-1));
    assertThrows(IllegalArgumentException.class, () -> s.addPermits(-1));
    assertThrows(IllegalArgumentException.class, () -> s.addPermits(Integer.MIN_VALUE));
    assertEquals(3, s.availablePermits());
    assertEquals(3, state(s)[0]);
    assertConserved(s);
  }

  // ------------------------------------------------------------------ queries

  /** isFair() is false. */
  @Test
  void isNotFair() {
    assertFalse(t1.semaphore(unique("fair"), 1).isFair());
  }

  /** getQueueLength/hasQueuedThreads report this JVM's threads queued behind the one waiting in Redis; waitingThreads counts all. */
  @Test
  void queueQueriesReportLocalWaiters() throws Exception {
    String name = unique("queue");
    DistributedSemaphore holder = t2.semaphore(name, 3);
    holder.acquire(3);
    DistributedSemaphore s = t1.semaphore(name, 3);
    assertFalse(s.hasQueuedThreads());
    assertEquals(0, s.getQueueLength());
    assertEquals(0, s.waitingThreads());
    AtomicReference<Throwable> error = new AtomicReference<>();
    CountDownLatch mayRelease = new CountDownLatch(1);
    List<Thread> waiters = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      waiters.add(start("waiter-" + i, () -> {
        try {
          s.acquire();
          mayRelease.await();
          s.release();
        } catch (Throwable e) {
          error.compareAndSet(null, e);
        }
      }));
    }
    for (Thread w : waiters) {
      awaitWaiting(w);
    }
    TestSupport.await("3 waiting, 2 queued", Duration.ofSeconds(5),
        () -> s.waitingThreads() == 3 && s.getQueueLength() == 2);
    Thread.sleep(200);
    assertEquals(3, s.waitingThreads());
    assertEquals(2, s.getQueueLength(), "threads queued behind the one waiting in Redis");
    assertTrue(s.hasQueuedThreads());
    assertEquals(0, s.heldPermits());
    holder.release(3);
    TestSupport.await("all 3 acquired", Duration.ofSeconds(5), () -> s.heldPermits() == 3);
    assertEquals(0, s.waitingThreads());
    assertEquals(0, s.getQueueLength());
    assertFalse(s.hasQueuedThreads());
    mayRelease.countDown();
    for (Thread w : waiters) {
      joinOrFail(w, 5000);
    }
    assertNull(error.get());
    assertEquals(0, s.heldPermits());
    assertEquals(0, s.waitingThreads());
    assertEquals(0, s.getQueueLength());
    assertFalse(s.hasQueuedThreads());
    assertEquals(3, s.availablePermits());
    assertConserved(s);
  }

  /** toString contains the name and the number of permits held by this client. */
  @Test
  void toStringShowsNameAndHeld() throws Exception {
    String name = unique("tostring");
    DistributedSemaphore s = t1.semaphore(name, 5);
    String before = s.toString();
    assertTrue(before.contains(name), before);
    assertEquals(List.of(0L), numbersOutside(before, name), before);
    s.acquire(3);
    String during = s.toString();
    assertTrue(during.contains(name), during);
    assertEquals(List.of(3L), numbersOutside(during, name), during);
    s.release(3);
    assertEquals(List.of(0L), numbersOutside(s.toString(), name), s.toString());
  }

  private static List<Long> numbersOutside(String text, String name) {
    Matcher m = Pattern.compile("-?\\d+").matcher(text.replace(name, ""));
    List<Long> out = new ArrayList<>();
    while (m.find()) {
      out.add(Long.parseLong(m.group()));
    }
    return out;
  }

  // ------------------------------------------------------------------ reflection

  /** Every public non-final instance method of Semaphore is overridden; exactly the final ones (hasQueuedThreads, getQueueLength) are not. */
  @Test
  void everyOverridableSemaphoreMethodIsOverridden() throws Exception {
    Class<?> runtime = t1.semaphore(unique("reflect"), 1).getClass();
    Set<String> notOverridden = new TreeSet<>();
    Set<String> finals = new TreeSet<>();
    for (Method m : Semaphore.class.getDeclaredMethods()) {
      int mod = m.getModifiers();
      if (!Modifier.isPublic(mod) || Modifier.isStatic(mod) || m.isSynthetic()) {
        continue;
      }
      String sig = m.getName() + Arrays.toString(m.getParameterTypes());
      if (Modifier.isFinal(mod)) {
        finals.add(sig);
      }
      Method actual = runtime.getMethod(m.getName(), m.getParameterTypes());
      if (actual.getDeclaringClass() == Semaphore.class) {
        notOverridden.add(sig);
        assertTrue(Modifier.isFinal(mod), "public non-final Semaphore method not overridden: " + sig);
      }
    }
    Set<String> expected = new TreeSet<>(List.of("getQueueLength[]", "hasQueuedThreads[]"));
    assertEquals(expected, notOverridden, "exactly the final methods fall through to Semaphore");
    assertEquals(expected, finals, "Semaphore's public final methods (a new JDK changed them?)");
    Method reduce = DistributedSemaphore.class.getDeclaredMethod("reducePermits", int.class);
    assertTrue(Modifier.isPublic(reduce.getModifiers()), "reducePermits is public");
    assertNotEquals(Semaphore.class, runtime.getMethod("reducePermits", int.class).getDeclaringClass());
  }
}
