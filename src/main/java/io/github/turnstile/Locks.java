package io.github.turnstile;

import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;

/** Code run holding a {@link Lock} (no {@code synchronized} in Turnstile: it would pin virtual threads). */
final class Locks {
  private Locks() {}

  /** Returns {@code read}'s value, read holding {@code lock}. */
  static <T> T locked(Lock lock, Supplier<T> read) {
    lock.lock();
    try {
      return read.get();
    } finally {
      lock.unlock();
    }
  }

  /** Runs {@code action} holding {@code lock}. */
  static void withLock(Lock lock, Runnable action) {
    lock.lock();
    try {
      action.run();
    } finally {
      lock.unlock();
    }
  }
}
