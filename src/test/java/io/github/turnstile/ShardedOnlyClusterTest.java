package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.LeastPrivilege.Deployment;
import io.github.turnstile.testing.RedisClusterProcesses;
import io.github.turnstile.testing.RedisServerProcess;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.protocol.ProtocolVersion;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Forced sharded pub/sub: some managed Valkey services map {@code PUBLISH} to
 * {@code SPUBLISH}, so a Cluster delivers only sharded messages. Here every node has
 * {@code PUBLISH} and {@code SUBSCRIBE} renamed away, so a wake-up by plain pub/sub could not
 * happen at all, and Turnstile connects as the restricted user (no {@code INFO}: the server version
 * comes from the RESP3 handshake, or, on RESP2, is assumed to be 7.0 or later). The waits that go
 * by pub/sub (past a pool of one blocking connection, readers of a read/write lock, asynchronous
 * acquisitions) are each woken by the release, long before the holder's 30 s lease would run out.
 * Before the least-privilege work this client could not connect: it read the version with {@code INFO server},
 * refused to the user.
 */
class ShardedOnlyClusterTest {
  private static final String PASSWORD = "sharded-only-test";
  /** A lost wake-up costs the holder's whole lease (30 s); a delivered one about a millisecond. */
  private static final long WOKEN_WITHIN_MS = 10_000;

  @Test
  void wakeUpsWorkWhereOnlyShardedMessagesAreDelivered() throws Exception {
    String version;
    try (RedisServerProcess probe = RedisServerProcess.start()) {
      version = probe.version();
    }
    if (LeastPrivilege.major(version) < 7) {
      System.err.println("[turnstile-testing] SKIPPED ShardedOnlyClusterTest: sharded pub/sub needs Redis 7.0"
          + " or later, this redis-server is " + version);
      Assumptions.assumeTrue(false, "Redis " + version + " has no sharded pub/sub");
    }
    try (RedisClusterProcesses cluster = RedisClusterProcesses.start(3, 0, 15_000,
        "--rename-command", "PUBLISH", "", "--rename-command", "SUBSCRIBE", "")) {
      for (RedisServerProcess node : cluster.nodes()) {
        LeastPrivilege.createUser(node, LeastPrivilege.USER,
            LeastPrivilege.restrictedUser(Deployment.CLUSTER, LeastPrivilege.USER, PASSWORD));
      }
      String uri = cluster.uri().replace("redis-cluster://", "redis-cluster://" + LeastPrivilege.USER + ":"
          + PASSWORD + "@");
      TurnstileOptions onePooled = TurnstileOptions.builder().blockingPoolSize(1).build();
      try (Turnstile holder = Turnstile.connect(cluster.uri())) {
        try (Turnstile t = Turnstile.connect(uri, onePooled)) {
          wakeUps("RESP3", holder, t, cluster);
        }
        List<RedisURI> seeds = Turnstile.clusterSeeds(uri);
        RedisClusterClient client = RedisClusterClient.create(seeds);
        client.setOptions(ClusterClientOptions.builder().protocolVersion(ProtocolVersion.RESP2)
            .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build()).build());
        try (Turnstile t = Turnstile.create(client, onePooled)) {
          wakeUps("RESP2, INFO refused", holder, t, cluster);
        } finally {
          client.shutdown();
        }
      }
      // the same user lacks WAIT: replicaAcks fails at connect, on a Cluster too (NoAdminTest: one server)
      TurnstileException e = org.junit.jupiter.api.Assertions.assertThrows(TurnstileException.class,
          () -> Turnstile.connect(uri, TurnstileOptions.builder().replicaAcks(1, java.time.Duration.ofSeconds(1))
              .build()).close());
      assertTrue(e.getMessage().contains("replicaAcks(1, 1000 ms) needs WAIT"), e.getMessage());
    }
  }

  private static void wakeUps(String what, Turnstile holder, Turnstile t, RedisClusterProcesses cluster)
      throws Exception {
    assertTrue(t.engine().topology().sharded(), what + ": shard channels");
    long published = spublishCalls(cluster);
    // three locks on (likely) different masters: one waiter blocks in BLPOP, two wait by pub/sub
    List<DistributedLock> held = new ArrayList<>();
    List<CompletableFuture<Long>> woken = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      String name = unique("sharded-lock-" + i);
      DistributedLock l = holder.lock(name);
      l.lock();
      held.add(l);
      DistributedLock mine = t.lock(name);
      woken.add(CompletableFuture.supplyAsync(() -> {
        mine.lock();
        long at = System.nanoTime();
        mine.unlock();
        return at;
      }));
    }
    // a reader always waits by pub/sub; an asynchronous acquisition too
    String rwName = unique("sharded-rw");
    DistributedReadWriteLock rw = holder.readWriteLock(rwName);
    rw.writeLock().lock();
    DistributedLock reader = t.readWriteLock(rwName).readLock();
    woken.add(CompletableFuture.supplyAsync(() -> {
      reader.lock();
      long at = System.nanoTime();
      reader.unlock();
      return at;
    }));
    String asyncName = unique("sharded-async");
    DistributedLock asyncHeld = holder.lock(asyncName);
    asyncHeld.lock();
    woken.add(t.lock(asyncName).lockAsync().thenApply(hold -> {
      long at = System.nanoTime();
      hold.release();
      return at;
    }));
    TestSupport.await(what + ": the waiters to wait", java.time.Duration.ofSeconds(10),
        () -> t.engine().pool.inUse() == 1);
    Thread.sleep(500); // the pub/sub waiters subscribe and attempt
    long releasedAt = System.nanoTime();
    for (DistributedLock l : held) {
      l.unlock();
    }
    rw.writeLock().unlock();
    asyncHeld.unlock();
    List<Long> ms = new ArrayList<>();
    for (CompletableFuture<Long> w : woken) {
      ms.add(TimeUnit.NANOSECONDS.toMillis(w.get(60, TimeUnit.SECONDS) - releasedAt));
    }
    long spublished = spublishCalls(cluster) - published;
    System.err.println("[turnstile-testing] ShardedOnlyClusterTest (" + what + "): woken " + ms
        + " ms after the releases (3 locks, 1 reader, 1 async), SPUBLISH calls " + spublished);
    for (long m : ms) {
      assertTrue(m < WOKEN_WITHIN_MS, what + ": woken " + ms + " ms after the releases, not at the 30 s lease");
    }
    assertTrue(spublished > 0, what + ": the releases published on shard channels");
  }

  private static long spublishCalls(RedisClusterProcesses cluster) {
    long n = 0;
    for (RedisServerProcess node : cluster.nodes()) {
      n += NoAdmin.calls(node.command("INFO", "commandstats"), "spublish");
    }
    return n;
  }
}
