package io.github.turnstile.bench;

import io.github.turnstile.Turnstile;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReadWriteLock;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Read-mostly read/write lock throughput, Turnstile next to Redisson's RReadWriteLock on the same
 * Redis in one run: {@code bench.clients} × {@code bench.threads} workers (4 × 4), each operation a
 * read with probability {@code bench.rw.readPercent} (90) and otherwise a write, holding the lock
 * {@code bench.rw.holdMicros} (100 µs, spinning). A checker counts writer overlaps. The two take
 * turns for {@code bench.rw.rounds} rounds (3) of {@code bench.rw.seconds} (5), on clients connected
 * once; the medians over rounds, and of the per-round ratios, are printed after the last round's
 * table.
 */
final class ReadWriteBenchmark {
  private static final int CLIENTS = Integer.getInteger("bench.clients", 4);
  private static final int THREADS = Integer.getInteger("bench.threads", 4);
  private static final int READ_PERCENT = Integer.getInteger("bench.rw.readPercent", 90);
  private static final long HOLD_NANOS = TimeUnit.MICROSECONDS.toNanos(Long.getLong("bench.rw.holdMicros", 100));
  private static final int WARMUP_SECONDS = Integer.getInteger("bench.warmup", 1);
  private static final int SECONDS = Integer.getInteger("bench.rw.seconds", 5);
  /** Rounds in which the two implementations take turns (medians over them; the load drifts). */
  private static final int ROUNDS = Integer.getInteger("bench.rw.rounds", 3);

  private ReadWriteBenchmark() {}

  static final class Result {
    String label;
    double opsPerSecond;
    double readsPerSecond;
    double writesPerSecond;
    double readP50Millis;
    double writeP50Millis;
    double writeP99Millis;
    int maxReaders;
    long violations;
    double commandsPerOp;
    double cpuMicrosPerOp;
    double userMicrosPerOp;
    double readEventsPerOp;
    Map<String, Long> commands = Map.of();
    long ops;
  }

  interface Side extends AutoCloseable {
    ReadWriteLock lock(int client, String name);

    @Override
    void close();
  }

  static List<Result> run(String uri, RedisCommands<String, String> redis) throws Exception {
    List<Turnstile> ts = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      ts.add(Turnstile.connect(uri));
    }
    Side turnstile = new Side() {
      @Override
      public ReadWriteLock lock(int client, String name) {
        return ts.get(client).readWriteLock(name);
      }

      @Override
      public void close() {
        ts.forEach(Turnstile::close);
      }
    };
    List<RedissonClient> rs = new ArrayList<>();
    for (int i = 0; i < CLIENTS; i++) {
      Config config = new Config();
      config.useSingleServer().setAddress(uri);
      rs.add(Redisson.create(config));
    }
    Side redisson = new Side() {
      @Override
      public ReadWriteLock lock(int client, String name) {
        return rs.get(client).getReadWriteLock(name);
      }

      @Override
      public void close() {
        rs.forEach(RedissonClient::shutdown);
      }
    };
    List<Result> ours = new ArrayList<>();
    List<Result> theirs = new ArrayList<>();
    try {
      for (int round = 0; round < ROUNDS; round++) {
        // the two take turns, the first one alternating: both meet the same drift of the load
        if (round % 2 == 0) {
          ours.add(measure("Turnstile", redis, turnstile));
          theirs.add(measure("Redisson", redis, redisson));
        } else {
          theirs.add(measure("Redisson", redis, redisson));
          ours.add(measure("Turnstile", redis, turnstile));
        }
      }
    } finally {
      turnstile.close();
      redisson.close();
    }
    List<Result> last = List.of(ours.get(ours.size() - 1), theirs.get(theirs.size() - 1));
    print(last);
    double[] opsT = ours.stream().mapToDouble(r -> r.opsPerSecond).toArray();
    double[] opsR = theirs.stream().mapToDouble(r -> r.opsPerSecond).toArray();
    double[] cpuT = ours.stream().mapToDouble(r -> r.cpuMicrosPerOp).toArray();
    double[] cpuR = theirs.stream().mapToDouble(r -> r.cpuMicrosPerOp).toArray();
    double[] cpuRatio = new double[ROUNDS];
    double[] opsRatio = new double[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
      cpuRatio[i] = cpuT[i] / cpuR[i];
      opsRatio[i] = opsT[i] / opsR[i];
    }
    System.out.printf(Locale.ROOT, "Read/write lock over %d rounds (the table above is the last): medians, Turnstile"
        + " | Redisson: operations/s %.0f | %.0f, Redis CPU/op %.1f | %.1f us; per-round ratios Turnstile / Redisson:"
        + " throughput %.2f, Redis CPU/op %.2f (rounds: %s)%n", ROUNDS, median(opsT), median(opsR), median(cpuT),
        median(cpuR), median(opsRatio), median(cpuRatio), java.util.Arrays.toString(
            java.util.Arrays.stream(cpuRatio).map(v -> Math.round(v * 100) / 100.0).toArray()));
    List<Result> all = new ArrayList<>(ours);
    all.addAll(theirs);
    return all;
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    java.util.Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static void spin(long nanos) {
    long until = System.nanoTime() + nanos;
    while (System.nanoTime() - until < 0) {
      Thread.onSpinWait();
    }
  }

  private static Result measure(String label, RedisCommands<String, String> redis, Side side) throws Exception {
    String name = "bench:rw:" + UUID.randomUUID();
    AtomicBoolean measuring = new AtomicBoolean();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicInteger readers = new AtomicInteger();
    AtomicInteger writers = new AtomicInteger();
    AtomicInteger maxReaders = new AtomicInteger();
    AtomicLong violations = new AtomicLong();
    AtomicLong reads = new AtomicLong();
    AtomicLong writes = new AtomicLong();
    List<LongSamples> readWaits = new ArrayList<>();
    List<LongSamples> writeWaits = new ArrayList<>();
    List<Thread> threads = new ArrayList<>();
    try {
      for (int c = 0; c < CLIENTS; c++) {
        ReadWriteLock rw = side.lock(c, name);
        for (int t = 0; t < THREADS; t++) {
          LongSamples rwaits = new LongSamples();
          LongSamples wwaits = new LongSamples();
          readWaits.add(rwaits);
          writeWaits.add(wwaits);
          Thread th = new Thread(() -> {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            while (!stop.get()) {
              boolean read = rnd.nextInt(100) < READ_PERCENT;
              long start = System.nanoTime();
              if (read) {
                rw.readLock().lock();
                long got = System.nanoTime();
                maxReaders.accumulateAndGet(readers.incrementAndGet(), Math::max);
                if (writers.get() != 0) {
                  violations.incrementAndGet();
                }
                spin(HOLD_NANOS);
                readers.decrementAndGet();
                rw.readLock().unlock();
                if (measuring.get()) {
                  reads.incrementAndGet();
                  rwaits.add(got - start);
                }
              } else {
                rw.writeLock().lock();
                long got = System.nanoTime();
                if (writers.incrementAndGet() != 1 || readers.get() != 0) {
                  violations.incrementAndGet();
                }
                spin(HOLD_NANOS);
                writers.decrementAndGet();
                rw.writeLock().unlock();
                if (measuring.get()) {
                  writes.incrementAndGet();
                  wwaits.add(got - start);
                }
              }
            }
          }, label + "-rw-" + c + "-" + t);
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
      RedisCpu cpuAfter = RedisCpu.take(redis);
      Map<String, Long> cmds = CommandStats.take(redis).since(before);
      stop.set(true);
      for (Thread t : threads) {
        t.join(10_000);
      }
      Result r = new Result();
      r.label = label;
      r.readsPerSecond = reads.get() / elapsed;
      r.writesPerSecond = writes.get() / elapsed;
      r.opsPerSecond = r.readsPerSecond + r.writesPerSecond;
      r.readP50Millis = merge(readWaits).percentile(0.5) / 1e6;
      LongSamples w = merge(writeWaits);
      r.writeP50Millis = w.percentile(0.5) / 1e6;
      r.writeP99Millis = w.percentile(0.99) / 1e6;
      r.maxReaders = maxReaders.get();
      r.violations = violations.get();
      long ops = reads.get() + writes.get();
      r.commandsPerOp = (double) CommandStats.total(cmds) / Math.max(1, ops);
      r.cpuMicrosPerOp = cpuAfter.microsPerOp(cpuBefore, ops);
      r.userMicrosPerOp = (cpuAfter.user - cpuBefore.user) * 1e6 / Math.max(1, ops);
      r.readEventsPerOp = (double) (cpuAfter.reads - cpuBefore.reads) / Math.max(1, ops);
      r.commands = cmds;
      r.ops = ops;
      System.out.printf(Locale.ROOT, "[bench] %-10s rw %d%% reads: %.0f ops/s (%.0f reads/s, %.0f writes/s)%n",
          label, READ_PERCENT, r.opsPerSecond, r.readsPerSecond, r.writesPerSecond);
      return r;
    } finally {
      stop.set(true);
    }
  }

  private static LongSamples merge(List<LongSamples> parts) {
    LongSamples all = new LongSamples();
    for (LongSamples p : parts) {
      for (int i = 0; i < p.size(); i++) {
        all.add(p.get(i));
      }
    }
    return all;
  }

  private static void print(List<Result> results) {
    System.out.println();
    System.out.printf(Locale.ROOT, "ReadWriteLock: %d%% reads, %.0f us hold, %d clients x %d threads, %d s%n",
        READ_PERCENT, HOLD_NANOS / 1e3, CLIENTS, THREADS, SECONDS);
    StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-36s", "metric"));
    for (Result r : results) {
      header.append(String.format(Locale.ROOT, " | %12s", r.label));
    }
    System.out.println(header);
    row(results, "operations/s", r -> String.format(Locale.ROOT, "%.0f", r.opsPerSecond));
    row(results, "reads/s", r -> String.format(Locale.ROOT, "%.0f", r.readsPerSecond));
    row(results, "writes/s", r -> String.format(Locale.ROOT, "%.0f", r.writesPerSecond));
    row(results, "read acquire p50 (ms)", r -> String.format(Locale.ROOT, "%.3f", r.readP50Millis));
    row(results, "write acquire p50 / p99 (ms)", r -> String.format(Locale.ROOT, "%.2f / %.2f", r.writeP50Millis, r.writeP99Millis));
    row(results, "max concurrent readers", r -> Integer.toString(r.maxReaders));
    row(results, "exclusion violations", r -> Long.toString(r.violations));
    row(results, "Redis cmds/op (incl. Lua)", r -> String.format(Locale.ROOT, "%.2f", r.commandsPerOp));
    row(results, "Redis CPU/op (us)", r -> String.format(Locale.ROOT, "%.1f", r.cpuMicrosPerOp));
    row(results, "  of which user (us)", r -> String.format(Locale.ROOT, "%.1f", r.userMicrosPerOp));
    row(results, "Redis read events/op", r -> String.format(Locale.ROOT, "%.2f", r.readEventsPerOp));
    if (results.size() == 2 && results.get(1).opsPerSecond > 0) {
      System.out.printf(Locale.ROOT, "Turnstile / Redisson read-mostly throughput: %.2f, Redis CPU/op: %.2f%n",
          results.get(0).opsPerSecond / results.get(1).opsPerSecond,
          results.get(0).cpuMicrosPerOp / results.get(1).cpuMicrosPerOp);
    }
    System.out.println("Redis commands per operation (INFO commandstats, incl. Lua-internal)");
    for (Result r : results) {
      java.util.Map<String, String> per = new java.util.LinkedHashMap<>();
      r.commands.entrySet().stream().sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
          .forEach(e -> per.put(e.getKey(), String.format(Locale.ROOT, "%.3f", (double) e.getValue() / Math.max(1, r.ops))));
      System.out.println("  " + r.label + ": " + per);
    }
  }

  private static void row(List<Result> results, String name, java.util.function.Function<Result, String> f) {
    StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-36s", name));
    for (Result r : results) {
      line.append(String.format(Locale.ROOT, " | %12s", f.apply(r)));
    }
    System.out.println(line);
  }
}
