package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A lock record's expiry (DESIGN §3, field {@code d}): every grant leaves the record at least its
 * lease and at most {@link Engine#RECORD_SPARE_MILLIS} more. While field {@code d} equals a lease,
 * the record expires no earlier than that lease after the end of the 2^15 µs window of its token
 * {@code t}, and a grant in that window with that lease sends no {@code PEXPIRE}. So whatever else
 * writes the record's expiry (a renewal, a re-sent grant, a release that someone waits for) or
 * moves its token to another window (a local hand-off) must clear {@code d}, or the next such grant
 * would keep an expiry shorter than its lease. Each case is set up through the client or by
 * calling the scripts as the client would, on its own redis-server (7.0 or later:
 * {@code PEXPIRETIME}). Server times only; nothing is timed against the wall clock.
 */
class LockRecordExpiryTest {
  private static final long LEASE = 5_000;
  private static final long WINDOW_MICROS = 32_768;
  /** d (or ""), PEXPIRETIME, the server time in ms and the record's token, read at one instant. */
  private static final String SNAPSHOT = "local t = redis.call('TIME')\n"
      + "return {redis.call('HGET', KEYS[1], 'd') or '', redis.call('PEXPIRETIME', KEYS[1]),"
      + " tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('HGET', KEYS[1], 't')}";

  private static RedisServerProcess server;
  private static RedisClient observer;
  private static StatefulRedisConnection<String, String> connection;

  @BeforeAll
  static void start() {
    server = RedisServerProcess.start();
    observer = RedisClient.create(server.uri());
    connection = observer.connect();
  }

  @AfterAll
  static void stop() {
    connection.close();
    observer.shutdown();
    server.close();
  }

  private static RedisCommands<String, String> redis() {
    return connection.sync();
  }

  private static long serverMillis() {
    List<String> t = redis().time();
    return Long.parseLong(t.get(0)) * 1000 + Long.parseLong(t.get(1)) / 1000;
  }

  /**
   * Checks the record right after a grant that was sent at server time {@code sentAt} (ms): it
   * expires no earlier than a lease after that, no later than a lease and the spare after now,
   * and, when d is the lease, no earlier than a lease after the end of its token's window.
   */
  private static void assertExpiry(String key, long sentAt, String what) {
    List<Object> s = redis().eval(SNAPSHOT, ScriptOutputType.MULTI, key);
    String d = (String) s.get(0);
    long expiry = (Long) s.get(1);
    long now = (Long) s.get(2);
    assertTrue(expiry >= sentAt + LEASE, what + ": the record expires at " + expiry
        + ", before a lease after the grant was sent (" + sentAt + " + " + LEASE + ")");
    assertTrue(expiry <= now + LEASE + Engine.RECORD_SPARE_MILLIS, what + ": the record expires at "
        + expiry + ", more than a lease and " + Engine.RECORD_SPARE_MILLIS + " ms after " + now);
    if (d.equals(Long.toString(LEASE))) {
      long token = Long.parseLong((String) s.get(3));
      long windowEnd = (token / WINDOW_MICROS + 1) * WINDOW_MICROS;
      assertTrue(expiry * 1000 >= windowEnd + LEASE * 1000, what + ": d says the record expires a lease"
          + " after its token's window (ending at " + windowEnd + " µs), but it expires at " + expiry);
    }
  }

  private static Turnstile connect() {
    return Turnstile.connect(server.uri(),
        TurnstileOptions.builder().lockCaching(false).leaseTime(Duration.ofMillis(LEASE)).build());
  }

  private static boolean sameWindow(long token1, long token2) {
    return token1 / WINDOW_MICROS == token2 / WINDOW_MICROS;
  }

  @Test
  void everyGrantLeavesItsLeaseAndAtMostTheSpare() throws Exception {
    try (Turnstile t = connect()) {
      RedisLock lock = (RedisLock) t.lock(unique("expiry"));
      for (int i = 0; i < 300; i++) {
        if (i % 50 == 49) {
          Thread.sleep(40); // the next grant in a new window
        }
        long sentAt = serverMillis();
        lock.lock();
        try {
          assertExpiry(lock.lockKey, sentAt, "grant " + i);
        } finally {
          lock.unlock();
        }
      }
    }
  }

  /** A write of the record's expiry made while the lock is held, given the lock and its token. */
  private interface ExpiryWrite {
    void run(RedisLock lock, long token, String what);
  }

  /**
   * 30 times: takes the lock, makes {@code write} (which must clear d), releases, and takes the
   * lock again at once, mostly in the same token window: that grant must still leave the record
   * its lease.
   */
  private static void grantAfter(String name, String what, ExpiryWrite write) throws Exception {
    try (Turnstile t = connect()) {
      RedisLock lock = (RedisLock) t.lock(unique(name));
      int inOneWindow = 0;
      for (int i = 0; i < 30; i++) {
        lock.lock();
        long first;
        try {
          first = lock.fencingToken();
          write.run(lock, first, what + " " + i);
          assertFalse(redis().hexists(lock.lockKey, "d"), what + " " + i + " left field d");
        } finally {
          lock.unlock();
        }
        long sentAt = serverMillis();
        lock.lock();
        try {
          assertExpiry(lock.lockKey, sentAt, "the grant after " + what + " " + i);
          if (sameWindow(first, lock.fencingToken())) {
            inOneWindow++;
          }
        } finally {
          lock.unlock();
        }
      }
      Assumptions.assumeTrue(inOneWindow > 0, "no grant after a " + what + " fell in its window (a slow machine)");
    }
  }

  /**
   * The case the watchdog makes when a tick comes right after a grant: a renewal resets the
   * record's expiry to the lease from now. It removes d, so a grant right after, in the same
   * window, writes the expiry again.
   */
  @Test
  void aRenewalRemovesDSoTheNextGrantWritesTheExpiry() throws Exception {
    grantAfter("expiry-renewed", "renewal", (lock, token, what) -> {
      String request = redis().hget(lock.lockKey, "r");
      List<Long> renewed = redis().eval(Script.RENEW.body, ScriptOutputType.MULTI,
          new String[] {lock.lockKey}, request, "200"); // shorter than the lease: shows
      assertEquals(List.of(1L), renewed, what);
    });
  }

  /** A re-sent copy of a grant gives the lease again from now: it removes d too. */
  @Test
  void aReSentGrantRemovesD() throws Exception {
    grantAfter("expiry-resent", "copy of a grant", (lock, token, what) -> {
      List<String> held = redis().hmget(lock.lockKey, "o", "r").stream().map(kv -> kv.getValue()).toList();
      List<Object> replay = redis().eval(Script.LOCK_ACQUIRE.body, ScriptOutputType.MULTI,
          new String[] {lock.lockKey, lock.lockKey.replace(":lock", ":fence")}, held.get(0), held.get(1), "200");
      assertEquals(1L, replay.get(0), what);
      assertEquals(Long.toString(token), replay.get(1).toString(), what + ": its token");
    });
  }

  /**
   * A local hand-off moves the hold to another thread of the client with a new token, and does not
   * touch the expiry: when that token is in a later window, d no longer holds for it, so the
   * hand-off sets d to "-" and the next grant writes the expiry.
   */
  @Test
  void aHandOffClearsD() throws Exception {
    try (Turnstile t = connect()) {
      RedisLock lock = (RedisLock) t.lock(unique("expiry-handed"));
      java.util.concurrent.ExecutorService other = java.util.concurrent.Executors.newSingleThreadExecutor();
      try {
        int handedIntoALaterWindow = 0;
        for (int i = 0; i < 10; i++) {
          lock.lock();
          long first = lock.fencingToken();
          java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
          java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
          long[] second = new long[1];
          Thread[] waiter = new Thread[1];
          java.util.concurrent.Future<?> successor = other.submit(() -> {
            waiter[0] = Thread.currentThread();
            lock.lock();
            try {
              second[0] = lock.fencingToken();
              held.countDown();
              release.await();
            } finally {
              lock.unlock();
            }
            return null;
          });
          TestSupport.await("the other thread waiting", Duration.ofSeconds(60),
              () -> lock.asyncGate() != null && lock.asyncGate().size() > 0 && waiter[0] != null
                  && (waiter[0].getState() == Thread.State.WAITING || waiter[0].getState() == Thread.State.TIMED_WAITING));
          Thread.sleep(40); // the successor's token in a later window than the first
          lock.unlock(); // hands it to the other thread
          held.await();
          assertTrue(second[0] > first, "a new token");
          if (second[0] / WINDOW_MICROS != first / WINDOW_MICROS) {
            handedIntoALaterWindow++;
            String d = redis().hget(lock.lockKey, "d");
            assertTrue(d == null || !d.equals(Long.toString(LEASE)), "hand-off " + i + " left d = " + d);
          }
          release.countDown();
          successor.get();
          long sentAt = serverMillis();
          lock.lock();
          try {
            assertExpiry(lock.lockKey, sentAt, "the grant after hand-off " + i);
          } finally {
            lock.unlock();
          }
        }
        assertTrue(handedIntoALaterWindow > 0, "no hand-off: the other thread got the lock otherwise");
      } finally {
        other.shutdownNow();
      }
    }
  }

  /** A release that someone may wait for sets the record's expiry to its ttl: it removes d. */
  @Test
  void aReleaseThatWakesRemovesD() throws Exception {
    try (Turnstile t = connect()) {
      RedisLock lock = (RedisLock) t.lock(unique("expiry-waited"));
      lock.lock();
      try {
        assertTrue(redis().hexists(lock.lockKey, "d"), "a grant writes field d");
        redis().hset(lock.lockKey, "q", "1"); // a waiting mark may exist
      } finally {
        lock.unlock();
      }
      assertFalse(redis().hexists(lock.lockKey, "d"), "the release left field d");
      long sentAt = serverMillis();
      lock.lock();
      try {
        assertExpiry(lock.lockKey, sentAt, "the grant after it");
      } finally {
        lock.unlock();
      }
    }
  }
}
