package io.github.turnstile.fault;

import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * One call (an acquisition, an unlock...) run on a daemon thread of its own, so that a test can
 * bound how long it waits for it and report what happened either way: the value or the exception,
 * and after how long, or that it had not returned yet. Timestamps are {@link System#nanoTime()}.
 *
 * @param <T> the call's result type
 */
public final class TimedCall<T> {
  private final String name;
  private final Thread thread;
  private final long startNanos;
  private volatile long endNanos;
  private volatile boolean done;
  private volatile T value;
  private volatile Throwable error;

  private TimedCall(String name, Callable<T> call) {
    this.name = name;
    this.startNanos = System.nanoTime();
    this.thread = new Thread(() -> run(call), name);
    this.thread.setDaemon(true);
  }

  /**
   * Starts {@code call} on a new daemon thread named {@code name}; the start time is read before.
   *
   * @param name the thread's name, used in {@link #describe()}
   * @param call the call
   * @param <T> the result type
   * @return the running call
   */
  public static <T> TimedCall<T> start(String name, Callable<T> call) {
    TimedCall<T> c = new TimedCall<>(name, call);
    c.thread.start();
    return c;
  }

  private void run(Callable<T> call) {
    try {
      value = call.call();
    } catch (Throwable e) {
      error = e;
    } finally {
      endNanos = System.nanoTime();
      done = true;
    }
  }

  /**
   * Waits up to {@code millis} for the call to return.
   *
   * @param millis the longest wait
   * @return whether it returned (or threw)
   * @throws InterruptedException if interrupted
   */
  public boolean await(long millis) throws InterruptedException {
    thread.join(Math.max(1, millis));
    return done;
  }

  /** @return whether the call has returned or thrown */
  public boolean done() {
    return done;
  }

  /** @return the thread running the call */
  public Thread thread() {
    return thread;
  }

  /** @return when the call was started ({@link System#nanoTime()}) */
  public long startNanos() {
    return startNanos;
  }

  /** @return when it returned or threw ({@link System#nanoTime()}); only meaningful once {@link #done()} */
  public long endNanos() {
    return endNanos;
  }

  /** @return how long it took, in ms, or -1 while it has not returned */
  public long millis() {
    return done ? TimeUnit.NANOSECONDS.toMillis(endNanos - startNanos) : -1;
  }

  /**
   * @param fromNanos an instant ({@link System#nanoTime()})
   * @return ms from {@code fromNanos} to the call's return, or -1 while it has not returned
   */
  public long millisAfter(long fromNanos) {
    return done ? TimeUnit.NANOSECONDS.toMillis(endNanos - fromNanos) : -1;
  }

  /** @return the value, or null (not returned yet, threw, or returned null) */
  public T value() {
    return value;
  }

  /** @return what it threw, or null */
  public Throwable error() {
    return error;
  }

  /** @return whether it returned normally (did not throw) */
  public boolean returnedNormally() {
    return done && error == null;
  }

  /**
   * @return e.g. "waiter returned true after 12 ms", "waiter threw TurnstileException: ... after
   *     5003 ms", or "waiter had not returned after 3000 ms"
   */
  public String describe() {
    if (!done) {
      return name + " had not returned after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos)
          + " ms";
    }
    if (error != null) {
      return name + " threw " + error + " after " + millis() + " ms";
    }
    return name + " returned " + value + " after " + millis() + " ms";
  }

  @Override
  public String toString() {
    return describe();
  }
}
