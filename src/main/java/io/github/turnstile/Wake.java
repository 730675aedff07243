package io.github.turnstile;

import java.util.concurrent.CompletableFuture;

/** A wait on a wake list (see {@link AcquisitionEnv#waitOnList}). */
interface Wake {
  /**
   * Completes with true when a wake token was taken, false when the wait ended without one
   * (its server-side timeout, or a failure); fails with an {@link AclRefusal} if Redis refused
   * the command, or if no connection could be opened.
   */
  CompletableFuture<Boolean> woken();

  /** The acquisition attempts now: a token taken is consumed by that attempt. */
  void used();

  /** No longer wanted: stops the command, and hands on a token it took and will not use. */
  void abandon();
}
