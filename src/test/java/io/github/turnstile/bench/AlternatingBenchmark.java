package io.github.turnstile.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.LockSupport;

/**
 * Alternating pairs, run by {@code exec:java@bench} after the main part
 * ({@code -Dbench.alternating=false} turns it off): two clients of one implementation (two
 * separate instances, each with its own connections, as two JVMs would have) take turns on one
 * lock name, one {@code lock(); unlock();} pair each, so the lock changes client at every pair:
 * client A's pair, then B's, then A's, and so on. A pair starts only after the other client's
 * {@code unlock()} returned: the two driver threads hand the turn to each other in this JVM (a
 * volatile turn and {@code LockSupport.unpark}), never through Redis. A round starts with the
 * client that did not take the previous round's last pair, so the lock changes client across
 * rounds too.
 *
 * <p>As in {@link LockBenchmark}'s uncontended pair in turns, the implementations take turns: each
 * round runs every implementation for {@code bench.alternating.roundMillis}, in an order that
 * rotates from round to round, on clients connected once, so that all of them share the machine's
 * drift. A reference takes its turn too: two synchronous PINGs per turn, on two plain Lettuce
 * clients taking turns by the same handshake ("2 PINGs"): the floor of an alternating pair of two
 * round trips, the handshake included.
 *
 * <p>Per implementation, medians over the rounds (and their min-max): pairs/s (both clients
 * together, the handshake included), p50 and p99 of one pair (one client's {@code lock()} call to
 * its {@code unlock()} return; the handshake excluded), Redis CPU per pair ({@code INFO cpu}) and
 * Redis commands per pair ({@code INFO commandstats}, scripts' own calls included). Then the
 * medians of the per-round ratios Turnstile / Redisson and Turnstile / the recipe.
 *
 * <p>Turnstile: {@code DistributedLock.lock()}/{@code unlock()} with lock caching off; "Turnstile
 * cached": the same with lock caching on. Redisson: {@code RLock.lock()}/{@code unlock()}, default {@code Config}. The
 * recipe ("SETNX-poll"): {@link SetNxPollLock}, {@code SET NX PX} and a compare-and-delete script;
 * its poll does not run here, since the lock is free whenever a pair starts.
 *
 * <p>System properties (defaults in brackets): {@code bench.alternating.rounds} [5],
 * {@code bench.alternating.roundMillis} [1000]; the implementations are those of
 * {@code bench.impls} [turnstile,redisson,setnx]. To run this part alone:
 * {@code -Dbench.main=false -Dbench.semaphore=false -Dbench.rw=false -Dbench.scaling=false
 * -Dbench.distinct=false -Dbench.async=false}.
 */
final class AlternatingBenchmark {
  private static final int ROUNDS = Integer.getInteger("bench.alternating.rounds", 5);
  private static final int ROUND_MILLIS = Integer.getInteger("bench.alternating.roundMillis", 1000);
  private static final long WARMUP_MILLIS = 300;
  private static final long JOIN_TIMEOUT_MILLIS = 30_000;
  private static final String PINGS = "2 PINGs";

  private AlternatingBenchmark() {}

  /** One contender of the turns: the pair of each of its two clients on one lock name. */
  private static final class Contender {
    final String label;
    final Runnable[] pairs;
    /** The client that takes the next pair: the one that did not take the last. */
    int next;
    boolean failed;

    Contender(String label, Runnable a, Runnable b) {
      this.label = label;
      this.pairs = new Runnable[] {a, b};
    }
  }

  /** The handshake of one round between the two driver threads. */
  private static final class Turns {
    final Thread[] threads = new Thread[2];
    volatile int turn;
    volatile boolean stop;
    volatile Throwable error;

    Turns(int first) {
      this.turn = first;
    }
  }

  /** What one round of one contender measured. */
  private static final class Round {
    long pairs;
    double pairsPerSec;
    double p50Micros;
    double p99Micros;
    double cpuMicrosPerPair;
    Map<String, Long> commands;
  }

  static void run(String uri, RedisCommands<String, String> redis) {
    if (ROUNDS <= 0) {
      return;
    }
    List<LockBenchmark.Impl> impls = LockBenchmark.selectedImpls();
    List<Contender> contenders = new ArrayList<>();
    List<AutoCloseable> closing = new ArrayList<>();
    String runId = Long.toHexString(ThreadLocalRandom.current().nextLong());
    try {
      for (LockBenchmark.Impl impl : impls) {
        LockBenchmark.Client a = impl.connect(uri);
        closing.add(a);
        LockBenchmark.Client b = impl.connect(uri);
        closing.add(b);
        String name = "bench:" + runId + ":alternating:" + impl.label();
        contenders.add(new Contender(impl.label(), pair(a.lock(name)), pair(b.lock(name))));
      }
      contenders.add(new Contender(PINGS, pings(uri, closing), pings(uri, closing)));
      List<String> labels = new ArrayList<>();
      contenders.forEach(c -> labels.add(c.label));
      System.out.println();
      System.out.printf(Locale.ROOT, "Alternating pairs: %s; 2 clients each take turns on one lock, %d rounds of %d ms%n",
          String.join(", ", labels), ROUNDS, ROUND_MILLIS);
      int n = contenders.size();
      for (Contender c : contenders) {
        try {
          round(c, redis, WARMUP_MILLIS);
        } catch (Throwable t) {
          c.failed = true;
          System.out.println("[bench] " + c.label + " FAILED in the alternating warm-up: " + t);
          t.printStackTrace(System.out);
        }
      }
      double[][] rate = nans(n);
      double[][] p50 = nans(n);
      double[][] p99 = nans(n);
      double[][] cpu = nans(n);
      double[][] cmds = nans(n);
      List<Map<String, Long>> commands = new ArrayList<>();
      long[] pairs = new long[n];
      for (int i = 0; i < n; i++) {
        commands.add(new TreeMap<>());
      }
      for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < n; k++) {
          int i = (k + round) % n;
          Contender c = contenders.get(i);
          if (c.failed) {
            continue;
          }
          try {
            Round r = round(c, redis, ROUND_MILLIS);
            rate[i][round] = r.pairsPerSec;
            p50[i][round] = r.p50Micros;
            p99[i][round] = r.p99Micros;
            cpu[i][round] = r.cpuMicrosPerPair;
            cmds[i][round] = (double) CommandStats.total(r.commands) / r.pairs;
            pairs[i] += r.pairs;
            r.commands.forEach((cmd, calls) -> commands.get(i).merge(cmd, calls, Long::sum));
          } catch (Throwable t) {
            c.failed = true;
            System.out.println("[bench] " + c.label + " FAILED in alternating round " + round + ": " + t);
            t.printStackTrace(System.out);
          }
        }
      }
      for (int i = 0; i < n; i++) {
        System.out.printf(Locale.ROOT,
            "[bench] %-10s alternating: %.0f pairs/s, p50 %.1f us, p99 %.1f us, Redis CPU %.1f us/pair,"
                + " %.2f cmds/pair%n",
            labels.get(i), median(rate[i]), median(p50[i]), median(p99[i]), median(cpu[i]), median(cmds[i]));
      }
      System.out.println();
      System.out.printf(Locale.ROOT,
          "Alternating pairs in turns (2 clients, one lock, the client changing at every pair): %d rounds of %d ms"
              + " each, medians (min-max)%n",
          ROUNDS, ROUND_MILLIS);
      System.out.printf(Locale.ROOT, "%-14s | %24s | %25s | %25s | %25s | %9s%n", "", "pairs/s", "pair p50 (us)",
          "pair p99 (us)", "Redis CPU/pair (us)", "cmds/pair");
      for (int i = 0; i < n; i++) {
        System.out.printf(Locale.ROOT, "%-14s | %8.0f (%6.0f-%6.0f) | %8.1f (%6.1f-%7.1f) | %8.1f (%6.1f-%7.1f)"
            + " | %8.1f (%6.1f-%7.1f) | %9.2f%s%n", labels.get(i),
            median(rate[i]), min(rate[i]), max(rate[i]), median(p50[i]), min(p50[i]), max(p50[i]),
            median(p99[i]), min(p99[i]), max(p99[i]), median(cpu[i]), min(cpu[i]), max(cpu[i]), median(cmds[i]),
            contenders.get(i).failed ? "  FAILED" : "");
      }
      int ts = labels.indexOf("Turnstile");
      int rd = labels.indexOf("Redisson");
      int rc = labels.indexOf("SETNX-poll");
      int ping = n - 1;
      System.out.println("Medians of the per-round ratios:");
      if (ts >= 0 && rd >= 0) {
        ratio("Turnstile / Redisson pairs/s", medianRatio(rate[ts], rate[rd]), "  [lock caching target: >= 1.5]");
        ratio("Turnstile / Redisson pair p50", medianRatio(p50[ts], p50[rd]), "");
        ratio("Turnstile / Redisson Redis CPU/pair", medianRatio(cpu[ts], cpu[rd]), "");
        ratio("Turnstile / Redisson Redis cmds/pair", medianRatio(cmds[ts], cmds[rd]), "");
      }
      int tc = labels.indexOf("Turnstile cached");
      if (tc >= 0 && rd >= 0) {
        ratio("Turnstile cached / Redisson pairs/s", medianRatio(rate[tc], rate[rd]), "  [lock caching target: >= 1.5]");
      }
      if (tc >= 0 && rc >= 0) {
        ratio("Turnstile cached / recipe (SETNX-poll) pairs/s", medianRatio(rate[tc], rate[rc]),
            "  [lock caching target: >= 0.9]");
      }
      if (ts >= 0 && rc >= 0) {
        ratio("Turnstile / recipe (SETNX-poll) pairs/s", medianRatio(rate[ts], rate[rc]),
            "  [lock caching target: >= 0.9]");
        ratio("Turnstile / recipe (SETNX-poll) pair p50", medianRatio(p50[ts], p50[rc]), "");
        ratio("Turnstile / recipe (SETNX-poll) Redis CPU/pair", medianRatio(cpu[ts], cpu[rc]), "");
        ratio("Turnstile / recipe (SETNX-poll) Redis cmds/pair", medianRatio(cmds[ts], cmds[rc]), "");
      }
      for (int i = 0; i < n - 1; i++) {
        ratio(labels.get(i) + " pairs/s / alternating 2 PINGs", medianRatio(rate[i], rate[ping]), "");
      }
      System.out.println("Redis commands per alternating pair (all rounds)");
      for (int i = 0; i < n; i++) {
        System.out.println("  " + labels.get(i) + ": " + perPair(commands.get(i), pairs[i]));
      }
    } finally {
      for (AutoCloseable c : closing) {
        try {
          c.close();
        } catch (Exception e) {
          System.out.println("[bench] closing an alternating-pairs client failed: " + e);
        }
      }
    }
  }

  private static Runnable pair(Lock lock) {
    return () -> {
      lock.lock();
      lock.unlock();
    };
  }

  /** One client's turn of the reference: two synchronous PINGs on a plain Lettuce client of its own. */
  private static Runnable pings(String uri, List<AutoCloseable> closing) {
    RedisClient client = LeanLettuce.create(uri);
    StatefulRedisConnection<String, String> conn;
    try {
      conn = client.connect();
    } catch (RuntimeException e) {
      LeanLettuce.shutdown(client);
      throw e;
    }
    closing.add(() -> {
      conn.close();
      LeanLettuce.shutdown(client);
    });
    RedisCommands<String, String> sync = conn.sync();
    return () -> {
      sync.ping();
      sync.ping();
    };
  }

  /**
   * One round of one contender: its two clients take turns for {@code millis}, each on a thread of
   * its own, starting with {@link Contender#next}.
   */
  private static Round round(Contender c, RedisCommands<String, String> redis, long millis)
      throws InterruptedException {
    Turns turns = new Turns(c.next);
    LongSamples[] samples = {new LongSamples(), new LongSamples()};
    CommandStats before = CommandStats.take(redis);
    RedisCpu cpuBefore = RedisCpu.take(redis);
    long start = System.nanoTime();
    long deadline = start + TimeUnit.MILLISECONDS.toNanos(millis);
    for (int t = 0; t < 2; t++) {
      int me = t;
      turns.threads[t] = new Thread(() -> drive(me, c.pairs[me], turns, samples[me], deadline),
          "bench-alternating-" + c.label + "-" + (char) ('A' + t));
      turns.threads[t].setDaemon(true);
    }
    for (Thread t : turns.threads) {
      t.start();
    }
    long joinDeadline = System.currentTimeMillis() + millis + JOIN_TIMEOUT_MILLIS;
    for (Thread t : turns.threads) {
      t.join(Math.max(1, joinDeadline - System.currentTimeMillis()));
    }
    long end = System.nanoTime();
    RedisCpu cpuAfter = RedisCpu.take(redis);
    Map<String, Long> cmds = CommandStats.take(redis).since(before);
    for (Thread t : turns.threads) {
      if (t.isAlive()) {
        turns.stop = true;
        throw new IllegalStateException(t.getName() + " still running " + JOIN_TIMEOUT_MILLIS / 1000
            + " s after the round's end: " + Arrays.toString(t.getStackTrace()));
      }
    }
    if (turns.error != null) {
      throw new IllegalStateException("a pair failed", turns.error);
    }
    if (Math.abs(samples[0].size() - samples[1].size()) > 1) {
      throw new IllegalStateException("the clients did not alternate: " + samples[0].size() + " and "
          + samples[1].size() + " pairs");
    }
    c.next = turns.turn; // the stopping thread's turn: it did not take the last pair
    LongSamples all = new LongSamples();
    all.addAll(samples[0]);
    all.addAll(samples[1]);
    Round r = new Round();
    r.pairs = all.size();
    r.pairsPerSec = all.size() / ((end - start) / 1e9);
    r.p50Micros = all.percentile(0.5) / 1e3;
    r.p99Micros = all.percentile(0.99) / 1e3;
    r.cpuMicrosPerPair = cpuAfter.microsPerOp(cpuBefore, all.size());
    r.commands = cmds;
    return r;
  }

  /**
   * A driver thread: waits for its turn, takes one pair unless the round is over, then gives the
   * turn to the other client's thread. The first to find the round over stops both.
   */
  private static void drive(int me, Runnable pair, Turns turns, LongSamples samples, long deadline) {
    Thread other = turns.threads[1 - me];
    try {
      while (true) {
        while (turns.turn != me) {
          if (turns.stop) {
            return;
          }
          LockSupport.park(turns);
        }
        if (turns.stop || System.nanoTime() - deadline >= 0) {
          break;
        }
        long t0 = System.nanoTime();
        pair.run();
        samples.add(System.nanoTime() - t0);
        turns.turn = 1 - me;
        LockSupport.unpark(other);
      }
    } catch (Throwable t) {
      if (turns.error == null) {
        turns.error = t;
      }
    }
    turns.stop = true;
    LockSupport.unpark(other);
  }

  private static double[][] nans(int n) {
    double[][] out = new double[n][ROUNDS];
    for (double[] row : out) {
      Arrays.fill(row, Double.NaN);
    }
    return out;
  }

  /** @return the values that were measured (rounds that failed or did not run are NaN) */
  private static double[] measured(double[] v) {
    return Arrays.stream(v).filter(x -> !Double.isNaN(x)).toArray();
  }

  private static double median(double[] v) {
    double[] m = measured(v);
    return m.length == 0 ? Double.NaN : LockBenchmark.median(m);
  }

  private static double min(double[] v) {
    return Arrays.stream(measured(v)).min().orElse(Double.NaN);
  }

  private static double max(double[] v) {
    return Arrays.stream(measured(v)).max().orElse(Double.NaN);
  }

  private static double medianRatio(double[] a, double[] b) {
    double[] r = new double[a.length];
    for (int i = 0; i < a.length; i++) {
      r[i] = a[i] / b[i];
    }
    return median(r);
  }

  private static void ratio(String what, double value, String note) {
    System.out.printf(Locale.ROOT, "  %-48s %.2f%s%n", what, value, note);
  }

  private static String perPair(Map<String, Long> cmds, long pairs) {
    if (pairs == 0) {
      return "n/a";
    }
    Map<String, String> out = new LinkedHashMap<>();
    cmds.entrySet().stream()
        .sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
        .forEach(e -> out.put(e.getKey(), String.format(Locale.ROOT, "%.3f", (double) e.getValue() / pairs)));
    return out.toString();
  }
}
