package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.LeastPrivilege.Deployment;
import io.github.turnstile.testing.RedisClusterProcesses;
import io.github.turnstile.testing.RedisSentinelProcesses;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The README's ACL lines on a Redis Cluster (the Cluster line, on every node) and on Sentinel (the
 * one-server line, on both data nodes): two clients run locks, read/write locks and a semaphore
 * through both tiers of waiting (a pool of one blocking connection, so waits also go to pub/sub,
 * sharded on the Cluster), give up timed waits (CLIENT UNBLOCK), ask isLocked(), and acquire with
 * replica acknowledgement (WAIT); afterwards no node's {@code ACL LOG} holds a refusal.
 */
class AclDeploymentsTest {
  private static final String PASSWORD = "acl-deployments-test";

  @Test
  void cluster() throws Exception {
    String version;
    try (RedisServerProcess probe = RedisServerProcess.start()) {
      version = probe.version();
    }
    if (LeastPrivilege.major(version) < 7) {
      System.err.println("[turnstile-testing] SKIPPED AclDeploymentsTest.cluster: the Cluster ACL line needs"
          + " Redis 7.0 or later (sharded pub/sub), this redis-server is " + version
          + " (install redis-server 7 on PATH; .ci/run does)");
      Assumptions.assumeTrue(false, "Redis " + version + " has no sharded pub/sub");
    }
    try (RedisClusterProcesses cluster = RedisClusterProcesses.start(3, 1, 15_000)) {
      for (RedisServerProcess node : cluster.nodes()) {
        LeastPrivilege.createUser(node, Deployment.CLUSTER, LeastPrivilege.USER, PASSWORD, r -> r);
      }
      String uri = cluster.uri().replace("redis-cluster://", "redis-cluster://" + LeastPrivilege.USER + ":"
          + PASSWORD + "@");
      workload(uri);
      assertNoRefusals(cluster.nodes());
      assertUsed(cluster.nodes(), "ssubscribe", "spublish", "blpop", "client|unblock", "wait");

      // A user without the topology refresh's command cannot connect, and is told which command it lacks.
      for (RedisServerProcess node : cluster.nodes()) {
        LeastPrivilege.createUser(node, Deployment.CLUSTER, "no-nodes", PASSWORD, rules -> {
          List<String> out = new ArrayList<>(rules);
          assertTrue(out.remove("+cluster|nodes"));
          return out;
        });
      }
      String noNodes = cluster.uri().replace("redis-cluster://", "redis-cluster://no-nodes:" + PASSWORD + "@");
      TurnstileException e = assertThrows(TurnstileException.class, () -> Turnstile.connect(noNodes).close());
      assertTrue(e.getMessage().contains("'cluster|nodes'"), e.getMessage());
      System.err.println("[turnstile-testing] AclDeploymentsTest.cluster, without +cluster|nodes: " + e.getMessage());
    }
  }

  @Test
  void sentinel() throws Exception {
    try (RedisSentinelProcesses s = RedisSentinelProcesses.start()) {
      for (RedisServerProcess node : s.dataNodes()) {
        LeastPrivilege.createUser(node, Deployment.STANDALONE, LeastPrivilege.USER, PASSWORD, r -> r);
      }
      // Lettuce sends the URI's credentials to the data nodes, none to the sentinels
      String uri = s.uri().replace("redis-sentinel://", "redis-sentinel://" + LeastPrivilege.USER + ":"
          + PASSWORD + "@");
      workload(uri);
      assertNoRefusals(s.dataNodes());
      assertUsed(s.dataNodes(), "subscribe", "publish", "blpop", "client|unblock", "wait");
    }
  }

  private static void assertNoRefusals(List<RedisServerProcess> nodes) {
    for (RedisServerProcess node : nodes) {
      assertEquals(List.of(), LeastPrivilege.refusals(node.command("ACL", "LOG")),
          "ACL LOG of " + node + ": commands Redis refused to the README's user");
    }
  }

  /** The workload went through every tier it is meant to (INFO commandstats, added up over the nodes). */
  private static void assertUsed(List<RedisServerProcess> nodes, String... commands) {
    // Redis 6.2 counts subcommands under their container (cmdstat_client)
    boolean subcommands = LeastPrivilege.major(nodes.get(0).version()) >= 7;
    for (String c : commands) {
      String counted = subcommands || !c.contains("|") ? c : c.substring(0, c.indexOf('|'));
      long calls = 0;
      for (RedisServerProcess node : nodes) {
        for (String line : node.command("INFO", "commandstats").split("\\r?\\n")) {
          if (line.startsWith("cmdstat_" + counted + ":calls=")) {
            calls += Long.parseLong(line.substring(line.indexOf('=') + 1, line.indexOf(',')));
          }
        }
      }
      assertTrue(calls > 0, "the workload ran " + c);
    }
  }

  private static void workload(String uri) throws Exception {
    TurnstileOptions small = TurnstileOptions.builder().blockingPoolSize(1).build();
    TurnstileOptions acked = TurnstileOptions.builder().replicaAcks(1, Duration.ofSeconds(5)).build();
    try (Turnstile a = Turnstile.connect(uri, acked); Turnstile b = Turnstile.connect(uri, small)) {
      // locks: b waits for two at once, on its one blocking connection and by (sharded) pub/sub
      List<DistributedLock> held = new ArrayList<>();
      List<CompletableFuture<Long>> waits = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        String name = unique("acl-lock-" + i);
        DistributedLock l = a.lock(name);
        l.lock(); // acknowledged by a replica (WAIT)
        held.add(l);
        DistributedLock theirs = b.lock(name);
        assertTrue(theirs.isLocked());
        assertFalse(theirs.tryLock(50, TimeUnit.MILLISECONDS), "times out: its wait is unblocked");
        waits.add(CompletableFuture.supplyAsync(() -> {
          theirs.lock();
          long token = theirs.fencingToken();
          theirs.unlock();
          return token;
        }));
      }
      Thread.sleep(200); // both wait in Redis
      for (DistributedLock l : held) {
        l.unlock();
      }
      for (CompletableFuture<Long> w : waits) {
        assertTrue(w.get(10, TimeUnit.SECONDS) > 0);
      }

      // read/write lock: readers always wait by pub/sub; a write release publishes once
      String rwName = unique("acl-rw");
      DistributedReadWriteLock rwA = a.readWriteLock(rwName);
      rwA.writeLock().lock();
      CompletableFuture<Boolean> reader = CompletableFuture.supplyAsync(() -> {
        DistributedLock r = b.readWriteLock(rwName).readLock();
        r.lock();
        r.unlock();
        return true;
      });
      Thread.sleep(200);
      rwA.writeLock().unlock();
      assertTrue(reader.get(10, TimeUnit.SECONDS));

      // semaphore: a waiter blocked on the wake list, woken by the release
      String semName = unique("acl-sem");
      DistributedSemaphore semA = a.semaphore(semName, 1);
      semA.acquire();
      DistributedSemaphore semB = b.semaphore(semName, 1);
      assertFalse(semB.tryAcquire(50, TimeUnit.MILLISECONDS));
      CompletableFuture<Boolean> permit = CompletableFuture.supplyAsync(() -> {
        semB.acquireUninterruptibly();
        semB.release();
        return true;
      });
      Thread.sleep(200);
      semA.release();
      assertTrue(permit.get(10, TimeUnit.SECONDS));
      assertEquals(1, semA.availablePermits());
    }
  }
}
