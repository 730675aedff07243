package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Timed waits that are interruptible or not, as the caller's contract requires. */
final class Waits {
  private Waits() {}

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

  /** Acquires a permit within the time, interruptibly or not. */
  static boolean acquire(Semaphore s, long timeoutNanos, boolean interruptible)
      throws InterruptedException {
    if (interruptible) {
      return s.tryAcquire(Math.max(0, timeoutNanos), TimeUnit.NANOSECONDS);
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return s.tryAcquire(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
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

  /** Acquires a lock within the time, interruptibly or not. */
  static boolean lock(java.util.concurrent.locks.Lock l, long timeoutNanos, boolean interruptible)
      throws InterruptedException {
    if (interruptible) {
      return l.tryLock(Math.max(0, timeoutNanos), TimeUnit.NANOSECONDS);
    }
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return l.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
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
}
