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

/** Redis down, paused, or with its script cache flushed. Each test runs its own redis-server. */
class RedisFaultTest {

  /** Redis down: a clear TurnstileException, nothing held locally, and retry works once it is back. */
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
      long start = System.nanoTime();
      TurnstileException e = assertThrows(TurnstileException.class, () -> lock.tryLock(2, TimeUnit.SECONDS));
      assertTrue(millisSince(start) < 2500, "no hang beyond the caller's timeout");
      assertTrue(e.getMessage().contains("not reachable") || e.getMessage().contains("did not answer"), e.getMessage());
      assertThrows(TurnstileException.class, lock::lock);
      assertEquals(0, lock.getHoldCount());
      assertFalse(lock.isHeldByCurrentThread());
      server.restart();
      TestSupport.await("works again", Duration.ofSeconds(20), () -> {
        try {
          return lock.tryLock(1, TimeUnit.SECONDS);
        } catch (TurnstileException | InterruptedException ex) {
          return false;
        }
      });
      assertTrue(lock.isHeldByCurrentThread());
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
        assertTrue(elapsed < 600, "returned in " + elapsed + " ms");
      } finally {
        server.resume();
      }
      assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
      lock.unlock();
      // the attempt abandoned while Redis was paused ran later and was cancelled: nothing is held
      assertFalse(lock.isLocked());
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
