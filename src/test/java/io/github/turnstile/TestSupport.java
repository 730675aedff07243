package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import io.github.turnstile.testing.TestRedis;

/** Small helpers shared by the tests. */
final class TestSupport {
  private TestSupport() {}

  static String unique(String prefix) {
    return prefix + ":" + UUID.randomUUID();
  }

  /**
   * Options with lock caching off (it is on by default): for tests of what a lock sends to Redis
   * and leaves there, which a grant kept idle in the JVM would change.
   */
  static final TurnstileOptions UNCACHED = TurnstileOptions.builder().lockCaching(false).build();

  static TurnstileOptions.Builder fastOptions() {
    return TurnstileOptions.builder().leaseTime(Duration.ofSeconds(30));
  }

  /**
   * Waits until the condition holds, failing after the timeout; a wait longer than 1 s is reported
   * (a starved machine shows in the test's output, not as a failure).
   */
  static void await(String what, Duration timeout, BooleanSupplier condition) {
    long start = System.nanoTime();
    if (!awaitOrFalse(timeout, condition)) {
      fail("timed out after " + timeout + " waiting for: " + what);
    }
    long ms = millisSince(start);
    if (ms > 1000) {
      System.out.println("[await] " + what + ": " + ms + " ms");
    }
  }

  /** Like {@link #await} but returns false at the timeout instead of failing. */
  static boolean awaitOrFalse(Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        return false;
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }
    return true;
  }

  /** Waits until the thread is parked or blocked (waiting in Turnstile), failing after 30 s (a starved machine). */
  static void awaitWaiting(Thread t) {
    await("thread " + t.getName() + " to wait", Duration.ofSeconds(30), () -> {
      Thread.State s = t.getState();
      return s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING || s == Thread.State.BLOCKED;
    });
  }

  /** Starts a daemon thread. */
  static Thread start(String name, ThrowingRunnable r) {
    Thread t = new Thread(() -> {
      try {
        r.run();
      } catch (Throwable e) {
        throw new RuntimeException(e);
      }
    }, name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  interface ThrowingRunnable {
    void run() throws Exception;
  }

  static <T> T unchecked(Callable<T> c) {
    try {
      return c.call();
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  /**
   * How late this machine wakes a sleeping thread just now: the worst overrun of ten 20 ms sleeps,
   * in ms (about 0 on a quiet machine, tens to hundreds at load 10). A bound on a timed call's
   * overrun tight enough to catch an overrun of 100 ms adds a multiple of it (docs/DEVELOPMENT.md,
   * "Time in tests").
   */
  static long machineOverrunMillis() {
    long worst = 0;
    for (int i = 0; i < 10; i++) {
      long start = System.nanoTime();
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      worst = Math.max(worst, millisSince(start) - 20);
    }
    return worst;
  }

  /**
   * The worst lateness of a sleeping thread on this machine between two {@link System#nanoTime()}
   * instants, in ms, sampled by a daemon thread (10 ms sleeps) from {@link #startLatenessSampler()}
   * on; 0 when it did not run then. A call that overran while the machine was starved is judged
   * against how starved it was during the call, not after.
   */
  static long latenessMillis(long fromNanos, long toNanos) {
    synchronized (LATE_AT) {
      long worst = 0;
      for (int i = 0; i < LATE_AT.length; i++) {
        if (LATE_AT[i] != 0 && LATE_AT[i] - fromNanos >= 0 && LATE_AT[i] - toNanos <= 0) {
          worst = Math.max(worst, LATE_MS[i]);
        }
      }
      return worst;
    }
  }

  /** Starts the sampler of {@link #latenessMillis} (once per JVM). */
  static void startLatenessSampler() {
    synchronized (LATE_AT) {
      if (lateSampler != null) {
        return;
      }
      lateSampler = new Thread(() -> {
        int next = 0;
        while (true) {
          long start = System.nanoTime();
          try {
            Thread.sleep(10);
          } catch (InterruptedException e) {
            return;
          }
          long end = System.nanoTime();
          synchronized (LATE_AT) {
            LATE_AT[next] = end;
            LATE_MS[next] = Math.max(0, TimeUnit.NANOSECONDS.toMillis(end - start) - 10);
          }
          next = (next + 1) % LATE_AT.length;
        }
      }, "lateness-sampler");
      lateSampler.setDaemon(true);
      lateSampler.start();
    }
  }

  private static final long[] LATE_AT = new long[16_384]; // about the last 3 minutes
  private static final long[] LATE_MS = new long[LATE_AT.length];
  private static Thread lateSampler; // guarded by LATE_AT

  static long millisSince(long startNanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
  }

  /** Parses INFO commandstats into command -> calls, added up over every master of a Cluster. */
  static Map<String, Long> commandStats(TestRedis redis) {
    Map<String, Long> stats = new TreeMap<>();
    for (String info : redis.commandOnEachMaster("INFO", "commandstats")) {
      for (String line : info.split("\r?\n")) {
        if (line.startsWith("cmdstat_")) {
          String cmd = line.substring(8, line.indexOf(':'));
          int c = line.indexOf("calls=");
          long calls = Long.parseLong(line.substring(c + 6, line.indexOf(',', c)));
          stats.merge(cmd, calls, Long::sum);
        }
      }
    }
    return stats;
  }

  /**
   * Waiters inside Redis, over every master: clients blocked in BLPOP/BLMOVE (waiters with a
   * pooled blocking connection) plus subscriptions to wake-up channels (waiters by pub/sub: one
   * per waiting client and primitive side). A Sentinel's own subscription on the primary is not
   * counted (it was: every read/write contract test on Sentinel then waited 3 s for it to go).
   */
  /**
   * Returns how many waits of {@code t} are in Redis now, seen from the client: channels it is
   * subscribed to (the pub/sub tier) and pooled connections lent out (the token-list tier).
   *
   * @return subscribed channels plus lent blocking connections of {@code t}
   */
  static int waitsOf(Turnstile t) {
    return t.engine().subscriptions.channels() + t.engine().pool.inUse();
  }

  /**
   * Waits until an acquisition of {@code t} waits in Redis on the token-list tier: refused, marked
   * waiting, and blocked on the wake list (a pooled connection of {@code t} lent out, a client of
   * the server blocked), failing after 30 s. A thread parks before its first attempt lands, so a
   * parked thread alone does not say that other clients can see it wait.
   */
  static void awaitBlockedInRedis(TestRedis redis, Turnstile t) {
    await("an acquisition blocked in Redis", Duration.ofSeconds(30),
        () -> t.engine().pool.inUse() >= 1 && redis.infoSum("clients", "blocked_clients") >= 1);
  }

  static long waitersInRedis(TestRedis redis) {
    return redis.infoSum("clients", "blocked_clients") + subscribers(redis, "CHANNELS", "NUMSUB")
        + subscribers(redis, "SHARDCHANNELS", "SHARDNUMSUB");
  }

  private static long subscribers(TestRedis redis, String list, String count) {
    long n = 0;
    for (String channels : redis.commandOnEachMaster("PUBSUB", list)) {
      if (channels == null || channels.isEmpty() || channels.startsWith("-")) {
        continue; // none, or Redis < 7 has no shard channels
      }
      // Sentinels keep a subscription to __sentinel__:hello on every server they watch: not a waiter
      String[] names = Arrays.stream(channels.split("\n")).filter(c -> !c.startsWith("__sentinel__:"))
          .toArray(String[]::new);
      if (names.length == 0) {
        continue;
      }
      String[] args = new String[names.length + 2];
      args[0] = "PUBSUB";
      args[1] = count;
      System.arraycopy(names, 0, args, 2, names.length);
      for (String reply : redis.commandOnEachMaster(args)) {
        String[] pairs = reply.split("\n");
        for (int i = 1; i < pairs.length; i += 2) {
          n += Long.parseLong(pairs[i]);
        }
      }
    }
    return n;
  }

  /**
   * How many times identity.lua (a client's identity record, DESIGN §16) ran between two
   * {@link #commandStats} snapshots. It is the only script that calls DEL, once per run
   * ({@code IdentityRecordTest.onlyTheIdentityScriptDeletes}), and Turnstile sends no DEL of its
   * own, so this is the DEL count's rise: valid for a window in which the test sends no DEL itself.
   *
   * <p>Tests that count what a waiter (or a hand-off) sends subtract it from their script count:
   * the record is written per client (at connect, once a lease, once for each thread that holds
   * for the first time, at a watchdog scan), never per waiter or per acquisition, and when it lands
   * is the watchdog's timing, not the waiter's. Such tests bound it separately (at most one per
   * client in the window).
   */
  static long identityWrites(Map<String, Long> before, Map<String, Long> after) {
    return totalCalls(after, "del") - totalCalls(before, "del");
  }

  static long totalCalls(Map<String, Long> stats, String... commands) {
    long sum = 0;
    for (String c : commands) {
      sum += stats.getOrDefault(c, 0L);
    }
    return sum;
  }
}
