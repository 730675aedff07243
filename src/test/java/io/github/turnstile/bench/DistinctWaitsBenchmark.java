package io.github.turnstile.bench;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Turnstile;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;
import java.util.function.ToDoubleFunction;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Distinct waits, run by {@code exec:java@bench} after the other parts
 * ({@code -Dbench.distinct=false} turns it off): N distinct locks, then N distinct one-permit
 * semaphores, each waited on by one thread of a single waiting client with default options, while
 * another client holds them all; then the holder releases them one at a time in a random order
 * (the same order for every implementation), each release starting at least
 * {@code bench.distinct.spacingMicros} after the previous one started.
 *
 * <p><b>Wake latency</b> = {@code System.nanoTime()} right after the waiter's {@code lock()} /
 * {@code acquire()} returned, minus {@code System.nanoTime()} right before the holder called
 * {@code unlock()} / {@code release()} on that primitive (one JVM; it includes the release's own
 * round trip). The targets for Turnstile: p99 ≤ 50 ms, max ≤ 250 ms.
 *
 * <p><b>Connections</b>, sampled every 20 ms ({@code CLIENT LIST}) from the waiters' start until the
 * last one acquired: the waiting client's, by name (Turnstile names its connections
 * {@code turnstile:<clientId>:...}, the client id being read from the name of the main connection
 * that appeared when the waiting client connected; the Redisson waiter is given a client name);
 * and those of both clients, as the growth over a baseline taken before either connected. Issue
 * 12's bound for Turnstile: {@code blockingPoolSize} + 2 = 18 on one node.
 *
 * <p>Turnstile: {@code DistributedLock} and {@code DistributedSemaphore} (capacity 1), default
 * options. Redisson: {@code RLock} and {@code RSemaphore} ({@code trySetPermits(1)}), default
 * {@code Config} (plus the client name). With defaults, Redisson's waiting client can subscribe to
 * at most 50 connections × 5 = 250 channels; its other waiters fail with
 * {@code RedisTimeoutException} ("Unable to acquire connection for subscription"), which is
 * reported as errors. <b>Redisson*</b> is Redisson with {@code subscriptionsPerConnection} raised
 * to ⌈N / 50⌉ (20 for N = 1000), so that every waiter can subscribe. No assertion: a waiter that
 * has not acquired 45 s after the last release is reported as missing.
 *
 * <p>System properties (defaults in brackets): {@code bench.distinct.n} [1000],
 * {@code bench.distinct.spacingMicros} [2000], {@code bench.distinct.seed} [random, printed],
 * {@code bench.distinct.impls} [turnstile,redisson,redisson*], {@code bench.distinct.kinds}
 * [locks,semaphores]. To run this part alone: {@code -Dbench.main=false -Dbench.semaphore=false
 * -Dbench.rw=false -Dbench.scaling=false}.
 */
final class DistinctWaitsBenchmark {
  private static final int N = Integer.getInteger("bench.distinct.n", 1000);
  private static final long SPACING_NANOS =
      TimeUnit.MICROSECONDS.toNanos(Long.getLong("bench.distinct.spacingMicros", 2000));
  private static final long SEED = Long.getLong("bench.distinct.seed", System.nanoTime());
  private static final String IMPLS = System.getProperty("bench.distinct.impls", "turnstile,redisson,redisson*");
  private static final String KINDS = System.getProperty("bench.distinct.kinds", "locks,semaphores");
  private static final long ACQUIRE_TIMEOUT_MILLIS = 45_000;
  private static final long SETTLE_MILLIS = 500;
  private static final long SAMPLE_MILLIS = 20;
  private static final int TURNSTILE_BOUND = 16 + 2; // default blockingPoolSize + main + subscriber
  /** Redisson's default {@code subscriptionConnectionPoolSize}. */
  private static final int REDISSON_SUBSCRIPTION_CONNECTIONS = 50;
  /** Redisson*: enough subscriptions per connection for N channels on the default 50 connections. */
  private static final int REDISSON_TUNED_SUBSCRIPTIONS =
      Math.max(5, (N + REDISSON_SUBSCRIPTION_CONNECTIONS - 1) / REDISSON_SUBSCRIPTION_CONNECTIONS);

  private DistinctWaitsBenchmark() {}

  /** One implementation × kind: the holder's and the waiters' side, index i names primitive i. */
  interface Side extends AutoCloseable {
    /** On the holder (bench main) thread. */
    void hold(int i);

    /** On the holder (bench main) thread. */
    void release(int i);

    /** On waiter thread i: wait (untimed). */
    void await(int i) throws InterruptedException;

    /** On waiter thread i, after {@link #await}. */
    void leave(int i);

    /** @return whether a {@code CLIENT LIST} name belongs to the waiting client */
    boolean waiterConnection(String name);

    @Override
    void close();
  }

  /** The figures of one run. */
  static final class Result {
    final String label;
    int acquired;
    int early;
    long errors;
    String firstError;
    double p50 = Double.NaN;
    double p90 = Double.NaN;
    double p99 = Double.NaN;
    double max = Double.NaN;
    long within50;
    long over250;
    long namedWaiting;
    long namedPeak;
    long addedPeak;
    double cmdsPerWake = Double.NaN;
    double releaseCallP50 = Double.NaN;
    long releaseWindowMillis;
    long allAcquiredMillis;
    String failure;

    Result(String label) {
      this.label = label;
    }
  }

  static void run(String uri, RedisCommands<String, String> redis) {
    System.out.println();
    System.out.printf(Locale.ROOT, "Distinct waits: %d distinct primitives, one waiting thread each in one"
        + " client (default options); released in one random order (seed %d), release starts >= %d us apart%n",
        N, SEED, TimeUnit.NANOSECONDS.toMicros(SPACING_NANOS));
    System.out.println("wake latency = waiter's lock()/acquire() return - holder's unlock()/release() call"
        + " (System.nanoTime, one JVM)");
    List<Integer> order = new ArrayList<>();
    for (int i = 0; i < N; i++) {
      order.add(i);
    }
    Collections.shuffle(order, new Random(SEED));
    for (String kind : KINDS.split(",")) {
      kind = kind.trim();
      if (kind.isEmpty()) {
        continue;
      }
      List<Result> results = new ArrayList<>();
      for (String impl : IMPLS.split(",")) {
        impl = impl.trim().toLowerCase(Locale.ROOT);
        if (impl.isEmpty()) {
          continue;
        }
        String label = impl.equals("turnstile") ? "Turnstile" : impl.equals("redisson") ? "Redisson"
            : impl.equals("redisson*") ? "Redisson*" : impl;
        Result r = new Result(label);
        results.add(r);
        String run = "bench:" + UUID.randomUUID() + ":distinct:" + kind;
        try {
          long baseline = CommandStats.settledConnectedClients(redis);
          measure(side(impl, kind, uri, redis, run), redis, order, r, baseline);
        } catch (Throwable t) {
          r.failure = t.toString();
          System.out.println("[bench] distinct " + kind + " " + label + " FAILED: " + t);
          t.printStackTrace(System.out);
        }
        System.out.printf(Locale.ROOT, "[bench] distinct %-10s %-10s acquired %d/%d, p50 %.1f ms p99 %.1f ms"
            + " max %.1f ms, connections %d (named)%n", kind, label, r.acquired, N, r.p50, r.p99, r.max,
            r.namedPeak);
      }
      print(kind, results);
    }
  }

  // ------------------------------------------------------------------ sides

  private static Side side(String impl, String kind, String uri, RedisCommands<String, String> redis,
      String run) {
    boolean locks;
    switch (kind) {
      case "locks":
        locks = true;
        break;
      case "semaphores":
        locks = false;
        break;
      default:
        throw new IllegalArgumentException("unknown kind in bench.distinct.kinds: " + kind);
    }
    switch (impl) {
      case "turnstile": {
        Turnstile holder = Turnstile.connect(uri);
        Set<String> before = names(redis);
        Turnstile waiter = Turnstile.connect(uri);
        return new TurnstileSide(holder, waiter, turnstilePrefix(redis, before), locks, run);
      }
      case "redisson":
      case "redisson*": {
        String waiterName = "bench-distinct-waiter-" + UUID.randomUUID();
        int subscriptions = impl.equals("redisson*") ? REDISSON_TUNED_SUBSCRIPTIONS : 0;
        return new RedissonSide(redisson(uri, null, 0), redisson(uri, waiterName, subscriptions), waiterName, locks,
            run);
      }
      default:
        throw new IllegalArgumentException("unknown implementation in bench.distinct.impls: " + impl);
    }
  }

  /** Turnstile: {@code DistributedLock}, or {@code DistributedSemaphore} with capacity 1. */
  static final class TurnstileSide implements Side {
    private final Turnstile holder;
    private final Turnstile waiter;
    private final String prefix;
    private final boolean locks;
    private final DistributedLock[] heldLocks;
    private final DistributedLock[] wantedLocks;
    private final DistributedSemaphore[] heldSems;
    private final DistributedSemaphore[] wantedSems;

    TurnstileSide(Turnstile holder, Turnstile waiter, String prefix, boolean locks, String run) {
      this.holder = holder;
      this.waiter = waiter;
      this.prefix = prefix;
      this.locks = locks;
      heldLocks = new DistributedLock[locks ? N : 0];
      wantedLocks = new DistributedLock[locks ? N : 0];
      heldSems = new DistributedSemaphore[locks ? 0 : N];
      wantedSems = new DistributedSemaphore[locks ? 0 : N];
      for (int i = 0; i < N; i++) {
        if (locks) {
          heldLocks[i] = holder.lock(run + ":" + i);
          wantedLocks[i] = waiter.lock(run + ":" + i);
        } else {
          heldSems[i] = holder.semaphore(run + ":" + i, 1);
          wantedSems[i] = waiter.semaphore(run + ":" + i, 1);
        }
      }
    }

    @Override
    public void hold(int i) {
      if (locks) {
        heldLocks[i].lock();
      } else if (!heldSems[i].tryAcquire()) {
        throw new IllegalStateException("the holder could not take semaphore " + i);
      }
    }

    @Override
    public void release(int i) {
      if (locks) {
        heldLocks[i].unlock();
      } else {
        heldSems[i].release();
      }
    }

    @Override
    public void await(int i) throws InterruptedException {
      if (locks) {
        wantedLocks[i].lock();
      } else {
        wantedSems[i].acquire();
      }
    }

    @Override
    public void leave(int i) {
      if (locks) {
        wantedLocks[i].unlock();
      } else {
        wantedSems[i].release();
      }
    }

    @Override
    public boolean waiterConnection(String name) {
      return name.equals(prefix) || name.startsWith(prefix + ":");
    }

    @Override
    public void close() {
      waiter.close();
      holder.close();
    }
  }

  /** Redisson: {@code RLock}, or {@code RSemaphore} after {@code trySetPermits(1)}. */
  static final class RedissonSide implements Side {
    private final RedissonClient holder;
    private final RedissonClient waiter;
    private final String waiterName;
    private final boolean locks;
    private final RLock[] heldLocks;
    private final RLock[] wantedLocks;
    private final RSemaphore[] heldSems;
    private final RSemaphore[] wantedSems;

    RedissonSide(RedissonClient holder, RedissonClient waiter, String waiterName, boolean locks, String run) {
      this.holder = holder;
      this.waiter = waiter;
      this.waiterName = waiterName;
      this.locks = locks;
      heldLocks = new RLock[locks ? N : 0];
      wantedLocks = new RLock[locks ? N : 0];
      heldSems = new RSemaphore[locks ? 0 : N];
      wantedSems = new RSemaphore[locks ? 0 : N];
      for (int i = 0; i < N; i++) {
        if (locks) {
          heldLocks[i] = holder.getLock(run + ":" + i);
          wantedLocks[i] = waiter.getLock(run + ":" + i);
        } else {
          heldSems[i] = holder.getSemaphore(run + ":" + i);
          heldSems[i].trySetPermits(1);
          wantedSems[i] = waiter.getSemaphore(run + ":" + i);
        }
      }
    }

    @Override
    public void hold(int i) {
      if (locks) {
        heldLocks[i].lock();
      } else if (!heldSems[i].tryAcquire()) {
        throw new IllegalStateException("the holder could not take semaphore " + i);
      }
    }

    @Override
    public void release(int i) {
      if (locks) {
        heldLocks[i].unlock();
      } else {
        heldSems[i].release();
      }
    }

    @Override
    public void await(int i) throws InterruptedException {
      if (locks) {
        wantedLocks[i].lock();
      } else {
        wantedSems[i].acquire();
      }
    }

    @Override
    public void leave(int i) {
      if (locks) {
        wantedLocks[i].unlock();
      } else {
        wantedSems[i].release();
      }
    }

    @Override
    public boolean waiterConnection(String name) {
      return name.equals(waiterName);
    }

    @Override
    public void close() {
      waiter.shutdown(0, 5, TimeUnit.SECONDS);
      holder.shutdown(0, 5, TimeUnit.SECONDS);
    }
  }

  /** @param subscriptionsPerConnection 0: Redisson's default (5) */
  private static RedissonClient redisson(String uri, String clientName, int subscriptionsPerConnection) {
    Config config = new Config();
    config.useSingleServer().setAddress(uri);
    if (clientName != null) {
      config.useSingleServer().setClientName(clientName);
    }
    if (subscriptionsPerConnection > 0) {
      config.useSingleServer().setSubscriptionsPerConnection(subscriptionsPerConnection);
    }
    return Redisson.create(config);
  }

  /** @return {@code turnstile:<clientId>} of the Turnstile whose main connection is new since {@code before} */
  private static String turnstilePrefix(RedisCommands<String, String> redis, Set<String> before) {
    for (String name : names(redis)) {
      if (!before.contains(name) && name.startsWith("turnstile:") && name.endsWith(":main")) {
        return name.substring(0, name.length() - ":main".length());
      }
    }
    throw new IllegalStateException("the waiting Turnstile's main connection is not in CLIENT LIST");
  }

  private static Set<String> names(RedisCommands<String, String> redis) {
    Set<String> out = new HashSet<>();
    for (String line : redis.clientList().split("\r?\n")) {
      String name = nameOf(line);
      if (name != null && !name.isEmpty()) {
        out.add(name);
      }
    }
    return out;
  }

  private static String nameOf(String clientListLine) {
    for (String field : clientListLine.split(" ")) {
      if (field.startsWith("name=")) {
        return field.substring("name=".length());
      }
    }
    return null;
  }

  // ------------------------------------------------------------------ measurement

  /** What one run's threads share. */
  private static final class Run {
    final long[] releaseStart = new long[N];
    final long[] releaseCall = new long[N];
    final boolean[] released = new boolean[N];
    final AtomicLongArray acquiredAt = new AtomicLongArray(N);
    final AtomicInteger acquired = new AtomicInteger();
    final AtomicLong errors = new AtomicLong();
    final ConcurrentLinkedQueue<String> firstErrors = new ConcurrentLinkedQueue<>();
    final Thread[] waiters = new Thread[N];
    final AtomicLong namedPeak = new AtomicLong();
    final AtomicLong totalPeak = new AtomicLong();
    volatile boolean stop;
  }

  /** @param baseline {@code connected_clients} before either client connected */
  private static void measure(Side side, RedisCommands<String, String> redis, List<Integer> order, Result r,
      long baseline) throws InterruptedException {
    Run run = new Run();
    try (side) {
      try {
        measure(side, redis, order, r, baseline, run);
      } finally {
        run.stop = true;
        for (int i = 0; i < N; i++) {
          if (!run.released[i]) {
            try {
              side.release(i);
            } catch (RuntimeException e) {
              // not held: nothing to give back
            }
          }
        }
      }
    }
  }

  private static void measure(Side side, RedisCommands<String, String> redis, List<Integer> order, Result r,
      long baseline, Run run) throws InterruptedException {
    for (int i = 0; i < N; i++) {
      side.hold(i);
    }
    Thread sampler = new Thread(() -> {
      while (!run.stop) {
        try {
          sample(side, redis, run);
          Thread.sleep(SAMPLE_MILLIS);
        } catch (InterruptedException e) {
          return;
        } catch (RuntimeException e) {
          System.out.println("[bench] distinct: sampling connections failed: " + e);
        }
      }
    }, "bench-distinct-sampler");
    sampler.setDaemon(true);
    sampler.start();
    for (int i = 0; i < N; i++) {
      int id = i;
      run.waiters[i] = new Thread(null, () -> {
        try {
          side.await(id);
          run.acquiredAt.set(id, System.nanoTime());
          run.acquired.incrementAndGet();
          side.leave(id);
        } catch (Throwable e) {
          if (run.errors.getAndIncrement() < 3) {
            run.firstErrors.add("waiter " + id + ": " + e);
          }
        }
      }, "bench-distinct-waiter-" + i, 256 * 1024);
      run.waiters[i].setDaemon(true);
      run.waiters[i].start();
    }
    awaitAllWaiting(run.waiters);
    awaitQuietRedis(redis);
    Thread.sleep(SETTLE_MILLIS);
    r.namedWaiting = run.namedPeak.get();
    if (run.acquired.get() != 0) {
      System.out.println("[bench] distinct: WARNING " + run.acquired.get() + " waiters acquired before any release");
    }

    CommandStats before = CommandStats.take(redis);
    long windowStart = System.nanoTime();
    long next = windowStart;
    for (int i : order) {
      long now;
      while ((now = System.nanoTime()) - next < 0) {
        LockSupport.parkNanos(next - now);
      }
      run.releaseStart[i] = System.nanoTime();
      side.release(i);
      run.releaseCall[i] = System.nanoTime() - run.releaseStart[i];
      run.released[i] = true;
      next = run.releaseStart[i] + SPACING_NANOS;
    }
    r.releaseWindowMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - windowStart);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ACQUIRE_TIMEOUT_MILLIS);
    while (run.acquired.get() + run.errors.get() < N && System.nanoTime() - deadline < 0) {
      Thread.sleep(5);
    }
    r.allAcquiredMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - windowStart);
    for (Thread w : run.waiters) {
      w.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
    }
    Map<String, Long> cmds = CommandStats.take(redis).since(before);
    run.stop = true;
    sampler.join(5000);
    sample(side, redis, run);

    LongSamples latencies = new LongSamples();
    for (int i = 0; i < N; i++) {
      long at = run.acquiredAt.get(i);
      if (at != 0) {
        latencies.add(at - run.releaseStart[i]);
        if (at - run.releaseStart[i] < 0) {
          r.early++;
        }
      }
    }
    LongSamples calls = new LongSamples();
    for (long c : run.releaseCall) {
      calls.add(c);
    }
    r.acquired = run.acquired.get();
    r.errors = run.errors.get();
    r.firstError = run.firstErrors.isEmpty() ? null : String.join("; ", run.firstErrors);
    if (latencies.size() > 0) {
      r.p50 = latencies.percentile(0.50) / 1e6;
      r.p90 = latencies.percentile(0.90) / 1e6;
      r.p99 = latencies.percentile(0.99) / 1e6;
      r.max = latencies.max() / 1e6;
    }
    r.within50 = latencies.size() - latencies.countAbove(TimeUnit.MILLISECONDS.toNanos(50));
    r.over250 = latencies.countAbove(TimeUnit.MILLISECONDS.toNanos(250));
    r.namedPeak = run.namedPeak.get();
    r.addedPeak = run.totalPeak.get() - baseline;
    r.cmdsPerWake = r.acquired == 0 ? Double.NaN : (double) CommandStats.total(cmds) / r.acquired;
    r.releaseCallP50 = calls.percentile(0.5) / 1e6;
  }

  private static void sample(Side side, RedisCommands<String, String> redis, Run run) {
    long named = 0;
    long total = 0;
    for (String line : redis.clientList().split("\r?\n")) {
      if (line.isBlank()) {
        continue;
      }
      total++;
      String name = nameOf(line);
      if (name != null && side.waiterConnection(name)) {
        named++;
      }
    }
    run.namedPeak.accumulateAndGet(named, Math::max);
    run.totalPeak.accumulateAndGet(total, Math::max);
  }

  private static void awaitAllWaiting(Thread[] waiters) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    int quietChecks = 0;
    while (quietChecks < 3) {
      if (System.nanoTime() - deadline > 0) {
        System.out.println("[bench] distinct: WARNING waiter threads did not all wait within 60 s; releasing anyway");
        return;
      }
      Thread.sleep(50);
      boolean all = true;
      for (Thread t : waiters) {
        Thread.State s = t.getState();
        if (s != Thread.State.WAITING && s != Thread.State.TIMED_WAITING) {
          all = false;
          break;
        }
      }
      quietChecks = all ? quietChecks + 1 : 0;
    }
  }

  /** Best effort (at most 10 s): until Redis ran no command for 200 ms besides INFO and CLIENT. */
  private static void awaitQuietRedis(RedisCommands<String, String> redis) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    long last = quietCount(redis);
    while (System.nanoTime() - deadline < 0) {
      Thread.sleep(200);
      long now = quietCount(redis);
      if (now == last) {
        return;
      }
      last = now;
    }
    System.out.println("[bench] distinct: Redis did not go quiet within 10 s; releasing anyway");
  }

  private static long quietCount(RedisCommands<String, String> redis) {
    long sum = 0;
    for (Map.Entry<String, Long> e : CommandStats.take(redis).calls.entrySet()) {
      if (!e.getKey().startsWith("client")) {
        sum += e.getValue();
      }
    }
    return sum;
  }

  // ------------------------------------------------------------------ report

  private static void print(String kind, List<Result> results) {
    System.out.println();
    System.out.printf(Locale.ROOT, "Distinct waits: %d %s%n", N, kind);
    StringBuilder h = new StringBuilder(String.format(Locale.ROOT, "%-52s", "metric"));
    for (Result r : results) {
      h.append(String.format(Locale.ROOT, " | %12s", r.label));
    }
    System.out.println(h);
    System.out.println("-".repeat(h.length()));
    rowText(results, "waiters acquired (of " + N + ")", r -> Integer.toString(r.acquired));
    row(results, "wake latency p50 (ms)", r -> r.p50, "%.1f");
    row(results, "wake latency p90 (ms)", r -> r.p90, "%.1f");
    row(results, "wake latency p99 (ms)   [target: <= 50]", r -> r.p99, "%.1f");
    row(results, "wake latency max (ms)   [target: <= 250]", r -> r.max, "%.1f");
    rowText(results, "wakes <= 50 ms / > 250 ms", r -> r.within50 + " / " + r.over250);
    rowText(results, "waiter connections while waiting (named)", r -> Long.toString(r.namedWaiting));
    rowText(results, "waiter connections peak (named)  [target: <= "
        + TURNSTILE_BOUND + "]", r -> Long.toString(r.namedPeak));
    rowText(results, "connections of both clients (CLIENT LIST, peak)", r -> Long.toString(r.addedPeak));
    row(results, "Redis cmds in release phase / waiters acquired", r -> r.cmdsPerWake, "%.1f");
    row(results, "holder's release call p50 (ms)", r -> r.releaseCallP50, "%.2f");
    rowText(results, "release window / all acquired after (ms)",
        r -> r.releaseWindowMillis + " / " + r.allAcquiredMillis);
    rowText(results, "errors / acquired before release", r -> r.errors + " / " + r.early);
    if (results.stream().anyMatch(r -> r.label.equals("Redisson*"))) {
      System.out.printf(Locale.ROOT, "  Redisson* = Redisson with subscriptionsPerConnection = %d (default 5), so that"
          + " its %d subscription connections (default) can carry %d channels%n", REDISSON_TUNED_SUBSCRIPTIONS,
          REDISSON_SUBSCRIPTION_CONNECTIONS, N);
    }
    for (Result r : results) {
      if (r.firstError != null) {
        System.out.println("  " + r.label + " first errors: " + r.firstError);
      }
      if (r.failure != null) {
        System.out.println("  " + r.label + " FAILED: " + r.failure);
      }
    }
  }

  private static void row(List<Result> results, String metric, ToDoubleFunction<Result> f, String format) {
    rowText(results, metric, r -> {
      double v = f.applyAsDouble(r);
      return Double.isNaN(v) ? "n/a" : String.format(Locale.ROOT, format, v);
    });
  }

  private static void rowText(List<Result> results, String metric, Function<Result, String> f) {
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-52s", metric));
    for (Result r : results) {
      sb.append(String.format(Locale.ROOT, " | %12s", f.apply(r)));
    }
    System.out.println(sb);
  }
}
