package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Timed waits that are interruptible or not, as the caller's contract requires. */
final class Waits {
  private Waits() {}

  /**
   * The deadline ({@link System#nanoTime()} based) of a wait of {@code time} in {@code unit}:
   * zero or negative times mean now, and huge ones are clamped so that deadline arithmetic
   * ({@code deadline - nanoTime()}) cannot overflow.
   */
  static long deadline(long time, TimeUnit unit) {
    return System.nanoTime() + Math.max(0, Math.min(unit.toNanos(time), Long.MAX_VALUE >> 2));
  }

  /**
   * Waits for a future. When not interruptible, an interrupt is remembered and re-asserted on
   * return, as {@code Lock.lock()} requires.
   *
   * @return the value
   * @throws TimeoutException if it did not complete within {@code timeoutNanos}
   * @throws ExecutionException if it failed
   * @throws InterruptedException only if interruptible
   */
  static <T> T get(CompletableFuture<T> f, long timeoutNanos, boolean interruptible)
      throws TimeoutException, ExecutionException, InterruptedException {
    if (interruptible) {
      return f.get(Math.max(0, timeoutNanos), TimeUnit.NANOSECONDS);
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A timed wait that may be interrupted. */
  @FunctionalInterface
  interface TimedWait {
    boolean await(long timeoutNanos) throws InterruptedException;
  }

  /**
   * Runs a timed wait within {@code timeoutNanos}. When not interruptible, an interrupt does not
   * end it: the wait resumes for the time left and the interrupt is re-asserted on return.
   */
  static boolean timed(TimedWait wait, long timeoutNanos, boolean interruptible) throws InterruptedException {
    if (interruptible) {
      return wait.await(Math.max(0, timeoutNanos));
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return wait.await(Math.max(0, deadline - System.nanoTime()));
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Acquires a permit within the time, interruptibly or not. */
  static boolean acquire(Semaphore s, long timeoutNanos, boolean interruptible) throws InterruptedException {
    return nowOrManaged(n -> s.tryAcquire(n, TimeUnit.NANOSECONDS), timeoutNanos, interruptible);
  }

  /** Acquires a lock within the time, interruptibly or not. */
  static boolean lock(java.util.concurrent.locks.Lock l, long timeoutNanos, boolean interruptible)
      throws InterruptedException {
    return nowOrManaged(n -> l.tryLock(n, TimeUnit.NANOSECONDS), timeoutNanos, interruptible);
  }

  /**
   * A timed wait tried first with a zero timeout (which, unlike an untimed {@code tryLock()} or
   * {@code tryAcquire()}, keeps a fair queue's order), then for the time given as a managed wait.
   */
  private static boolean nowOrManaged(TimedWait wait, long timeoutNanos, boolean interruptible)
      throws InterruptedException {
    return timed(wait, 0, interruptible) || managed(() -> timed(wait, timeoutNanos, interruptible));
  }

  /** A wait that may park the calling thread. */
  @FunctionalInterface
  interface Parking<T> {
    T await() throws InterruptedException;
  }

  /**
   * Runs a wait that may park the calling thread. On a {@link ForkJoinPool} worker it runs as a
   * {@link ForkJoinPool.ManagedBlocker}, as {@code CompletableFuture.get} does, so that the pool
   * may activate or start a spare worker while this one waits. Without that, a caller waiting on
   * the common pool's only worker (its parallelism is 1 on a 2-core machine) starves the tasks the
   * wait depends on: from JDK 25 {@code CompletableFuture}'s default async executor is the common
   * pool at any parallelism, and Lettuce's handshake of a new connection continues there when the
   * URI's credentials provider is not immediate. Such a wait for a new connection then lasted
   * until Lettuce's 10 s connect timeout (docs/RELIABILITY.md).
   */
  static <T> T managed(Parking<T> wait) throws InterruptedException {
    if (!(Thread.currentThread() instanceof ForkJoinWorkerThread)) {
      return wait.await();
    }
    Managed<T> m = new Managed<>(wait);
    try {
      ForkJoinPool.managedBlock(m);
    } catch (InterruptedException e) {
      if (m.entered) {
        throw e; // the wait's own: an interruptible wait was interrupted
      }
      // the pool's: from JDK 25 a stopping pool refuses to compensate with this exception, which
      // an uninterruptible wait must not throw; wait as on any other thread
      return wait.await();
    }
    return m.value;
  }

  private static final class Managed<T> implements ForkJoinPool.ManagedBlocker {
    private final Parking<T> wait;
    private boolean entered;
    private boolean done;
    T value;

    Managed(Parking<T> wait) {
      this.wait = wait;
    }

    @Override
    public boolean block() throws InterruptedException {
      entered = true;
      value = wait.await(); // runs once: the pool calls it from this thread only
      done = true;
      return true;
    }

    @Override
    public boolean isReleasable() {
      return done;
    }
  }
}
