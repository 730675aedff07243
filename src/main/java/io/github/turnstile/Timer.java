package io.github.turnstile;

import java.util.ArrayList;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One-shot timers, one daemon thread per JVM whatever the number of pending acquisitions. A timer
 * completes with {@code true} when it fires; {@link #cancel} completes it with {@code false} and
 * removes it.
 *
 * <p>Most timers are cancelled long before they fire: an acquisition's reply re-check, a
 * release's patience and its command timeout are armed for every lock and unlock. The JDK's delay
 * scheduler wakes its thread for every timer that becomes the earliest, which each of these does
 * when the previous one was cancelled: two to three thread wake-ups per uncontended
 * {@code lock()}/{@code unlock()} pair, on the path of the pair on a machine of few cores. So timers
 * of {@link #WHEEL_NANOS} or more wait in buckets of whole milliseconds (a tick), and this thread
 * sleeps until the earliest bucket: arming a timer wakes it only when the timer is due before the
 * tick it sleeps until, and a cancelled timer leaves its bucket at once. Such a timer fires up to
 * one tick late, never early. Shorter ones (pauses of a fraction of a millisecond, whose spread
 * matters) use the JDK's scheduler.
 */
final class Timer {
  private Timer() {}

  /** A tick: the resolution of the timers of the wheel. */
  static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
  /** Timers this long or longer are in the wheel (up to one tick late is under 10 % of them). */
  static final long WHEEL_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

  /** A timer of the wheel: its tick, so that a cancel finds its bucket. */
  private static final class Tick extends CompletableFuture<Boolean> {
    final long tick;

    Tick(long tick) {
      this.tick = tick;
    }

    /** What depends on a timer is a plain future (a {@code Tick} only ever is a timer). */
    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }
  }

  // No synchronized in Turnstile (it would pin virtual threads): one lock for the wheel, held for
  // a few map operations.
  private static final ReentrantLock LOCK = new ReentrantLock();
  /** Pending timers by tick (guarded by LOCK). */
  private static final TreeMap<Long, ArrayList<Tick>> BUCKETS = new TreeMap<>();
  /** The tick the thread sleeps until; Long.MAX_VALUE while it sleeps with nothing pending (guarded by LOCK). */
  private static long wakeTick = Long.MAX_VALUE;
  /** The thread, started with the first timer of the wheel, and again if it died (guarded by LOCK). */
  private static Thread thread;

  /** A timer that fires in {@code nanos} (at once if not positive). */
  static CompletableFuture<Boolean> after(long nanos) {
    if (nanos < WHEEL_NANOS) {
      return new CompletableFuture<Boolean>().completeOnTimeout(Boolean.TRUE, Math.max(0, nanos), TimeUnit.NANOSECONDS);
    }
    // the first tick at or after the due instant: never early
    long tick = Math.floorDiv(System.nanoTime() + nanos + TICK_NANOS - 1, TICK_NANOS);
    Tick t = new Tick(tick);
    Thread wake = null;
    LOCK.lock();
    try {
      BUCKETS.computeIfAbsent(tick, k -> new ArrayList<>(4)).add(t);
      if (thread == null || !thread.isAlive()) {
        // the first timer of the wheel, or its thread died (an Error): as a pool replaces a worker
        thread = new Thread(Timer::run, "turnstile-timer");
        thread.setDaemon(true);
        thread.start();
      } else if (tick < wakeTick) {
        wakeTick = tick;
        wake = thread;
      }
    } finally {
      LOCK.unlock();
    }
    if (wake != null) {
      LockSupport.unpark(wake);
    }
    return t;
  }

  /** Cancels {@code t} (a timer from {@link #after}; null: nothing): it completes with {@code false}. */
  static void cancel(CompletableFuture<Boolean> t) {
    if (t == null) {
      return;
    }
    if (t instanceof Tick k && !k.isDone()) {
      LOCK.lock();
      try {
        ArrayList<Tick> bucket = BUCKETS.get(k.tick);
        if (bucket != null && bucket.remove(k) && bucket.isEmpty()) {
          BUCKETS.remove(k.tick);
        }
      } finally {
        LOCK.unlock();
      }
    }
    t.complete(Boolean.FALSE);
  }

  /**
   * Completes {@code f} with a {@link TimeoutException} if it is not done within {@code nanos}
   * (as {@link CompletableFuture#orTimeout}, on these timers).
   *
   * @return {@code f}
   */
  static <T> CompletableFuture<T> orTimeout(CompletableFuture<T> f, long nanos) {
    CompletableFuture<Boolean> t = after(nanos);
    t.thenAccept(fired -> {
      if (fired) {
        f.completeExceptionally(new TimeoutException());
      }
    });
    f.whenComplete((v, e) -> cancel(t));
    return f;
  }

  /** Whether {@code t} waits in the wheel (tests). */
  static boolean inWheel(CompletableFuture<Boolean> t) {
    LOCK.lock();
    try {
      return t instanceof Tick k && BUCKETS.getOrDefault(k.tick, new ArrayList<>()).contains(k);
    } finally {
      LOCK.unlock();
    }
  }

  /** The thread: fires each bucket when its tick has come, sleeps until the next one. */
  private static void run() {
    while (true) {
      ArrayList<Tick> due = null;
      long sleep = 0;
      LOCK.lock();
      try {
        Map.Entry<Long, ArrayList<Tick>> first = BUCKETS.firstEntry();
        if (first == null) {
          wakeTick = Long.MAX_VALUE;
        } else {
          long left = first.getKey() * TICK_NANOS - System.nanoTime();
          if (left <= 0) {
            due = BUCKETS.pollFirstEntry().getValue();
          } else {
            wakeTick = first.getKey();
            sleep = left;
          }
        }
      } finally {
        LOCK.unlock();
      }
      if (due != null) {
        for (Tick t : due) {
          try {
            t.complete(Boolean.TRUE);
          } catch (Throwable e) {
            // a dependent's failure is its own (futures catch them); this thread goes on regardless
          }
        }
      } else if (sleep > 0) {
        LockSupport.parkNanos(Timer.class, sleep);
      } else {
        LockSupport.park(Timer.class);
      }
    }
  }
}
