package io.github.turnstile.demo;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileException;
import io.github.turnstile.testing.RedisServerProcess;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Runnable demo: several Turnstile clients (each its own Redis connections) in this JVM, each with
 * several threads, contend for one distributed lock for a few seconds. Inside the critical section
 * every holder checks mutual exclusion and that its fencing token is larger than the previous
 * holder's; at the end a summary is printed and the exit code says whether both held.
 *
 * <pre>
 * mvn -B -q test-compile exec:java@demo
 * mvn -B -q test-compile exec:java@demo -Ddemo.clients=2 -Ddemo.threads=8 -Ddemo.seconds=10
 * REDIS_URI=redis://localhost:6379 mvn -B -q test-compile exec:java@demo
 * </pre>
 *
 * <p>Without {@code REDIS_URI} (environment) or {@code redis.uri} (system property), a throwaway
 * redis-server child process is started on a free loopback port and stopped at the end.
 */
public final class Demo {

  /** ~50 µs of busy work inside the critical section. */
  private static final long WORK_NANOS = 50_000;

  private final int clients;
  private final int threadsPerClient;
  private final int seconds;

  // shared state, touched only inside the critical section (or read for reporting)
  private final AtomicInteger inside = new AtomicInteger();
  private final AtomicLong overlaps = new AtomicLong();
  private final AtomicLong lastToken = new AtomicLong(Long.MIN_VALUE);
  private final AtomicLong tokenViolations = new AtomicLong();
  private final AtomicLong acquisitions = new AtomicLong();
  private final AtomicLong handoffs = new AtomicLong();
  private final AtomicLong errors = new AtomicLong();
  private volatile int lastHolder = -1;
  private volatile long lastUnlockStartNanos;
  private volatile boolean stop;
  private volatile String firstError;

  private Demo(int clients, int threadsPerClient, int seconds) {
    this.clients = clients;
    this.threadsPerClient = threadsPerClient;
    this.seconds = seconds;
  }

  /**
   * Runs the demo.
   *
   * @param args ignored; see the class comment for the system properties
   */
  public static void main(String[] args) {
    int code;
    try {
      code = new Demo(Integer.getInteger("demo.clients", 4), Integer.getInteger("demo.threads", 4),
          Integer.getInteger("demo.seconds", 5)).run();
    } catch (Throwable t) {
      System.out.println("demo failed: " + t);
      t.printStackTrace(System.out);
      code = 2;
    }
    System.out.flush();
    System.exit(code);
  }

  private int run() throws InterruptedException {
    if (clients < 1 || threadsPerClient < 1 || seconds < 1) {
      throw new IllegalArgumentException("demo.clients, demo.threads and demo.seconds must be >= 1");
    }
    RedisServerProcess embedded = null;
    List<Turnstile> turnstiles = new ArrayList<>();
    try {
      String uri = configuredUri();
      if (uri == null) {
        embedded = RedisServerProcess.start();
        uri = embedded.uri();
        System.out.println("Redis: started embedded redis-server " + embedded.version() + " at " + uri
            + " (set REDIS_URI to use your own)");
      } else {
        try {
          turnstiles.add(Turnstile.connect(uri));
        } catch (TurnstileException | IllegalArgumentException e) {
          // one line, not a stack trace: the usual cause is a typo or a Redis that is not running
          System.out.println("Redis: cannot use REDIS_URI " + uri + ": " + e.getMessage()
              + " (unset REDIS_URI and the demo starts its own Redis)");
          return 1;
        }
        System.out.println("Redis: using REDIS_URI " + uri);
      }
      String lockName = "demo:" + Long.toHexString(ThreadLocalRandom.current().nextLong());
      for (int c = turnstiles.size(); c < clients; c++) {
        turnstiles.add(Turnstile.connect(uri));
      }
      int n = clients * threadsPerClient;
      System.out.printf(Locale.ROOT,
          "%d clients x %d threads = %d threads contending for lock '%s' for %d s (critical section ~%d us)%n",
          clients, threadsPerClient, n, lockName, seconds, WORK_NANOS / 1000);

      long[] perThread = new long[n];
      long[][] latencies = new long[n][];
      int[] latencyCounts = new int[n];
      Thread[] threads = new Thread[n];
      for (int c = 0; c < clients; c++) {
        DistributedLock lock = turnstiles.get(c).lock(lockName);
        for (int t = 0; t < threadsPerClient; t++) {
          int id = c * threadsPerClient + t;
          threads[id] = new Thread(() -> worker(id, lock, perThread, latencies, latencyCounts),
              "demo-client" + c + "-t" + t);
        }
      }
      long start = System.nanoTime();
      for (Thread th : threads) {
        th.start();
      }
      long prevHandoffs = 0;
      for (int s = 1; s <= seconds; s++) {
        long wakeAt = start + s * 1_000_000_000L;
        long sleep;
        while ((sleep = wakeAt - System.nanoTime()) > 0) {
          Thread.sleep(Math.max(1, sleep / 1_000_000));
        }
        long h = handoffs.get();
        System.out.printf(Locale.ROOT, "  t=%2ds  acquisitions %8d   handoffs/s %7d%s%n", s,
            acquisitions.get(), h - prevHandoffs, overlaps.get() > 0 ? "   OVERLAPS " + overlaps.get() : "");
        prevHandoffs = h;
      }
      stop = true;
      long end = System.nanoTime();
      List<String> stuck = new ArrayList<>();
      for (Thread th : threads) {
        th.join(35_000);
        if (th.isAlive()) {
          stuck.add(th.getName());
        }
      }
      long drained = System.nanoTime();
      double elapsed = (end - start) / 1e9;

      long total = Arrays.stream(perThread).sum();
      long min = Arrays.stream(perThread).min().orElse(0);
      long max = Arrays.stream(perThread).max().orElse(0);
      int latN = Arrays.stream(latencyCounts).sum();
      long[] all = new long[latN];
      int pos = 0;
      for (int i = 0; i < n; i++) {
        if (latencies[i] != null) {
          System.arraycopy(latencies[i], 0, all, pos, latencyCounts[i]);
          pos += latencyCounts[i];
        }
      }
      Arrays.sort(all);
      boolean tokensOk = tokenViolations.get() == 0;
      boolean exclusive = overlaps.get() == 0;

      System.out.println();
      System.out.println("Summary");
      System.out.printf(Locale.ROOT, "  total acquisitions            %d (in %.2f s; %.2f s more to let waiters finish)%n",
          total, elapsed, (drained - end) / 1e9);
      System.out.printf(Locale.ROOT, "  acquisitions/s                %.0f%n", total / elapsed);
      System.out.printf(Locale.ROOT, "  handoffs between threads/s    %.0f (%d handoffs)%n", handoffs.get() / elapsed,
          handoffs.get());
      System.out.printf(Locale.ROOT, "  handoff latency p50 / p99     %.3f ms / %.3f ms (max %.3f ms)%n",
          percentile(all, 0.50) / 1e6, percentile(all, 0.99) / 1e6, (latN == 0 ? 0 : all[latN - 1]) / 1e6);
      System.out.printf(Locale.ROOT, "  per-thread acquisitions       min %d / max %d%n", min, max);
      if (errors.get() > 0) {
        System.out.println("  errors                        " + errors.get() + " (first: " + firstError + ")");
      }
      if (!stuck.isEmpty()) {
        System.out.println("  threads still running after 35 s: " + stuck);
      }
      System.out.println("  mutual exclusion verified: "
          + (exclusive ? "no overlap" : overlaps.get() + " OVERLAPS"));
      System.out.println("  fencing tokens strictly increasing: "
          + (tokensOk ? "yes" : "no (" + tokenViolations.get() + " violations)"));
      return exclusive && tokensOk ? 0 : 1;
    } finally {
      for (Turnstile t : turnstiles) {
        try {
          t.close();
        } catch (RuntimeException e) {
          System.out.println("closing " + t + " failed: " + e);
        }
      }
      if (embedded != null) {
        embedded.close();
      }
    }
  }

  private void worker(int id, DistributedLock lock, long[] perThread, long[][] latencies, int[] counts) {
    long mine = 0;
    long[] lat = new long[4096];
    int latN = 0;
    try {
      while (!stop) {
        try {
          lock.lock();
        } catch (RuntimeException e) {
          recordError(e);
          continue;
        }
        long acquiredAt = System.nanoTime();
        try {
          if (inside.incrementAndGet() != 1) {
            overlaps.incrementAndGet();
          }
          long token = lock.fencingToken();
          if (token <= lastToken.get()) {
            tokenViolations.incrementAndGet();
          }
          lastToken.set(token);
          int prev = lastHolder;
          if (prev >= 0 && prev != id) {
            if (latN == lat.length) {
              lat = Arrays.copyOf(lat, latN * 2);
            }
            lat[latN++] = acquiredAt - lastUnlockStartNanos;
            handoffs.incrementAndGet();
          }
          mine++;
          acquisitions.incrementAndGet();
          long until = System.nanoTime() + WORK_NANOS;
          while (System.nanoTime() < until) {
            Thread.onSpinWait();
          }
        } catch (RuntimeException e) {
          recordError(e);
        } finally {
          inside.decrementAndGet();
          lastHolder = id;
          lastUnlockStartNanos = System.nanoTime();
          try {
            lock.unlock();
          } catch (RuntimeException e) {
            recordError(e);
          }
        }
      }
    } finally {
      perThread[id] = mine;
      latencies[id] = lat;
      counts[id] = latN;
    }
  }

  private void recordError(RuntimeException e) {
    if (errors.getAndIncrement() == 0) {
      firstError = e.toString();
      System.out.println("  error in " + Thread.currentThread().getName() + ": " + e);
    }
  }

  private static long percentile(long[] sorted, double q) {
    if (sorted.length == 0) {
      return 0;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
  }

  private static String configuredUri() {
    String uri = System.getenv("REDIS_URI");
    if (uri == null || uri.isBlank()) {
      uri = System.getProperty("redis.uri");
    }
    return uri == null || uri.isBlank() ? null : uri.trim();
  }
}
