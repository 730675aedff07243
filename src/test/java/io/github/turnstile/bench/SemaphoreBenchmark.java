package io.github.turnstile.bench;

import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Turnstile;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.redisson.Redisson;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Semaphore utilization, Turnstile next to Redisson's RSemaphore on the same Redis in one run:
 * {@code bench.sem.permits} permits (4), each held {@code bench.sem.holdMillis} (2 ms) by
 * {@code bench.clients} × {@code bench.threads} workers (4 × 4). Utilization = achieved
 * acquisitions/s ÷ (permits ÷ hold), i.e. the share of permit-time actually in use; also reported
 * from the measured hold times, since a 2 ms park oversleeps a little.
 */
final class SemaphoreBenchmark {
  private static final int PERMITS = Integer.getInteger("bench.sem.permits", 4);
  private static final long HOLD_NANOS = TimeUnit.MILLISECONDS.toNanos(Long.getLong("bench.sem.holdMillis", 2));
  private static final int CLIENTS = Integer.getInteger("bench.clients", 4);
  private static final int THREADS = Integer.getInteger("bench.threads", 4);
  private static final int WARMUP_SECONDS = Integer.getInteger("bench.warmup", 1);
  private static final int SECONDS = Integer.getInteger("bench.sem.seconds", 5);
  private static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(Long.getLong("bench.sem.spinMicros", 100));

  private SemaphoreBenchmark() {}

  /** One side's figures. */
  static final class Result {
    String label;
    double acquisitionsPerSecond;
    double utilization;
    double measuredUtilization;
    double waitP50Millis;
    double waitP99Millis;
    double commandsPerAcquisition;
    double cpuMicrosPerAcquisition;
    double jain;
    int maxInUse;
    long overCapacity;
  }

  /** One side's uncontended pairs: {@code tryAcquire()} + {@code release()} by one thread. */
  static final class Pair {
    String label;
    double pairsPerSecond;
    double cpuMicrosPerPair;
    double commandsPerPair;
    double scriptMicrosPerPair;
    /** Per round: {pairs/s, Redis CPU µs/pair, commands/pair, µs in scripts/pair}. */
    double[][] rounds;
  }

  /** Microseconds Redis spent in EVALSHA/EVAL so far (INFO commandstats), the scripts' own cost. */
  private static long scriptMicros(RedisCommands<String, String> redis) {
    long total = 0;
    for (String line : redis.info("commandstats").split("\\r?\\n")) {
      if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
        for (String field : line.substring(line.indexOf(':') + 1).split(",")) {
          if (field.startsWith("usec=")) {
            total += Long.parseLong(field.substring(5));
          }
        }
      }
    }
    return total;
  }

  interface Side extends AutoCloseable {
    Semaphore semaphore(int client, String name);

    @Override
    void close();
  }

  static List<Result> run(String uri, RedisCommands<String, String> redis) throws Exception {
    List<Result> results = new ArrayList<>();
    if (!Boolean.getBoolean("bench.sem.pairsOnly")) {
      results.add(measure("Turnstile", redis, turnstile(uri)));
      results.add(measure("Redisson", redis, redisson(uri)));
      print(results);
    }
    printPairs(uncontended(uri, redis));
    return results;
  }

  private static final int PAIR_ROUNDS = Integer.getInteger("bench.sem.pair.rounds", 7);
  private static final long PAIR_ROUND_MILLIS = Long.getLong("bench.sem.pair.roundMillis", 1000);

  /**
   * Uncontended pairs on one thread, in turns: Turnstile's semaphore {@code tryAcquire()} +
   * {@code release()}, Turnstile's lock {@code lock()} + {@code unlock()} without lock caching (the semaphore's target
   * is at most 1.2x its Redis CPU), Redisson's semaphore and Turnstile's counting semaphore (like
   * Redisson's, not leased) each run for
   * {@code bench.sem.pair.roundMillis} (1000) per round, in an order that rotates, for
   * {@code bench.sem.pair.rounds} (7) rounds, on clients connected once. On a shared machine the
   * load drifts within seconds; taking turns exposes every side to the same drift, and the medians
   * of the per-round ratios are what the target is checked against.
   */
  static List<Pair> uncontended(String uri, RedisCommands<String, String> redis) throws Exception {
    List<String> labels = List.of("Turnstile semaphore", "Turnstile lock (uncached)", "Redisson semaphore",
        "Turnstile counting");
    Config config = new Config();
    config.useSingleServer().setAddress(uri);
    RedissonClient r = Redisson.create(config);
    // lock caching off: the lock pair is the two-script protocol the semaphore pair is held to (a
    // cached pair goes to Redis no more)
    try (Turnstile t = Turnstile.connect(uri, io.github.turnstile.TurnstileOptions.builder().lockCaching(false).build())) {
      DistributedSemaphore s = t.semaphore("bench:sem-pair:" + UUID.randomUUID(), 4);
      io.github.turnstile.DistributedLock l = t.lock("bench:lock-pair:" + UUID.randomUUID());
      DistributedSemaphore counting = t.countingSemaphore("bench:csem-pair:" + UUID.randomUUID(), 4);
      RSemaphore rs = r.getSemaphore("bench:rsem-pair:" + UUID.randomUUID());
      rs.trySetPermits(4);
      List<Runnable> ops = List.of(() -> {
        if (!s.tryAcquire()) {
          throw new IllegalStateException("uncontended tryAcquire() refused");
        }
        s.release();
      }, () -> {
        l.lock();
        l.unlock();
      }, () -> {
        if (!rs.tryAcquire()) {
          throw new IllegalStateException("uncontended tryAcquire() refused");
        }
        rs.release();
      }, () -> {
        if (!counting.tryAcquire()) {
          throw new IllegalStateException("uncontended tryAcquire() refused");
        }
        counting.release();
      });
      int n = ops.size();
      double[][][] m = new double[n][PAIR_ROUNDS][];
      for (Runnable op : ops) {
        slice(op, redis, 300); // warm-up
      }
      for (int round = 0; round < PAIR_ROUNDS; round++) {
        for (int k = 0; k < n; k++) {
          int i = (k + round) % n;
          m[i][round] = slice(ops.get(i), redis, PAIR_ROUND_MILLIS);
        }
      }
      List<Pair> pairs = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        Pair p = new Pair();
        p.label = labels.get(i);
        p.rounds = m[i];
        p.pairsPerSecond = median(m[i], 0);
        p.cpuMicrosPerPair = median(m[i], 1);
        p.commandsPerPair = median(m[i], 2);
        p.scriptMicrosPerPair = median(m[i], 3);
        pairs.add(p);
      }
      return pairs;
    } finally {
      r.shutdown();
    }
  }

  /** One slice of a pair loop: {pairs/s, Redis CPU µs/pair, Redis commands/pair, µs in scripts/pair}. */
  private static double[] slice(Runnable op, RedisCommands<String, String> redis, long millis) {
    CommandStats before = CommandStats.take(redis);
    long scripts = scriptMicros(redis);
    double[] m = LockBenchmark.loop(op, redis, millis);
    double pairs = m[2];
    double scriptMicros = (scriptMicros(redis) - scripts) / pairs;
    double commands = CommandStats.total(CommandStats.take(redis).since(before)) / pairs; // INFO not counted
    return new double[] {m[0], m[1], commands, scriptMicros};
  }

  private static double median(double[][] rounds, int k) {
    double[] v = new double[rounds.length];
    for (int i = 0; i < v.length; i++) {
      v[i] = rounds[i][k];
    }
    return LockBenchmark.median(v);
  }

  /** The median over rounds of a's figure k divided by b's in the same round. */
  private static double medianRatio(Pair a, Pair b, int k) {
    double[] x = new double[a.rounds.length];
    double[] y = new double[b.rounds.length];
    for (int i = 0; i < x.length; i++) {
      x[i] = a.rounds[i][k];
      y[i] = b.rounds[i][k];
    }
    return LockBenchmark.medianRatio(x, y);
  }

  private static void printPairs(List<Pair> pairs) {
    System.out.println();
    System.out.printf(Locale.ROOT, "Uncontended pairs, one thread, in turns: %d rounds of %d ms each, medians%n",
        PAIR_ROUNDS, PAIR_ROUND_MILLIS);
    System.out.printf(Locale.ROOT, "%-25s | %10s | %16s | %16s | %14s%n", "pair", "pairs/s", "Redis CPU us/pair",
        "in scripts us/pair", "commands/pair");
    for (Pair p : pairs) {
      System.out.printf(Locale.ROOT, "%-25s | %10.0f | %16.1f | %16.1f | %14.1f%n", p.label, p.pairsPerSecond,
          p.cpuMicrosPerPair, p.scriptMicrosPerPair, p.commandsPerPair);
    }
    System.out.println("Medians of the per-round ratios:");
    System.out.printf(Locale.ROOT, "  semaphore pair / lock pair: Redis CPU %.2f [target: <= 1.2], in scripts %.2f, pairs/s %.2f%n",
        medianRatio(pairs.get(0), pairs.get(1), 1), medianRatio(pairs.get(0), pairs.get(1), 3),
        medianRatio(pairs.get(0), pairs.get(1), 0));
    System.out.printf(Locale.ROOT, "  semaphore pair / Redisson's: Redis CPU %.2f, pairs/s %.2f%n",
        medianRatio(pairs.get(0), pairs.get(2), 1), medianRatio(pairs.get(0), pairs.get(2), 0));
    // Redisson's RSemaphore is not leased (a crashed holder's permits are gone): the counting mode is its like
    System.out.printf(Locale.ROOT, "  counting pair / Redisson's: Redis CPU %.2f, pairs/s %.2f%n",
        medianRatio(pairs.get(3), pairs.get(2), 1), medianRatio(pairs.get(3), pairs.get(2), 0));
  }

  private static Side turnstile(String uri) {
    List<Turnstile> clients = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      clients.add(Turnstile.connect(uri));
    }
    return new Side() {
      @Override
      public Semaphore semaphore(int client, String name) {
        DistributedSemaphore s = clients.get(client).semaphore(name, PERMITS);
        return s;
      }

      @Override
      public void close() {
        clients.forEach(Turnstile::close);
      }
    };
  }

  private static Side redisson(String uri) {
    List<RedissonClient> clients = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      Config config = new Config();
      config.useSingleServer().setAddress(uri);
      clients.add(Redisson.create(config));
    }
    return new Side() {
      @Override
      public Semaphore semaphore(int client, String name) {
        RSemaphore s = clients.get(client).getSemaphore(name);
        s.trySetPermits(PERMITS);
        // adapt RSemaphore to the two calls the workers make
        return new Semaphore(0) {
          private static final long serialVersionUID = 1L;

          @Override
          public void acquire() throws InterruptedException {
            s.acquire();
          }

          @Override
          public void release() {
            s.release();
          }
        };
      }

      @Override
      public void close() {
        clients.forEach(RedissonClient::shutdown);
      }
    };
  }

  private static Result measure(String label, RedisCommands<String, String> redis, Side side) throws Exception {
    String name = "bench:sem:" + UUID.randomUUID();
    AtomicBoolean measuring = new AtomicBoolean();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicInteger inUse = new AtomicInteger();
    AtomicInteger maxInUse = new AtomicInteger();
    AtomicLong over = new AtomicLong();
    AtomicLong acquisitions = new AtomicLong();
    AtomicLong heldNanos = new AtomicLong();
    List<LongSamples> waits = new ArrayList<>();
    List<AtomicLong> perThread = new ArrayList<>();
    List<Thread> threads = new ArrayList<>();
    try {
      for (int c = 0; c < CLIENTS; c++) {
        Semaphore s = side.semaphore(c, name);
        for (int t = 0; t < THREADS; t++) {
          LongSamples w = new LongSamples();
          waits.add(w);
          AtomicLong mine = new AtomicLong();
          perThread.add(mine);
          Thread th = new Thread(() -> {
            while (!stop.get()) {
              long start = System.nanoTime();
              try {
                s.acquire();
              } catch (InterruptedException e) {
                return;
              }
              long got = System.nanoTime();
              int now = inUse.incrementAndGet();
              if (now > PERMITS) {
                over.incrementAndGet();
              }
              maxInUse.accumulateAndGet(now, Math::max);
              hold(got + HOLD_NANOS);
              long held = System.nanoTime() - got;
              inUse.decrementAndGet();
              s.release();
              if (measuring.get()) {
                acquisitions.incrementAndGet();
                mine.incrementAndGet();
                heldNanos.addAndGet(held);
                w.add(got - start);
              }
            }
          }, label + "-sem-" + c + "-" + t);
          th.setDaemon(true);
          threads.add(th);
        }
      }
      threads.forEach(Thread::start);
      Thread.sleep(TimeUnit.SECONDS.toMillis(WARMUP_SECONDS));
      CommandStats before = CommandStats.take(redis);
      RedisCpu cpuBefore = RedisCpu.take(redis);
      long start = System.nanoTime();
      measuring.set(true);
      Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS));
      measuring.set(false);
      double elapsed = (System.nanoTime() - start) / 1e9;
      double cpuMicros = RedisCpu.take(redis).micros(cpuBefore);
      Map<String, Long> cmds = CommandStats.take(redis).since(before);
      stop.set(true);
      for (Thread t : threads) {
        t.join(10_000);
      }
      Result r = new Result();
      r.label = label;
      r.acquisitionsPerSecond = acquisitions.get() / elapsed;
      r.utilization = r.acquisitionsPerSecond / (PERMITS / (HOLD_NANOS / 1e9));
      r.measuredUtilization = heldNanos.get() / 1e9 / (PERMITS * elapsed);
      LongSamples all = new LongSamples();
      for (LongSamples w : waits) {
        for (int i = 0; i < w.size(); i++) {
          all.add(w.get(i));
        }
      }
      r.waitP50Millis = all.percentile(0.5) / 1e6;
      r.waitP99Millis = all.percentile(0.99) / 1e6;
      r.commandsPerAcquisition = (double) CommandStats.total(cmds) / Math.max(1, acquisitions.get());
      r.cpuMicrosPerAcquisition = cpuMicros / Math.max(1, acquisitions.get());
      double sum = 0;
      double squares = 0;
      for (AtomicLong n : perThread) {
        sum += n.get();
        squares += (double) n.get() * n.get();
      }
      r.jain = squares == 0 ? 0 : sum * sum / (perThread.size() * squares);
      r.maxInUse = maxInUse.get();
      r.overCapacity = over.get();
      System.out.printf(Locale.ROOT, "[bench] %-10s semaphore: %.0f acq/s, utilization %.3f (measured %.3f)%n",
          label, r.acquisitionsPerSecond, r.utilization, r.measuredUtilization);
      return r;
    } finally {
      stop.set(true);
      side.close();
    }
  }

  /**
   * Holds until {@code until}: parks until bench.sem.spinMicros (100) before, then spins, so that the hold is 2 ms and
   * not 2 ms plus the scheduler's oversleep (the same for both sides).
   */
  private static void hold(long until) {
    long park = until - System.nanoTime() - SPIN_NANOS;
    if (park > 0) {
      LockSupport.parkNanos(park);
    }
    while (System.nanoTime() - until < 0) {
      Thread.onSpinWait();
    }
  }

  private static void print(List<Result> results) {
    System.out.println();
    System.out.printf(Locale.ROOT, "Semaphore: %d permits, %.1f ms hold, %d clients x %d threads, %d s%n",
        PERMITS, HOLD_NANOS / 1e6, CLIENTS, THREADS, SECONDS);
    StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-38s", "metric"));
    for (Result r : results) {
      header.append(String.format(Locale.ROOT, " | %12s", r.label));
    }
    System.out.println(header);
    row(results, "acquisitions/s", r -> String.format(Locale.ROOT, "%.0f", r.acquisitionsPerSecond));
    row(results, "utilization (acq/s / (permits/hold))", r -> String.format(Locale.ROOT, "%.3f", r.utilization));
    row(results, "utilization (measured hold time)", r -> String.format(Locale.ROOT, "%.3f", r.measuredUtilization));
    row(results, "acquire wait p50 (ms)", r -> String.format(Locale.ROOT, "%.3f", r.waitP50Millis));
    row(results, "acquire wait p99 (ms)", r -> String.format(Locale.ROOT, "%.3f", r.waitP99Millis));
    row(results, "Redis cmds/acquisition (incl. Lua)", r -> String.format(Locale.ROOT, "%.2f", r.commandsPerAcquisition));
    row(results, "Redis CPU us/acquisition (INFO cpu)", r -> String.format(Locale.ROOT, "%.1f", r.cpuMicrosPerAcquisition));
    row(results, "Jain index across threads", r -> String.format(Locale.ROOT, "%.4f", r.jain));
    row(results, "max permits in use / over capacity", r -> r.maxInUse + " / " + r.overCapacity);
    if (results.size() == 2 && results.get(1).acquisitionsPerSecond > 0) {
      System.out.printf(Locale.ROOT, "Turnstile / Redisson semaphore throughput: %.2f; Redis CPU per acquisition: %.2f%n",
          results.get(0).acquisitionsPerSecond / results.get(1).acquisitionsPerSecond,
          results.get(0).cpuMicrosPerAcquisition / Math.max(1e-9, results.get(1).cpuMicrosPerAcquisition));
    }
  }

  private static void row(List<Result> results, String name, java.util.function.Function<Result, String> f) {
    StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-38s", name));
    for (Result r : results) {
      line.append(String.format(Locale.ROOT, " | %12s", f.apply(r)));
    }
    System.out.println(line);
  }
}
