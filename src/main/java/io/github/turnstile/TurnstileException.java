package io.github.turnstile;

/**
 * The root of Turnstile's own unchecked exceptions: Redis could not be reached or did not answer
 * in time, a reply was not what a script promises, or stored state contradicts the caller's
 * arguments.
 *
 * <p>When an operation fails with this exception, the local state of the primitive is left as it
 * was before the call: a failed {@code lock()} holds nothing, and may simply be retried once Redis
 * is back. {@link LockLostException} is deliberately not a subclass: it extends
 * {@link IllegalMonitorStateException} so that code written for {@code ReentrantLock} handles it.
 */
public class TurnstileException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * Creates an exception with a message.
   *
   * @param message what went wrong, naming the primitive where there is one
   */
  public TurnstileException(String message) {
    super(message);
  }

  /**
   * Creates an exception with a message and a cause.
   *
   * @param message what went wrong, naming the primitive where there is one
   * @param cause the underlying failure, usually from Lettuce
   */
  public TurnstileException(String message, Throwable cause) {
    super(message, cause);
  }
}
