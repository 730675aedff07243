package io.github.turnstile;

/**
 * The client's monotonic clock (a {@link System#nanoTime()} source) for lease bookkeeping: when an
 * acquisition was sent, when a lease was last confirmed, and whether it has run out. Production
 * code always uses {@link #SYSTEM}; tests replace it per engine ({@code Engine.ticker}) to move
 * one client's clock, e.g. to make it consider its leases expired. Deadlines of waits are not
 * measured with it.
 *
 * <p>It is read by: the lock's and the read/write lock's acquisition send time
 * ({@code AsyncAcquisition}), their liveness checks
 * ({@code isHeldByCurrentThread}, re-entry, unlock, {@code fencingToken}), and the watchdog's scan
 * and renewal send time. The semaphore still stamps its liveness lease with
 * {@link System#nanoTime()} (its send times double as wait deadlines), so a test that moves the
 * ticker forward also makes the semaphore's liveness lease look older, never younger.
 */
@FunctionalInterface
interface Ticker {
  Ticker SYSTEM = System::nanoTime;

  long read();
}
