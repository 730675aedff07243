package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.fault.History;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A randomized history with lock caching on: 3 clients × 4 threads take one lock in bursts (so
 * grants are cached, taken locally, handed on and revoked), while every connection is killed
 * from time to time and Redis is paused past nothing (a short {@code CLIENT PAUSE}). The checker
 * ({@link History}) reports overlapping holds and fencing tokens that do not grow in acquisition
 * order, across clients. Each hold is valid from its acquire's return to the last instant its
 * thread saw it held (read just before its unlock).
 */
class LockCachingHistoryTest {
  private static final long RUN_MILLIS = Long.getLong("turnstile.test.cachingHistoryMillis", 12_000);
  private static final long PHASE_NANOS = TimeUnit.MILLISECONDS.toNanos(1500);

  @Test
  void noOverlapAndTokensGrowAcrossClientsWithCaching() throws Exception {
    try (RedisServerProcess p = RedisServerProcess.start()) {
      String name = unique("cache-history");
      List<Turnstile> clients = new ArrayList<>();
      for (int c = 0; c < 3; c++) {
        clients.add(Turnstile.connect(p.uri(), TurnstileOptions.builder()
            .leaseTime(Duration.ofSeconds(5)).lockCaching(true).build()));
      }
      History history = new History();
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong failures = new AtomicLong();
      AtomicLong lostUnlocks = new AtomicLong();
      List<Thread> threads = new ArrayList<>();
      List<RedisLock> locks = new ArrayList<>();
      try {
        for (int c = 0; c < clients.size(); c++) {
          RedisLock lock = (RedisLock) clients.get(c).lock(name);
          locks.add(lock);
          String client = "c" + c;
          for (int t = 0; t < 4; t++) {
            threads.add(TestSupport.start(client + "-" + t, () -> {
              ThreadLocalRandom r = ThreadLocalRandom.current();
              int me = Integer.parseInt(client.substring(1));
              while (!stop.get()) {
                // one client at a time is busy for a phase (1.5 s, longer than the 1 s back-off
                // after a revocation: its grant gets cached, taken and handed on locally); the
                // others try now and then (revocations)
                boolean busy = (System.nanoTime() / PHASE_NANOS) % 3 == me;
                if (!busy) {
                  Thread.sleep(100 + r.nextInt(400));
                }
                int burst = busy ? 1 + r.nextInt(30) : 1;
                for (int i = 0; i < burst && !stop.get(); i++) {
                  try {
                    if (!lock.tryLock(2, TimeUnit.SECONDS)) {
                      continue;
                    }
                  } catch (TurnstileException e) {
                    failures.incrementAndGet(); // Redis unreachable for a moment (a killed connection)
                    continue;
                  }
                  long start = System.nanoTime();
                  long token = lock.fencingToken();
                  if (r.nextInt(4) == 0) {
                    Thread.sleep(r.nextInt(3));
                  }
                  long end = System.nanoTime();
                  boolean held = lock.isHeldByCurrentThread();
                  try {
                    lock.unlock();
                  } catch (LockLostException lost) {
                    held = false;
                    if (lostUnlocks.incrementAndGet() <= 3) {
                      System.out.println("[caching-history] lost unlock: " + lost.getMessage());
                    }
                  }
                  if (held) {
                    history.add(client, token, 1, start, end);
                  }
                }
                if (busy) {
                  Thread.sleep(r.nextInt(5));
                }
              }
            }));
          }
        }
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RUN_MILLIS);
        int kills = 0;
        while (System.nanoTime() - until < 0) {
          Thread.sleep(700 + ThreadLocalRandom.current().nextInt(600));
          if (ThreadLocalRandom.current().nextBoolean()) {
            p.command("CLIENT", "KILL", "TYPE", "normal");
          } else {
            p.command("CLIENT", "PAUSE", "150", "ALL");
          }
          kills++;
        }
        stop.set(true);
        for (Thread t : threads) {
          t.join(30_000);
          assertTrue(!t.isAlive(), t.getName() + " finished");
        }
        History.Report report = history.checkAndPrint("lock-caching-history", "lock", 1);
        long takes = 0;
        for (RedisLock l : locks) {
          takes += l.cache.takes.get();
        }
        System.out.println("[caching-history] holds " + report.acquisitions() + ", taken from a cache " + takes
            + ", faults " + kills + ", unreachable moments " + failures.get() + ", lost unlocks " + lostUnlocks.get());
        assertTrue(takes > 100, "the caches were used: " + takes + " takes");
        // no fault here loses data or outlasts the 5 s lease: no hold may be reported lost
        assertEquals(0, lostUnlocks.get(), "unlocks that threw LockLostException");
        assertTrue(report.acquisitions() > 500, "enough holds: " + report.acquisitions());
        assertEquals(0, report.overlaps(), report.summaryLine());
        assertEquals(0, report.tokenViolations(), report.summaryLine());
      } finally {
        stop.set(true);
        for (Turnstile t : clients) {
          t.close();
        }
      }
    }
  }
}
