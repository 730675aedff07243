package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Many waiters of one client, blocked on every master of a Cluster, give up at once (a recovery
 * event) before the client has ever unblocked anything. The first {@code CLIENT UNBLOCK} decides
 * whether the client may; the others wait for its verdict and are sent from the thread
 * that completes it, a Lettuce event loop, where nothing may block: {@code Topology.unblock} on a
 * Cluster used {@code getConnection(host, port)}, which opens a node connection synchronously the
 * first time, and now uses {@code getConnectionAsync}. This test did not fail with the synchronous
 * version on an idle machine (the node connections opened quickly); it guards the property: every
 * waiter is unblocked (none closed) at once, and the client answers meanwhile.
 */
@ExtendWith(RedisExtension.class)
@RedisTopology(RedisTopology.Kind.CLUSTER)
class UnblockOnClusterTest {
  private static final int WAITERS = 12;

  /** CLIENT UNBLOCK calls on every master (Redis 7+ counts the subcommand; 6.2 under client). */
  private static long unblocks(TestRedis redis) {
    long n = 0;
    for (String stats : redis.commandOnEachMaster("INFO", "commandstats")) {
      n += NoAdmin.calls(stats, "client|unblock") + NoAdmin.calls(stats, "client");
    }
    return n;
  }

  @Test
  void simultaneousFirstGiveUpsOnEveryMasterDoNotStallTheClient(TestRedis redis) throws Exception {
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile t = Turnstile.connect(redis.uri())) {
      List<DistributedLock> held = new ArrayList<>();
      List<CompletableFuture<Long>> acquired = new ArrayList<>();
      for (int i = 0; i < WAITERS; i++) {
        String name = unique("unblock-cluster-" + i);
        DistributedLock h = holder.lock(name);
        h.lock();
        held.add(h);
        DistributedLock mine = t.lock(name);
        acquired.add(CompletableFuture.supplyAsync(() -> {
          mine.lock();
          long at = System.nanoTime();
          mine.unlock();
          return at;
        }, r -> TestSupport.start("waiter", r::run)));
      }
      TestSupport.await("every waiter blocked in Redis", Duration.ofSeconds(20),
          () -> redis.infoSum("clients", "blocked_clients") == WAITERS);
      long unblocks = unblocks(redis);
      long firedAt = System.nanoTime();
      t.engine().recovered(); // every waiter gives up its BLPOP at once, and attempts again
      TestSupport.await("every waiter unblocked (or closed)", Duration.ofSeconds(30),
          () -> unblocks(redis) - unblocks + t.engine().abandonedByClose.sum() >= WAITERS);
      long unblockedMs = TestSupport.millisSince(firedAt);
      long probeStart = System.nanoTime();
      t.lock(unique("unblock-cluster-probe")).isLocked(); // the client answers
      long answeredMs = TestSupport.millisSince(probeStart);
      long releasedAt = System.nanoTime();
      for (DistributedLock h : held) {
        h.unlock();
      }
      long worst = 0;
      for (CompletableFuture<Long> a : acquired) {
        worst = Math.max(worst, TimeUnit.NANOSECONDS.toMillis(a.get(60, TimeUnit.SECONDS) - releasedAt));
      }
      System.err.println("[turnstile-testing] UnblockOnClusterTest: " + WAITERS + " waiters gave up at once; "
          + "closed " + t.engine().abandonedByClose.sum() + ", all unblocked within " + unblockedMs
          + " ms, the client answered in " + answeredMs + " ms, all acquired within " + worst
          + " ms of the releases");
      assertEquals(0, t.engine().abandonedByClose.sum(), "every waiter was unblocked, none closed");
      assertTrue(unblockedMs < 5000, "all unblocked within " + unblockedMs + " ms");
      assertTrue(answeredMs < 5000, "the client answered in " + answeredMs + " ms");
      assertTrue(worst < 5000, "acquired within " + worst + " ms of the releases");
    }
  }
}
