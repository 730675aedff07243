package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The registry stays bounded, and lease renewal is one batched round trip per tick. */
class RegistryAndWatchdogTest {

  /** Millions of distinct names: unreferenced, unlocked instances are collected; heap stays bounded. */
  @Test
  void registryIsBounded() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile turnstile = Turnstile.connect(server.uri(), TestSupport.UNCACHED)) {
      long baseline = usedHeapAfterGc();
      DistributedLock kept = turnstile.lock("kept");
      for (int i = 0; i < 2_000_000; i++) {
        turnstile.lock("name-" + i);
      }
      long cached = Long.MAX_VALUE;
      for (int i = 0; i < 20 && cached > 1000; i++) { // cleared weak references are enqueued lazily
        usedHeapAfterGc();
        cached = turnstile.cachedLocks();
      }
      long used = usedHeapAfterGc();
      System.out.println("after 2M names: cached=" + cached + " heap delta=" + (used - baseline) / 1024 / 1024 + " MB");
      assertTrue(cached < 100_000, "registry holds " + cached + " instances");
      assertTrue(used - baseline < 64L * 1024 * 1024, "heap grew by " + (used - baseline) + " bytes");
      assertTrue(kept == turnstile.lock("kept"), "a referenced instance is kept");
    }
  }

  private static long usedHeapAfterGc() throws InterruptedException {
    for (int i = 0; i < 4; i++) {
      System.gc();
      Thread.sleep(50);
    }
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  /**
   * 100 held locks are renewed with one script call per tick (not 100), survive well past their
   * lease, and renewal stops once they are released.
   */
  @Test
  void renewalIsBatched() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start()) {
      TestRedis redis = TestRedis.of(server.uri(), server.host(), server.port(), "process");
      TurnstileOptions options = TurnstileOptions.builder().lockCaching(false)
          .leaseTime(Duration.ofMillis(1500))
          .renewInterval(Duration.ofMillis(500))
          .build();
      try (Turnstile turnstile = Turnstile.connect(redis.uri(), options)) {
        List<DistributedLock> locks = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
          DistributedLock l = turnstile.lock(unique("batch-" + i));
          l.lock();
          locks.add(l);
        }
        Map<String, Long> before = TestSupport.commandStats(redis);
        Thread.sleep(3000);
        Map<String, Long> after = TestSupport.commandStats(redis);
        // the client's identity record (DESIGN §16), rewritten once a lease: not a renewal
        long identityWrites = TestSupport.identityWrites(before, after);
        assertTrue(identityWrites <= 3, "identity writes: at most one a lease (1.5 s), got " + identityWrites);
        long scripts = TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval")
            - identityWrites;
        System.out.println("renewal scripts for 100 locks over 3 s at 500 ms ticks: " + scripts);
        assertTrue(scripts >= 4 && scripts <= 8, "one renewal per tick for all 100 locks, got " + scripts);
        for (DistributedLock l : locks) {
          assertTrue(l.isHeldByCurrentThread(), "held past its lease thanks to renewal");
          l.unlock();
        }
        Map<String, Long> released = TestSupport.commandStats(redis);
        Thread.sleep(1200);
        Map<String, Long> later = TestSupport.commandStats(redis);
        // the identity record is rewritten once a lease while the client is open, holding or not:
        // not a renewal
        long idleIdentity = TestSupport.identityWrites(released, later);
        assertTrue(idleIdentity <= 1, "identity writes in 1.2 s, at most one a lease (1.5 s): " + idleIdentity);
        assertEquals(TestSupport.totalCalls(released, "evalsha", "eval"),
            TestSupport.totalCalls(later, "evalsha", "eval") - idleIdentity, "no renewal after unlock");
      }
    }
  }
}
