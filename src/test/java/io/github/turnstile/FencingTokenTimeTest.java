package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A fencing token is the server's time in µs when Redis granted it (DESIGN §3; while the clock is
 * ahead of the last token, as it is here): {@code lock_acquire.lua} builds it from {@code TIME}'s
 * seconds and microseconds, padding the microseconds to six digits. Its usual grant does that with
 * string arithmetic of its own (no {@code tonumber}, no {@code math.floor}: fewer Lua calls); a
 * microsecond part under 100,000 takes the padding branch, which a grant meets about once in ten.
 * A read grant of a read/write lock ({@code rwlock.lua}) builds its token the same way.
 * Server times only; nothing is timed against the wall clock.
 */
class FencingTokenTimeTest {
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

  private static long serverMicros() {
    List<String> t = connection.sync().time();
    return Long.parseLong(t.get(0)) * 1_000_000 + Long.parseLong(t.get(1));
  }

  @Test
  void everyTokenIsTheServerTimeOfItsGrant() {
    try (Turnstile t = Turnstile.connect(server.uri())) {
      checkTokens(t.lock(unique("token-time")));
    }
  }

  /** The same for a read/write lock's read grants ({@code rwlock.lua}, op {@code read}). */
  @Test
  void everyReadTokenIsTheServerTimeOfItsGrant() {
    try (Turnstile t = Turnstile.connect(server.uri())) {
      checkTokens(t.readWriteLock(unique("read-token-time")).readLock());
    }
  }

  private static void checkTokens(DistributedLock lock) {
    int padded = 0;
    int unpadded = 0;
    long last = 0;
    for (int i = 0; i < 20_000 && (padded < 3 || unpadded < 3); i++) {
      long before = serverMicros();
      lock.lock();
      long token;
      try {
        token = lock.fencingToken();
      } finally {
        lock.unlock();
      }
      long after = serverMicros();
      assertTrue(before <= token && token <= after, "grant " + i + ": token " + token
          + " is not the server time between " + before + " and " + after);
      assertTrue(token > last, "grant " + i + ": token " + token + " after " + last);
      last = token;
      if (token % 1_000_000 < 100_000) {
        padded++;
      } else {
        unpadded++;
      }
    }
    assertTrue(padded >= 3 && unpadded >= 3, "grants with a microsecond part under 100,000: " + padded
        + ", over: " + unpadded);
  }
}
