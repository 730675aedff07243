package io.github.turnstile.bench;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.LockHold;
import io.github.turnstile.Turnstile;
import io.lettuce.core.api.sync.RedisCommands;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Asynchronous acquisition, run by {@code exec:java@bench} ({@code -Dbench.async=false}
 * turns it off; to run it alone: {@code -Dbench.main=false -Dbench.semaphore=false -Dbench.rw=false
 * -Dbench.scaling=false -Dbench.distinct=false}).
 *
 * <p><b>Hot lock</b>: {@code bench.async.clients} clients × {@code bench.async.acquirers} acquirers
 * [4 × 4] contend for one lock for {@code bench.async.seconds} [5] after 1 s of warm-up; each
 * acquirer loops acquire → check exclusion → release (awaited) → acquire, holding for no time.
 * Rows: Turnstile {@code lockAsync()} (a {@code CompletableFuture} chain per acquirer, no thread),
 * Turnstile {@code lock()} (a thread per acquirer), Redisson {@code RLock.lockAsync(id)} /
 * {@code unlockAsync(id)} (a chain per acquirer, one id each), Redisson {@code lock()} (a thread per
 * acquirer). Figures: acquisitions/s; hand-off latency (from the release call to the next grant, to
 * anyone); wait per acquisition; Jain's fairness index over the acquirers' counts; threads added
 * (the JVM's thread count during the run minus before the clients connected: client threads plus
 * acquirer threads); Redis commands per acquisition (INFO commandstats, Lua included); overlaps.
 *
 * <p><b>Pending</b>: one client holds {@code bench.async.names} [100] locks; another client starts
 * {@code bench.async.pending} [10000] async acquisitions of them and they all wait. Threads added
 * and heap per pending acquisition (used heap after GC, before and after); then the holds are
 * released, every grant is released at once, and the time until all were granted. Turnstile
 * {@code lockAsync()} against Redisson {@code lockAsync(id)} (with {@code subscriptionsPerConnection}
 * raised so that every name can be subscribed: Redisson waits by pub/sub per name).
 */
final class AsyncBenchmark {
  private static final int CLIENTS = Integer.getInteger("bench.async.clients", 4);
  private static final int ACQUIRERS = Integer.getInteger("bench.async.acquirers", 4);
  private static final int SECONDS = Integer.getInteger("bench.async.seconds", 5);
  private static final int PENDING = Integer.getInteger("bench.async.pending", 10_000);
  private static final int NAMES = Integer.getInteger("bench.async.names", 100);

  private AsyncBenchmark() {}

  /** One acquirer's operations: acquire (completing with a fencing token, or -1), release. */
  interface Acquirer {
    CompletionStage<Long> acquire();

    CompletionStage<?> release();
  }

  /** One client of an implementation. */
  interface Client extends AutoCloseable {
    Acquirer acquirer(String name);

    @Override
    void close();
  }

  /** A row: an implementation and whether its acquirers are threads (blocking) or chains (async). */
  static final class Row {
    final String label;
    final boolean blocking;
    final Function<String, Client> connect;

    Row(String label, boolean blocking, Function<String, Client> connect) {
      this.label = label;
      this.blocking = blocking;
      this.connect = connect;
    }
  }

  static void run(String uri, RedisCommands<String, String> redis) throws Exception {
    System.out.println();
    System.out.printf(Locale.ROOT, "== Async acquisition: hot lock, %d clients x %d acquirers, %d s;"
        + " then %d pending acquisitions on %d names%n", CLIENTS, ACQUIRERS, SECONDS, PENDING, NAMES);
    List<Row> rows = List.of(
        new Row("Turnstile lockAsync", false, AsyncBenchmark::turnstileAsync),
        new Row("Turnstile lock()", true, AsyncBenchmark::turnstileBlocking),
        new Row("Redisson lockAsync", false, u -> redissonAsync(u, 5)),
        new Row("Redisson lock()", true, u -> redissonBlocking(u)));
    List<String> lines = new ArrayList<>();
    for (Row row : rows) {
      try {
        lines.add(hot(row, uri, redis));
      } catch (Exception e) {
        lines.add(String.format(Locale.ROOT, "| %s | failed: %s |", row.label, e));
        e.printStackTrace(System.out);
      }
    }
    System.out.println();
    System.out.println("| hot lock | acquisitions/s | hand-off p50 / p99 (ms) | wait p50 / p99 (ms) | Jain | threads added"
        + " | Redis cmds/acq | overlaps |");
    System.out.println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    lines.forEach(System.out::println);

    List<String> pending = new ArrayList<>();
    pending.add(pending("Turnstile lockAsync", AsyncBenchmark::turnstileAsync, uri));
    int perConnection = Math.max(5, (NAMES + 49) / 50 + 1);
    pending.add(pending("Redisson lockAsync", u -> redissonAsync(u, perConnection), uri));
    System.out.println();
    System.out.println("| " + PENDING + " pending on " + NAMES + " names | threads added | heap per pending (bytes)"
        + " | drained in (ms) | grants/s |");
    System.out.println("| --- | ---: | ---: | ---: | ---: |");
    pending.forEach(System.out::println);
  }

  // ------------------------------------------------------------------ implementations

  static Client turnstileAsync(String uri) {
    Turnstile t = Turnstile.connect(uri);
    return new Client() {
      @Override
      public Acquirer acquirer(String name) {
        DistributedLock lock = t.lock(name);
        return new Acquirer() {
          private LockHold hold;

          @Override
          public CompletionStage<Long> acquire() {
            return lock.lockAsync().thenApply(h -> {
              hold = h;
              return h.fencingToken();
            });
          }

          @Override
          public CompletionStage<?> release() {
            return hold.release();
          }
        };
      }

      @Override
      public void close() {
        t.close();
      }
    };
  }

  static Client turnstileBlocking(String uri) {
    Turnstile t = Turnstile.connect(uri);
    return new Client() {
      @Override
      public Acquirer acquirer(String name) {
        DistributedLock lock = t.lock(name);
        return new Acquirer() {
          @Override
          public CompletionStage<Long> acquire() {
            lock.lock();
            return CompletableFuture.completedFuture(lock.fencingToken());
          }

          @Override
          public CompletionStage<?> release() {
            lock.unlock();
            return CompletableFuture.completedFuture(null);
          }
        };
      }

      @Override
      public void close() {
        t.close();
      }
    };
  }

  private static final AtomicLong REDISSON_IDS = new AtomicLong(1_000_000);

  static Client redissonAsync(String uri, int subscriptionsPerConnection) {
    Config config = new Config();
    config.useSingleServer().setAddress(uri).setSubscriptionsPerConnection(subscriptionsPerConnection);
    RedissonClient r = Redisson.create(config);
    return new Client() {
      @Override
      public Acquirer acquirer(String name) {
        RLock lock = r.getLock(name);
        long id = REDISSON_IDS.incrementAndGet(); // lockAsync(id): the "thread" the hold belongs to
        return new Acquirer() {
          @Override
          public CompletionStage<Long> acquire() {
            return lock.lockAsync(id).thenApply(v -> -1L);
          }

          @Override
          public CompletionStage<?> release() {
            return lock.unlockAsync(id);
          }
        };
      }

      @Override
      public void close() {
        r.shutdown(0, 5, TimeUnit.SECONDS);
      }
    };
  }

  static Client redissonBlocking(String uri) {
    Config config = new Config();
    config.useSingleServer().setAddress(uri);
    RedissonClient r = Redisson.create(config);
    return new Client() {
      @Override
      public Acquirer acquirer(String name) {
        RLock lock = r.getLock(name);
        return new Acquirer() {
          @Override
          public CompletionStage<Long> acquire() {
            lock.lock();
            return CompletableFuture.completedFuture(-1L);
          }

          @Override
          public CompletionStage<?> release() {
            lock.unlock();
            return CompletableFuture.completedFuture(null);
          }
        };
      }

      @Override
      public void close() {
        r.shutdown(0, 5, TimeUnit.SECONDS);
      }
    };
  }

  // ------------------------------------------------------------------ hot lock

  /** Shared state of one hot-lock run. */
  static final class Hot {
    final AtomicInteger inside = new AtomicInteger();
    final AtomicLong overlaps = new AtomicLong();
    final AtomicLong errors = new AtomicLong();
    final AtomicLong lastToken = new AtomicLong(Long.MIN_VALUE);
    final AtomicLong tokenViolations = new AtomicLong();
    volatile long lastRelease;
    volatile boolean measuring;
    volatile boolean stop;
    final LongSamples handoffs = new LongSamples(); // guarded by itself
    final LongSamples waits = new LongSamples(); // guarded by handoffs
  }

  private static String hot(Row row, String uri, RedisCommands<String, String> redis) throws Exception {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    int threadsBefore = threads.getThreadCount();
    String name = "bench:async:" + UUID.randomUUID();
    List<Client> clients = new ArrayList<>();
    Hot hot = new Hot();
    int n = CLIENTS * ACQUIRERS;
    long[] counts = new long[n];
    List<Thread> workers = new ArrayList<>();
    List<CompletableFuture<Void>> chains = new ArrayList<>();
    int threadsDuring;
    CommandStats before;
    CommandStats after;
    long measuredNanos;
    try {
      for (int c = 0; c < CLIENTS; c++) {
        clients.add(row.connect.apply(uri));
      }
      for (int c = 0; c < CLIENTS; c++) {
        for (int a = 0; a < ACQUIRERS; a++) {
          int id = c * ACQUIRERS + a;
          Acquirer acq = clients.get(c).acquirer(name);
          if (row.blocking) {
            Thread t = new Thread(() -> {
              while (!hot.stop) {
                long start = System.nanoTime();
                try {
                  long token = acq.acquire().toCompletableFuture().join();
                  inside(hot, id, counts, start, token);
                  acq.release().toCompletableFuture().join();
                } catch (RuntimeException e) {
                  hot.errors.incrementAndGet();
                }
              }
            }, "bench-async-" + id);
            t.setDaemon(true);
            workers.add(t);
          } else {
            CompletableFuture<Void> done = new CompletableFuture<>();
            chains.add(done);
            workers.add(null);
            loopLater(hot, acq, id, counts, done);
          }
        }
      }
      for (Thread t : workers) {
        if (t != null) {
          t.start();
        }
      }
      Thread.sleep(1000);
      synchronized (hot.handoffs) {
        java.util.Arrays.fill(counts, 0);
        hot.measuring = true;
      }
      before = CommandStats.take(redis);
      long start = System.nanoTime();
      Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS));
      threadsDuring = threads.getThreadCount();
      synchronized (hot.handoffs) {
        hot.measuring = false;
      }
      measuredNanos = System.nanoTime() - start;
      after = CommandStats.take(redis);
      hot.stop = true;
      for (Thread t : workers) {
        if (t != null) {
          t.join(30_000);
        }
      }
      for (CompletableFuture<Void> c : chains) {
        c.get(30, TimeUnit.SECONDS);
      }
    } finally {
      hot.stop = true;
      for (Client c : clients) {
        c.close();
      }
    }
    long total = 0;
    for (long c : counts) {
      total += c;
    }
    Map<String, Long> cmds = after.since(before);
    double perSec = total / (measuredNanos / 1e9);
    String line;
    synchronized (hot.handoffs) {
      line = String.format(Locale.ROOT, "| %s | %.0f | %.2f / %.2f | %.2f / %.2f | %.4f | %d | %.1f | %d |", row.label,
          perSec, hot.handoffs.percentile(0.5) / 1e6, hot.handoffs.percentile(0.99) / 1e6,
          hot.waits.percentile(0.5) / 1e6, hot.waits.percentile(0.99) / 1e6, jain(counts),
          threadsDuring - threadsBefore, (double) CommandStats.total(cmds) / Math.max(1, total), hot.overlaps.get());
    }
    if (Boolean.getBoolean("bench.async.counts")) {
      System.out.println("[bench] async " + row.label + " acquisitions per acquirer: " + java.util.Arrays.toString(counts));
    }
    System.out.println("[bench] async " + line + (hot.errors.get() > 0 ? " errors " + hot.errors.get() : "")
        + (hot.tokenViolations.get() > 0 ? " fencing violations " + hot.tokenViolations.get() : ""));
    return line;
  }

  /** Starts an async acquirer's chain off the caller's stack. */
  private static void loopLater(Hot hot, Acquirer acq, int id, long[] counts, CompletableFuture<Void> done) {
    CompletableFuture.runAsync(() -> loop(hot, acq, id, counts, done));
  }

  private static void loop(Hot hot, Acquirer acq, int id, long[] counts, CompletableFuture<Void> done) {
    if (hot.stop) {
      done.complete(null);
      return;
    }
    long start = System.nanoTime();
    acq.acquire().whenComplete((token, e) -> {
      if (e != null) {
        hot.errors.incrementAndGet();
        loopLater(hot, acq, id, counts, done);
        return;
      }
      inside(hot, id, counts, start, token);
      acq.release().whenComplete((v, x) -> {
        if (x != null) {
          hot.errors.incrementAndGet();
        }
        loop(hot, acq, id, counts, done);
      });
    });
  }

  /** The critical section: check exclusion and tokens, record, and note the release time. */
  private static void inside(Hot hot, int id, long[] counts, long start, long token) {
    long now = System.nanoTime();
    if (hot.inside.incrementAndGet() != 1) {
      hot.overlaps.incrementAndGet();
    }
    if (token >= 0 && token <= hot.lastToken.getAndSet(token)) {
      hot.tokenViolations.incrementAndGet();
    }
    long last = hot.lastRelease;
    synchronized (hot.handoffs) {
      if (hot.measuring) {
        counts[id]++;
        hot.waits.add(now - start);
        if (last != 0) {
          hot.handoffs.add(now - last);
        }
      }
    }
    hot.inside.decrementAndGet();
    hot.lastRelease = System.nanoTime();
  }

  private static double jain(long[] counts) {
    double sum = 0;
    double squares = 0;
    for (long c : counts) {
      sum += c;
      squares += (double) c * c;
    }
    return squares == 0 ? 0 : sum * sum / (counts.length * squares);
  }

  // ------------------------------------------------------------------ pending

  private static String pending(String label, Function<String, Client> connect, String uri) {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    String run = UUID.randomUUID().toString().substring(0, 8);
    try (Client holder = connect.apply(uri); Client waiter = connect.apply(uri)) {
      Acquirer[] held = new Acquirer[NAMES];
      for (int i = 0; i < NAMES; i++) {
        held[i] = holder.acquirer("bench:pending:" + run + ":" + i);
        held[i].acquire().toCompletableFuture().get(30, TimeUnit.SECONDS);
      }
      // warm the waiter up (its subscriber connection, classes)
      Acquirer warmHolder = holder.acquirer("bench:pending:" + run + ":warm");
      warmHolder.acquire().toCompletableFuture().get(30, TimeUnit.SECONDS);
      CompletableFuture<Long> warm = waiter.acquirer("bench:pending:" + run + ":warm").acquire().toCompletableFuture();
      Thread.sleep(300);
      warmHolder.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      warm.get(30, TimeUnit.SECONDS);
      int threadsBefore = threads.getThreadCount();
      long heapBefore = usedHeapAfterGc(memory);
      Acquirer[] acquirers = new Acquirer[PENDING];
      List<CompletableFuture<Long>> futures = new ArrayList<>(PENDING);
      for (int i = 0; i < PENDING; i++) {
        acquirers[i] = waiter.acquirer("bench:pending:" + run + ":" + (i % NAMES));
        futures.add(acquirers[i].acquire().toCompletableFuture());
      }
      Thread.sleep(2000);
      long heapPending = usedHeapAfterGc(memory);
      int threadsPending = threads.getThreadCount();
      long early = futures.stream().filter(CompletableFuture::isDone).count();
      List<CompletableFuture<?>> done = new ArrayList<>(PENDING);
      for (int i = 0; i < PENDING; i++) {
        Acquirer a = acquirers[i];
        done.add(futures.get(i).thenCompose(token -> a.release()));
      }
      long start = System.nanoTime();
      for (Acquirer h : held) {
        h.release();
      }
      CompletableFuture.allOf(done.toArray(new CompletableFuture<?>[0])).get(600, TimeUnit.SECONDS);
      long drainMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      String line = String.format(Locale.ROOT, "| %s | %d | %.0f | %d | %.0f |", label, threadsPending - threadsBefore,
          (double) (heapPending - heapBefore) / PENDING, drainMs, PENDING * 1000.0 / Math.max(1, drainMs));
      System.out.println("[bench] async pending " + line + (early > 0 ? " (" + early + " completed early)" : ""));
      return line;
    } catch (Exception e) {
      e.printStackTrace(System.out);
      return "| " + label + " | failed: " + e + " |";
    }
  }

  private static long usedHeapAfterGc(MemoryMXBean memory) throws InterruptedException {
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(100);
    }
    return memory.getHeapMemoryUsage().getUsed();
  }
}
