package io.github.turnstile;

/**
 * The client's monotonic clock (a {@link System#nanoTime()} source) for lease bookkeeping: when an
 * acquisition was sent, when a lease was last confirmed, and whether it has run out. Production
 * code always uses {@link #SYSTEM}; tests replace it per engine ({@code Engine.ticker}) to move
 * one client's clock, e.g. to make it consider its leases expired. Deadlines of waits are not
 * measured with it.
 */
@FunctionalInterface
interface Ticker {
  Ticker SYSTEM = System::nanoTime;

  long read();
}
