package io.github.turnstile;

import java.util.concurrent.CompletableFuture;

/** A subscription to a wake-up channel (see {@link Subscriptions.Sub}). */
interface WakeChannel {
  /** Completes when the subscription is confirmed; fails if it could not be made. */
  CompletableFuture<Void> ready();

  /** The future the next message (or re-subscription) completes. */
  CompletableFuture<Void> next();

  /** No longer needed. */
  void close();
}
