package io.github.turnstile.fault;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

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
 * permits leaked at quiescence (given by the scenario, read from Redis), and recovery times. For a
 * read/write lock ({@link #addRead}, {@link #addWrite}, {@link #checkReadWrite}) it reports holds
 * that began while an incompatible hold was valid: any hold during a write, a write during a read.
 */
public final class History {
  /**
   * One acquisition; {@code endNanos} is the end of its validity (see class doc); {@code exclusive}
   * for a write hold of a read/write lock.
   */
  public record Hold(String client, long token, int permits, long startNanos, long endNanos, boolean exclusive) { }

  private final List<Hold> holds = new ArrayList<>();
  private final List<Long> recoveryMillis = new ArrayList<>();
  private long leakedPermits;
  private long staleWritesRejected;

  public synchronized void add(String client, long token, int permits, long startNanos, long endNanos) {
    holds.add(new Hold(client, token, permits, startNanos, Math.max(startNanos, endNanos), false));
  }

  /** A read hold of a read/write lock (shared); see {@link #checkReadWrite}. */
  public synchronized void addRead(String client, long token, long startNanos, long endNanos) {
    holds.add(new Hold(client, token, 1, startNanos, Math.max(startNanos, endNanos), false));
  }

  /** A write hold of a read/write lock (exclusive); see {@link #checkReadWrite}. */
  public synchronized void addWrite(String client, long token, long startNanos, long endNanos) {
    holds.add(new Hold(client, token, 1, startNanos, Math.max(startNanos, endNanos), true));
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

    /**
     * {@link #summaryLine()} followed by {@code key=value} fields in the map's order; a collection
     * value is written as {@code [a,b,c]}, so that every field stays one space-free token.
     *
     * @param extra the fields to append
     * @return the line
     */
    public String summaryLine(Map<String, ?> extra) {
      StringBuilder line = new StringBuilder(summaryLine());
      extra.forEach((k, v) -> line.append(' ').append(k).append('=').append(format(v)));
      return line.toString();
    }

    private static String format(Object v) {
      if (v instanceof java.util.Collection<?> c) {
        return c.stream().map(String::valueOf).collect(Collectors.joining(",", "[", "]"));
      }
      return String.valueOf(v).replace(' ', '_');
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

  /**
   * Checks the history of a read/write lock (holds added by {@link #addRead} and {@link #addWrite}).
   * The report's {@code overlaps} counts holds that began while an incompatible hold was valid (a
   * write while anything was held, a read while a write was held); {@code maxConcurrent} is the
   * most holders at once. Tokens are not checked: concurrent readers need not return in grant order.
   */
  public synchronized Report checkReadWrite(String scenario, String primitive) {
    // kinds, in the order they apply at one instant (touching is fine): 0 end of a read, 1 end of a
    // write, 2 start of a read, 3 start of a write
    List<long[]> events = new ArrayList<>();
    for (Hold h : holds) {
      events.add(new long[] {h.startNanos(), h.exclusive() ? 3 : 2});
      events.add(new long[] {h.endNanos(), h.exclusive() ? 1 : 0});
    }
    events.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    int readers = 0;
    int writers = 0;
    int violations = 0;
    int max = 0;
    for (long[] e : events) {
      switch ((int) e[1]) {
        case 0 -> readers--;
        case 1 -> writers--;
        case 2 -> {
          if (writers > 0) {
            violations++;
          }
          readers++;
        }
        default -> {
          if (writers > 0 || readers > 0) {
            violations++;
          }
          writers++;
        }
      }
      max = Math.max(max, readers + writers);
    }
    return new Report(scenario, primitive, holds.size(), violations, 0, max, 0, leakedPermits,
        staleWritesRejected, List.copyOf(recoveryMillis));
  }

  /**
   * Describes the first violations {@link #check} or {@link #checkReadWrite} counts: for each, the
   * hold that began while the others were valid, and those others, with times in ms relative to
   * {@code originNanos}.
   *
   * @param capacity 1 for a lock, the permits of a semaphore, 0 for a read/write lock
   * @param originNanos the instant times are given from
   * @param max how many violations to describe
   * @return one line per violation
   */
  public synchronized List<String> describeViolations(int capacity, long originNanos, int max) {
    List<String> out = new ArrayList<>();
    for (Violation v : violations(capacity)) {
      if (out.size() >= max) {
        break;
      }
      out.add(describe(v.hold(), originNanos) + " began while valid: "
          + v.valid().stream().map(o -> describe(o, originNanos)).collect(Collectors.joining(", ")));
    }
    return out;
  }

  /**
   * Returns the start of every hold that began a violation {@link #describeViolations} would
   * describe (all of them, in order).
   *
   * @param capacity 1 for a lock, the permits of a semaphore, 0 for a read/write lock
   * @return the start instants (nanoTime) of the violating holds
   */
  public synchronized List<Long> violationStarts(int capacity) {
    return violations(capacity).stream().map(v -> v.hold().startNanos()).toList();
  }

  /** A hold that began while the holds {@code valid} made it one too many. */
  private record Violation(Hold hold, List<Hold> valid) { }

  /** Every violation, in order of start: the sweep both public views share. */
  private List<Violation> violations(int capacity) {
    List<Hold> sorted = new ArrayList<>(holds);
    sorted.sort(Comparator.comparingLong(Hold::startNanos));
    List<Violation> out = new ArrayList<>();
    List<Hold> active = new ArrayList<>(); // holds begun earlier and still valid
    for (Hold h : sorted) {
      active.removeIf(o -> o.endNanos() - h.startNanos() <= 0);
      int permits = 0;
      boolean write = false;
      for (Hold o : active) {
        permits += o.permits();
        write |= o.exclusive();
      }
      boolean violation = capacity == 0 ? !active.isEmpty() && (h.exclusive() || write)
          : permits + h.permits() > capacity;
      if (violation) {
        out.add(new Violation(h, List.copyOf(active)));
      }
      active.add(h);
    }
    return out;
  }

  private static String describe(Hold h, long origin) {
    return String.format(Locale.ROOT, "%s%s[token %d, %.1f..%.1f ms]", h.client(), h.exclusive() ? "/write" : "",
        h.token(), (h.startNanos() - origin) / 1e6, (h.endNanos() - origin) / 1e6);
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
