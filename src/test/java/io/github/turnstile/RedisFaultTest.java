package io.github.turnstile;

import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import io.github.turnstile.testing.Bounds;

/** Redis down, paused, or with its script cache flushed. Each test runs its own redis-server. */
class RedisFaultTest {

  /**
   * Redis down: tryLock() (no wait) fails fast with a clear TurnstileException; tryLock(t)
   * returns false within t + 50 ms; an untimed lock() rides through the outage and succeeds once
   * Redis is back; an unlock during the outage returns at once. Nothing is held locally meanwhile.
   */
  @Test
  void redisDownThenBack() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri())) {
      DistributedLock lock = turnstile.lock(unique("down"));
      lock.lock();
      lock.unlock();
      server.kill9();
      TestSupport.await("client noticed", Duration.ofSeconds(5), () -> {
        try {
          lock.tryLock();
          lock.unlock();
          return false;
        } catch (TurnstileException e) {
          return true;
        }
      });
      TurnstileException e = assertThrows(TurnstileException.class, lock::tryLock);
      assertTrue(e.getMessage().contains("not reachable"), e.getMessage());
      long start = System.nanoTime();
      assertFalse(lock.tryLock(2, TimeUnit.SECONDS), "its time ran out while Redis was down");
      long elapsed = millisSince(start);
      assertTrue(elapsed >= 2000 && elapsed < 2000 + Bounds.OVERRUN_MS, "tryLock(2 s) returned after " + elapsed + " ms");
      assertEquals(0, lock.getHoldCount());
      assertFalse(lock.isHeldByCurrentThread());
      long[] acquiredAt = new long[1];
      Thread rider = TestSupport.start("rider", () -> {
        lock.lock(); // waits through the outage
        acquiredAt[0] = System.nanoTime();
        lock.unlock();
      });
      Thread.sleep(1000);
      assertTrue(rider.isAlive(), "lock() waits while Redis is down");
      server.restart();
      long backAt = System.nanoTime();
      rider.join(30_000);
      assertFalse(rider.isAlive());
      assertTrue(acquiredAt[0] != 0, "lock() acquired once Redis was back");
      long resumed = TimeUnit.NANOSECONDS.toMillis(acquiredAt[0] - backAt);
      assertTrue(resumed < Bounds.PROMPT_MS, "acquired " + resumed + " ms after Redis was back");
      assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
      assertTrue(lock.isHeldByCurrentThread());
      server.kill9();
      start = System.nanoTime();
      lock.unlock(); // finishes locally at once; the release completes (or the lease ends) later
      assertTrue(millisSince(start) < Bounds.OVERRUN_MS, "unlock during an outage returned in " + millisSince(start) + " ms");
      assertFalse(lock.isHeldByCurrentThread());
      server.restart();
      assertTrue(lock.tryLock(5, TimeUnit.SECONDS), "free again once Redis is back");
      lock.unlock();
    }
  }

  /**
   * An untimed lock() gives up after the outage tolerance of continuous unavailability, with a
   * TurnstileException that says for how long Redis was unreachable; it holds nothing.
   */
  @Test
  void outageLongerThanToleranceFailsUntimedCalls() throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().outageTolerance(Duration.ofMillis(800)).build();
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri(), options)) {
      DistributedLock lock = turnstile.lock(unique("tolerance"));
      DistributedSemaphore sem = turnstile.semaphore(unique("tolerance-sem"), 1);
      server.kill9();
      long start = System.nanoTime();
      TurnstileException e = assertThrows(TurnstileException.class, lock::lock);
      long elapsed = millisSince(start);
      assertTrue(elapsed >= 700 && elapsed < 800 + Bounds.OVERRUN_MS, "gave up after " + elapsed + " ms");
      assertTrue(e.getMessage().contains("unreachable for") && e.getMessage().contains("outage tolerance"),
          e.getMessage());
      assertEquals(0, lock.getHoldCount());
      assertThrows(TurnstileException.class, sem::acquireUninterruptibly);
      assertEquals(0, sem.heldPermits());
      server.restart();
      TestSupport.await("works again", Duration.ofSeconds(10), () -> {
        try {
          return lock.tryLock(1, TimeUnit.SECONDS);
        } catch (InterruptedException ex) {
          return false;
        }
      });
      lock.unlock();
    }
  }

  /** Redis paused (SIGSTOP): tryLock(t) returns within about t, and all is well after SIGCONT. */
  @Test
  void redisPausedTryLockHonoursTimeout() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri())) {
      DistributedLock lock = turnstile.lock(unique("paused"));
      server.pause();
      try {
        long start = System.nanoTime();
        boolean got = lock.tryLock(300, TimeUnit.MILLISECONDS);
        long elapsed = millisSince(start);
        assertFalse(got);
        assertTrue(elapsed < 300 + Bounds.OVERRUN_MS, "returned in " + elapsed + " ms");
      } finally {
        server.resume();
      }
      assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
      lock.unlock();
      // the attempt abandoned while Redis was paused ran later and was cancelled: nothing is held
      assertFalse(lock.isLocked());
    }
  }

  /**
   * A counting semaphore's release that Redis answers only after {@code release()} returned (Redis
   * paused), and that it refuses (the free permits would pass {@code Integer.MAX_VALUE}): the
   * refusal, which can no longer be thrown, is logged, and nothing changed.
   */
  @Test
  void aCountingReleaseRefusedAfterItReturnedIsLogged() throws Exception {
    java.util.logging.Logger log = java.util.logging.Logger.getLogger("io.github.turnstile");
    java.util.List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
    java.util.logging.Handler probe = new java.util.logging.Handler() {
      @Override
      public void publish(java.util.logging.LogRecord r) {
        if (r.getLevel() == java.util.logging.Level.WARNING && r.getMessage() != null) {
          warnings.add(r.getMessage());
        }
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri())) {
      DistributedSemaphore s = turnstile.countingSemaphore(unique("late-overflow"), Integer.MAX_VALUE - 1);
      log.addHandler(probe);
      try {
        server.pause();
        try {
          s.release(2); // finishes locally once Redis has not answered for 250 ms
        } finally {
          server.resume();
        }
        TestSupport.await("the refusal logged", Duration.ofSeconds(10),
            () -> warnings.stream().anyMatch(w -> w.contains("Maximum permit count exceeded")));
      } finally {
        log.removeHandler(probe);
      }
      assertEquals(Integer.MAX_VALUE - 1, s.availablePermits(), "nothing changed");
    }
  }

  /** SCRIPT FLUSH while in use: scripts are reloaded transparently (EVALSHA, NOSCRIPT, EVAL). */
  @Test
  void scriptFlushIsTransparent() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri())) {
      DistributedLock lock = turnstile.lock(unique("flush"));
      lock.lock();
      long t1 = lock.fencingToken();
      server.command("SCRIPT", "FLUSH");
      lock.unlock();
      server.command("SCRIPT", "FLUSH");
      assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
      assertTrue(lock.fencingToken() > t1);
      lock.unlock();
      Map<String, Long> stats = TestSupport.commandStats(io.github.turnstile.testing.TestRedis.of(server.uri(), server.host(), server.port(), "process"));
      assertTrue(stats.getOrDefault("eval", 0L) >= 2, "fell back to EVAL: " + stats);
    }
  }
}
