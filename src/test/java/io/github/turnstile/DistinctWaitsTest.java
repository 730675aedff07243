package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Many <em>distinct</em> primitives waited on from one JVM with default options.
 *
 * <p>A holder client (its own {@link Turnstile}) takes N distinct locks (or the one permit of N
 * distinct semaphores). A waiter client (another {@link Turnstile}, default options, so
 * {@code blockingPoolSize} 16) starts one thread per primitive, each waiting in {@code lock()} /
 * {@code acquire()} on its own primitive. Once every thread waits, the holder releases them one
 * at a time in a random order, each release starting at least {@code spacingMicros} after the
 * previous one started, so that every wake-up is timed against its own release.
 *
 * <p><b>Wake latency</b> of a waiter = {@code System.nanoTime()} read by the waiter right after its
 * {@code lock()} / {@code acquire()} returned, minus {@code System.nanoTime()} read by the holder
 * right <em>before</em> it called {@code unlock()} / {@code release()} on that primitive (so it
 * includes the release's own round trip). Both instants are read in this JVM.
 *
 * <p>While the threads wait and until the last one has acquired, the server's connections are
 * sampled every 20 ms ({@code CLIENT LIST}): those named for the waiter client
 * ({@code turnstile:<clientId>} or {@code turnstile:<clientId>:*}), and all of them, against a
 * baseline taken before the waiter client connected (the holder never waits, so growth is the
 * waiter's, named or not).
 *
 * <p>Asserted: every waiter acquires (none before its release, none left waiting 45 s after the
 * last release); the waiter client never has more than {@code blockingPoolSize + 2} connections
 * (main + subscriber + pool, one node), counted by name and, unless the server is a shared
 * {@code REDIS_URI}, by growth; and generous latency bounds: p99 ≤ 1 s, max ≤ 2 s. The issue's
 * targets (p99 ≤ 50 ms, max ≤ 250 ms) are the benchmark's to report ({@code exec:java@bench},
 * part {@code bench.distinct}), not this test's to assert. Each scenario prints one
 * {@code distinct-waits} line with p50/p90/p99/max (surefire puts it in
 * {@code target/surefire-reports/io.github.turnstile.DistinctWaitsTest-output.txt}).
 *
 * <p>With waiting bounded by a pool of 16 blocking connections, a waiter without a connection is
 * only woken once the waiters ahead of it in the pool's queue have been released, so its latency
 * grows with the release window (≥ N × spacing = 2 s by default), not with its own release: p99
 * 2.4–2.9 s on the code this test was written against. The 1 s bound fails that.
 *
 * <p>System properties: {@code turnstile.test.distinct.n} primitives per scenario [1000],
 * {@code turnstile.test.distinct.spacingMicros} least time between release starts [2000],
 * {@code turnstile.test.distinct.seed} release order [random, printed].
 */
@ExtendWith(RedisExtension.class)
class DistinctWaitsTest {
  private static final int N = Integer.getInteger("turnstile.test.distinct.n", 1000);
  private static final long SPACING_NANOS =
      TimeUnit.MICROSECONDS.toNanos(Long.getLong("turnstile.test.distinct.spacingMicros", 2000));
  private static final long SEED = Long.getLong("turnstile.test.distinct.seed", System.nanoTime());
  /** Generous bounds: the targets are 50 ms and 250 ms. */
  private static final long P99_BOUND_MILLIS = 1000;
  private static final long MAX_BOUND_MILLIS = 2000;
  /** Longer than the default lease (30 s), so a waiter that only wakes when its slice ends still counts. */
  private static final long ACQUIRE_TIMEOUT_MILLIS = 45_000;
  private static final long SETTLE_MILLIS = 500;
  private static final long SAMPLE_MILLIS = 20;

  /**
   * The name of the test's one observing connection (CLIENT LIST, INFO). A fresh raw socket per
   * sample is not used: its close may not have been processed when another thread's CLIENT LIST
   * runs, and such a socket was counted as the waiter's (CI failed 19 vs 18 on an unnamed socket
   * whose last command was INFO, read by the quiet check while the sampler ran).
   */
  static final String OBSERVER_NAME = "distinct-waits-observer";

  private final TestRedis redis;
  private RedisClient observerClient;
  private StatefulRedisConnection<String, String> observer;

  DistinctWaitsTest(TestRedis redis) {
    this.redis = redis;
  }

  @BeforeEach
  void connectObserver() {
    RedisURI uri = RedisURI.create(redis.uri());
    uri.setClientName(OBSERVER_NAME);
    observerClient = RedisClient.create(uri);
    observer = observerClient.connect();
  }

  @AfterEach
  void closeObserver() {
    if (observer != null) {
      observer.close();
    }
    if (observerClient != null) {
      observerClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  /** {@code CLIENT LIST} over the observing connection. */
  private String clientList() {
    return observer.sync().clientList();
  }

  /** The holder's and the waiters' side of one kind of primitive; index i names primitive i. */
  private interface Primitives {
    /** On the holder (test) thread: take primitive i. */
    void hold(int i) throws Exception;

    /** On the holder (test) thread: give primitive i back. */
    void release(int i);

    /** On waiter thread i: wait for primitive i (untimed). */
    void await(int i) throws Exception;

    /** On waiter thread i, after {@link #await}: give it back. */
    void leave(int i);
  }

  @Test
  void distinctLocksWakePromptlyWithinTheConnectionBound() throws Exception {
    String run = unique("distinct-locks");
    // the holder stands in for other clients; with lock caching its first unlock would open a
    // subscriber connection, counted here against the waiter client's bound
    try (Turnstile holderClient = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      long baseline = settledConnections(holderClient);
      try (Turnstile waiterClient = Turnstile.connect(redis.uri())) { // default options
        DistributedLock[] held = new DistributedLock[N];
        DistributedLock[] wanted = new DistributedLock[N];
        for (int i = 0; i < N; i++) {
          held[i] = holderClient.lock(run + ":" + i);
          wanted[i] = waiterClient.lock(run + ":" + i);
        }
        measure("locks", holderClient, waiterClient, baseline, new Primitives() {
          @Override
          public void hold(int i) {
            held[i].lock();
          }

          @Override
          public void release(int i) {
            held[i].unlock();
          }

          @Override
          public void await(int i) {
            wanted[i].lock();
          }

          @Override
          public void leave(int i) {
            wanted[i].unlock();
          }
        });
      }
    }
  }

  @Test
  void distinctSemaphoresWakePromptlyWithinTheConnectionBound() throws Exception {
    String run = unique("distinct-semaphores");
    // the holder stands in for other clients; with lock caching its first unlock would open a
    // subscriber connection, counted here against the waiter client's bound
    try (Turnstile holderClient = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      long baseline = settledConnections(holderClient);
      try (Turnstile waiterClient = Turnstile.connect(redis.uri())) { // default options
        DistributedSemaphore[] held = new DistributedSemaphore[N];
        DistributedSemaphore[] wanted = new DistributedSemaphore[N];
        for (int i = 0; i < N; i++) {
          held[i] = holderClient.semaphore(run + ":" + i, 1);
          wanted[i] = waiterClient.semaphore(run + ":" + i, 1);
        }
        measure("semaphores", holderClient, waiterClient, baseline, new Primitives() {
          @Override
          public void hold(int i) {
            assertTrue(held[i].tryAcquire(), "the holder takes the only permit of semaphore " + i);
          }

          @Override
          public void release(int i) {
            held[i].release();
          }

          @Override
          public void await(int i) throws InterruptedException {
            wanted[i].acquire();
          }

          @Override
          public void leave(int i) {
            wanted[i].release();
          }
        });
      }
    }
  }

  /**
   * Runs one scenario.
   *
   * @param baseline connections on the server before the waiter client connected
   */
  private void measure(String kind, Turnstile holderClient, Turnstile waiterClient, long baseline, Primitives p)
      throws Exception {
    int bound = waiterClient.options().blockingPoolSize() + 2;
    String waiterName = "turnstile:" + waiterClient.engine().clientId;
    boolean[] released = new boolean[N];
    long[] releaseStart = new long[N];
    long[] releaseCall = new long[N];
    AtomicLongArray acquiredAt = new AtomicLongArray(N);
    AtomicInteger acquired = new AtomicInteger();
    ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
    Thread[] waiters = new Thread[N];
    ConnectionSampler sampler = new ConnectionSampler(waiterName, "turnstile:" + holderClient.engine().clientId);
    long testStart = System.nanoTime();
    try {
      for (int i = 0; i < N; i++) {
        p.hold(i);
      }
      long heldMillis = TestSupport.millisSince(testStart);
      sampler.start();
      for (int i = 0; i < N; i++) {
        int id = i;
        waiters[i] = new Thread(null, () -> {
          try {
            p.await(id);
            acquiredAt.set(id, System.nanoTime());
            acquired.incrementAndGet();
            p.leave(id);
          } catch (Throwable e) {
            errors.add("waiter " + id + ": " + e);
          }
        }, "distinct-waiter-" + i, 256 * 1024);
        waiters[i].setDaemon(true);
        waiters[i].start();
      }
      awaitAllWaiting(waiters);
      awaitQuietRedis();
      Thread.sleep(SETTLE_MILLIS);
      assertEquals(0, acquired.get(), "waiters acquired " + kind + " that another client holds");
      assertTrue(errors.isEmpty(), "waiters failed: " + errors);
      long waitingConnections = sampler.peak();
      long waitingAdded = sampler.peakAll() - baseline;

      List<Integer> order = new ArrayList<>();
      for (int i = 0; i < N; i++) {
        order.add(i);
      }
      Collections.shuffle(order, new Random(SEED));
      long releasesStart = System.nanoTime();
      long next = releasesStart;
      for (int i : order) {
        long now;
        while ((now = System.nanoTime()) - next < 0) {
          LockSupport.parkNanos(next - now);
        }
        releaseStart[i] = System.nanoTime();
        p.release(i);
        releaseCall[i] = System.nanoTime() - releaseStart[i];
        released[i] = true;
        next = releaseStart[i] + SPACING_NANOS;
      }
      long releasesMillis = TestSupport.millisSince(releasesStart);
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ACQUIRE_TIMEOUT_MILLIS);
      while (acquired.get() + errors.size() < N && System.nanoTime() - deadline < 0) {
        Thread.sleep(5);
      }
      long allMillis = TestSupport.millisSince(releasesStart);
      for (Thread w : waiters) {
        w.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      }
      sampler.stop();

      long[] latencies = new long[N];
      int k = 0;
      int earlyCount = 0;
      for (int i = 0; i < N; i++) {
        long at = acquiredAt.get(i);
        if (at != 0) {
          latencies[k++] = at - releaseStart[i];
          if (at - releaseStart[i] < 0) {
            earlyCount++;
          }
        }
      }
      int early = earlyCount;
      int got = k; // a straggler may still acquire while this runs: count what was read
      latencies = Arrays.copyOf(latencies, got);
      Arrays.sort(latencies);
      long[] calls = releaseCall.clone();
      Arrays.sort(calls);
      double p50 = millis(percentile(latencies, 0.50));
      double p90 = millis(percentile(latencies, 0.90));
      double p99 = millis(percentile(latencies, 0.99));
      double max = millis(percentile(latencies, 1.0));
      System.out.printf(Locale.ROOT, "distinct-waits %s: N=%d acquired=%d wake latency p50 %.1f ms, p90 %.1f ms,"
              + " p99 %.1f ms, max %.1f ms | waiter connections peak %d while waiting, %d overall (bound %d);"
              + " connections added since it connected (any name) %d while waiting, %d overall"
              + " | release call p50 %.2f ms | releases over %d ms (spacing >= %d us, seed %d), all acquired"
              + " %d ms after the first release; holder took %d in %d ms%n",
          kind, N, got, p50, p90, p99, max, waitingConnections, sampler.peak(), bound, waitingAdded,
          sampler.peakAll() - baseline,
          millis(percentile(calls, 0.5)), releasesMillis, TimeUnit.NANOSECONDS.toMicros(SPACING_NANOS), SEED,
          allMillis, N, heldMillis);
      System.out.println("distinct-waits " + kind + ": wake latency histogram (ms): " + histogram(latencies));

      assertTrue(errors.isEmpty(), "waiters failed: " + errors);
      int missing = N - got;
      assertEquals(0, missing, missing + " of " + N + " waiters had not acquired their " + kind + " "
          + ACQUIRE_TIMEOUT_MILLIS + " ms after the last release");
      assertAll(
          () -> assertEquals(0, early, early + " waiters acquired before their " + kind + " was released"),
          () -> assertTrue(sampler.peak() <= bound, "the waiter client had " + sampler.peak()
              + " connections on the node, more than blockingPoolSize + 2 = " + bound),
          () -> assertTrue(sharedServer() || sampler.peakAll() - baseline <= bound, "the server had "
              + (sampler.peakAll() - baseline) + " more connections than before the waiter client connected,"
              + " more than blockingPoolSize + 2 = " + bound + " (named or not); at the peak: "
              + sampler.peakAllLines()),
          () -> assertTrue(p99 <= P99_BOUND_MILLIS, String.format(Locale.ROOT,
              "wake latency p99 %.1f ms > %d ms over %d distinct %s (p50 %.1f ms, max %.1f ms)", p99,
              P99_BOUND_MILLIS, N, kind, p50, max)),
          () -> assertTrue(max <= MAX_BOUND_MILLIS, String.format(Locale.ROOT,
              "wake latency max %.1f ms > %d ms over %d distinct %s (p50 %.1f ms, p99 %.1f ms)", max,
              MAX_BOUND_MILLIS, N, kind, p50, p99)));
    } finally {
      sampler.stop();
      for (int i = 0; i < N; i++) {
        if (!released[i]) {
          try {
            p.release(i); // a failed run still leaves nothing held (the waiter then acquires and leaves)
          } catch (RuntimeException e) {
            // held nothing (hold failed) or the client is gone: nothing left to give back
          }
        }
      }
    }
  }

  /** Waits until every waiter thread has been parked (inside lock()/acquire()) for 3 checks in a row. */
  private static void awaitAllWaiting(Thread[] waiters) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    int quietChecks = 0;
    while (quietChecks < 3) {
      if (System.nanoTime() - deadline > 0) {
        fail("waiter threads did not all wait within 60 s");
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

  /**
   * Waits (at most 10 s; best effort, since a shared {@code REDIS_URI} may be busy with others)
   * until Redis has run no command for 200 ms besides INFO and CLIENT: every waiter's attempt has
   * been answered and nobody polls.
   */
  private void awaitQuietRedis() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    long last = commands();
    while (System.nanoTime() - deadline < 0) {
      Thread.sleep(200);
      long now = commands();
      if (now == last) {
        return;
      }
      last = now;
    }
    System.out.println("distinct-waits: Redis did not go quiet within 10 s; releasing anyway");
  }

  private long commands() {
    long sum = 0;
    for (String line : observer.sync().info("commandstats").split("\r?\n")) {
      if (line.startsWith("cmdstat_")) {
        String cmd = line.substring(8, line.indexOf(':'));
        if (!cmd.equals("info") && !cmd.startsWith("client")) {
          int c = line.indexOf("calls=");
          sum += Long.parseLong(line.substring(c + 6, line.indexOf(',', c)));
        }
      }
    }
    return sum;
  }

  /** Samples, every {@link #SAMPLE_MILLIS}, how many connections on the server carry a client's name. */
  private final class ConnectionSampler {
    private final String clientName;
    private final AtomicLong peak = new AtomicLong();
    private final AtomicLong peakAll = new AtomicLong();
    private final String holderName;
    private volatile String peakAllLines = "";
    private volatile boolean stopped;
    private Thread thread;

    ConnectionSampler(String clientName, String holderName) {
      this.clientName = clientName;
      this.holderName = holderName;
    }

    void start() {
      sample();
      thread = new Thread(() -> {
        while (!stopped) {
          try {
            sample();
            Thread.sleep(SAMPLE_MILLIS);
          } catch (InterruptedException e) {
            return;
          } catch (RuntimeException e) {
            System.out.println("distinct-waits: CLIENT LIST failed: " + e);
          }
        }
      }, "distinct-connection-sampler");
      thread.setDaemon(true);
      thread.start();
    }

    /** @return the most connections named for the client seen in one sample */
    long peak() {
      return peak.get();
    }

    /** @return the most connections of any name seen in one sample (the test's own CLIENT LIST sockets excluded) */
    long peakAll() {
      return peakAll.get();
    }

    /** @return the connections counted at the peak, other than the waiter's named ones */
    String peakAllLines() {
      return peakAllLines;
    }

    void stop() throws InterruptedException {
      stopped = true;
      if (thread != null) {
        thread.join(5000);
      }
      if (thread != null && !thread.isAlive()) {
        sample();
      }
    }

    private void sample() {
      String list = clientList();
      peak.accumulateAndGet(named(list), Math::max);
      long all = countConnections(list, holderName);
      if (all > peakAll.get()) {
        peakAll.set(all);
        // for a failure message: what was counted, besides the waiter's named connections
        peakAllLines = counted(list, holderName).filter(l -> !l.contains("name=" + clientName))
            .collect(java.util.stream.Collectors.joining(" | "));
      }
    }

    /** Connections named exactly {@code clientName} or {@code clientName:<anything>}. */
    long named(String clientList) {
      return clientList.lines().filter(line -> {
        for (String field : line.split(" ")) {
          if (field.startsWith("name=")) {
            String name = field.substring(5);
            return name.equals(clientName) || name.startsWith(clientName + ":");
          }
        }
        return false;
      }).count();
    }
  }

  /**
   * Connections in a {@code CLIENT LIST} reply, without the test's own. The test asks over one
   * named connection ({@link #OBSERVER_NAME}), not counted. Unnamed raw sockets that ran only
   * {@code CLIENT LIST}, {@code INFO} or nothing yet ({@code cmd=NULL}) are not counted either: they
   * are helpers of the test harness whose close the server may not have processed yet (three CI
   * runs failed by one connection on such a socket, with the waiter's named connections within
   * the bound). Turnstile names every connection in its handshake and a Lettuce connection's
   * first command is that handshake, so none of Turnstile's is skipped. The holder client's
   * connections are not counted either: the bound is the waiter client's, and a connection the
   * holder opens after the baseline (it never waits, but it may subscribe) is not the waiter's.
   */
  static long countConnections(String clientList, String holderName) {
    return counted(clientList, holderName).count();
  }

  /** The lines {@link #countConnections} counts. */
  static java.util.stream.Stream<String> counted(String clientList, String holderName) {
    return clientList.lines().filter(l -> !l.isBlank()).filter(line -> {
      String name = "";
      String cmd = "";
      for (String field : line.split(" ")) {
        if (field.startsWith("name=")) {
          name = field.substring(5);
        } else if (field.startsWith("cmd=")) {
          cmd = field.substring(4);
        }
      }
      boolean ownSocket = name.isEmpty() && (cmd.equals("client|list") || cmd.equals("client")
          || cmd.equals("info") || cmd.equals("NULL"));
      boolean holder = name.equals(holderName) || name.startsWith(holderName + ":");
      return !ownSocket && !holder && !name.equals(OBSERVER_NAME);
    });
  }

  /** @return connections on the server (CLIENT LIST, the test's own excluded) once stable for 100 ms, at most 3 s */
  private long settledConnections(Turnstile holder) throws InterruptedException {
    String holderName = "turnstile:" + holder.engine().clientId;
    long last = countConnections(clientList(), holderName);
    for (int i = 0; i < 30; i++) {
      Thread.sleep(100);
      long now = countConnections(clientList(), holderName);
      if (now == last) {
        return now;
      }
      last = now;
    }
    return last;
  }

  /** A {@code REDIS_URI} server may be shared with other JVMs: only named connections are then counted. */
  private boolean sharedServer() {
    return TestRedis.SOURCE_REDIS_URI.equals(redis.source());
  }

  private static long percentile(long[] sorted, double q) {
    if (sorted.length == 0) {
      return 0;
    }
    int rank = (int) Math.ceil(q * sorted.length);
    return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
  }

  private static double millis(long nanos) {
    return nanos / 1e6;
  }

  /** Counts per latency bucket: ≤ 10 ms, ≤ 50, ≤ 250, ≤ 1000, ≤ 5000, more. */
  private static String histogram(long[] latencies) {
    long[] edges = {10, 50, 250, 1000, 5000};
    int[] counts = new int[edges.length + 1];
    for (long l : latencies) {
      int b = 0;
      while (b < edges.length && l > TimeUnit.MILLISECONDS.toNanos(edges[b])) {
        b++;
      }
      counts[b]++;
    }
    StringBuilder sb = new StringBuilder();
    for (int b = 0; b < counts.length; b++) {
      sb.append(b < edges.length ? "<=" + edges[b] : ">" + edges[edges.length - 1]).append(':').append(counts[b])
          .append(b < counts.length - 1 ? " " : "");
    }
    return sb.toString();
  }
}
