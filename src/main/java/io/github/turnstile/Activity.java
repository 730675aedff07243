package io.github.turnstile;

import java.time.Duration;

/**
 * One primitive this client holds or waits for, as {@link Turnstile#activity()} lists them: known
 * locally, without asking Redis. Immutable.
 *
 * <p>A hold is listed per lease: a thread's hold of a lock or write lock, a reading thread's hold,
 * an asynchronous hold ({@link LockHold}), or a semaphore's permits (one entry for all the permits
 * this client holds on it). A lock's grant kept idle by lock caching is not a hold here, as
 * {@link DistributedLock#isLocked()} says ({@link DistributedLock#inspect()} shows it, cached). A
 * wait is listed per primitive and JVM: only one thread per primitive waits in Redis (the others
 * queue behind it in this JVM); {@link #queued()} counts them where known. Waiting asynchronous acquisitions ({@code lockAsync()}, {@code acquireAsync})
 * are not listed: they wait without a thread.
 */
public final class Activity {
  private final Inspection.Kind kind;
  private final String name;
  private final boolean held;
  private final String thread;
  private final long fencingToken;
  private final int permits;
  private final Duration since;
  private final Duration leaseRemaining;
  private final int queued;

  Activity(Inspection.Kind kind, String name, boolean held, String thread, long fencingToken, int permits,
      Duration since, Duration leaseRemaining, int queued) {
    this.kind = kind;
    this.name = name;
    this.held = held;
    this.thread = thread;
    this.fencingToken = fencingToken;
    this.permits = permits;
    this.since = since;
    this.leaseRemaining = leaseRemaining;
    this.queued = queued;
  }

  /** {@return the primitive's kind, or null for a wait of an unknown kind} */
  public Inspection.Kind kind() {
    return kind;
  }

  /** {@return the primitive's name} */
  public String name() {
    return name;
  }

  /** {@return true for a hold, false for a wait} */
  public boolean isHeld() {
    return held;
  }

  /**
   * {@return the holding or waiting thread's name ({@code "async hold ..."} for an asynchronous
   * hold, {@code "client <id>"} for a semaphore's permits, held by the client)}
   */
  public String thread() {
    return thread;
  }

  /** {@return the hold's fencing token, or 0 for a wait and for semaphore permits} */
  public long fencingToken() {
    return fencingToken;
  }

  /** {@return the permits held (a semaphore; 1 for a lock hold, 0 for a wait)} */
  public int permits() {
    return permits;
  }

  /**
   * {@return for how long it has been held or waited for, by this JVM's monotonic clock (a
   * semaphore entry: since its registration began, i.e. since it has held permits without a pause)}
   */
  public Duration since() {
    return since;
  }

  /**
   * {@return how long the hold's lease is confirmed for by the latest renewal (by this JVM's clock,
   * conservatively), or null for a wait}
   */
  public Duration leaseRemaining() {
    return leaseRemaining;
  }

  /**
   * Returns, for a wait, how many more threads of this JVM queue behind the waiting one (-1 if
   * unknown); 0 for a hold.
   *
   * @return threads queued behind the waiter, or -1
   */
  public int queued() {
    return queued;
  }

  @Override
  public String toString() {
    String k = kind == null ? "?" : kind.label();
    return (held ? "holds " : "waits for ") + k + " '" + name + "' (" + thread
        + (fencingToken != 0 ? ", token " + fencingToken : "") + (permits > 1 ? ", " + permits + " permits" : "")
        + ", for " + since.toMillis() + " ms"
        + (leaseRemaining != null ? ", lease left " + leaseRemaining.toMillis() + " ms" : "")
        + (queued > 0 ? ", " + queued + " more queued" : "") + ")";
  }
}
