package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A fencing token is the server's time in µs when Redis granted it (DESIGN §3; while the clock is
 * ahead of the last token, as it is here): {@code lock_acquire.lua} builds it from {@code TIME}'s
 * seconds and microseconds, padding the microseconds to six digits. Its usual grant does that with
 * string arithmetic of its own (no {@code tonumber}, no {@code math.floor}: fewer Lua calls); a
 * microsecond part under 100,000 takes the padding branch, which a grant meets about once in ten.
 * A read grant of a read/write lock ({@code rwlock.lua}) builds its token the same way.
 * Server times only; nothing is timed against the wall clock.
 */
@ExtendWith(RedisExtension.class)
class FencingTokenTimeTest {

  @Test
  void everyTokenIsTheServerTimeOfItsGrant(TestRedis redis) {
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      checkTokens(redis, t.lock(unique("token-time")));
    }
  }

  /** The same for a read/write lock's read grants ({@code rwlock.lua}, op {@code read}). */
  @Test
  void everyReadTokenIsTheServerTimeOfItsGrant(TestRedis redis) {
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      checkTokens(redis, t.readWriteLock(unique("read-token-time")).readLock());
    }
  }

  private static void checkTokens(TestRedis redis, DistributedLock lock) {
    RedisClient client = RedisClient.create(redis.uri());
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      check(connection.sync(), lock);
    } finally {
      client.shutdown();
    }
  }

  private static long serverMicros(RedisCommands<String, String> observer) {
    List<String> t = observer.time();
    return Long.parseLong(t.get(0)) * 1_000_000 + Long.parseLong(t.get(1));
  }

  private static void check(RedisCommands<String, String> observer, DistributedLock lock) {
    int padded = 0;
    int unpadded = 0;
    long last = 0;
    for (int i = 0; i < 20_000 && (padded < 3 || unpadded < 3); i++) {
      long before = serverMicros(observer);
      lock.lock();
      long token;
      try {
        token = lock.fencingToken();
      } finally {
        lock.unlock();
      }
      long after = serverMicros(observer);
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
