package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One-shot timers on the JDK's shared delay scheduler ({@code CompletableFuture.completeOnTimeout}):
 * one daemon thread per JVM, whatever the number of pending acquisitions. A timer completes
 * with {@code true} when it fires; cancelling completes it with {@code false}, which also
 * removes its task from the scheduler's queue.
 */
final class Timer {
  private Timer() {}

  static CompletableFuture<Boolean> after(long nanos) {
    return new CompletableFuture<Boolean>().completeOnTimeout(Boolean.TRUE, Math.max(0, nanos), TimeUnit.NANOSECONDS);
  }

  static void cancel(CompletableFuture<Boolean> t) {
    if (t != null) {
      t.complete(Boolean.FALSE);
    }
  }
}
