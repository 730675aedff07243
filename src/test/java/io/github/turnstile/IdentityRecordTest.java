package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * What the client's identity record (DESIGN §16) costs: one write when the client connects, then
 * one a lease while it is open, plus one for each thread that holds for the first time; never one
 * per acquisition. Its own redis-server, so that the command counts are the test's.
 */
class IdentityRecordTest {
  private static final long LEASE_MS = 1000;

  /**
   * identity.lua is the only script that calls DEL (or UNLINK), which the tests that count a
   * waiter's commands rely on to leave the record's writes out ({@link TestSupport#identityWrites}).
   * Every command of every script, as the ACL test reads them (a computed command other than the
   * publish command fails there).
   */
  @Test
  void onlyTheIdentityScriptDeletes() {
    Map<String, List<String>> commands = LeastPrivilege.scriptCommands();
    assertTrue(commands.containsKey("hset"), "the scripts' commands were read: " + commands.keySet());
    List<String> deleting = new ArrayList<>();
    for (String command : List.of("del", "unlink")) {
      for (String where : commands.getOrDefault(command, List.of())) {
        deleting.add(where.substring(0, where.indexOf(':')));
      }
    }
    assertEquals(List.of("identity.lua"), deleting, "the scripts that call DEL or UNLINK");
  }

  @Test
  void writtenOncePerClientNeverPerAcquisition() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start()) {
      TestRedis redis = TestRedis.of(server.uri(), server.host(), server.port(), "process");
      TurnstileOptions options = TurnstileOptions.builder().clientName("cost").leaseTime(Duration.ofMillis(LEASE_MS)).build();
      Map<String, Long> beforeConnect = TestSupport.commandStats(redis);
      try (Turnstile t = Turnstile.connect(redis.uri(), options)) {
        // at connect: one write, in Redis before connect returns
        Map<String, Long> connected = TestSupport.commandStats(redis);
        assertEquals(1, TestSupport.identityWrites(beforeConnect, connected), "identity writes at connect");
        String key = Identity.key(options.keyPrefix(), t.clientId());
        assertEquals("cost", redis.command("HGET", key, "name").trim(), "the record, as connect returned");
        System.out.println("identity: at connect, commands " + delta(beforeConnect, connected));

        // idle (nothing held) for 3.5 leases: one write a lease, and nothing else
        long start = System.nanoTime();
        Thread.sleep(LEASE_MS * 7 / 2);
        Map<String, Long> idle = TestSupport.commandStats(redis);
        long idleMs = TestSupport.millisSince(start);
        long idleWrites = TestSupport.identityWrites(connected, idle);
        long idleScripts = TestSupport.totalCalls(idle, "evalsha", "eval") - TestSupport.totalCalls(connected, "evalsha", "eval");
        System.out.println("identity: idle " + idleMs + " ms (lease " + LEASE_MS + " ms): " + idleWrites
            + " writes, commands " + delta(connected, idle));
        assertTrue(idleWrites >= 1, "rewritten while idle (it would expire after 3 leases): " + idleWrites);
        assertTrue(idleWrites <= idleMs / LEASE_MS + 1, idleWrites + " writes in " + idleMs + " ms: more than one a lease");
        assertEquals(idleWrites, idleScripts, "an idle client runs no other script");

        // 4 threads, 500 acquisitions each: one write per new holding thread, plus one a lease
        int threads = 4;
        int each = 500;
        start = System.nanoTime();
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
          DistributedLock lock = t.lock(unique("identity-cost-" + i));
          workers.add(TestSupport.start("acquirer-" + i, () -> {
            for (int n = 0; n < each; n++) {
              lock.lock();
              lock.unlock();
            }
          }));
        }
        for (Thread w : workers) {
          w.join();
        }
        Map<String, Long> acquired = TestSupport.commandStats(redis);
        long busyMs = TestSupport.millisSince(start);
        long busyWrites = TestSupport.identityWrites(idle, acquired);
        System.out.println("identity: " + threads * each + " acquisitions by " + threads + " threads in " + busyMs
            + " ms: " + busyWrites + " writes");
        assertTrue(busyWrites <= threads + busyMs / LEASE_MS + 1,
            busyWrites + " writes for " + threads * each + " acquisitions in " + busyMs + " ms: more than one per"
                + " thread and one a lease");
      }
      // closed: no write after close
      Map<String, Long> closed = TestSupport.commandStats(redis);
      Thread.sleep(LEASE_MS * 3 / 2);
      assertEquals(0, TestSupport.identityWrites(closed, TestSupport.commandStats(redis)), "written after close");
    }
  }

  /**
   * A Redis that restarts without its data loses the record; the client writes it again as soon
   * as it has reconnected, not a lease later (the lease here is 60 s), whether it holds anything
   * or not.
   */
  @Test
  void rewrittenAfterRedisRestartsWithoutItsData() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile t = Turnstile.connect(server.uri(),
            TurnstileOptions.builder().clientName("restarted").leaseTime(Duration.ofSeconds(60)).build())) {
      String key = Identity.key(t.options().keyPrefix(), t.clientId());
      assertEquals("1", server.command("EXISTS", key));
      server.restart(); // SIGKILL, then a fresh process: no data
      long back = System.nanoTime();
      TestSupport.await("the record written again after the reconnect", Duration.ofSeconds(30),
          () -> "restarted".equals(server.command("HGET", key, "name")));
      System.out.println("identity: rewritten " + TestSupport.millisSince(back) + " ms after Redis restarted");
    }
  }

  /** The commands Redis ran between two snapshots, less INFO (the snapshots' own). */
  private static Map<String, Long> delta(Map<String, Long> before, Map<String, Long> after) {
    Map<String, Long> d = new TreeMap<>();
    after.forEach((c, n) -> {
      long k = n - before.getOrDefault(c, 0L);
      if (k != 0 && !c.equals("info")) {
        d.put(c, k);
      }
    });
    return d;
  }
}
