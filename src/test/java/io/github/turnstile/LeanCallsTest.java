package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * An uncontended acquisition costs Redis only what it must: no lock or read/write lock
 * script call sends an optional argument left at its default, the keys sent are the primitive's
 * (every key the script may touch is declared, so that a migrating slot refuses the call before it
 * runs: DESIGN §3), and an uncontended pair runs no command for waiters and reads the server time
 * once per grant. Redis's slow log, with a threshold of 0, records every command with its
 * arguments; INFO commandstats counts the commands the scripts ran. Counted, never timed. Runs on
 * its own redis-server (standalone: PUBLISH, the publish command's default, is not sent).
 */
class LeanCallsTest {
  private static RedisServerProcess server;
  private static TestRedis redis;
  private static RedisClient observer;
  private static StatefulRedisConnection<String, String> connection;

  @BeforeAll
  static void start() {
    server = RedisServerProcess.start();
    redis = TestRedis.of(server.uri(), server.host(), server.port(), "process");
    observer = RedisClient.create(server.uri());
    connection = observer.connect();
    connection.sync().configSet("slowlog-max-len", "1000");
    connection.sync().configSet("slowlog-log-slower-than", "-1");
  }

  @AfterAll
  static void stop() {
    connection.close();
    observer.shutdown();
    server.close();
  }

  /** What Redis did during an action: the scripts' calls with their arguments, and every command run. */
  private record Window(Map<String, List<List<String>>> calls, Map<String, Long> commands) {
    /** The EVALSHAs of {@code script}, oldest first, each as its arguments after the SHA. */
    List<List<String>> of(Script script) {
      return calls.getOrDefault(script.sha, List.of());
    }
  }

  /**
   * Runs {@code action} with every command recorded (slow log threshold 0 µs, command stats
   * reset), again if another script ran meanwhile (the watchdog's identity record or a renewal,
   * whose commands would be counted too): at most 10 times.
   */
  private static Window during(Runnable action, Script... expected) {
    Set<String> shas = new java.util.HashSet<>();
    for (Script s : expected) {
      shas.add(s.sha);
    }
    Window w = null;
    for (int attempt = 0; attempt < 10; attempt++) {
      connection.sync().slowlogReset();
      connection.sync().configResetstat();
      connection.sync().configSet("slowlog-log-slower-than", "0");
      action.run();
      connection.sync().configSet("slowlog-log-slower-than", "-1");
      Map<String, Long> commands = new TreeMap<>(TestSupport.commandStats(redis));
      // the observer's own commands (Redis 7 counts CONFIG SET as "config|set")
      commands.keySet().removeIf(c -> c.startsWith("config") || c.startsWith("slowlog") || c.equals("info")
          || c.equals("evalsha") || c.equals("eval"));
      Map<String, List<List<String>>> calls = new java.util.HashMap<>();
      boolean others = false;
      for (Object entry : connection.sync().slowlogGet(1000)) {
        List<String> args = new ArrayList<>();
        for (Object a : (List<?>) ((List<?>) entry).get(3)) {
          args.add(a.toString());
        }
        if (args.get(0).equalsIgnoreCase("evalsha") || args.get(0).equalsIgnoreCase("eval")) {
          if (!shas.contains(args.get(1))) {
            others = true;
          }
          calls.computeIfAbsent(args.get(1), k -> new ArrayList<>()).add(0, args.subList(2, args.size()));
        }
      }
      w = new Window(calls, commands);
      if (!others) {
        return w;
      }
    }
    throw new AssertionError("another script ran beside the action in 10 attempts: " + w);
  }

  private static void sleepMillis(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static void assertSent(List<List<String>> calls, List<String> keys, int args, String what) {
    assertTrue(!calls.isEmpty(), what + ": no call recorded");
    for (List<String> call : calls) {
      assertEquals(Integer.toString(keys.size()), call.get(0), what + ": keys sent, in " + call);
      assertEquals(keys, call.subList(1, 1 + keys.size()), what + ": the keys sent, in " + call);
      assertEquals(args, call.size() - 1 - keys.size(), what + ": arguments sent, in " + call);
    }
  }

  @Test
  void anUncontendedLockPairSendsNoDefaultsAndRunsNothingForWaiters() {
    String name = unique("lean-lock");
    try (Turnstile t = Turnstile.connect(server.uri(), TestSupport.UNCACHED)) {
      Lock lock = t.lock(name);
      lock.lock(); // the first grant writes the fence: not the pair measured
      lock.unlock();
      Window w = during(() -> {
        lock.lock();
        lock.unlock();
      }, Script.LOCK_ACQUIRE, Script.LOCK_RELEASE);
      String base = "{turnstile:" + name + "}:";
      assertSent(w.of(Script.LOCK_ACQUIRE), List.of(base + "lock", base + "fence"), 3,
          "acquire (owner, request, lease; no flags)");
      assertSent(w.of(Script.LOCK_RELEASE), List.of(base + "lock", base + "wake"), 3,
          "release (request, token, ttl; no publish command)");
      Map<String, Long> run = new TreeMap<>(w.commands());
      // the grant: HMGET, TIME, HSET; the release: HMGET, HDEL. Nothing for waiters. The grant
      // before it (same 2^15 µs token window) set the record's expiry to a lease after the window's
      // end (field d = the lease): no PEXPIRE. A slow machine may see the pair's grant enter a new
      // window: then it writes the fence (SET) and the expiry (PEXPIRE), as the pair below.
      if (run.getOrDefault("set", 0L) == 0) {
        assertEquals(Map.of("hmget", 2L, "time", 1L, "hset", 1L, "hdel", 1L), run,
            "commands of one uncontended pair");
      } else {
        assertEquals(Map.of("hmget", 2L, "time", 1L, "set", 1L, "hset", 1L, "pexpire", 1L, "hdel", 1L),
            run, "commands of one uncontended pair, its grant in a new window");
      }
      // a lock not taken for more than a window (2^15 µs): its grant writes the fence and the
      // expiry, and still reads the server time once
      Window later = during(() -> {
        sleepMillis(40);
        lock.lock();
        lock.unlock();
      }, Script.LOCK_ACQUIRE, Script.LOCK_RELEASE);
      assertEquals(Map.of("hmget", 2L, "time", 1L, "set", 1L, "hset", 1L, "pexpire", 1L, "hdel", 1L),
          later.commands(), "commands of a pair on a lock idle for 40 ms");
    }
  }

  /**
   * Back to back, most grants fall in the window of the grant before (2^15 µs): only a grant whose
   * token enters a new window writes the record's expiry (PEXPIRE), and it writes the fence (SET)
   * then too. So PEXPIRE and SET are counted the same.
   */
  @Test
  void backToBackGrantsWriteTheExpiryOnlyInANewWindow() {
    String name = unique("lean-window");
    try (Turnstile t = Turnstile.connect(server.uri(), TestSupport.UNCACHED)) {
      Lock lock = t.lock(name);
      lock.lock();
      lock.unlock();
      int pairs = 500;
      Window w = during(() -> {
        for (int i = 0; i < pairs; i++) {
          lock.lock();
          lock.unlock();
        }
      }, Script.LOCK_ACQUIRE, Script.LOCK_RELEASE);
      Map<String, Long> run = w.commands();
      long windows = run.getOrDefault("set", 0L);
      // less the identity record's writes (DEL, HSET, PEXPIRE each; at most one per client and
      // lease, and one when a thread first holds: the watchdog's scan may land in the window)
      long identity = run.getOrDefault("del", 0L);
      assertTrue(identity <= 1, "identity writes: " + run);
      assertEquals(windows, run.getOrDefault("pexpire", 0L) - identity, "expiry writes beside fence writes: " + run);
      assertEquals((long) pairs, run.get("hset") - identity, "grants: " + run);
      assertTrue(windows < pairs, "every one of " + pairs + " grants wrote the expiry: " + run);
    }
  }

  @Test
  void anAsyncLockPairSendsNoDefaults() {
    String name = unique("lean-async");
    try (Turnstile t = Turnstile.connect(server.uri(), TestSupport.UNCACHED)) {
      DistributedLock lock = t.lock(name);
      lock.lockAsync().join().release().toCompletableFuture().join();
      Window w = during(() -> lock.lockAsync().join().release().toCompletableFuture().join(),
          Script.LOCK_ACQUIRE, Script.LOCK_RELEASE);
      String base = "{turnstile:" + name + "}:";
      assertSent(w.of(Script.LOCK_ACQUIRE), List.of(base + "lock", base + "fence"), 3, "async acquire");
      assertSent(w.of(Script.LOCK_RELEASE), List.of(base + "lock", base + "wake"), 3, "async release");
    }
  }

  @Test
  void readWriteLockCallsSendNoDefaults() {
    String name = unique("lean-rw");
    try (Turnstile t = Turnstile.connect(server.uri(), TestSupport.UNCACHED)) {
      DistributedReadWriteLock rw = t.readWriteLock(name);
      rw.readLock().lock();
      rw.readLock().unlock();
      rw.writeLock().lock();
      rw.writeLock().unlock();
      Window reads = during(() -> {
        rw.readLock().lock();
        rw.readLock().unlock();
      }, Script.RWLOCK);
      String p = "{turnstile:" + name + "}:rw:";
      List<String> shared = List.of(p + "w", p + "fence", p + "readers", p + "wwait", p + "rwait", p + "wq",
          p + "state");
      // read (op, owner, request, lease), runlock (the same); the 8th key is the request's lease
      List<List<String>> calls = reads.of(Script.RWLOCK);
      assertEquals(2, calls.size(), "read and runlock: " + calls);
      for (List<String> call : calls) {
        List<String> keys = new ArrayList<>(shared);
        keys.add(p + "rd:" + call.get(11));
        assertSent(List.of(call), keys, 4, "read and runlock");
      }
      assertEquals(0L, reads.commands().getOrDefault("publish", 0L) + reads.commands().getOrDefault("rpush", 0L),
          "nothing for waiters when nobody waits: " + reads.commands());
      List<List<String>> writes = during(() -> {
        rw.writeLock().lock();
        rw.writeLock().unlock();
      }, Script.RWLOCK).of(Script.RWLOCK);
      assertEquals(2, writes.size(), "write and wunlock: " + writes);
      for (int i = 0; i < 2; i++) {
        List<String> keys = new ArrayList<>(shared);
        keys.add(p + "rd:" + writes.get(i).get(11));
        // write: op, owner, request, lease; wunlock sends the hold's fencing token after them
        assertSent(writes.subList(i, i + 1), keys, i == 0 ? 4 : 5, i == 0 ? "write" : "wunlock");
      }
    }
  }
}
