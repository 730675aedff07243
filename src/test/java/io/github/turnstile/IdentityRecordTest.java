package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
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
   */
  @Test
  void onlyTheIdentityScriptDeletes() throws Exception {
    Pattern deletes = Pattern.compile("redis\\.call\\(\\s*['\"](del|unlink)['\"]", Pattern.CASE_INSENSITIVE);
    List<String> deleting = new ArrayList<>();
    int scripts = 0;
    for (Field f : Script.class.getDeclaredFields()) {
      if (Modifier.isStatic(f.getModifiers()) && f.getType() == Script.class) {
        Script s = (Script) f.get(null);
        scripts++;
        if (deletes.matcher(s.body).find()) {
          deleting.add(s.name);
        }
      }
    }
    assertTrue(scripts >= 9, "the scripts were found: " + scripts);
    assertEquals(List.of(Script.IDENTITY.name), deleting, "the scripts that call DEL or UNLINK");
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
