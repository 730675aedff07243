package io.github.turnstile;

/**
 * Thrown when the current thread's hold on a distributed primitive ended without its consent:
 * the lease expired because renewals did not reach Redis in time, or the lease key was deleted
 * or taken over by another owner.
 *
 * <p>It extends {@link IllegalMonitorStateException}, which is what {@code ReentrantLock.unlock()}
 * throws when the caller does not hold the lock, so existing handlers keep working. Unlike a plain
 * {@code IllegalMonitorStateException} it means the caller <em>did</em> hold the lock, and that
 * another process may have held it since; anything done under the lock after
 * {@link #lostAt() the loss} was not mutually exclusive. Writes protected by a
 * {@linkplain DistributedLock#fencingToken() fencing token} were refused by a store that checks it.
 */
public class LockLostException extends IllegalMonitorStateException {
  private static final long serialVersionUID = 1L;

  /** The name of the primitive whose lease was lost. */
  private final String name;
  /** The fencing token of the lost acquisition (0 for a semaphore's permits). */
  private final long fencingToken;
  /** When the loss was detected, as {@link System#currentTimeMillis()}. */
  private final long lostAt;

  /**
   * Creates the exception.
   *
   * @param name the primitive's name
   * @param fencingToken the fencing token of the lost acquisition
   * @param lostAtMillis wall-clock time ({@link System#currentTimeMillis()}) when the loss was detected
   * @param reason why the lease is considered lost
   */
  public LockLostException(String name, long fencingToken, long lostAtMillis, String reason) {
    super("lease of '" + name + "' (fencing token " + fencingToken + ") was lost: " + reason);
    this.name = name;
    this.fencingToken = fencingToken;
    this.lostAt = lostAtMillis;
  }

  /** {@return the name of the primitive whose lease was lost} */
  public String name() {
    return name;
  }

  /** {@return the fencing token of the acquisition that was lost} */
  public long fencingToken() {
    return fencingToken;
  }

  /** {@return when this client detected the loss, as {@link System#currentTimeMillis()}} */
  public long lostAt() {
    return lostAt;
  }
}
