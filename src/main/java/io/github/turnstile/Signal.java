package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A wake-up that cannot be lost between looking and waiting: a waiter takes {@link #next()}
 * before it asks Redis (an attempt), and after a refusal waits on that future; every
 * {@link #fire()} completes the future current at that moment and installs a fresh one. So a
 * fire that happens after the waiter took its future, even before it started to wait, wakes it.
 * Used for pub/sub messages (one per subscribed channel) and for recovery events (one per
 * client). jcstress: {@code SignalFireVersusNextStress}.
 */
final class Signal {
  private final AtomicReference<CompletableFuture<Void>> next = new AtomicReference<>(new CompletableFuture<>());

  /** Returns the future the next {@link #fire()} completes. */
  CompletableFuture<Void> next() {
    return next.get();
  }

  /** Wakes everyone who took {@link #next()} before now. */
  void fire() {
    next.getAndSet(new CompletableFuture<>()).complete(null);
  }
}
