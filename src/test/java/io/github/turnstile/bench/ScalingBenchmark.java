package io.github.turnstile.bench;

import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import org.redisson.Redisson;
import org.redisson.config.Config;

/**
 * How cost grows, run by {@code exec:java@bench} after the other parts ({@code -Dbench.scaling=false}
 * turns it off):
 *
 * <ol type="a">
 *   <li><b>clients</b>: 1, 2, 4, 8 clients × 2 threads on one hot lock: handoffs/s, Redis commands
 *       per acquisition, connections;
 *   <li><b>held locks</b>: one client holds 1, 100, 1000 locks for a few seconds with a short lease
 *       (3 s, so both watchdogs renew every second): Redis commands/s and scripts/s in that window,
 *       all of which are renewal (nothing else runs);
 *   <li><b>waiting threads</b>: 1, 16, 64 threads of one client wait on 1 lock, or spread over 16
 *       locks, held by another client: connections the waiting client opened and Redis commands/s
 *       while they wait.
 * </ol>
 *
 * <p>System properties (defaults in brackets): {@code bench.scaling.impls}
 * [turnstile,redisson,setnx; part b never runs SETNX, which has no renewal],
 * {@code bench.scaling.clients} [1,2,4,8], {@code bench.scaling.threads} per client [2],
 * {@code bench.scaling.seconds} measurement window of each step [2],
 * {@code bench.scaling.warmupMillis} [500], {@code bench.scaling.held} [1,100,1000],
 * {@code bench.scaling.leaseMillis} [3000], {@code bench.scaling.waiters} [1,16,64],
 * {@code bench.scaling.waitLocks} [1,16], {@code bench.scaling.parts} [a,b,c].
 */
final class ScalingBenchmark {
  private static final String IMPLS = System.getProperty("bench.scaling.impls", "turnstile,redisson,setnx");
  private static final int[] CLIENTS = ints("bench.scaling.clients", "1,2,4,8");
  private static final int THREADS = Integer.getInteger("bench.scaling.threads", 2);
  private static final long SECONDS = Long.getLong("bench.scaling.seconds", 2);
  private static final long WARMUP_MILLIS = Long.getLong("bench.scaling.warmupMillis", 500);
  private static final int[] HELD = ints("bench.scaling.held", "1,100,1000");
  private static final long LEASE_MILLIS = Long.getLong("bench.scaling.leaseMillis", 3000);
  private static final int[] WAITERS = ints("bench.scaling.waiters", "1,16,64");
  private static final int[] WAIT_LOCKS = ints("bench.scaling.waitLocks", "1,16");
  private static final String PARTS = System.getProperty("bench.scaling.parts", "a,b,c");
  private static final long SETTLE_MILLIS = 500;
  private static final long JOIN_MILLIS = 30_000;

  private ScalingBenchmark() {}

  static void run(String uri, RedisCommands<String, String> redis) {
    List<LockBenchmark.Impl> impls = impls(true);
    System.out.println();
    System.out.printf(Locale.ROOT, "Scaling: %s; window %d s per step (+%d ms warm-up)%n", labels(impls),
        SECONDS, WARMUP_MILLIS);
    if (PARTS.contains("a")) {
      clients(uri, redis, impls);
    }
    if (PARTS.contains("b")) {
      held(uri, redis, impls(false));
    }
    if (PARTS.contains("c")) {
      waiting(uri, redis, impls);
    }
  }

  // ------------------------------------------------------------------ a. clients

  private static void clients(String uri, RedisCommands<String, String> redis, List<LockBenchmark.Impl> impls) {
    System.out.println();
    System.out.printf(Locale.ROOT, "a. Hot lock, N clients x %d threads: handoffs (different thread)/s |"
        + " Redis cmds/acquisition | connections (all clients)%n", THREADS);
    StringBuilder h = new StringBuilder(String.format(Locale.ROOT, "%-8s", "clients"));
    for (LockBenchmark.Impl impl : impls) {
      h.append(String.format(Locale.ROOT, " | %-28s", impl.label()));
    }
    System.out.println(h);
    System.out.println("-".repeat(h.length()));
    String run = UUID.randomUUID().toString();
    for (int c : CLIENTS) {
      StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-8d", c));
      for (LockBenchmark.Impl impl : impls) {
        LockBenchmark.Result r = new LockBenchmark.Result(impl.label());
        String cell;
        try {
          LockBenchmark.hot(impl, uri, redis, "bench:" + run + ":scale:" + c + ":" + impl.label(), c, THREADS,
              WARMUP_MILLIS, TimeUnit.SECONDS.toMillis(SECONDS), r, false);
          cell = String.format(Locale.ROOT, "%7.0f/s %6.2f cmd %4.0f conn", r.hotHandoffsPerSec, r.hotCmdsPerAcq,
              r.hotConnections);
          if (r.hotOverlaps > 0 || r.hotErrors > 0) {
            cell += " !" + (long) r.hotOverlaps + " overlaps " + (long) r.hotErrors + " errors";
          }
        } catch (Throwable t) {
          cell = "FAILED " + t;
        }
        row.append(String.format(Locale.ROOT, " | %-28s", cell));
      }
      System.out.println(row);
    }
  }

  // ------------------------------------------------------------------ b. held locks (watchdog)

  private static void held(String uri, RedisCommands<String, String> redis, List<LockBenchmark.Impl> impls) {
    System.out.println();
    System.out.printf(Locale.ROOT, "b. One client holds N locks for %d s, lease %d ms (both watchdogs renew every"
        + " %d ms): Redis commands/s in the window (all renewal) | scripts (round trips)/s | cmds per lock"
        + " per renewal period%n", SECONDS, LEASE_MILLIS, LEASE_MILLIS / 3);
    StringBuilder h = new StringBuilder(String.format(Locale.ROOT, "%-8s", "locks"));
    for (LockBenchmark.Impl impl : impls) {
      h.append(String.format(Locale.ROOT, " | %-34s", impl.label()));
    }
    System.out.println(h);
    System.out.println("-".repeat(h.length()));
    for (int n : HELD) {
      StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-8d", n));
      String detail = "";
      for (LockBenchmark.Impl impl : impls) {
        String cell;
        try {
          Map<String, Long> cmds = holdMany(impl, uri, redis, n);
          double secs = SECONDS;
          double total = CommandStats.total(cmds) / secs;
          double scripts = CommandStats.scripts(cmds) / secs;
          double perLockPeriod = CommandStats.total(cmds) / (double) n / (secs * 3000.0 / LEASE_MILLIS);
          cell = String.format(Locale.ROOT, "%8.1f cmd/s %7.1f scr/s %5.2f", total, scripts, perLockPeriod);
          detail += "  " + impl.label() + " " + n + ": " + cmds;
        } catch (Throwable t) {
          cell = "FAILED " + t;
        }
        row.append(String.format(Locale.ROOT, " | %-34s", cell));
      }
      System.out.println(row);
      System.out.println(detail);
    }
  }

  /** @return the Redis commands of the hold window (after every lock is held, before any release) */
  private static Map<String, Long> holdMany(LockBenchmark.Impl impl, String uri,
      RedisCommands<String, String> redis, int n) throws InterruptedException {
    String run = UUID.randomUUID().toString();
    try (LockBenchmark.Client client = connectWithLease(impl, uri)) {
      List<Lock> locks = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        Lock l = client.lock("bench:" + run + ":held:" + i);
        l.lock();
        locks.add(l);
      }
      try {
        // start the window after one full renewal period, so every lease is in its renewal cycle
        Thread.sleep(LEASE_MILLIS / 3);
        CommandStats before = CommandStats.take(redis);
        Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS));
        return CommandStats.take(redis).since(before);
      } finally {
        for (Lock l : locks) {
          l.unlock();
        }
      }
    }
  }

  private static LockBenchmark.Client connectWithLease(LockBenchmark.Impl impl, String uri) {
    if (impl instanceof LockBenchmark.TurnstileImpl) {
      return new LockBenchmark.TurnstileClient(Turnstile.connect(uri,
          TurnstileOptions.builder().leaseTime(Duration.ofMillis(LEASE_MILLIS)).build()));
    }
    if (impl instanceof LockBenchmark.RedissonImpl) {
      Config config = new Config();
      config.useSingleServer().setAddress(uri);
      config.setLockWatchdogTimeout(LEASE_MILLIS);
      return new LockBenchmark.RedissonLockClient(Redisson.create(config));
    }
    throw new IllegalArgumentException(impl.label() + " has no lease renewal");
  }

  // ------------------------------------------------------------------ c. waiting threads

  private static void waiting(String uri, RedisCommands<String, String> redis, List<LockBenchmark.Impl> impls) {
    System.out.println();
    System.out.printf(Locale.ROOT, "c. T threads of one client wait on L locks held by another client (%d s"
        + " window): connections the waiting client added while waiting (its idle connections) | Redis"
        + " commands/s while waiting%n", SECONDS);
    StringBuilder h = new StringBuilder(String.format(Locale.ROOT, "%-12s", "threads/locks"));
    for (LockBenchmark.Impl impl : impls) {
      h.append(String.format(Locale.ROOT, " | %-28s", impl.label()));
    }
    System.out.println(h);
    System.out.println("-".repeat(h.length()));
    for (int t : WAITERS) {
      for (int l : WAIT_LOCKS) {
        if (l > t) {
          continue; // fewer threads than locks: some locks would have no waiter
        }
        StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-12s", t + "/" + l));
        for (LockBenchmark.Impl impl : impls) {
          String cell;
          try {
            long[] w = waitMany(impl, uri, redis, t, l);
            cell = String.format(Locale.ROOT, "%4d conn (idle %3d) %7.1f cmd/s", w[1], w[0], w[2] / 1000.0);
            if (w[3] > 0) {
              cell += " !" + w[3] + " stuck";
            }
          } catch (Throwable e) {
            cell = "FAILED " + e;
          }
          row.append(String.format(Locale.ROOT, " | %-28s", cell));
        }
        System.out.println(row);
      }
    }
  }

  /**
   * @return {idle connections of the waiting client, connections it added while its threads wait,
   *     Redis commands/s × 1000 in the window, threads still waiting 30 s after the release}
   */
  private static long[] waitMany(LockBenchmark.Impl impl, String uri, RedisCommands<String, String> redis,
      int threads, int lockCount) throws InterruptedException {
    String run = UUID.randomUUID().toString();
    try (LockBenchmark.Client holder = impl.connect(uri)) {
      List<Lock> held = new ArrayList<>();
      for (int i = 0; i < lockCount; i++) {
        Lock l = holder.lock("bench:" + run + ":wait:" + i);
        l.lock();
        held.add(l);
      }
      long[] out = new long[4];
      Thread[] waiters = new Thread[threads];
      try {
        long base = CommandStats.settledConnectedClients(redis);
        try (LockBenchmark.Client waiter = impl.connect(uri)) {
          // one uncontended acquisition first, so lazily opened connections count as idle ones
          Lock warm = waiter.lock("bench:" + run + ":warm");
          warm.lock();
          warm.unlock();
          long idle = CommandStats.settledConnectedClients(redis);
          AtomicInteger acquired = new AtomicInteger();
          CountDownLatch started = new CountDownLatch(threads);
          for (int i = 0; i < threads; i++) {
            Lock l = waiter.lock("bench:" + run + ":wait:" + (i % lockCount));
            waiters[i] = new Thread(() -> {
              started.countDown();
              l.lock();
              acquired.incrementAndGet();
              l.unlock();
            }, "bench-waiter-" + i);
            waiters[i].setDaemon(true);
            waiters[i].start();
          }
          started.await();
          Thread.sleep(SETTLE_MILLIS);
          CommandStats before = CommandStats.take(redis);
          long peak = CommandStats.connectedClients(redis);
          long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(SECONDS);
          while (System.nanoTime() < end) {
            Thread.sleep(250);
            peak = Math.max(peak, CommandStats.connectedClients(redis));
          }
          Map<String, Long> cmds = CommandStats.take(redis).since(before);
          out[0] = idle - base;
          out[1] = peak - idle;
          out[2] = CommandStats.total(cmds) * 1000 / SECONDS;
          if (acquired.get() != 0) {
            throw new IllegalStateException(acquired.get() + " waiters acquired a lock that another client holds");
          }
          // release: every waiter acquires in turn and leaves
          for (Lock l : held) {
            l.unlock();
          }
          held.clear();
          long deadline = System.currentTimeMillis() + JOIN_MILLIS;
          for (Thread w : waiters) {
            w.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (w.isAlive()) {
              out[3]++;
            }
          }
        }
      } finally {
        for (Lock l : held) {
          l.unlock();
        }
      }
      return out;
    }
  }

  // ------------------------------------------------------------------ helpers

  private static List<LockBenchmark.Impl> impls(boolean withSetNx) {
    List<LockBenchmark.Impl> out = new ArrayList<>();
    for (String s : IMPLS.split(",")) {
      switch (s.trim().toLowerCase(Locale.ROOT)) {
        case "turnstile":
          out.add(new LockBenchmark.TurnstileImpl());
          break;
        case "redisson":
          out.add(new LockBenchmark.RedissonImpl());
          break;
        case "setnx":
          if (withSetNx) {
            out.add(new LockBenchmark.SetNxImpl());
          }
          break;
        case "":
          break;
        default:
          throw new IllegalArgumentException("unknown implementation in bench.scaling.impls: " + s);
      }
    }
    return out;
  }

  private static String labels(List<LockBenchmark.Impl> impls) {
    List<String> l = new ArrayList<>();
    impls.forEach(i -> l.add(i.label()));
    return String.join(", ", l);
  }

  private static int[] ints(String property, String def) {
    String[] parts = System.getProperty(property, def).split(",");
    int[] out = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Integer.parseInt(parts[i].trim());
    }
    return out;
  }
}
