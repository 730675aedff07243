package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.fault.History;
import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A randomized history with lock caching on: 4 clients × 4 threads take one lock in bursts (so
 * grants are cached, taken locally, handed on and revoked). Three clients are in this JVM; the
 * fourth is a JVM of its own ({@link CachingHolderMain}), killed with kill -9 while Redis names it
 * as the lock's cache. Meanwhile every connection is killed from time to time, Redis is paused
 * past nothing (a short {@code CLIENT PAUSE}), and Redis itself is killed and restarted once (AOF,
 * fsync always: it keeps the holds, as a lock server should run). The checker ({@link History})
 * reports overlapping holds and fencing tokens that do not grow in acquisition order, across
 * clients. Each hold is valid from its acquire's return to the last instant its thread saw it held
 * (read just before its unlock); the killed JVM's last holds end when it was gone.
 */
class LockCachingHistoryTest {
  private static final long RUN_MILLIS = Long.getLong("turnstile.test.cachingHistoryMillis", 16_000);
  private static final long PHASE_NANOS = TimeUnit.MILLISECONDS.toNanos(1500);
  private static final long LEASE_MILLIS = 5000;
  private static final int CLIENTS = 4;
  /** The client in a JVM of its own. */
  private static final int CHILD = 3;

  /** What a worker reports of its holds. */
  interface Events {
    void acquired(long token, long startNanos);

    /** Just before the unlock of a hold its thread saw held until {@code endNanos} (a JVM may be killed in the unlock). */
    default void releasing(long endNanos) { }

    void released(long token, long startNanos, long endNanos);

    void lost();

    void unreachable();
  }

  /**
   * One worker thread of client {@code me}: one client at a time is busy for a phase (1.5 s,
   * longer than the 1 s back-off after a revocation: its grant gets cached, taken and handed on
   * locally); the others try now and then (revocations).
   */
  static void work(DistributedLock lock, int me, int clients, AtomicBoolean stop, Events events)
      throws InterruptedException {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    while (!stop.get()) {
      boolean busy = (System.nanoTime() / PHASE_NANOS) % clients == me;
      if (!busy) {
        Thread.sleep(300 + r.nextInt(1000));
      }
      int burst = busy ? 1 + r.nextInt(30) : 1;
      for (int i = 0; i < burst && !stop.get(); i++) {
        try {
          if (!lock.tryLock(2, TimeUnit.SECONDS)) {
            continue;
          }
        } catch (TurnstileException e) {
          events.unreachable(); // Redis unreachable for a moment (a killed connection, the restart)
          continue;
        }
        long start = System.nanoTime();
        long token = lock.fencingToken();
        events.acquired(token, start);
        if (r.nextInt(4) == 0) {
          Thread.sleep(r.nextInt(3));
        }
        long end = System.nanoTime();
        boolean held = lock.isHeldByCurrentThread();
        if (held) {
          events.releasing(end);
        }
        try {
          lock.unlock();
        } catch (LockLostException lost) {
          held = false;
        }
        if (held) {
          events.released(token, start, end);
        } else {
          events.lost();
        }
      }
      if (busy) {
        Thread.sleep(r.nextInt(5));
      }
    }
  }

  @Test
  void noOverlapAndTokensGrowAcrossClientsWithCaching() throws Exception {
    try (RedisServerProcess p = RedisServerProcess.start("--appendonly", "yes", "--appendfsync", "always")) {
      String name = unique("cache-history");
      List<Turnstile> clients = new ArrayList<>();
      for (int c = 0; c < CHILD; c++) {
        clients.add(Turnstile.connect(p.uri(), TurnstileOptions.builder()
            .leaseTime(Duration.ofMillis(LEASE_MILLIS)).lockCaching(true).build()));
      }
      History history = new History();
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong failures = new AtomicLong();
      AtomicLong lostUnlocks = new AtomicLong();
      AtomicLong firstHoldAfterKill = new AtomicLong();
      AtomicLong killedAt = new AtomicLong();
      List<Thread> threads = new ArrayList<>();
      List<RedisLock> locks = new ArrayList<>();
      JvmProcess child = JvmProcess.start(CachingHolderMain.class, p.uri(), name, Long.toString(LEASE_MILLIS),
          Integer.toString(CHILD), Integer.toString(CLIENTS));
      try {
        String childId = child.awaitLine("CLIENT ", Duration.ofSeconds(60)).substring(7);
        for (int c = 0; c < clients.size(); c++) {
          RedisLock lock = (RedisLock) clients.get(c).lock(name);
          locks.add(lock);
          String client = "c" + c;
          int me = c;
          for (int t = 0; t < 4; t++) {
            threads.add(TestSupport.start(client + "-" + t, () -> work(lock, me, CLIENTS, stop, new Events() {
              @Override public void acquired(long token, long startNanos) {
                if (killedAt.get() != 0 && startNanos - killedAt.get() > 0) {
                  firstHoldAfterKill.compareAndSet(0, startNanos);
                }
              }
              @Override public void released(long token, long startNanos, long endNanos) {
                history.add(client, token, 1, startNanos, endNanos);
              }
              @Override public void lost() {
                lostUnlocks.incrementAndGet();
              }
              @Override public void unreachable() {
                failures.incrementAndGet();
              }
            })));
          }
        }
        String lockKey = locks.get(0).lockKey;
        long begin = System.nanoTime();
        long until = begin + TimeUnit.MILLISECONDS.toNanos(RUN_MILLIS);
        int faults = 0;
        boolean restarted = false;
        // until the faults were injected and the caches were used (a loaded machine caches less:
        // its holds overlap its neighbours' attempts more), for at most 90 s more
        while (System.nanoTime() - until < 0 || killedAt.get() == 0 || !restarted
            || (takes(locks, child) < 20 && System.nanoTime() - until < TimeUnit.SECONDS.toNanos(90))) {
          assertTrue(System.nanoTime() - until < TimeUnit.SECONDS.toNanos(90),
              "the child JVM cached the lock (Redis's field c named it) within the run and 90 s more");
          if (killedAt.get() == 0) {
            // kill -9 of the child while Redis names it as the lock's cache (idle or taken)
            if (childId.equals(cachedBy(p, lockKey))) {
              child.kill9();
              child.waitFor(Duration.ofSeconds(30));
              killedAt.set(System.nanoTime());
              System.out.println("[caching-history] child JVM killed while caching the lock");
            } else {
              Thread.sleep(20);
            }
            continue;
          }
          Thread.sleep(700 + ThreadLocalRandom.current().nextInt(600));
          if (!restarted && System.nanoTime() - killedAt.get() > TimeUnit.MILLISECONDS.toNanos(LEASE_MILLIS + 1000)) {
            p.restart(); // kill -9 of Redis, started again with its AOF: the holds stay
            restarted = true;
            System.out.println("[caching-history] Redis restarted");
          } else if (ThreadLocalRandom.current().nextBoolean()) {
            p.command("CLIENT", "KILL", "TYPE", "normal");
          } else {
            p.command("CLIENT", "PAUSE", "150", "ALL");
          }
          faults++;
        }
        stop.set(true);
        for (Thread t : threads) {
          t.join(30_000);
          assertTrue(!t.isAlive(), t.getName() + " finished");
        }
        int childHolds = addChildHolds(history, child.output(), killedAt.get());
        History.Report report = history.checkAndPrint("lock-caching-history", "lock", 1);
        history.describeViolations(1, begin, 5).forEach(v -> System.out.println("[caching-history] " + v));
        long takes = takes(locks, child);
        long freeAfterKillMs = TimeUnit.NANOSECONDS.toMillis(firstHoldAfterKill.get() - killedAt.get());
        System.out.println("[caching-history] holds " + report.acquisitions() + " (child JVM's " + childHolds
            + "), taken from a cache " + takes + ", faults " + faults + ", unreachable moments " + failures.get()
            + ", lost unlocks " + lostUnlocks.get() + ", first hold after the kill " + freeAfterKillMs
            + " ms (lease " + LEASE_MILLIS + " ms)");
        assertTrue(takes > 0, "the caches were used: " + takes + " takes");
        assertTrue(childHolds > 0, "the child JVM held the lock");
        // the killed JVM's grant is free within its lease (plus slack for a loaded machine)
        assertTrue(firstHoldAfterKill.get() != 0 && freeAfterKillMs < LEASE_MILLIS + 10_000,
            "a lock cached by a killed JVM is free within its lease: " + freeAfterKillMs + " ms");
        // no fault here loses data or outlasts the 5 s lease: no hold may be reported lost
        assertEquals(0, lostUnlocks.get(), "unlocks that threw LockLostException");
        assertTrue(report.acquisitions() > 500, "enough holds: " + report.acquisitions());
        assertEquals(0, report.overlaps(), report.summaryLine());
        assertEquals(0, report.tokenViolations(), report.summaryLine());
      } finally {
        stop.set(true);
        child.close();
        for (Turnstile t : clients) {
          t.close();
        }
      }
    }
  }

  /** Grants taken from a cache so far, by the clients of this JVM and the child's last report. */
  private static long takes(List<RedisLock> locks, JvmProcess child) {
    long n = 0;
    for (RedisLock l : locks) {
      n += l.cache.takes.get();
    }
    List<String> out = child.output();
    for (int i = out.size() - 1; i >= 0; i--) {
      if (out.get(i).startsWith("T ")) {
        return n + Long.parseLong(out.get(i).substring(2).trim());
      }
    }
    return n;
  }

  /** The client that Redis names as the lock's cache (field {@code c}), or null. */
  private static String cachedBy(RedisServerProcess p, String lockKey) {
    try {
      String c = p.command("HGET", lockKey, "c");
      return c == null || c.isBlank() ? null : c.trim();
    } catch (RuntimeException e) {
      return null;
    }
  }

  /**
   * Adds the child JVM's holds from its output: each {@code A} line ends at its thread's next
   * {@code E} line (printed just before the unlock), unless an {@code L} line follows (the unlock
   * found the lease lost); an {@code A} line with no {@code E} after it was cut off by the kill, and
   * ends then.
   *
   * @return the holds added
   */
  private static int addChildHolds(History history, List<String> lines, long killedAt) {
    Map<String, long[]> open = new HashMap<>(); // thread -> {token, start, end (0 while open)}
    int added = 0;
    for (String line : lines) {
      String[] f = line.trim().split(" ");
      switch (f[0]) {
        case "A" -> {
          added += commit(history, open.get(f[1]), killedAt);
          open.put(f[1], new long[] {Long.parseLong(f[2]), Long.parseLong(f[3]), 0});
        }
        case "E" -> {
          long[] h = open.get(f[1]);
          if (h != null) {
            h[2] = Long.parseLong(f[2]);
          }
        }
        case "L" -> open.remove(f[1]);
        default -> { }
      }
    }
    for (long[] h : open.values()) {
      added += commit(history, h, killedAt);
    }
    return added;
  }

  private static int commit(History history, long[] h, long killedAt) {
    if (h == null) {
      return 0;
    }
    history.add("child", h[0], 1, h[1], h[2] != 0 ? h[2] : killedAt);
    return 1;
  }
}
