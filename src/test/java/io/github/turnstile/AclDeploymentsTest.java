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
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The README's ACL lines on a Redis Cluster (the Cluster line, on every node) and on Sentinel (the
 * one-server line, on both data nodes): two clients run locks, read/write locks and a semaphore
 * through both tiers of waiting (a pool of one blocking connection, so waits also go to pub/sub,
 * sharded on the Cluster), give up timed waits and an interrupted one (CLIENT UNBLOCK), ask
 * isLocked(), and acquire with replica acknowledgement (WAIT). As the user of the default line and
 * the optional line, no node's {@code ACL LOG} holds a refusal afterwards; as the restricted user
 * (the default line without {@code +client|setname}: none of the optional commands), the same
 * workload without replica acknowledgement runs, and each of those commands is refused at most once
 * per client ({@link NoAdmin}).
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
        LeastPrivilege.createFullUser(node, Deployment.CLUSTER, LeastPrivilege.USER, PASSWORD);
      }
      String uri = cluster.uri().replace("redis-cluster://", "redis-cluster://" + LeastPrivilege.USER + ":"
          + PASSWORD + "@");
      workload(cluster.nodes(), uri, true);
      assertNoRefusals(cluster.nodes());
      assertUsed(cluster.nodes(), "ssubscribe", "spublish", "blpop", "client|unblock", "wait");

      restricted(cluster.nodes(), Deployment.CLUSTER, uri, true);

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
        LeastPrivilege.createFullUser(node, Deployment.STANDALONE, LeastPrivilege.USER, PASSWORD);
      }
      // Lettuce sends the URI's credentials to the data nodes, none to the sentinels
      String uri = s.uri().replace("redis-sentinel://", "redis-sentinel://" + LeastPrivilege.USER + ":"
          + PASSWORD + "@");
      workload(s.dataNodes(), uri, true);
      assertNoRefusals(s.dataNodes());
      assertUsed(s.dataNodes(), "subscribe", "publish", "blpop", "client|unblock", "wait");

      restricted(s.dataNodes(), Deployment.STANDALONE, uri, false);
    }
  }

  /**
   * The user becomes the restricted one on every node; the workload runs again without replica
   * acknowledgement (connecting with it fails at once without WAIT, see NoAdminTest), with its
   * early give-up now closing a connection instead of unblocking it.
   */
  private static void restricted(List<RedisServerProcess> nodes, Deployment d, String uri, boolean cluster)
      throws Exception {
    for (RedisServerProcess node : nodes) {
      LeastPrivilege.createUser(node, LeastPrivilege.USER, LeastPrivilege.restrictedUser(d, LeastPrivilege.USER,
          PASSWORD));
      assertEquals("OK", node.command("ACL", "LOG", "RESET"));
      assertEquals("OK", node.command("CONFIG", "RESETSTAT"));
    }
    long before = Engine.CREATED.get();
    workload(nodes, uri, false);
    Map<String, Long> refused = NoAdmin.assertDetectedOnce(nodes, cluster, Engine.CREATED.get() - before);
    if (LeastPrivilege.major(nodes.get(0).version()) >= 7) { // 6.2 logs it as 'client', not counted
      assertTrue(refused.getOrDefault("client|unblock", 0L) >= 1, "the interrupted waiter tried to unblock: " + refused);
    }
    assertUsed(nodes, cluster ? "spublish" : "publish", "blpop");
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

  /** Clients blocked in a command now, added up over {@code nodes}. */
  private static long blocked(List<RedisServerProcess> nodes) {
    long n = 0;
    for (RedisServerProcess node : nodes) {
      for (String line : node.command("INFO", "clients").split("\\r?\\n")) {
        if (line.startsWith("blocked_clients:")) {
          n += Long.parseLong(line.substring("blocked_clients:".length()).trim());
        }
      }
    }
    return n;
  }

  private static void workload(List<RedisServerProcess> nodes, String uri, boolean withWait) throws Exception {
    TurnstileOptions small = TurnstileOptions.builder().blockingPoolSize(1).build();
    TurnstileOptions acked = withWait ? TurnstileOptions.builder().replicaAcks(1, Duration.ofSeconds(5)).build()
        : TurnstileOptions.defaults();
    // on a Cluster, b is made from the application's own client: its node connections then take
    // the credentials from the client's initial URI (Topology.seedOf)
    io.lettuce.core.cluster.RedisClusterClient own = uri.startsWith("redis-cluster://")
        ? io.lettuce.core.cluster.RedisClusterClient.create(Turnstile.clusterSeeds(uri)) : null;
    try (Turnstile a = Turnstile.connect(uri, acked);
        Turnstile b = own != null ? Turnstile.create(own, small) : Turnstile.connect(uri, small)) {
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
        assertFalse(theirs.tryLock(50, TimeUnit.MILLISECONDS), "times out: its wait ends at the deadline");
        if (i == 0) {
          // an early give-up: CLIENT UNBLOCK where granted, else the connection is closed (once the
          // tryLock's connection is back: with the one connection lent, the waiter would wait by pub/sub)
          TestSupport.await("the connection back", Duration.ofSeconds(10), () -> b.engine().pool.inUse() == 0);
          Thread interrupted = TestSupport.start("interrupted", () -> {
            try {
              theirs.lockInterruptibly();
              theirs.unlock();
            } catch (InterruptedException expected) {
              // the give-up
            }
          });
          TestSupport.await("blocked in Redis", Duration.ofSeconds(10), () -> blocked(nodes) == 1);
          interrupted.interrupt();
          interrupted.join(10_000);
          assertFalse(interrupted.isAlive());
        }
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
      // as for the lock: the given-up wait's connection comes back to the pool only once its
      // CLIENT UNBLOCK (or close) is answered; a waiter that found it lent out would wait by
      // pub/sub, and no client would block (a loaded machine's Valkey matrix run, 1 in 7 at load 8)
      TestSupport.await("the connection back", Duration.ofSeconds(10), () -> b.engine().pool.inUse() == 0);
      CompletableFuture<Boolean> permit = CompletableFuture.supplyAsync(() -> {
        semB.acquireUninterruptibly();
        semB.release();
        return true;
      });
      // blocked on the wake list before the release (a sleep here let a loaded machine release
      // first, and the waiter took the permit at its first attempt: it never blocked)
      TestSupport.await("the semaphore waiter blocked in Redis", Duration.ofSeconds(10), () -> blocked(nodes) == 1);
      // every connection of both clients, the blocking and subscriber ones included, is the URI's user
      NoAdmin.assertAllConnectionsAre(nodes, LeastPrivilege.USER);
      semA.release();
      assertTrue(permit.get(10, TimeUnit.SECONDS));
      assertEquals(1, semA.availablePermits());
    } finally {
      if (own != null) {
        own.shutdown();
      }
    }
  }
}
