package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/** What is particular to a Redis Cluster: slots, per-slot renewal, no broadcast wake-ups, URIs. */
@ExtendWith(RedisExtension.class)
@RedisTopology(RedisTopology.Kind.CLUSTER)
class ClusterTopologyTest {
  private final TestRedis redis;

  ClusterTopologyTest(TestRedis redis) {
    this.redis = redis;
  }

  /**
   * One client holds 40 locks spread over many slots (and all three masters) for several leases;
   * the watchdog renews them with one script per slot per tick, all sent together, and none is lost.
   */
  @Test
  void watchdogRenewsLocksOnEverySlotAndMaster() throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(900))
        .renewInterval(Duration.ofMillis(300)).build();
    try (Turnstile t = Turnstile.connect(redis.uri(), options)) {
      List<DistributedLock> held = new ArrayList<>();
      Set<String> slots = new HashSet<>();
      for (int i = 0; i < 40; i++) {
        DistributedLock l = t.lock(unique("renew-" + i));
        l.lock();
        held.add(l);
        slots.add(redis.command("CLUSTER", "KEYSLOT", ((RedisLock) l).lockKey));
      }
      assertTrue(slots.size() > 30, "the names spread over many slots: " + slots.size());
      Map<String, Long> before = TestSupport.commandStats(redis);
      Thread.sleep(3000); // more than three leases
      Map<String, Long> after = TestSupport.commandStats(redis);
      for (DistributedLock l : held) {
        assertTrue(l.isHeldByCurrentThread(), l + " lost");
        l.unlock();
      }
      long scripts = TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval");
      long ticks = 3000 / 300;
      // one renewal script per slot per tick (a tick may be skipped while one is in flight)
      assertTrue(scripts <= (ticks + 1) * slots.size(), scripts + " scripts for " + slots.size() + " slots");
      assertTrue(scripts >= (ticks / 2) * slots.size(), scripts + " scripts for " + slots.size() + " slots");
    }
  }

  /** Contended locks on a Cluster wake waiters through token lists: not one PUBLISH anywhere. */
  @Test
  void wakeUpsNeverBroadcast() throws Exception {
    Map<String, Long> before = TestSupport.commandStats(redis);
    try (Turnstile a = Turnstile.connect(redis.uri(), TestSupport.UNCACHED);
        Turnstile b = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      List<Thread> threads = new ArrayList<>();
      String[] names = {unique("nopub-0"), unique("nopub-1"), unique("nopub-2")};
      long[] count = new long[1];
      for (Turnstile t : List.of(a, b)) {
        for (int k = 0; k < 3; k++) {
          threads.add(TestSupport.start("w" + k, () -> {
            for (int i = 0; i < 30; i++) {
              DistributedLock l = t.lock(names[i % names.length]);
              assertTrue(l.tryLock(10, TimeUnit.SECONDS));
              try {
                Thread.sleep(1);
              } finally {
                l.unlock();
              }
            }
            synchronized (count) {
              count[0] += 30;
            }
          }));
        }
      }
      for (Thread th : threads) {
        th.join(60_000);
      }
      assertEquals(180, count[0]);
    }
    Map<String, Long> after = TestSupport.commandStats(redis);
    assertEquals(TestSupport.totalCalls(before, "publish", "spublish"),
        TestSupport.totalCalls(after, "publish", "spublish"), "no pub/sub traffic");
    assertTrue(TestSupport.totalCalls(after, "blpop") > TestSupport.totalCalls(before, "blpop"),
        "waiters blocked on token lists");
  }

  /** Cluster-bus counters of one node (CLUSTER INFO): publish messages sent and received. */
  private static long busMessages(String clusterInfo, String field) {
    for (String line : clusterInfo.split("\r?\n")) {
      if (line.startsWith(field + ":")) {
        return Long.parseLong(line.substring(field.length() + 1).trim());
      }
    }
    return 0;
  }

  /**
   * A waiter past the pool waits by sharded pub/sub (Redis 7+): the release SPUBLISHes on the
   * lock's master only, and no other master receives a publish over the cluster bus (a plain
   * PUBLISH on a Cluster is broadcast to every node). Skipped, loudly, on Redis older than 7.0.
   */
  @Test
  void pubSubWakeUpsStayOnTheShard() throws Exception {
    int major = Integer.parseInt(redis.version().split("\\.")[0]);
    if (major < 7) {
      System.err.println("[turnstile-testing] SKIPPED ClusterTopologyTest.pubSubWakeUpsStayOnTheShard: sharded"
          + " pub/sub needs Redis 7.0 or later, this cluster runs " + redis.version()
          + " (install redis-server 7 on PATH; .ci/run does)");
      org.junit.jupiter.api.Assumptions.assumeTrue(false, "Redis " + redis.version() + " has no sharded pub/sub");
    }
    String busy = unique("shard-busy");
    String woken = unique("shard-woken");
    TurnstileOptions onePool = TurnstileOptions.builder().blockingPoolSize(1).build();
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile waiter = Turnstile.connect(redis.uri(), onePool)) {
      holder.lock(busy).lock();
      DistributedLock target = holder.lock(woken);
      target.lock();
      // the only pooled connection goes to the first waiter; the second waits by pub/sub
      Thread first = TestSupport.start("busy-waiter", () -> {
        DistributedLock l = waiter.lock(busy);
        if (l.tryLock(20, TimeUnit.SECONDS)) {
          l.unlock();
        }
      });
      TestSupport.awaitWaiting(first);
      Thread.sleep(200);
      long[] acquiredAt = new long[1];
      Thread second = TestSupport.start("pubsub-waiter", () -> {
        DistributedLock l = waiter.lock(woken);
        l.lock();
        acquiredAt[0] = System.nanoTime();
        l.unlock();
      });
      TestSupport.await("the second waiter subscribed", Duration.ofSeconds(10),
          () -> TestSupport.waitersInRedis(redis) >= 2);
      Thread.sleep(200);
      List<String> statsBefore = redis.commandOnEachMaster("INFO", "commandstats");
      List<String> busBefore = redis.commandOnEachMaster("CLUSTER", "INFO");
      long releasedAt = System.nanoTime();
      target.unlock();
      second.join(5000);
      assertTrue(acquiredAt[0] != 0, "the pub/sub waiter acquired");
      long ms = TimeUnit.NANOSECONDS.toMillis(acquiredAt[0] - releasedAt);
      List<String> statsAfter = redis.commandOnEachMaster("INFO", "commandstats");
      List<String> busAfter = redis.commandOnEachMaster("CLUSTER", "INFO");
      int publishingMasters = 0;
      for (int i = 0; i < statsBefore.size(); i++) {
        long spub = calls(statsAfter.get(i), "spublish") - calls(statsBefore.get(i), "spublish");
        long pub = calls(statsAfter.get(i), "publish") - calls(statsBefore.get(i), "publish");
        assertEquals(0, pub, "no plain PUBLISH on master " + i);
        if (spub > 0) {
          publishingMasters++;
          continue;
        }
        for (String f : List.of("cluster_stats_messages_publish_received", "cluster_stats_messages_publishshard_received")) {
          assertEquals(busMessages(busBefore.get(i), f), busMessages(busAfter.get(i), f),
              f + " on master " + i + ", which does not serve the lock's slot");
        }
      }
      assertEquals(1, publishingMasters, "exactly the lock's master published");
      assertTrue(ms < Bounds.PROMPT_MS, "woken " + ms + " ms after the release");
      holder.lock(busy).unlock();
      first.join(5000);
    }
  }

  private static long calls(String commandStats, String command) {
    for (String line : commandStats.split("\r?\n")) {
      if (line.startsWith("cmdstat_" + command + ":")) {
        int c = line.indexOf("calls=");
        return Long.parseLong(line.substring(c + 6, line.indexOf(',', c)));
      }
    }
    return 0;
  }

  /** Turnstile.create on an application-owned RedisClusterClient; close() leaves the client usable. */
  @Test
  void createOnAnApplicationOwnedClusterClient() throws Exception {
    RedisClusterClient client = RedisClusterClient.create(Turnstile.clusterSeeds(redis.uri()));
    try {
      String name = unique("owned");
      try (Turnstile t = Turnstile.create(client, TurnstileOptions.defaults())) {
        DistributedLock l = t.lock(name);
        assertTrue(l.tryLock(1, TimeUnit.SECONDS));
        l.unlock();
      }
      try (var c = client.connect()) {
        assertEquals("PONG", c.sync().ping(), "the application's client is still open");
      }
    } finally {
      client.shutdown();
    }
  }

  @Test
  void clusterUrisCarryCredentialsAndSeveralSeeds() {
    List<RedisURI> seeds = Turnstile.clusterSeeds("redis-cluster://user:secret@10.0.0.1:7000,10.0.0.2,10.0.0.3:7002/0?timeout=3s");
    assertEquals(3, seeds.size());
    assertEquals("10.0.0.2", seeds.get(1).getHost());
    assertEquals(6379, seeds.get(1).getPort());
    assertEquals(7002, seeds.get(2).getPort());
    for (RedisURI u : seeds) {
      io.lettuce.core.RedisCredentials credentials = u.getCredentialsProvider().resolveCredentials().block();
      assertEquals("user", credentials.getUsername());
      assertEquals("secret", new String(credentials.getPassword()));
      assertEquals(Duration.ofSeconds(3), u.getTimeout());
    }
    assertTrue(Turnstile.clusterSeeds("rediss-cluster://h:1").get(0).isSsl());
    assertThrows(IllegalArgumentException.class, () -> Turnstile.clusterSeeds("redis-cluster://"));
    assertThrows(IllegalArgumentException.class, () -> Turnstile.connect("redis-cluster://,"));
  }
}
