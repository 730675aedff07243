package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.ScriptOutputType;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Lettuce re-sends in-flight commands after a reconnect, so every script runs at least once and
 * maybe twice. A re-sent acquire must not hand out a second token or count a second hold; a
 * re-sent release must not fail the true owner nor release someone else's lock.
 */
@ExtendWith(RedisExtension.class)
class ReplayIdempotencyTest {

  /** Script level: the same request twice gives the same token and issues one token only. */
  @Test
  void acquireAndReleaseScriptsAreIdempotent(TestRedis redis) throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri())) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("idem"));
      Engine engine = turnstile.engine();
      String req = engine.newRequestId();
      Engine.Attempt a1 = engine.awaitQuietly(lock.attempt(req), "a1");
      String fenceAfterFirst = redis.command("GET", lock.fenceKey);
      Engine.Attempt a2 = engine.awaitQuietly(lock.attempt(req), "a2");
      assertTrue(a1.acquired && a2.acquired);
      assertEquals(a1.token, a2.token, "replayed acquire returns the same token");
      assertEquals(fenceAfterFirst, redis.command("GET", lock.fenceKey), "no second token issued");

      String[] keys = {lock.lockKey, lock.wakeKey};
      assertEquals(1L, (long) engine.awaitQuietly(
          engine.<Long>eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, keys, req, "30000"), "r1"));
      assertEquals(2L, (long) engine.awaitQuietly(
          engine.<Long>eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, keys, req, "30000"), "r2"),
          "replayed release is recognised as already done");
      assertEquals(0L, (long) engine.awaitQuietly(
          engine.<Long>eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, keys, "someone:else", "30000"), "r3"),
          "a release of a request that never held it is refused");
      // a new owner's lock survives a replay of the previous owner's release
      String other = engine.newRequestId();
      assertTrue(engine.awaitQuietly(lock.attempt(other), "a3").acquired);
      assertEquals(2L, (long) engine.awaitQuietly(
          engine.<Long>eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, keys, req, "30000"), "r4"));
      assertEquals(other, redis.command("HGET", lock.lockKey, "r"), "new owner still holds it");
    }
  }

  /** End to end: the acquire's reply is lost, the connection is cut, Lettuce re-sends it. */
  @Test
  void resentAcquireAfterReconnect(TestRedis redis) throws Exception {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile turnstile = Turnstile.connect(proxy.uri())) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("replay-acquire"));
      AtomicBoolean acquired = new AtomicBoolean();
      AtomicReference<Long> token = new AtomicReference<>();
      proxy.setDropReplies(true);
      Thread t = TestSupport.start("acquirer", () -> {
        acquired.set(lock.tryLock(10, TimeUnit.SECONDS));
        token.set(lock.fencingToken());
        assertEquals(1, lock.getHoldCount());
        lock.unlock();
      });
      TestSupport.await("acquire reached Redis", java.time.Duration.ofSeconds(5),
          () -> "1".equals(redis.command("HEXISTS", lock.lockKey, "o")));
      String fenceAfterFirst = redis.command("GET", lock.fenceKey);
      proxy.setDropReplies(false);
      proxy.cutAll();
      t.join(10_000);
      assertTrue(acquired.get());
      assertEquals(Long.parseLong(fenceAfterFirst), token.get(), "the re-sent acquire got the same token");
      assertEquals(fenceAfterFirst, redis.command("GET", lock.fenceKey), "only one token was issued");
      assertEquals("0", redis.command("HEXISTS", lock.lockKey, "o"), "released");
    }
  }

  /**
   * End to end: the release's reply is lost; meanwhile another client takes the now free lock;
   * the re-sent release neither throws at the true owner nor frees the other client's lock.
   */
  @Test
  void resentReleaseAfterReconnect(TestRedis redis) throws Exception {
    String name = unique("replay-release");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri());
        Turnstile direct = Turnstile.connect(redis.uri())) {
      RedisLock lock = (RedisLock) viaProxy.lock(name);
      AtomicReference<Throwable> unlockError = new AtomicReference<>();
      AtomicBoolean unlocked = new AtomicBoolean();
      java.util.concurrent.CountDownLatch locked = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      Thread t = TestSupport.start("owner", () -> {
        lock.lock();
        locked.countDown();
        go.await();
        try {
          lock.unlock(); // same thread as lock(): the true owner
          unlocked.set(true);
        } catch (Throwable e) {
          unlockError.set(e);
        }
      });
      locked.await();
      proxy.setDropReplies(true);
      go.countDown();
      DistributedLock theirs = direct.lock(name);
      assertTrue(theirs.tryLock(5, TimeUnit.SECONDS), "release reached Redis");
      proxy.setDropReplies(false);
      proxy.cutAll();
      t.join(10_000);
      assertNull(unlockError.get(), "true owner's unlock must not fail after a replay");
      assertTrue(unlocked.get());
      assertTrue(theirs.isHeldByCurrentThread());
      assertEquals("1", redis.command("HEXISTS", lock.lockKey, "o"), "other client's lock untouched");
      theirs.unlock();
    }
  }
}
