package io.github.turnstile.fault;

import java.util.ArrayList;
import java.util.List;

/**
 * Exceptions thrown by one kind of call during a fault-injection run (say, acquisitions of the
 * lock): when each was thrown ({@link System#nanoTime()}), so that a run of several faults can
 * count them per fault, and the first few of them in full, for the report.
 */
public final class ErrorTally {
  private static final int KEPT = 5;

  private final String what;
  private final List<Long> at = new ArrayList<>();
  private final List<String> first = new ArrayList<>();
  private int unacknowledged;

  /** @param what the kind of call, e.g. "lock.acquire" */
  public ErrorTally(String what) {
    this.what = what;
  }

  /** Records an exception thrown now by {@code thread}. */
  public synchronized void record(Throwable e, String thread) {
    long now = System.nanoTime();
    at.add(now);
    // too few replicas acknowledged in time: an answer, given back by design; an acknowledgement
    // cut by a fault ("acquired, but ... Connection reset") is ridden through, so it is not counted here
    if (e.getMessage() != null && e.getMessage().contains(" acquired, but ")
        && e.getMessage().contains(" replicas acknowledged within ")) {
      unacknowledged++;
    }
    if (first.size() < KEPT) {
      first.add(thread + ": " + e);
    }
  }

  /** @return how many were recorded */
  public synchronized int count() {
    return at.size();
  }

  /**
   * @param fromNanos start of the window (inclusive)
   * @param toNanos end of the window (exclusive)
   * @return how many were recorded in the window
   */
  public synchronized int countBetween(long fromNanos, long toNanos) {
    int n = 0;
    for (long t : at) {
      if (t - fromNanos >= 0 && t - toNanos < 0) {
        n++;
      }
    }
    return n;
  }

  /**
   * @return how many were acquisitions given back because their replica acknowledgement
   *     ({@code replicaAcks}) failed: too few acknowledgements, or a fault cut the acknowledgement step
   */
  public synchronized int unacknowledged() {
    return unacknowledged;
  }

  /** @return the first few, "thread: exception" */
  public synchronized List<String> first() {
    return List.copyOf(first);
  }

  /** @return e.g. "lock.acquire: 3, first: [...]" */
  @Override
  public synchronized String toString() {
    return what + ": " + at.size() + (first.isEmpty() ? "" : ", first: " + first);
  }
}
