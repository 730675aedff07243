package io.github.turnstile;

/**
 * Permits of a {@link DistributedSemaphore} acquired with
 * {@link DistributedSemaphore#acquireAsync(int)} or
 * {@link DistributedSemaphore#tryAcquireAsync(int, long, java.util.concurrent.TimeUnit)}, released
 * together by {@link #release()}. The permits count among the client's
 * ({@link DistributedSemaphore#heldPermits()}) while held, and belong to this hold: release them
 * through it, not through {@link DistributedSemaphore#release(int)}. See {@link Hold} for leases
 * and release; the lease of permits is the client's liveness on the semaphore, shared by every
 * permit the client holds.
 */
public interface PermitHold extends Hold {

  /** {@return how many permits this hold holds} */
  int permits();
}
