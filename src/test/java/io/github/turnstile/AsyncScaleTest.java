package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * Many pending async acquisitions from one JVM cost memory, not threads: P acquisitions wait on N
 * held locks (P / N per name), the thread count stays flat, and the heap grows by a few hundred
 * bytes per pending acquisition. Then the holds are released and every waiter acquires in turn
 * (each releases at once): the wake latency from a release to the next grant of that name, and
 * mutual exclusion and increasing fencing tokens per name throughout.
 *
 * <p>The defaults are the figure, 100,000 acquisitions on 1,000 names (about 20 s on 2
 * shared cores); {@code -Dturnstile.test.asyncPending=N -Dturnstile.test.asyncNames=M} changes them.
 */
@ExtendWith(RedisExtension.class)
class AsyncScaleTest {
  private static final int PENDING = Integer.getInteger("turnstile.test.asyncPending", 100_000);
  private static final int NAMES = Integer.getInteger("turnstile.test.asyncNames", 1000);
  /** Extra names, one waiter each, released one at a time while everything else stays pending. */
  private static final int PROBES = 50;
  /** How long the drain may take before the test reports what is left (it takes 7-30 s). */
  private static final int DRAIN_SECONDS = Integer.getInteger("turnstile.test.asyncDrainSeconds", 300);

  @Test
  void manyPendingAcquisitionsCostMemoryNotThreads(TestRedis redis) throws Exception {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    String run = UUID.randomUUID().toString().substring(0, 8);
    try (Turnstile holders = Turnstile.connect(redis.uri()); Turnstile waiters = Turnstile.connect(redis.uri())) {
      DistributedLock[] locks = new DistributedLock[NAMES];
      LockHold[] held = new LockHold[NAMES];
      for (int i = 0; i < NAMES; i++) {
        locks[i] = waiters.lock("scale:" + run + ":" + i);
        held[i] = holders.lock(locks[i].name()).lockAsync().get(30, TimeUnit.SECONDS);
      }
      DistributedLock[] probes = new DistributedLock[PROBES];
      LockHold[] probeHeld = new LockHold[PROBES];
      for (int i = 0; i < PROBES; i++) {
        probes[i] = waiters.lock("scale:" + run + ":probe" + i);
        probeHeld[i] = holders.lock(probes[i].name()).lockAsync().get(30, TimeUnit.SECONDS);
      }
      warmUp(holders, waiters, run);
      long threadsBefore = threads.getThreadCount();
      long heapBefore = usedHeapAfterGc(memory);

      long enqueueStart = System.nanoTime();
      List<CompletableFuture<LockHold>> pending = new ArrayList<>(PENDING);
      for (int i = 0; i < PENDING; i++) {
        pending.add(locks[i % NAMES].lockAsync());
      }
      long enqueueMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - enqueueStart);
      List<CompletableFuture<LockHold>> probeWaiters = new ArrayList<>();
      for (DistributedLock probe : probes) {
        probeWaiters.add(probe.lockAsync());
      }
      // every name's head subscribed and refused: they all wait in Redis now
      TestSupport.await("every head waits", Duration.ofSeconds(120),
          () -> TestSupport.waitsOf(waiters) >= NAMES + PROBES);
      Thread.sleep(500);
      long heapPending = usedHeapAfterGc(memory);
      long threadsPending = threads.getThreadCount();
      double bytesPerPending = (double) (heapPending - heapBefore) / PENDING;
      for (CompletableFuture<LockHold> f : pending) {
        assertTrue(!f.isDone(), "all still pending");
      }

      // one release at a time while all the others stay pending: the wake latency
      long[] wakes = new long[PROBES];
      for (int i = 0; i < PROBES; i++) {
        long t0 = System.nanoTime();
        probeHeld[i].release();
        LockHold got = probeWaiters.get(i).get(30, TimeUnit.SECONDS);
        wakes[i] = System.nanoTime() - t0;
        got.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
        Thread.sleep(5);
      }
      Arrays.sort(wakes);
      double wakeP50 = wakes[PROBES / 2] / 1e6;
      double wakeP99 = wakes[PROBES - 1] / 1e6; // of 50: the max

      // release: each waiter, once granted, releases at once; latency = previous release -> this grant
      threads.resetPeakThreadCount();
      long[] latencies = new long[PENDING];
      AtomicInteger recorded = new AtomicInteger();
      AtomicLongArray releasedAt = new AtomicLongArray(NAMES);
      AtomicIntegerArray inside = new AtomicIntegerArray(NAMES);
      AtomicLongArray lastToken = new AtomicLongArray(NAMES);
      AtomicLong overlaps = new AtomicLong();
      AtomicLong tokenViolations = new AtomicLong();
      CompletableFuture<?>[] done = new CompletableFuture<?>[PENDING];
      for (int i = 0; i < PENDING; i++) {
        int name = i % NAMES;
        done[i] = pending.get(i).thenAccept(hold -> {
          latencies[recorded.getAndIncrement()] = System.nanoTime() - releasedAt.get(name);
          if (inside.incrementAndGet(name) != 1) {
            overlaps.incrementAndGet();
          }
          long token = hold.fencingToken();
          if (token <= lastToken.getAndSet(name, token)) {
            tokenViolations.incrementAndGet();
          }
          inside.decrementAndGet(name);
          releasedAt.set(name, System.nanoTime());
          hold.release();
        });
      }
      long drainStart = System.nanoTime();
      for (int i = 0; i < NAMES; i++) {
        releasedAt.set(i, System.nanoTime());
        held[i].release();
      }
      try {
        CompletableFuture.allOf(done).get(DRAIN_SECONDS, TimeUnit.SECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        throw new AssertionError(stuck(redis, waiters, locks, held, done, recorded.get()), e);
      }
      long drainMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - drainStart);
      long peakThreads = threads.getPeakThreadCount();

      long[] sorted = Arrays.copyOf(latencies, recorded.get());
      Arrays.sort(sorted);
      double p50 = sorted[sorted.length / 2] / 1e6;
      double p99 = sorted[(int) (sorted.length * 0.99)] / 1e6;
      double max = sorted[sorted.length - 1] / 1e6;
      System.out.printf(Locale.ROOT, "async scale: %d pending acquisitions on %d names from one JVM%n", PENDING, NAMES);
      System.out.printf(Locale.ROOT, "  enqueued in %d ms; threads %d before, %d while pending, peak %d while draining%n",
          enqueueMs, threadsBefore, threadsPending, peakThreads);
      System.out.printf(Locale.ROOT, "  heap %.1f MB before, %.1f MB pending: %.0f bytes per pending acquisition%n",
          heapBefore / 1e6, heapPending / 1e6, bytesPerPending);
      System.out.printf(Locale.ROOT, "  wake latency, one release while %d stay pending (release call -> grant,"
          + " %d samples): p50 %.2f ms, max %.2f ms%n", PENDING, PROBES, wakeP50, wakeP99);
      System.out.printf(Locale.ROOT, "  then all %d names released, each grant released at once: drained in %d ms"
          + " (%.0f grants/s); hand-off latency under that load (release -> next grant of the name) p50 %.2f ms,"
          + " p99 %.2f ms, max %.1f ms%n", NAMES, drainMs, PENDING * 1000.0 / drainMs, p50, p99, max);
      System.out.printf(Locale.ROOT, "  overlaps %d, fencing violations %d, subscriber connections %d%n",
          overlaps.get(), tokenViolations.get(), waiters.engine().subscriptions.connections());

      assertEquals(PENDING, recorded.get(), "every acquisition was granted");
      assertEquals(0, overlaps.get(), "mutual exclusion per name");
      assertEquals(0, tokenViolations.get(), "fencing tokens increase per name");
      // the heads past the first borrow blocking connections (the token-list tier), each opened on
      // a connector thread of the pool: at most the pool's size, whatever the number pending
      int pool = waiters.engine().pool.size();
      assertTrue(threadsPending <= threadsBefore + 2 + pool, "no thread per pending acquisition: "
          + threadsBefore + " -> " + threadsPending);
      assertTrue(peakThreads <= threadsBefore + 8 + pool, "no thread per acquisition while draining: peak " + peakThreads);
      assertTrue(bytesPerPending < 4096, "memory per pending acquisition: " + bytesPerPending + " bytes");
      assertTrue(wakeP50 < Bounds.OVERRUN_MS, "wake latency p50 " + wakeP50 + " ms");
      assertEquals(1, waiters.engine().subscriptions.connections(), "one subscriber connection");
      if (waiters.engine().lockCaches != null) {
        // lock caching keeps the drained locks' grants, each subscribed for its revocations: given
        // up, they must leave no subscription behind either
        waiters.engine().lockCaches.releaseAll().get(30, java.util.concurrent.TimeUnit.SECONDS);
      }
      try {
        TestSupport.await("subscriptions closed", Duration.ofSeconds(10),
            () -> waiters.engine().subscriptions.channels() == 0);
      } catch (AssertionError e) {
        // failed once beside 4 burners (1 run in 10, 2026-11-27): say which are left, and why
        throw new AssertionError(e.getMessage() + "; left:\n" + waiters.engine().subscriptions.describe()
            + "gates: " + gates(locks), e);
      }
    }
  }

  /** The locks whose async gate still has acquisitions or a subscription (diagnostics). */
  private static String gates(DistributedLock[] locks) {
    StringBuilder b = new StringBuilder();
    for (DistributedLock l : locks) {
      String g = ((RedisLock) l).gateState();
      if (g != null) {
        b.append(l.name()).append(": ").append(g).append('\n');
      }
    }
    return b.toString();
  }

  /**
   * What a drain that did not finish left behind (it failed in CI twice, 2026-11-27 and 28, at
   * 300 s, not reproduced since): how many were granted, how many names still have pending
   * acquisitions, and, for the first of them, the lock's state in Redis and in this JVM (its
   * async gate: head, queue, channel).
   */
  private static String stuck(TestRedis redis, Turnstile waiters, DistributedLock[] locks, LockHold[] held,
      CompletableFuture<?>[] done, int granted) {
    int[] left = new int[locks.length];
    int stuckNames = 0;
    for (int i = 0; i < done.length; i++) {
      if (!done[i].isDone() && left[i % locks.length]++ == 0) {
        stuckNames++;
      }
    }
    StringBuilder b = new StringBuilder("drain unfinished after " + DRAIN_SECONDS + " s: " + granted + " of " + done.length
        + " granted; " + stuckNames + " names with pending acquisitions; subscribed channels "
        + waiters.engine().subscriptions.channels() + "; activities of the waiting client " + waiters.activity().size());
    int shown = 0;
    for (int i = 0; i < locks.length && shown < 3; i++) {
      if (left[i] == 0) {
        continue;
      }
      shown++;
      String tag = "{turnstile:" + locks[i].name() + "}";
      b.append("\n  name ").append(locks[i].name()).append(": ").append(left[i]).append(" pending")
          .append("; locked (client view) ").append(locks[i].isLocked())
          .append("; first holder's hold ").append(held[i])
          .append("\n    HGETALL lock ").append(redis.command("HGETALL", tag + ":lock").replace('\n', ' '))
          .append(" PTTL ").append(redis.command("PTTL", tag + ":lock").trim())
          .append(" LLEN wake ").append(redis.command("LLEN", tag + ":wake").trim())
          .append(" NUMSUB ").append(redis.command("PUBSUB", "NUMSUB", tag + ":ch").replace('\n', ' '))
          .append("\n    async gate ").append(((RedisLock) locks[i]).gateState());
    }
    for (java.lang.management.ThreadInfo t : ManagementFactory.getThreadMXBean().dumpAllThreads(false, false)) {
      if (t.getThreadName().startsWith("turnstile") || t.getThreadName().startsWith("lettuce")) {
        b.append("\n  thread ").append(t.getThreadName()).append(' ').append(t.getThreadState());
        StackTraceElement[] st = t.getStackTrace();
        for (int k = 0; k < Math.min(6, st.length); k++) {
          b.append("\n      at ").append(st[k]);
        }
      }
    }
    return b.toString();
  }

  /** Loads the classes and opens the subscriber connection and timers of the waiting client. */
  private static void warmUp(Turnstile holders, Turnstile waiters, String run) throws Exception {
    for (int i = 0; i < 3; i++) {
      String name = "scale:" + run + ":warm" + i;
      LockHold h = holders.lock(name).lockAsync().get(30, TimeUnit.SECONDS);
      CompletableFuture<LockHold> w = waiters.lock(name).lockAsync();
      CompletableFuture<LockHold> t = waiters.lock(name).tryLockAsync(1, TimeUnit.MILLISECONDS);
      TestSupport.await("waiting in Redis", Duration.ofSeconds(30), () -> TestSupport.waitsOf(waiters) > 0);
      h.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      w.get(30, TimeUnit.SECONDS).release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      t.handle((v, e) -> v).get(30, TimeUnit.SECONDS);
    }
    Thread.sleep(200);
  }

  private static long usedHeapAfterGc(MemoryMXBean memory) throws InterruptedException {
    for (int i = 0; i < 3; i++) {
      System.gc();
      Thread.sleep(100);
    }
    return memory.getHeapMemoryUsage().getUsed();
  }

  /**
   * Reproduced by reading: pending acquisitions queued behind one name's head sat in a deque, so
   * each cancellation searched it, and cancelling many (a mass timeout, a shutdown) was quadratic.
   * Here 20,000 and then 200,000 acquisitions wait behind one held name and are completed
   * exceptionally newest first (the deque's worst case); the larger batch must cost about 10 times
   * the smaller one, not 100 times (asserted: the least of two runs under 20 times the least of
   * three). Measured: 9.9 and 11.0 times with
   * the fix; 37.5 and 41.2 times before it (9.8 to 11.0 s for 200,000, against 1.8 to 1.9 s).
   */
  @Test
  void cancellingManyPendingAcquisitionsOfOneNameIsLinear(TestRedis redis) throws Exception {
    try (Turnstile holders = Turnstile.connect(redis.uri()); Turnstile waiters = Turnstile.connect(redis.uri())) {
      String name = "scale-cancel:" + UUID.randomUUID();
      LockHold held = holders.lock(name).lockAsync().get(30, TimeUnit.SECONDS);
      DistributedLock lock = waiters.lock(name);
      cancelNewestFirst(lock, 20_000); // warm-up
      // the least of several runs: a busy machine only ever adds time (one run of 200,000 took 20.4
      // times one of 20,000 beside 4 CPU burners, with the fix)
      long small = Long.MAX_VALUE;
      for (int i = 0; i < 3; i++) {
        small = Math.min(small, cancelNewestFirst(lock, 20_000));
      }
      long large = Math.min(cancelNewestFirst(lock, 200_000), cancelNewestFirst(lock, 200_000));
      System.out.printf(Locale.ROOT, "async: cancelling 20,000 pending on one name took %.1f ms, 200,000 took %.1f ms"
          + " (ratio %.1f)%n", small / 1e6, large / 1e6, (double) large / small);
      assertTrue(large < 20 * small, "cancelling 200,000 took " + large / 1_000_000 + " ms, 20,000 took "
          + small / 1_000_000 + " ms: not linear");
      held.close();
      try (LockHold h = lock.tryLockAsync(5, TimeUnit.SECONDS).get(10, TimeUnit.SECONDS)) {
        assertTrue(h.isValid(), "the name is free for the next one: no cancelled waiter left behind");
      }
    }
  }

  /** Queues n acquisitions of a held lock, cancels them newest first; returns the cancelling time (ns). */
  private static long cancelNewestFirst(DistributedLock lock, int n) throws Exception {
    List<CompletableFuture<LockHold>> pending = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      pending.add(lock.lockAsync());
    }
    // one shared exception, as a caller's own timeout might complete them: no stack trace per
    // cancellation, so the gate's own work is what is timed
    java.util.concurrent.CancellationException gone = new java.util.concurrent.CancellationException("given up");
    System.gc();
    long start = System.nanoTime();
    for (int i = n - 1; i >= 0; i--) {
      pending.get(i).completeExceptionally(gone);
    }
    long took = System.nanoTime() - start;
    for (CompletableFuture<LockHold> f : pending) {
      assertTrue(f.isCancelled());
    }
    return took;
  }

}
