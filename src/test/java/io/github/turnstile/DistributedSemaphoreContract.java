package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The {@link Semaphore} contract, method by method from the JDK javadoc, that both modes of
 * {@link DistributedSemaphore} keep (the JSR-166 TCK's {@code SemaphoreTest} served as a list of
 * what to cover; nothing is copied from it). {@link DistributedSemaphoreContractTest} runs it for
 * the leased mode and the counting mode, and adds each mode's own rules.
 *
 * <p>Where the JDK's scenario releases permits that were never acquired, the releasing client of
 * a leased semaphore holds them beforehand (see {@link #prepare}); a counting semaphore creates them
 * on release, as {@code Semaphore} does. "Same client" runs a scenario within one {@link Turnstile}
 * (one JVM's threads); "other client" releases, adds or holds through a second {@code Turnstile} on
 * the same Redis, standing in for another JVM.
 *
 * <p>Timing: no test bounds how fast anything happens. A wait for an event allows
 * {@link #EVENT_WAIT} and fails only if the event never comes; a check that something does not
 * happen looks for a while and cannot fail from slowness. Every blocking call is bounded: the test
 * body runs under a preemptive {@link Timeout}, and every thread a test starts is joined with a
 * timeout.
 */
@Timeout(value = 180, unit = SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
abstract class DistributedSemaphoreContract {
  /** How long a test waits for an event that must happen (generous: the machine may be at load 10). */
  static final Duration EVENT_WAIT = Duration.ofSeconds(45);
  /** How long a timed acquire that must succeed may wait. */
  static final long LONG_WAIT_SECONDS = 90;
  /** How long a test watches for something that must not happen. */
  static final long QUIET_MILLIS = 300;

  /** The first client: the acquiring side of every scenario. */
  abstract Turnstile t1();

  /** The second client, on the same Redis: "another JVM". */
  abstract Turnstile t2();

  /** Whether this run checks leased semaphores ({@link Turnstile#semaphore}) or counting ones. */
  abstract boolean leased();

  /** Obtains the semaphore of this run's mode. */
  final DistributedSemaphore obtain(Turnstile t, String name, int permits) {
    return leased() ? t.semaphore(name, permits) : t.countingSemaphore(name, permits);
  }

  /** Where the other party of a scenario (releaser, adder, holder) is. */
  enum Where {
    SAME_CLIENT,
    OTHER_CLIENT
  }

  /** The acquiring side ({@link #t1()}) and the releasing side (the same instance, or {@link #t2()}'s). */
  record Sems(DistributedSemaphore acq, DistributedSemaphore rel) {}

  /**
   * Creates a semaphore with {@code available} free permits, of which the releasing side may
   * release {@code releasable} more: leased, it is created with {@code available + releasable}
   * permits and the releasing side's client acquires {@code releasable} of them; counting, it is
   * created with {@code available} and a release creates permits.
   */
  final Sems prepare(String name, int available, int releasable, Where where) {
    int initial = leased() ? available + releasable : available;
    DistributedSemaphore acq = obtain(t1(), name, initial);
    DistributedSemaphore rel = where == Where.SAME_CLIENT ? acq : obtain(t2(), name, initial);
    if (leased() && releasable > 0) {
      assertTrue(rel.tryAcquire(releasable), "setup: pre-hold " + releasable + " permits to release later");
    }
    assertEquals(available, acq.availablePermits(), "setup: free permits");
    return new Sems(acq, rel);
  }

  /** heldPermits() as this mode defines it: leased, the client's permits; counting, always 0. */
  final void assertHeld(int leasedHeld, DistributedSemaphore s, String what) {
    assertEquals(leased() ? leasedHeld : 0, s.heldPermits(), "heldPermits(): " + what);
  }

  // ------------------------------------------------------------------ the acquisition methods

  /** Every acquisition method of Semaphore; the one-permit ones take n permits one at a time. */
  enum Acquirer {
    ACQUIRE,
    ACQUIRE_N,
    UNINTERRUPTIBLY,
    UNINTERRUPTIBLY_N,
    TRY,
    TRY_N,
    TIMED,
    TIMED_N;

    /** Acquires {@code n} permits with this method; a try method must succeed. */
    void acquire(DistributedSemaphore s, int n) throws InterruptedException {
      switch (this) {
        case ACQUIRE -> {
          for (int i = 0; i < n; i++) {
            s.acquire();
          }
        }
        case ACQUIRE_N -> s.acquire(n);
        case UNINTERRUPTIBLY -> {
          for (int i = 0; i < n; i++) {
            s.acquireUninterruptibly();
          }
        }
        case UNINTERRUPTIBLY_N -> s.acquireUninterruptibly(n);
        case TRY -> {
          for (int i = 0; i < n; i++) {
            assertTrue(s.tryAcquire(), "tryAcquire() with a permit free");
          }
        }
        case TRY_N -> assertTrue(s.tryAcquire(n), "tryAcquire(" + n + ") with that many free");
        case TIMED -> {
          for (int i = 0; i < n; i++) {
            assertTrue(s.tryAcquire(LONG_WAIT_SECONDS, SECONDS), "tryAcquire(" + LONG_WAIT_SECONDS + " s)");
          }
        }
        case TIMED_N -> assertTrue(s.tryAcquire(n, LONG_WAIT_SECONDS, SECONDS),
            "tryAcquire(" + n + ", " + LONG_WAIT_SECONDS + " s)");
        default -> throw new AssertionError(this);
      }
    }

    /** The state of a thread waiting in this method: parked untimed, or timed for the timed ones. */
    Thread.State parkedState() {
      return this == TIMED || this == TIMED_N ? Thread.State.TIMED_WAITING : Thread.State.WAITING;
    }
  }

  // ------------------------------------------------------------------ threads and waiting

  interface Body {
    void run() throws Exception;
  }

  /** A thread started by a test, whose failure (an assertion included) fails the test when joined. */
  static final class Worker {
    final Thread thread;
    final AtomicReference<Throwable> failure = new AtomicReference<>();

    Worker(String name, Body body) {
      thread = new Thread(() -> {
        try {
          body.run();
        } catch (Throwable e) {
          failure.set(e);
        }
      }, name);
      thread.setDaemon(true);
    }
  }

  private final List<Worker> workers = new CopyOnWriteArrayList<>();

  final Worker spawn(String name, Body body) {
    Worker w = new Worker(name, body);
    workers.add(w);
    w.thread.start();
    return w;
  }

  /** Joins the worker (failing if it never finishes) and rethrows what it failed with. */
  static void finish(Worker w) throws InterruptedException {
    finish(w, () -> "");
  }

  /**
   * Joins the worker, failing if it never finishes with {@code context} (the state of the test),
   * the worker's stack and the stacks of Turnstile's own threads, to diagnose a lost wake-up.
   */
  static void finish(Worker w, Supplier<String> context) throws InterruptedException {
    w.thread.join(EVENT_WAIT.toMillis());
    if (w.thread.isAlive()) {
      String state;
      try {
        state = context.get();
      } catch (RuntimeException e) {
        state = "(context failed: " + e + ")";
      }
      fail("thread " + w.thread.getName() + " did not finish within " + EVENT_WAIT + " (state "
          + w.thread.getState() + ") " + state + "; stack: " + Arrays.toString(w.thread.getStackTrace())
          + turnstileThreads());
    }
    Throwable e = w.failure.get();
    if (e != null) {
      throw new AssertionError("thread " + w.thread.getName() + " failed: " + e, e);
    }
  }

  /** The stacks of the threads that run Turnstile's code (waiter threads, event loops), for a failure message. */
  static String turnstileThreads() {
    StringBuilder out = new StringBuilder();
    for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
      String stack = Arrays.toString(t.getValue());
      if (stack.contains("io.github.turnstile.RedisSemaphore") || stack.contains("io.github.turnstile.Engine")) {
        out.append("\n  thread ").append(t.getKey().getName()).append(" (").append(t.getKey().getState())
            .append("): ").append(stack);
      }
    }
    return out.length() == 0 ? "" : "\nTurnstile threads:" + out;
  }

  /**
   * The servers the suite runs on (every master of a Cluster), for {@link #describe}.
   *
   * @return the servers the suite runs on
   */
  TestRedis redis() {
    return RedisExtension.shared();
  }

  /**
   * A semaphore's counts, its client's books and what Redis holds for its waiters (the wake list,
   * the waiting lanes, the clients blocked on the wake list), for a failure message. Read on every
   * master of the suite's servers (a Cluster's keys live on one of them; the others answer MOVED,
   * left out). Before, it read the shared single server whatever the suite ran on, so on a Cluster
   * its "in Redis" part was always empty.
   */
  String describe(DistributedSemaphore s) {
    String books = s instanceof RedisSemaphore r ? ", books: " + r.books() : "";
    String redis;
    try {
      TestRedis servers = redis();
      String base = "{" + TurnstileOptions.builder().build().keyPrefix() + ":" + s.name() + "}:s";
      StringBuilder blocked = new StringBuilder();
      for (String list : servers.commandOnEachMaster("CLIENT", "LIST")) {
        for (String line : list.split("\r?\n")) {
          if (line.contains("cmd=blpop")) {
            blocked.append(" {").append(line).append('}');
          }
        }
      }
      redis = ", in Redis: wake list " + onOwner(servers, "LRANGE", base + ":wake", "0", "-1")
          + ", waiting lanes " + onOwner(servers, "ZRANGE", base + ":w", "0", "-1", "WITHSCORES")
          + ", clients in BLPOP:" + blocked;
    } catch (RuntimeException e) {
      redis = ", Redis not read: " + e;
    }
    return "[" + s.name() + ": available " + s.availablePermits() + ", queued " + s.getQueueLength()
        + ", held " + s.heldPermits() + books + redis + "]";
  }

  /** The reply of the master that owns the key (the others answer MOVED). */
  private static String onOwner(TestRedis servers, String... command) {
    StringBuilder out = new StringBuilder();
    for (String reply : servers.commandOnEachMaster(command)) {
      if (!reply.contains("MOVED")) {
        out.append(reply.replace('\n', ' '));
      }
    }
    return out.toString();
  }

  /** A failed test must not leave its threads waiting (interruptible ones end; the rest are daemons). */
  @AfterEach
  void stopStragglers() {
    for (Worker w : workers) {
      if (w.thread.isAlive()) {
        w.thread.interrupt();
      }
    }
    workers.clear();
  }

  static void await(String what, BooleanSupplier condition) {
    TestSupport.await(what, EVENT_WAIT, condition);
  }

  /** As {@link #await(String, BooleanSupplier)}, failing with {@code context} (the state of the test) and Turnstile's threads. */
  static void await(String what, BooleanSupplier condition, Supplier<String> context) {
    long deadline = System.nanoTime() + EVENT_WAIT.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        String state;
        try {
          state = context.get();
        } catch (RuntimeException e) {
          state = "(context failed: " + e + ")";
        }
        fail("timed out after " + EVENT_WAIT + " waiting for: " + what + "; " + state + turnstileThreads());
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }
  }

  /** Waits until exactly {@code queued} threads wait in {@code s} and each of {@code threads} is parked in {@code state}. */
  static void awaitParked(DistributedSemaphore s, int queued, Thread.State state, Worker... threads) {
    await(queued + " queued thread(s) of " + s.name() + ", parked in " + state, () -> {
      if (s.getQueueLength() != queued) {
        return false;
      }
      for (Worker w : threads) {
        if (w.thread.getState() != state) {
          return false;
        }
      }
      return true;
    });
    assertEquals(queued > 0, s.hasQueuedThreads(), "hasQueuedThreads() with " + queued + " waiting");
    assertEquals(queued, s.waitingThreads(), "waitingThreads() == getQueueLength()");
  }

  /** Watches the workers for a while: each must still be waiting (alive) throughout. */
  static void assertStillWaiting(String why, Worker... threads) throws InterruptedException {
    long until = System.nanoTime() + MILLISECONDS.toNanos(QUIET_MILLIS);
    while (System.nanoTime() - until < 0) {
      for (Worker w : threads) {
        if (!w.thread.isAlive()) {
          fail(w.thread.getName() + " stopped waiting: " + why
              + (w.failure.get() == null ? "" : " (failed: " + w.failure.get() + ")"));
        }
      }
      Thread.sleep(20);
    }
  }

  // ================================================================== construction and queries

  /** Semaphore(int): zero, negative and positive initial permits are allowed and are the free permits; isFair() is false. */
  @Test
  void anyInitialPermitsAreTheFreePermits() {
    for (int permits : new int[] {-42, -1, 0, 1, 42}) {
      String name = unique("initial" + permits);
      DistributedSemaphore s = obtain(t1(), name, permits);
      assertEquals(permits, s.availablePermits(), "created with " + permits);
      assertEquals(permits, obtain(t2(), name, permits).availablePermits(), "as another client sees it");
      assertFalse(s.isFair(), "isFair()");
      assertFalse(s.hasQueuedThreads());
      assertEquals(0, s.getQueueLength());
      assertHeld(0, s, "nothing acquired yet");
    }
  }

  /** tryAcquire() takes a free permit and returns true; with none free it returns false (never throws) and changes nothing. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void tryAcquireTakesFreePermitsOrReturnsFalse(Where where) {
    String name = unique("try");
    DistributedSemaphore a = obtain(t1(), name, 2);
    DistributedSemaphore b = where == Where.SAME_CLIENT ? a : obtain(t2(), name, 2);
    assertEquals(2, a.availablePermits());
    assertTrue(a.tryAcquire());
    assertTrue(b.tryAcquire());
    assertEquals(0, a.availablePermits());
    assertEquals(0, b.availablePermits());
    assertFalse(a.tryAcquire());
    assertFalse(b.tryAcquire());
    assertEquals(0, a.availablePermits(), "a failed tryAcquire changes nothing");
    assertHeld(where == Where.SAME_CLIENT ? 2 : 1, a, "one permit per successful tryAcquire");
  }

  /** tryAcquire(n) is all or nothing: false (nothing taken) while fewer than n are free, more than ever existed included. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void tryAcquireNIsAllOrNothing(Where where) {
    String name = unique("try-n");
    DistributedSemaphore a = obtain(t1(), name, 2);
    DistributedSemaphore b = where == Where.SAME_CLIENT ? a : obtain(t2(), name, 2);
    assertFalse(a.tryAcquire(3), "3 of 2");
    assertFalse(a.tryAcquire(Integer.MAX_VALUE), "Integer.MAX_VALUE of 2");
    assertEquals(2, a.availablePermits(), "took nothing");
    assertHeld(0, a, "took nothing");
    assertTrue(b.tryAcquire(2));
    assertEquals(0, a.availablePermits());
    assertFalse(a.tryAcquire(1));
    assertFalse(a.tryAcquire(2));
    assertEquals(0, a.availablePermits());
    assertHeld(where == Where.SAME_CLIENT ? 2 : 0, a, "after tryAcquire(2)");
  }

  /** Acquiring 0 permits succeeds at once, and release(0) does nothing, while no permit is free. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void zeroPermitsNeedNoFreePermit(Where where) throws Exception {
    Sems x = prepare(unique("zero"), 0, 2, where);
    DistributedSemaphore s = x.acq();
    s.acquire(0);
    s.acquireUninterruptibly(0);
    assertTrue(s.tryAcquire(0));
    assertTrue(s.tryAcquire(0, LONG_WAIT_SECONDS, SECONDS));
    s.release(0);
    x.rel().release(0);
    assertEquals(0, s.availablePermits());
    assertHeld(where == Where.SAME_CLIENT ? 2 : 0, s, "nothing changed");
    assertFalse(s.hasQueuedThreads());
  }

  /** With negative free permits even 0 permits are not available (Semaphore: remaining = available - 0 < 0): they wait until the count is back at 0. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void zeroPermitsWaitWhileFreePermitsAreNegative(Where where) throws Exception {
    String name = unique("zero-neg");
    DistributedSemaphore s = obtain(t1(), name, 0);
    DistributedSemaphore other = where == Where.SAME_CLIENT ? s : obtain(t2(), name, 0);
    s.reducePermits(1);
    assertEquals(-1, s.availablePermits());
    assertFalse(s.tryAcquire(0), "tryAcquire(0) at -1");
    assertFalse(s.tryAcquire(0, 100, MILLISECONDS), "tryAcquire(0, 100 ms) at -1");
    Worker w = spawn("acquire(0)", () -> s.acquire(0));
    awaitParked(s, 1, Thread.State.WAITING, w);
    assertStillWaiting("acquire(0) at -1 free permits", w);
    other.addPermits(1);
    finish(w, () -> where + ": " + describe(s));
    assertEquals(0, s.availablePermits());
    assertHeld(0, s, "acquire(0) holds nothing");
  }

  // ================================================================== acquire / release

  /** Every acquisition method, same thread: release(i) makes i more permits free, and acquiring i takes exactly them. */
  @ParameterizedTest
  @EnumSource(Acquirer.class)
  void releaseThenAcquireInTheSameThread(Acquirer method) throws Exception {
    Sems x = prepare(unique("same-thread-" + method), 1, 5, Where.SAME_CLIENT);
    DistributedSemaphore s = x.acq();
    for (int i = 1; i <= 5; i++) {
      s.release(i);
      assertEquals(1 + i, s.availablePermits(), "after release(" + i + ")");
      method.acquire(s, i);
      assertEquals(1, s.availablePermits(), "after acquiring " + i + " with " + method);
    }
    assertHeld(5, s, "as many as before");
    assertFalse(s.hasQueuedThreads());
  }

  /**
   * Every blocking acquisition method: a thread that waits for 1, then 3, then 1, then 3 permits is
   * released by another thread (of the same client, or of another client) each time, in order.
   */
  @ParameterizedTest(name = "{0} {1}")
  @EnumSource(value = Acquirer.class, names = {"ACQUIRE", "ACQUIRE_N", "UNINTERRUPTIBLY", "UNINTERRUPTIBLY_N",
      "TIMED", "TIMED_N"})
  void releaseInOneThreadEnablesAcquireInAnother(Acquirer method) throws Exception {
    for (Where where : Where.values()) {
      releaseEnablesAcquire(method, where);
    }
  }

  /**
   * The scenario above 200 times over within one client (alternately timed and untimed waits): a
   * release hands a permit to the waiting thread and sends the rest to Redis while the JVM's waiter
   * thread, interrupted because its thread was served, abandons a wait in Redis and starts the next
   * one. A wake-up lost in that interleaving leaves the next acquisition waiting with permits free.
   */
  @Test
  void releaseEnablesAcquireOverAndOver() throws Exception {
    for (int i = 0; i < 200; i++) {
      releaseEnablesAcquire(i % 2 == 0 ? Acquirer.TIMED : Acquirer.ACQUIRE, Where.SAME_CLIENT);
    }
  }

  private void releaseEnablesAcquire(Acquirer method, Where where) throws Exception {
    int rounds = 4;
    Sems x = prepare(unique("handoff-" + method + "-" + where), 0, 8, where);
    DistributedSemaphore s = x.acq();
    AtomicInteger round = new AtomicInteger(-1);
    Worker w = spawn("acquirer-" + method + "-" + where, () -> {
      for (int i = 0; i < rounds; i++) {
        assertFalse(s.hasQueuedThreads(), "nobody queued at round " + i);
        round.set(i);
        method.acquire(s, i % 2 == 0 ? 1 : 3);
      }
      round.set(rounds);
    });
    for (int i = 0; i < rounds; i++) {
      int r = i;
      await("round " + r + ": the acquirer waits with no permit free", () -> round.get() == r
          && s.hasQueuedThreads() && w.thread.getState() == method.parkedState() && s.availablePermits() == 0,
          () -> where + ": at round " + round.get() + ", acquirer " + w.thread.getState() + " "
              + Arrays.toString(w.thread.getStackTrace()) + (w.failure.get() == null ? "" : " failed: " + w.failure.get())
              + ", acquirer side " + describe(s) + ", releaser side " + describe(x.rel()));
      assertTrue(w.thread.isAlive());
      x.rel().release(i % 2 == 0 ? 1 : 3);
    }
    finish(w, () -> "at round " + round.get() + " of " + rounds + ", acquirer side " + describe(s)
        + ", releaser side " + describe(x.rel()));
    assertEquals(0, s.availablePermits(), where + ": every permit released was acquired");
    assertFalse(s.hasQueuedThreads());
    assertHeld(8, s, where + ": the acquirer's client holds what it acquired");
  }

  /** Several threads of two clients wait; one release of enough permits serves every one of them. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void oneReleaseServesSeveralWaiters(Where where) throws Exception {
    String name = unique("several");
    Sems x = prepare(name, 0, 6, where);
    DistributedSemaphore a = x.acq();
    DistributedSemaphore b = obtain(t2(), name, leased() ? 6 : 0);
    Worker w1 = spawn("acquire", a::acquire);
    Worker w2 = spawn("acquireUninterruptibly(2)", () -> a.acquireUninterruptibly(2));
    Worker w3 = spawn("tryAcquire(timed)", () -> assertTrue(a.tryAcquire(LONG_WAIT_SECONDS, SECONDS)));
    Worker w4 = spawn("other client acquire(2)", () -> b.acquire(2));
    await("4 waiters", () -> a.getQueueLength() == 3 && b.getQueueLength() == 1);
    x.rel().release(6);
    for (Worker w : List.of(w1, w2, w3, w4)) {
      finish(w, () -> where + ": " + describe(a));
    }
    assertEquals(0, a.availablePermits());
    assertHeld(4, a, "1 + 2 + 1 acquired by this client's threads");
    assertHeld(2, b, "acquired by the other client");
  }

  /** The permits of a multi-permit acquisition are taken all at once: a waiter holds none of them while it waits, and non-fair tryAcquire() takes a free one meanwhile. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void multiPermitWaiterTakesNothingUntilAllAreFree(Where where) throws Exception {
    String name = unique("all-at-once");
    Sems x = prepare(name, 2, 2, where);
    DistributedSemaphore s = x.acq();
    DistributedSemaphore other = obtain(t2(), name, leased() ? 4 : 2);
    Worker w = spawn("acquire(3)", () -> s.acquire(3));
    awaitParked(s, 1, Thread.State.WAITING, w);
    assertStillWaiting("only 2 of 3 permits are free", w);
    assertEquals(2, s.availablePermits(), "the waiter took none of the 2 free permits");
    assertTrue(s.tryAcquire(), "non-fair: tryAcquire() takes a free permit while a thread waits (same client)");
    assertTrue(other.tryAcquire(), "non-fair: tryAcquire() takes a free permit while a thread waits (other client)");
    assertEquals(0, s.availablePermits());
    s.release();
    other.release();
    assertTrue(w.thread.isAlive(), "2 free: still not enough");
    x.rel().release(2);
    finish(w, () -> where + ": " + describe(s));
    assertEquals(1, s.availablePermits(), "4 - 3");
    assertHeld(3, s, where + ": the 3 acquired");
  }

  /** acquire(n) with n above all permits that exist waits (tryAcquire returns false, never throws) until addPermits makes it possible. */
  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Acquirer.class, names = {"ACQUIRE_N", "UNINTERRUPTIBLY_N", "TIMED_N"})
  void acquireAboveCapacityWaitsUntilPermitsAreAdded(Acquirer method) throws Exception {
    for (Where where : Where.values()) {
      String name = unique("above-" + method + "-" + where);
      DistributedSemaphore s = obtain(t1(), name, 2);
      DistributedSemaphore adder = where == Where.SAME_CLIENT ? s : obtain(t2(), name, 2);
      assertFalse(s.tryAcquire(5), "tryAcquire(5) of 2");
      assertFalse(s.tryAcquire(5, 100, MILLISECONDS), "tryAcquire(5, 100 ms) of 2");
      Worker w = spawn(method + "(5)", () -> method.acquire(s, 5));
      awaitParked(s, 1, method.parkedState(), w);
      assertStillWaiting("5 of 2 permits", w);
      assertEquals(2, s.availablePermits(), "the waiter took none");
      adder.addPermits(2);
      assertStillWaiting("5 of 4 permits", w);
      adder.addPermits(1);
      finish(w, () -> where + ": " + describe(s));
      assertEquals(0, s.availablePermits(), where + ": 5 added-up permits, 5 taken");
      assertHeld(5, s, where + ": the 5 acquired");
    }
  }

  /** Release in one thread happens-before a successful acquire in another thread of the same JVM (plain fields written before release are seen after acquire). */
  @ParameterizedTest
  @EnumSource(Where.class)
  void releaseHappensBeforeAcquire(Where where) throws Exception {
    int rounds = 40;
    Sems x = prepare(unique("hb"), 0, rounds, where);
    final class Box {
      int number;
      long square;
      String text;
    }
    Box box = new Box();
    Semaphore ack = new Semaphore(0); // the reader's reads of round i happen-before the writes of round i + 1
    Worker reader = spawn("reader", () -> {
      for (int i = 1; i <= rounds; i++) {
        x.acq().acquire();
        if (box.number != i || box.square != (long) i * i || !("round " + i).equals(box.text)) {
          throw new AssertionError("round " + i + ": saw " + box.number + ", " + box.square + ", " + box.text);
        }
        ack.release();
      }
    });
    for (int i = 1; i <= rounds; i++) {
      box.number = i;
      box.square = (long) i * i;
      box.text = "round " + i;
      x.rel().release();
      assertTrue(ack.tryAcquire(EVENT_WAIT.toSeconds(), SECONDS), "the reader acquired in round " + i);
    }
    finish(reader, () -> describe(x.acq()));
    assertEquals(0, x.acq().availablePermits());
  }

  // ================================================================== timed waits

  /** tryAcquire(timeout) and tryAcquire(n, timeout) return false once the time has elapsed, nothing held, nobody left queued. */
  @Test
  void timedTryAcquireReturnsFalseWhenTheTimeElapses() throws Exception {
    String name = unique("timeout");
    DistributedSemaphore none = obtain(t1(), name, 0);
    long start = System.nanoTime();
    assertFalse(none.tryAcquire(200, MILLISECONDS));
    assertTrue(TestSupport.millisSince(start) >= 200, "returned before its time: " + TestSupport.millisSince(start));

    DistributedSemaphore two = obtain(t1(), unique("timeout-n"), 2);
    start = System.nanoTime();
    assertFalse(two.tryAcquire(3, 200, MILLISECONDS));
    assertTrue(TestSupport.millisSince(start) >= 200, "returned before its time: " + TestSupport.millisSince(start));
    assertEquals(0, none.availablePermits());
    assertEquals(2, two.availablePermits(), "took none of the 2 while waiting for 3");
    assertHeld(0, two, "nothing held after the time elapsed");
    assertFalse(none.hasQueuedThreads());
    assertFalse(two.hasQueuedThreads());
    assertTrue(two.tryAcquire(2), "the 2 are still free");
  }

  /** A timeout of zero or less tries once: true if the permits are free, false otherwise, without waiting; extreme values included. */
  @Test
  void nonPositiveTimeoutsTryOnce() throws Exception {
    DistributedSemaphore s = obtain(t1(), unique("no-wait"), 2);
    assertTrue(s.tryAcquire(0, SECONDS), "free permit, timeout 0");
    assertTrue(s.tryAcquire(-1, SECONDS), "free permit, negative timeout");
    assertEquals(0, s.availablePermits());
    assertFalse(s.tryAcquire(0, SECONDS));
    assertFalse(s.tryAcquire(-1, MILLISECONDS));
    assertFalse(s.tryAcquire(Long.MIN_VALUE, TimeUnit.NANOSECONDS));
    assertFalse(s.tryAcquire(-Long.MAX_VALUE, TimeUnit.DAYS));
    assertFalse(s.tryAcquire(2, Long.MIN_VALUE, TimeUnit.DAYS));
    assertHeld(2, s, "the two acquired with free permits");
    assertFalse(s.hasQueuedThreads());
  }

  /** An enormous timeout (Long.MAX_VALUE days) does not overflow: the wait ends when a permit is released. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void hugeTimeoutWaitsForARelease(Where where) throws Exception {
    Sems x = prepare(unique("huge-timeout"), 0, 1, where);
    Worker w = spawn("tryAcquire(Long.MAX_VALUE days)",
        () -> assertTrue(x.acq().tryAcquire(Long.MAX_VALUE, TimeUnit.DAYS)));
    awaitParked(x.acq(), 1, Thread.State.TIMED_WAITING, w);
    x.rel().release();
    finish(w, () -> describe(x.acq()));
    assertEquals(0, x.acq().availablePermits());
  }

  // ================================================================== interrupts

  /**
   * acquire(), acquire(n), tryAcquire(timeout), tryAcquire(n, timeout) are interruptible: interrupted
   * before the call or while waiting (parked WAITING, or TIMED_WAITING for the timed ones), they
   * throw InterruptedException, clear the interrupt status and take nothing.
   */
  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Acquirer.class, names = {"ACQUIRE", "ACQUIRE_N", "TIMED", "TIMED_N"})
  void interruptibleAcquisitionsThrowAndTakeNothing(Acquirer method) throws Exception {
    for (Where where : Where.values()) {
      interruptible(method, where);
    }
  }

  private void interruptible(Acquirer method, Where where) throws Exception {
    // no permit free: the holder (same or other client) holds both
    Sems x = prepare(unique("interrupt-" + method + "-" + where), 0, 2, where);
    DistributedSemaphore s = x.acq();
    AtomicInteger phase = new AtomicInteger();
    Worker w = spawn("interrupted", () -> {
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, () -> method.acquire(s, 1), "interrupted before acquiring 1");
      assertFalse(Thread.interrupted(), "interrupt status cleared (before, 1)");
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, () -> method.acquire(s, 3), "interrupted before acquiring 3");
      assertFalse(Thread.interrupted(), "interrupt status cleared (before, 3)");
      phase.set(1);
      assertThrows(InterruptedException.class, () -> method.acquire(s, 1), "interrupted while waiting for 1");
      assertFalse(Thread.interrupted(), "interrupt status cleared (waiting, 1)");
      phase.set(2);
      assertThrows(InterruptedException.class, () -> method.acquire(s, 3), "interrupted while waiting for 3");
      assertFalse(Thread.interrupted(), "interrupt status cleared (waiting, 3)");
      phase.set(3);
    });
    for (int p = 1; p <= 2; p++) {
      int want = p;
      await("phase " + want + " of " + method + " waiting", () -> phase.get() == want);
      awaitParked(s, 1, method.parkedState(), w);
      w.thread.interrupt();
    }
    finish(w, () -> where + ": " + describe(s));
    assertEquals(3, phase.get());
    assertFalse(s.hasQueuedThreads(), "nobody left queued");
    assertEquals(0, s.getQueueLength());
    assertEquals(0, s.availablePermits(), "took nothing");
    assertHeld(where == Where.SAME_CLIENT ? 2 : 0, s, "took nothing");
    // nothing was left waiting in Redis to take the next permit: another client gets it
    x.rel().release();
    assertEquals(1, s.availablePermits());
    DistributedSemaphore taker = obtain(t2(), s.name(), leased() ? 2 : 0);
    assertTrue(taker.tryAcquire(), "the released permit is free for anyone");
  }

  /**
   * A thread whose interrupt status is set: the interruptible methods throw InterruptedException
   * (status cleared) even though permits are free, and take none; acquireUninterruptibly and the
   * untimed tryAcquire, which are not interruptible, acquire and leave the status set.
   */
  @Test
  void interruptStatusBeforeTheCallWinsOverFreePermits() throws Exception {
    DistributedSemaphore s = obtain(t1(), unique("pre-interrupted"), 3);
    List<Body> interruptible = List.of(s::acquire, () -> s.acquire(2), () -> s.tryAcquire(1, SECONDS),
        () -> s.tryAcquire(2, 1, SECONDS));
    for (int i = 0; i < interruptible.size(); i++) {
      Thread.currentThread().interrupt();
      assertThrows(InterruptedException.class, interruptible.get(i)::run, "interruptible call #" + i);
      assertFalse(Thread.interrupted(), "interrupt status cleared by call #" + i);
    }
    assertEquals(3, s.availablePermits(), "took nothing although 3 were free");
    assertHeld(0, s, "took nothing");
    try {
      Thread.currentThread().interrupt();
      s.acquireUninterruptibly();
      assertTrue(Thread.currentThread().isInterrupted(), "acquireUninterruptibly() leaves the status set");
      assertTrue(s.tryAcquire(), "tryAcquire() is not interruptible");
      assertTrue(Thread.currentThread().isInterrupted(), "tryAcquire() leaves the status set");
      s.acquireUninterruptibly(0);
      assertTrue(s.tryAcquire(0));
    } finally {
      Thread.interrupted();
    }
    assertEquals(1, s.availablePermits());
    assertHeld(2, s, "the two acquired");
  }

  /**
   * acquireUninterruptibly() and acquireUninterruptibly(n) are not interruptible: a thread
   * interrupted before the call and one interrupted while waiting both keep waiting (parked
   * WAITING), acquire on release, and return with the interrupt status set.
   */
  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Acquirer.class, names = {"UNINTERRUPTIBLY", "UNINTERRUPTIBLY_N"})
  void uninterruptibleAcquisitionsIgnoreInterrupts(Acquirer method) throws Exception {
    for (Where where : Where.values()) {
      int each = method == Acquirer.UNINTERRUPTIBLY_N ? 2 : 1;
      Sems x = prepare(unique("uninterruptible-" + method + "-" + where), 0, 2 * each, where);
      DistributedSemaphore s = x.acq();
      Worker before = spawn("interrupted-before", () -> {
        Thread.currentThread().interrupt();
        method.acquire(s, each);
        assertTrue(Thread.interrupted(), "interrupt status set on return (interrupted before)");
      });
      Worker during = spawn("interrupted-during", () -> {
        method.acquire(s, each);
        assertTrue(Thread.interrupted(), "interrupt status set on return (interrupted while waiting)");
      });
      awaitParked(s, 2, Thread.State.WAITING, before, during);
      during.thread.interrupt();
      assertStillWaiting("uninterruptible waits ignore interrupts", before, during);
      awaitParked(s, 2, Thread.State.WAITING, before, during);
      assertEquals(0, s.availablePermits());
      x.rel().release(2 * each);
      finish(before, () -> where + ": " + describe(s));
      finish(during, () -> where + ": " + describe(s));
      assertEquals(0, s.availablePermits(), where + ": both acquired");
      assertFalse(s.hasQueuedThreads());
      assertHeld(2 * each, s, where + ": both acquired");
    }
  }

  // ================================================================== queue queries

  /**
   * hasQueuedThreads() and getQueueLength() count the waiting threads (every one, including the one
   * this JVM waits in Redis for): 1, then 2; an interrupted waiter leaves the queue; a release
   * empties it.
   */
  @ParameterizedTest
  @EnumSource(Where.class)
  void queueQueriesCountWaitingThreads(Where where) throws Exception {
    Sems x = prepare(unique("queue"), 0, 1, where);
    DistributedSemaphore s = x.acq();
    assertFalse(s.hasQueuedThreads());
    assertEquals(0, s.getQueueLength());
    Worker first = spawn("waiter-to-interrupt", () -> assertThrows(InterruptedException.class, s::acquire));
    awaitParked(s, 1, Thread.State.WAITING, first);
    Worker second = spawn("waiter", s::acquire);
    awaitParked(s, 2, Thread.State.WAITING, first, second);
    first.thread.interrupt();
    finish(first, () -> where + ": " + describe(s));
    awaitParked(s, 1, Thread.State.WAITING, second);
    x.rel().release();
    finish(second, () -> where + ": " + describe(s));
    assertFalse(s.hasQueuedThreads());
    assertEquals(0, s.getQueueLength());
    assertEquals(0, s.waitingThreads());
    assertHeld(1, s, "the second waiter's permit");
  }

  /**
   * A waiter that gives up because it is interrupted leaves the queue and does not block the
   * waiter behind it: with 1 permit free, a head waiting for 3 leaves, and the next thread, waiting
   * for 1 behind it, gets the free permit.
   */
  @Test
  void anInterruptedHeadLetsTheNextWaiterGo() throws Exception {
    DistributedSemaphore s = obtain(t1(), unique("give-up-interrupt"), 1);
    Worker head = spawn("head acquire(3)", () -> assertThrows(InterruptedException.class, () -> s.acquire(3)));
    awaitParked(s, 1, Thread.State.WAITING, head);
    Worker next = spawn("next acquire()", s::acquire);
    // a non-fair Semaphore may let it barge past the head; Turnstile queues it behind: either is fine
    await("the next thread queued or done", () -> s.getQueueLength() == 2 || !next.thread.isAlive());
    head.thread.interrupt();
    finish(head, () -> describe(s));
    finish(next, () -> describe(s));
    assertEquals(0, s.availablePermits());
    assertHeld(1, s, "the next waiter's permit");
  }

  /**
   * A waiter whose time elapses leaves the queue and does not block the waiter behind it (as
   * above). The head waits 1 s; if this machine cannot queue the second thread within that, the
   * attempt is repeated with twice the wait, up to 8 s, and only then is the test aborted, not
   * failed (the timed case was not checked).
   */
  @Test
  void aTimedOutHeadLetsTheNextWaiterGo() throws Exception {
    boolean checked = false;
    for (long headWaitMillis = 1000; headWaitMillis <= 8000 && !checked; headWaitMillis *= 2) {
      long wait = headWaitMillis;
      DistributedSemaphore s = obtain(t1(), unique("give-up-timeout"), 1);
      Worker head = spawn("head tryAcquire(3, " + wait + " ms)", () -> assertFalse(s.tryAcquire(3, wait, MILLISECONDS)));
      awaitParked(s, 1, Thread.State.TIMED_WAITING, head);
      Worker next = spawn("next acquire()", s::acquire);
      await("the next thread queued or done", () -> s.getQueueLength() == 2 || !next.thread.isAlive()
          || !head.thread.isAlive());
      checked = head.thread.isAlive() && next.thread.isAlive();
      finish(head, () -> describe(s));
      finish(next, () -> describe(s));
      assertEquals(0, s.availablePermits());
      assertHeld(1, s, "the next waiter's permit");
      s.release();
    }
    assumeTrue(checked, "the head's time (up to 8 s) ran out before the next thread queued: the timed case was not checked");
  }

  // ================================================================== drain, reduce, add

  /** drainPermits() acquires and returns every free permit (0 when none is free). */
  @ParameterizedTest
  @EnumSource(Where.class)
  void drainPermitsTakesEveryFreePermit(Where where) {
    Sems x = prepare(unique("drain"), 0, 10, where);
    DistributedSemaphore s = x.acq();
    assertEquals(0, s.availablePermits());
    assertEquals(0, s.drainPermits());
    x.rel().release(10);
    assertEquals(10, s.availablePermits());
    assertEquals(10, s.drainPermits());
    assertEquals(0, s.availablePermits());
    assertEquals(0, x.rel().availablePermits());
    assertFalse(x.rel().tryAcquire(), "drained");
    assertEquals(0, s.drainPermits());
    assertHeld(10, s, where + ": the drained permits are this client's");
  }

  /** drainPermits() with negative free permits (JDK 17+): sets them to 0 and returns the negative number. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void drainPermitsCancelsANegativeCount(Where where) {
    Sems x = prepare(unique("drain-negative"), 1, 2, where);
    DistributedSemaphore s = x.acq();
    s.reducePermits(3);
    assertEquals(-2, s.availablePermits());
    assertEquals(-2, x.rel().drainPermits(), "returns the negative count");
    assertEquals(0, s.availablePermits(), "set to 0");
    assertEquals(0, s.drainPermits());
    assertFalse(s.tryAcquire());
    x.rel().release(2);
    assertEquals(2, s.availablePermits(), "releases count from 0 again");
    assertHeld(0, s, "released what it held");
  }

  /** reducePermits(n) shrinks the free permits by n, below zero too; 0 changes nothing; acquisitions fail while negative, adding makes them possible again. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void reducePermitsMayGoBelowZero(Where where) {
    String name = unique("reduce");
    DistributedSemaphore s = obtain(t1(), name, 10);
    DistributedSemaphore other = where == Where.SAME_CLIENT ? s : obtain(t2(), name, 10);
    s.reducePermits(0);
    assertEquals(10, other.availablePermits());
    s.reducePermits(1);
    assertEquals(9, other.availablePermits());
    s.reducePermits(10);
    assertEquals(-1, other.availablePermits());
    other.reducePermits(10);
    assertEquals(-11, s.availablePermits());
    s.reducePermits(0);
    assertEquals(-11, other.availablePermits());
    assertFalse(other.tryAcquire());
    assertFalse(other.tryAcquire(0));
    assertEquals(-11, other.drainPermits(), "drain returns the negative count and sets 0");
    assertEquals(0, s.availablePermits());
    other.addPermits(1);
    assertTrue(s.tryAcquire());
    assertHeld(1, s, "the one acquired");
  }

  /**
   * While reducePermits has taken the free permits below zero, a waiter waits until releases have
   * paid the debt: with -2 free, two releases bring the count to 0 and only the third serves it.
   */
  @ParameterizedTest
  @EnumSource(Where.class)
  void releasesPayANegativeCountBeforeAWaiterIsServed(Where where) throws Exception {
    Sems x = prepare(unique("debt"), 1, 3, where);
    DistributedSemaphore s = x.acq();
    s.reducePermits(3);
    assertEquals(-2, s.availablePermits());
    Worker w = spawn("waiter", s::acquire);
    awaitParked(s, 1, Thread.State.WAITING, w);
    x.rel().release();
    assertStillWaiting("-1 free after the first release", w);
    assertEquals(-1, s.availablePermits(), "the first release paid a permit of the debt");
    x.rel().release();
    assertStillWaiting("0 free after the second release", w);
    assertEquals(0, s.availablePermits(), "the second release paid the rest of the debt");
    x.rel().release();
    finish(w, () -> where + ": " + describe(s));
    assertEquals(0, s.availablePermits(), "the third release's permit went to the waiter");
    assertHeld(1, s, "the waiter's permit");
  }

  /** addPermits(n) adds n free permits, visible to every client; 0 changes nothing. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void addPermitsAddsFreePermits(Where where) throws Exception {
    String name = unique("add");
    DistributedSemaphore s = obtain(t1(), name, 0);
    DistributedSemaphore other = where == Where.SAME_CLIENT ? s : obtain(t2(), name, 0);
    other.addPermits(0);
    assertEquals(0, s.availablePermits());
    other.addPermits(3);
    assertEquals(3, s.availablePermits());
    assertTrue(s.tryAcquire(3));
    assertHeld(3, s, "the 3 added and acquired");
  }

  /** addPermits(n) on a negative count adds n, whether the result is still negative or not; a waiter is served once the count covers it. */
  @ParameterizedTest
  @EnumSource(Where.class)
  void addPermitsToANegativeCount(Where where) throws Exception {
    String name = unique("add-negative");
    DistributedSemaphore s = obtain(t1(), name, -5);
    DistributedSemaphore adder = where == Where.SAME_CLIENT ? s : obtain(t2(), name, -5);
    Worker w = spawn("waiter", s::acquire);
    awaitParked(s, 1, Thread.State.WAITING, w);
    adder.addPermits(2);
    assertEquals(-3, s.availablePermits());
    adder.addPermits(3);
    assertEquals(0, s.availablePermits());
    assertStillWaiting("0 free", w);
    adder.addPermits(1);
    finish(w, () -> where + ": " + describe(s));
    assertEquals(0, s.availablePermits());
    assertHeld(1, s, "the waiter's permit");
  }

  // ================================================================== bad input

  /** A negative number of permits is refused with IllegalArgumentException by every method that takes one, and nothing changes. */
  @Test
  void negativeArgumentsAreRefusedAndChangeNothing() throws Exception {
    Sems x = prepare(unique("negative"), 2, 1, Where.SAME_CLIENT);
    DistributedSemaphore s = x.acq();
    List<String> notRefused = new ArrayList<>();
    check(notRefused, "acquire(-1)", () -> s.acquire(-1));
    check(notRefused, "acquireUninterruptibly(-1)", () -> s.acquireUninterruptibly(-1));
    check(notRefused, "tryAcquire(-1)", () -> s.tryAcquire(-1));
    check(notRefused, "tryAcquire(-1, 1 s)", () -> s.tryAcquire(-1, 1, SECONDS));
    check(notRefused, "release(-1)", () -> s.release(-1));
    check(notRefused, "release(MIN_VALUE)", () -> s.release(Integer.MIN_VALUE));
    check(notRefused, "reducePermits(-1)", () -> s.reducePermits(-1));
    check(notRefused, "addPermits(-1)", () -> s.addPermits(-1));
    check(notRefused, "addPermits(MIN_VALUE)", () -> s.addPermits(Integer.MIN_VALUE));
    assertEquals(List.of(), notRefused, "calls that did not throw IllegalArgumentException");
    assertEquals(2, s.availablePermits(), "nothing changed");
    assertHeld(1, s, "nothing changed");
    assertFalse(s.hasQueuedThreads());
    s.release();
    assertEquals(3, s.availablePermits(), "still works");
  }

  private static void check(List<String> notRefused, String call, Body body) {
    try {
      body.run();
      notRefused.add(call + " returned");
    } catch (IllegalArgumentException expected) {
      // refused
    } catch (Exception e) {
      notRefused.add(call + " threw " + e);
    }
  }

  /** addPermits beyond Integer.MAX_VALUE is refused with IllegalArgumentException and changes nothing. */
  @Test
  void addPermitsOverflowIsRefused() {
    String name = unique("add-overflow");
    DistributedSemaphore s = obtain(t1(), name, Integer.MAX_VALUE - 1);
    assertThrows(IllegalArgumentException.class, () -> s.addPermits(2));
    assertThrows(IllegalArgumentException.class, () -> s.addPermits(Integer.MAX_VALUE));
    assertEquals(Integer.MAX_VALUE - 1, s.availablePermits(), "nothing changed");
    s.addPermits(1);
    assertEquals(Integer.MAX_VALUE, s.availablePermits(), "up to Integer.MAX_VALUE is fine");
  }

  /** Messages count permits in English: "1 permit", "2 permits" (not "cannot acquire 1 permits"). */
  @Test
  void messagesCountPermitsInEnglish() {
    String name = unique("messages");
    DistributedSemaphore s = obtain(t1(), name, Integer.MAX_VALUE - 1);
    IllegalArgumentException add = assertThrows(IllegalArgumentException.class, () -> s.addPermits(1 + 1));
    assertTrue(add.getMessage().startsWith("cannot add 2 permits to "), add.getMessage());
    assertEquals("1 permit", RedisSemaphore.permits(1));
    if (leased()) {
      IllegalStateException one = assertThrows(IllegalStateException.class, s::release);
      assertTrue(one.getMessage().startsWith("cannot release 1 permit of "), one.getMessage());
      IllegalArgumentException capacity = assertThrows(IllegalArgumentException.class,
          () -> t2().semaphore(name, 1).availablePermits());
      assertTrue(capacity.getMessage().contains("capacity of " + (Integer.MAX_VALUE - 1) + " permits, not the 1 requested"),
          capacity.getMessage());
      String one1 = unique("messages-one");
      t1().semaphore(one1, 1).availablePermits();
      IllegalArgumentException capacity1 = assertThrows(IllegalArgumentException.class,
          () -> t2().semaphore(one1, 2).availablePermits());
      assertTrue(capacity1.getMessage().contains("a capacity of 1 permit, not the 2 requested"), capacity1.getMessage());
    }
  }

  /** reducePermits below Integer.MIN_VALUE throws Error("Permit count underflow"), as Semaphore does, and changes nothing. */
  @Test
  void reducePermitsUnderflowThrowsError() {
    DistributedSemaphore s = obtain(t1(), unique("underflow"), Integer.MIN_VALUE + 1);
    Error e = assertThrows(Error.class, () -> s.reducePermits(2));
    assertEquals("Permit count underflow", e.getMessage());
    assertEquals(Integer.MIN_VALUE + 1, s.availablePermits(), "nothing changed");
    s.reducePermits(1);
    assertEquals(Integer.MIN_VALUE, s.availablePermits(), "down to Integer.MIN_VALUE is fine");
  }

  // ================================================================== toString

  /** toString() identifies the semaphore and, as Semaphore's says, includes "Permits =" followed by the number of permits. */
  @Test
  void toStringNamesTheSemaphoreWithoutARoundTrip() throws Exception {
    // a documented deviation: Semaphore.toString() shows "Permits = n", which here would need a
    // round trip (and could fail); it shows the name, the mode and this client's waiting threads
    String name = unique("tostring");
    Sems x = prepare(name, 0, 3, Where.SAME_CLIENT);
    DistributedSemaphore s = x.acq();
    String shown = s.toString();
    assertTrue(shown.contains(name), shown);
    assertTrue(shown.contains(s.isLeased() ? "leased" : "counting"), shown);
    assertTrue(shown.contains("waiting threads = 0"), shown);
  }

}
