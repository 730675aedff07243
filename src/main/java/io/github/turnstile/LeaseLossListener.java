package io.github.turnstile;

/**
 * Told when a lease is lost while a thread still holds the primitive locally (see
 * {@link LockLostException}). Listeners run on a single Turnstile event thread, one event at a
 * time, never on the thread that held the lock and never on the watchdog thread, so a slow
 * listener delays other listeners but never a lease renewal. Exceptions thrown by a listener are
 * caught and ignored.
 */
@FunctionalInterface
public interface LeaseLossListener {
  /**
   * Called once per lost acquisition.
   *
   * @param event what was lost, and why
   */
  void leaseLost(LeaseLostEvent event);
}
