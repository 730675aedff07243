package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * No call may make Redis run a script whose cost grows with an argument: hostile numbers (a
 * capacity of {@code Integer.MAX_VALUE}, a billion permits at once), long names and many leases
 * keep every script short, Redis keeps answering, and arguments past a documented limit are
 * refused before anything is sent. Runs on its own redis-server. Work is counted, not timed: the
 * commands Redis executed inside scripts (INFO commandstats), which a loaded machine cannot
 * distort; a 50 ms slow log only catches gross stalls.
 */
class BoundedWorkTest {
  /** A command slower than this is logged by Redis (SLOWLOG); none may be. */
  private static final int SLOW_MICROS = 50_000;

  private static RedisServerProcess server() {
    RedisServerProcess server = RedisServerProcess.start();
    server.command("CONFIG", "SET", "slowlog-log-slower-than", Integer.toString(SLOW_MICROS));
    server.command("SLOWLOG", "RESET");
    return server;
  }

  /** Commands Redis executed, inside scripts or not (INFO commandstats), minus the script calls themselves. */
  private static long commandsRun(RedisServerProcess server, String... excluding) {
    java.util.Map<String, Long> stats = TestSupport.commandStats(io.github.turnstile.testing.TestRedis.of(
        server.uri(), server.host(), server.port(), "process"));
    long n = 0;
    for (java.util.Map.Entry<String, Long> e : stats.entrySet()) {
      if (!List.of(excluding).contains(e.getKey())) {
        n += e.getValue();
      }
    }
    return n;
  }

  private static long calls(RedisServerProcess server, String command) {
    return TestSupport.commandStats(io.github.turnstile.testing.TestRedis.of(
        server.uri(), server.host(), server.port(), "process")).getOrDefault(command, 0L);
  }

  /** Every command that took longer than SLOW_MICROS since the last reset, one line each. */
  private static String slowCommands(RedisServerProcess server) {
    return server.command("SLOWLOG", "GET", "100");
  }

  /** The worst PING round trip (ms) measured by a background thread while {@code work} runs. */
  private static long worstPingWhile(RedisServerProcess server, TestSupport.ThrowingRunnable work) throws Exception {
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong worst = new AtomicLong();
    Thread pinger = TestSupport.start("pinger", () -> {
      while (!stop.get()) {
        long t = System.nanoTime();
        server.command("PING");
        worst.accumulateAndGet(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t), Math::max);
        Thread.sleep(1);
      }
    });
    try {
      work.run();
    } finally {
      stop.set(true);
      pinger.join(5000);
    }
    return worst.get();
  }

  /**
   * {@code semaphore(name, Integer.MAX_VALUE)} used to run two billion RPUSHes in one script and
   * stop Redis for every client; now every op on it is short, whatever its numbers.
   */
  @Test
  void hugePermitCountsCostNothingInRedis() throws Exception {
    try (RedisServerProcess server = server(); Turnstile t = Turnstile.connect(server.uri())) {
      String name = unique("huge");
      long[] timing = new long[1];
      long before = commandsRun(server, "ping", "info", "slowlog", "config");
      long worstPing = worstPingWhile(server, () -> {
        long start = System.nanoTime();
        DistributedSemaphore s = t.semaphore(name, Integer.MAX_VALUE);
        assertEquals(Integer.MAX_VALUE, s.availablePermits());
        s.acquire(1_000_000_000);
        assertEquals(1_000_000_000, s.heldPermits());
        assertEquals(Integer.MAX_VALUE - 1_000_000_000, s.availablePermits());
        assertTrue(s.tryAcquire(1_000_000_000, 1, TimeUnit.SECONDS));
        int drained = s.drainPermits();
        assertEquals(Integer.MAX_VALUE - 2_000_000_000, drained);
        assertEquals(0, s.availablePermits());
        s.release(Integer.MAX_VALUE);
        assertEquals(Integer.MAX_VALUE, s.availablePermits());
        s.reducePermits(Integer.MAX_VALUE - 4);
        assertEquals(4, s.availablePermits());
        s.addPermits(Integer.MAX_VALUE - 4);
        assertEquals(Integer.MAX_VALUE, s.availablePermits());
        timing[0] = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      });
      long work = commandsRun(server, "ping", "info", "slowlog", "config") - before;
      String slow = slowCommands(server);
      System.out.println("bounded work: 10 ops moving up to 2^31 permits ran " + work + " commands in Redis"
          + " (scripts included) in " + timing[0] + " ms, worst PING " + worstPing + " ms, slow log: [" + slow + "]");
      assertTrue(work < 1000, "work in Redis does not grow with the permits: " + work + " commands");
      assertTrue(slow == null || slow.isEmpty(), "no command slower than " + SLOW_MICROS + " µs: " + slow);
      assertTrue(worstPing < 1000, "Redis kept answering: worst PING " + worstPing + " ms");
    }
  }

  /** Arguments past a limit are refused with the limit named, and nothing changes. */
  @Test
  void argumentsPastTheLimitsAreRefusedBeforeAnythingIsSent() throws Exception {
    try (RedisServerProcess server = server(); Turnstile t = Turnstile.connect(server.uri())) {
      DistributedSemaphore s = t.semaphore(unique("limits"), 4);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> s.addPermits(Integer.MAX_VALUE));
      assertTrue(e.getMessage().contains("Integer.MAX_VALUE"), e.getMessage());
      assertEquals(4, s.availablePermits(), "nothing changed");
      e = assertThrows(IllegalArgumentException.class, () -> s.reducePermits(5));
      assertTrue(e.getMessage().contains("capacity"), e.getMessage());
      assertEquals(4, s.availablePermits(), "nothing changed");
      e = assertThrows(IllegalArgumentException.class, () -> s.acquire(5));
      assertTrue(e.getMessage().contains("capacity is 4"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> s.acquire(-1));

      String longest = "n".repeat(Turnstile.MAX_NAME_LENGTH);
      DistributedLock ok = t.lock(longest);
      assertTrue(ok.tryLock());
      ok.unlock();
      String keysBefore = server.command("DBSIZE");
      for (Runnable tooLong : List.<Runnable>of(
          () -> t.lock(longest + "x"),
          () -> t.readWriteLock(longest + "x"),
          () -> t.semaphore(longest + "x", 1))) {
        e = assertThrows(IllegalArgumentException.class, tooLong::run);
        assertTrue(e.getMessage().contains("MAX_NAME_LENGTH") && e.getMessage().contains("1024"), e.getMessage());
      }
      assertEquals(keysBefore, server.command("DBSIZE"), "nothing was sent");
    }
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> TurnstileOptions.builder().leaseTime(Duration.ofSeconds(30)).renewInterval(Duration.ofMillis(15_001)).build());
    assertTrue(e.getMessage().contains("at most half the leaseTime"), e.getMessage());
    assertDoesNotThrow(() -> TurnstileOptions.builder().leaseTime(Duration.ofSeconds(30))
        .renewInterval(Duration.ofSeconds(15)).build());
    assertThrows(IllegalArgumentException.class, () -> TurnstileOptions.builder().keyPrefix("p".repeat(65)));
    assertThrows(IllegalArgumentException.class, () -> TurnstileOptions.builder().outageTolerance(Duration.ofMillis(-1)));
  }

  /**
   * 1,200 held locks on one server: the watchdog renews them in scripts of at most 200 leases
   * (pipelined), none is lost, and no renewal script is slow.
   */
  @Test
  void renewalsOfManyLeasesStayShort() throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(1500))
        .renewInterval(Duration.ofMillis(300)).build();
    try (RedisServerProcess server = server(); Turnstile t = Turnstile.connect(server.uri(), options)) {
      List<DistributedLock> held = new ArrayList<>();
      for (int i = 0; i < 1200; i++) {
        DistributedLock l = t.lock(unique("many-" + i));
        l.lock();
        held.add(l);
      }
      server.command("SLOWLOG", "RESET");
      long scripts = calls(server, "evalsha");
      long keyChecks = calls(server, "hget"); // renew.lua: one HGET per lease
      Thread.sleep(2000); // more than a lease
      scripts = calls(server, "evalsha") - scripts;
      keyChecks = calls(server, "hget") - keyChecks;
      for (DistributedLock l : held) {
        assertTrue(l.isHeldByCurrentThread(), l + " lost");
        l.unlock();
      }
      String slow = slowCommands(server);
      System.out.println("bounded work: 1200 leases renewed by " + scripts + " scripts, " + keyChecks + " lease checks");
      assertTrue(keyChecks >= 1200, "every lease renewed at least once: " + keyChecks);
      assertTrue(keyChecks <= scripts * Watchdog.MAX_PER_SCRIPT, keyChecks + " lease checks in " + scripts
          + " scripts: more than " + Watchdog.MAX_PER_SCRIPT + " per script");
      assertTrue(slow == null || slow.isEmpty(), "no renewal slower than " + SLOW_MICROS + " µs: " + slow);
    }
  }
}
