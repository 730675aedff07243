package io.github.turnstile.fault;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * A history of acquisitions and releases, checked after a fault-injection run. Each {@link Hold}
 * is one acquisition by one client: its fencing token (0 for permits), and the interval, in
 * {@link System#nanoTime()} (one clock for every JVM on this machine: CLOCK_MONOTONIC on Linux),
 * during which the holder had a valid lease by its own account: from the acquire's return to the
 * last instant it confirmed the hold ({@code isHeldByCurrentThread()} true, read just before the
 * check), its release, or its death, whichever came first.
 *
 * <p>The checker reports: overlaps between holds of a lock (mutual-exclusion violations), instants
 * where the permits held exceed the capacity, fencing tokens that do not grow in acquisition order,
 * permits leaked at quiescence (given by the scenario, read from Redis), and recovery times.
 */
public final class History {
  /** One acquisition; {@code endNanos} is the end of its validity (see class doc). */
  public record Hold(String client, long token, int permits, long startNanos, long endNanos) { }

  private final List<Hold> holds = new ArrayList<>();
  private final List<Long> recoveryMillis = new ArrayList<>();
  private long leakedPermits;
  private long staleWritesRejected;

  public synchronized void add(String client, long token, int permits, long startNanos, long endNanos) {
    holds.add(new Hold(client, token, permits, startNanos, Math.max(startNanos, endNanos)));
  }

  public synchronized void recovery(long millis) {
    recoveryMillis.add(millis);
  }

  public synchronized void leaked(long permits) {
    leakedPermits += permits;
  }

  public synchronized void staleWritesRejected(long n) {
    staleWritesRejected += n;
  }

  /** @return a copy of the holds recorded so far */
  public synchronized List<Hold> holds() {
    return List.copyOf(holds);
  }

  public synchronized int size() {
    return holds.size();
  }

  /** The outcome of {@link #check}. */
  public record Report(String scenario, String primitive, int acquisitions, int overlaps, int overCapacity,
      int maxConcurrent, int tokenViolations, long leaked, long staleRejected, List<Long> recoveryMillis) {

    public boolean clean() {
      return overlaps == 0 && overCapacity == 0 && tokenViolations == 0 && leaked == 0;
    }

    public long maxRecoveryMillis() {
      return recoveryMillis.stream().mapToLong(Long::longValue).max().orElse(-1);
    }

    /** One machine-readable line, collected into docs/RELIABILITY.md. */
    public String summaryLine() {
      return String.format(Locale.ROOT,
          "RELIABILITY scenario=%s primitive=%s acquisitions=%d overlaps=%d overCapacity=%d maxConcurrent=%d"
              + " tokenViolations=%d leakedPermits=%d staleWritesRejected=%d recoveryMs=%s",
          scenario, primitive, acquisitions, overlaps, overCapacity, maxConcurrent, tokenViolations, leaked,
          staleRejected, recoveryMillis.isEmpty() ? "-" : maxRecoveryMillis());
    }
  }

  /**
   * Checks the history of one primitive.
   *
   * @param capacity 1 for a lock (overlaps and token order are checked), the permits of a semaphore
   */
  public synchronized Report check(String scenario, String primitive, int capacity) {
    List<Hold> sorted = new ArrayList<>(holds);
    sorted.sort(Comparator.comparingLong(Hold::startNanos));
    int overlaps = 0;
    int tokenViolations = 0;
    if (capacity == 1) {
      long maxEnd = Long.MIN_VALUE;
      long lastToken = Long.MIN_VALUE;
      for (Hold h : sorted) {
        if (maxEnd != Long.MIN_VALUE && h.startNanos() - maxEnd < 0) {
          overlaps++;
        }
        if (maxEnd == Long.MIN_VALUE || h.endNanos() - maxEnd > 0) {
          maxEnd = h.endNanos();
        }
        if (h.token() <= lastToken) {
          tokenViolations++;
        }
        lastToken = h.token();
      }
    }
    // sweep: +permits at start, -permits at end; at equal instants, ends first (touching is fine)
    List<long[]> events = new ArrayList<>();
    for (Hold h : sorted) {
      events.add(new long[] {h.startNanos(), +h.permits()});
      events.add(new long[] {h.endNanos(), -h.permits()});
    }
    events.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    int current = 0;
    int max = 0;
    int overCapacity = 0;
    for (long[] e : events) {
      boolean wasOver = current > capacity;
      current += (int) e[1];
      max = Math.max(max, current);
      if (current > capacity && !wasOver) {
        overCapacity++;
      }
    }
    return new Report(scenario, primitive, holds.size(), overlaps, overCapacity, max, tokenViolations,
        leakedPermits, staleWritesRejected, List.copyOf(recoveryMillis));
  }

  /** Checks, prints the summary line, and returns the report. */
  public Report checkAndPrint(String scenario, String primitive, int capacity) {
    Report r = check(scenario, primitive, capacity);
    System.out.println(r.summaryLine());
    return r;
  }

  public static long millis(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos);
  }
}
