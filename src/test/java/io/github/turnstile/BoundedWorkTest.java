package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import io.github.turnstile.testing.Bounds;

/**
 * No call may make Redis run a script whose cost grows with an argument: hostile numbers (a
 * capacity of {@code Integer.MAX_VALUE}, a billion permits at once), long names and many leases
 * keep every script short, Redis keeps answering, and arguments past a documented limit are
 * refused before anything is sent. Runs on its own redis-server. Work is counted, not timed: the
 * commands Redis executed inside scripts (INFO commandstats), which a loaded machine cannot
 * distort; a 1 s slow log only catches gross stalls (it was 50 ms, which a script met on a machine
 * at load 8: 70 ms; the two-billion RPUSH script it guards against runs for minutes).
 */
class BoundedWorkTest {
  /** A command slower than this is logged by Redis (SLOWLOG); none may be. */
  private static final int SLOW_MICROS = 1_000_000;

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
      assertTrue(worstPing < Bounds.PROMPT_MS, "Redis kept answering: worst PING " + worstPing + " ms");
    }
  }

  /**
   * The bounded-work figure: with the largest accepted arguments (a capacity of
   * {@code Integer.MAX_VALUE}, a billion permits per call, names of {@code MAX_NAME_LENGTH}
   * characters, renewal scripts of {@code Watchdog.MAX_PER_SCRIPT} leases), how long does the
   * longest script run inside Redis, and how slow does {@code PING} get meanwhile. Redis logs every
   * command here (slow log threshold 0), so the durations are Redis's own, not the client's. The
   * assertion is the slow-log bound of this class only; the figures go in PERFORMANCE.md.
   */
  @Test
  void largestAcceptedArgumentsKeepScriptsShort() throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(1500))
        .renewInterval(Duration.ofMillis(300)).build();
    try (RedisServerProcess server = server(); Turnstile t = Turnstile.connect(server.uri(), options);
        io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(server.uri());
        io.lettuce.core.api.StatefulRedisConnection<String, String> admin = client.connect()) {
      server.command("CONFIG", "SET", "slowlog-max-len", "100000");
      server.command("CONFIG", "SET", "slowlog-log-slower-than", "0");
      server.command("SLOWLOG", "RESET");
      String longest = "n".repeat(Turnstile.MAX_NAME_LENGTH - 37); // unique() adds 37 characters
      // PING on a connection opened beforehand: what another application's command waits, without
      // the cost of opening a socket per PING
      AtomicBoolean stop = new AtomicBoolean();
      List<Long> pings = java.util.Collections.synchronizedList(new ArrayList<>());
      Thread pinger = TestSupport.start("pinger", () -> {
        while (!stop.get()) {
          long t0 = System.nanoTime();
          admin.sync().ping();
          pings.add(System.nanoTime() - t0);
          Thread.sleep(1);
        }
      });
      try {
        DistributedSemaphore s = t.semaphore(unique(longest.substring(0, 100)), Integer.MAX_VALUE);
        s.acquire(1_000_000_000);
        assertTrue(s.tryAcquire(1_000_000_000, 1, TimeUnit.SECONDS));
        s.drainPermits();
        s.release(Integer.MAX_VALUE);
        s.reducePermits(Integer.MAX_VALUE - 4);
        s.addPermits(Integer.MAX_VALUE - 4);
        DistributedLock lock = t.lock(unique(longest));
        lock.lock();
        lock.unlock();
        DistributedReadWriteLock rw = t.readWriteLock(unique(longest));
        rw.writeLock().lock();
        rw.writeLock().unlock();
        DistributedSemaphore named = t.semaphore(unique(longest), Integer.MAX_VALUE);
        named.acquire(Integer.MAX_VALUE);
        named.release(Integer.MAX_VALUE);
        List<DistributedLock> held = new ArrayList<>();
        for (int i = 0; i < 2 * Watchdog.MAX_PER_SCRIPT; i++) {
          DistributedLock l = t.lock(unique("renewed-" + i));
          l.lock();
          held.add(l);
        }
        Thread.sleep(1000); // three renewal ticks, each two scripts of MAX_PER_SCRIPT leases
        for (DistributedLock l : held) {
          l.unlock();
        }
      } finally {
        stop.set(true);
        pinger.join(5000);
      }
      server.command("CONFIG", "SET", "slowlog-log-slower-than", Integer.toString(SLOW_MICROS));
      java.util.Map<String, String> scriptNames = new java.util.HashMap<>();
      for (String script : List.of("lock_acquire", "lock_pass", "lock_release", "renew", "rwlock", "semaphore")) {
        try (java.io.InputStream in = Turnstile.class.getResourceAsStream("lua/" + script + ".lua")) {
          byte[] sha = java.security.MessageDigest.getInstance("SHA-1").digest(in.readAllBytes());
          scriptNames.put(java.util.HexFormat.of().formatHex(sha), script + ".lua");
        }
      }
      java.util.Map<String, long[]> perScript = new java.util.TreeMap<>(); // name -> {calls, worst µs}
      long worstOther = 0;
      for (Object entry : admin.sync().slowlogGet(100_000)) {
        List<?> e = (List<?>) entry;
        long micros = ((Number) e.get(2)).longValue();
        List<?> args = (List<?>) e.get(3);
        String command = String.valueOf(args.get(0)).toLowerCase(java.util.Locale.ROOT);
        if (command.equals("evalsha") || command.equals("eval")) {
          String name = command.equals("evalsha")
              ? scriptNames.getOrDefault(String.valueOf(args.get(1)).toLowerCase(java.util.Locale.ROOT), "other script")
              : "EVAL";
          long[] v = perScript.computeIfAbsent(name, k -> new long[2]);
          v[0]++;
          v[1] = Math.max(v[1], micros);
        } else if (!command.equals("slowlog") && !command.equals("config") && !command.equals("ping")) {
          worstOther = Math.max(worstOther, micros);
        }
      }
      long[] sorted = pings.stream().mapToLong(Long::longValue).sorted().toArray();
      long worstScript = perScript.values().stream().mapToLong(v -> v[1]).max().orElse(0);
      StringBuilder report = new StringBuilder();
      perScript.forEach((name, v) -> report.append(String.format(" %s %d calls, longest %d µs;", name, v[0], v[1])));
      System.out.printf("bounded work: largest accepted arguments, script time inside Redis:%s worst other command"
          + " %d µs; PING meanwhile (%d, one connection): p50 %.2f ms, p99 %.2f ms, max %.2f ms%n", report,
          worstOther, sorted.length, sorted.length == 0 ? 0 : sorted[sorted.length / 2] / 1e6,
          sorted.length == 0 ? 0 : sorted[(int) Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] / 1e6,
          sorted.length == 0 ? 0 : sorted[sorted.length - 1] / 1e6);
      assertTrue(perScript.values().stream().mapToLong(v -> v[0]).sum() > 10, "the slow log saw the scripts: " + perScript.keySet());
      assertTrue(worstScript < SLOW_MICROS, "no script slower than " + SLOW_MICROS + " µs: " + worstScript);
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
      // as Semaphore: reducePermits may take the free permits below zero, but not below Integer.MIN_VALUE
      s.reducePermits(Integer.MAX_VALUE);
      assertEquals(4 - Integer.MAX_VALUE, s.availablePermits());
      Error underflow = assertThrows(Error.class, () -> s.reducePermits(Integer.MAX_VALUE));
      assertEquals("Permit count underflow", underflow.getMessage());
      assertEquals(4 - Integer.MAX_VALUE, s.availablePermits(), "nothing changed");
      s.addPermits(Integer.MAX_VALUE - 4);
      assertEquals(0, s.availablePermits());
      assertFalse(s.tryAcquire(Integer.MAX_VALUE), "more than is free: false, never an error");
      assertThrows(IllegalArgumentException.class, () -> s.acquire(-1));
      assertEquals(0, s.availablePermits(), "nothing changed");

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
      long keyChecks = calls(server, "hmget"); // renew.lua: one HMGET per lease
      Thread.sleep(2000); // more than a lease
      scripts = calls(server, "evalsha") - scripts;
      keyChecks = calls(server, "hmget") - keyChecks;
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
