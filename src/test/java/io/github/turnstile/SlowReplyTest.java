package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.Bounds;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A zero or short timeout on a host or network that answers slowly: a free primitive is taken
 * (the JDK's "if the lock is available this method returns immediately with true"), because the
 * one attempt's reply is awaited for at least {@code Call.FIRST_REPLY_NANOS}. With 20 ms, a busy
 * CI machine (the server matrices, two suites on two cores) refused free permits and read locks
 * (CHANGELOG.md). Here every reply
 * comes at least 60 ms after its command (a proxy delays each direction by 30 ms); with the old
 * 20 ms, every call below returned false.
 */
@ExtendWith(RedisExtension.class)
class SlowReplyTest {

  @Test
  void zeroAndShortTimeoutsTakeAFreePrimitiveWhoseRepliesAreSlow(TestRedis redis) throws Exception {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile slow = Turnstile.connect(proxy.uri())) {
      DistributedLock lock = slow.lock(unique("slow-lock"));
      DistributedSemaphore sem = slow.semaphore(unique("slow-sem"), 2);
      DistributedReadWriteLock rw = slow.readWriteLock(unique("slow-rw"));
      proxy.setDelayMillis(30);
      assertTrue(lock.tryLock(0, TimeUnit.SECONDS), "free lock, timeout 0");
      lock.unlock();
      assertTrue(lock.tryLock(5, TimeUnit.MILLISECONDS), "free lock, timeout 5 ms");
      lock.unlock();
      assertTrue(sem.tryAcquire(0, TimeUnit.SECONDS), "free permit, timeout 0");
      assertTrue(sem.tryAcquire(-1, TimeUnit.SECONDS), "free permit, negative timeout");
      sem.release(2);
      assertTrue(rw.readLock().tryLock(0, TimeUnit.SECONDS), "free read lock, timeout 0");
      rw.readLock().unlock();
      assertTrue(rw.writeLock().tryLock(0, TimeUnit.SECONDS), "free write lock, timeout 0");
      rw.writeLock().unlock();
      LockHold hold = lock.tryLockAsync(0, TimeUnit.SECONDS).get(10, TimeUnit.SECONDS);
      hold.release().toCompletableFuture().get(10, TimeUnit.SECONDS);
      proxy.setDelayMillis(0);
      assertEquals(2, sem.availablePermits());
    }
  }

  /**
   * The other side of the minimum wait: when Redis does not answer at all (the proxy forwards
   * nothing), a zero timeout still returns false, after about the minimum wait, and holds
   * nothing once Redis answers again.
   */
  @Test
  void aZeroTimeoutReturnsFalseWhenNoReplyComes(TestRedis redis) throws Exception {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile stalled = Turnstile.connect(proxy.uri());
        Turnstile other = Turnstile.connect(redis.uri())) {
      String name = unique("no-reply");
      DistributedLock lock = stalled.lock(name);
      proxy.setPaused(true);
      long start = System.nanoTime();
      assertFalse(lock.tryLock(0, TimeUnit.SECONDS), "no reply: not acquired");
      long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      long min = TimeUnit.NANOSECONDS.toMillis(Call.FIRST_REPLY_NANOS);
      assertTrue(elapsed >= min && elapsed < min + Bounds.OVERRUN_MS, "returned after " + elapsed + " ms");
      assertFalse(lock.isHeldByCurrentThread());
      proxy.setPaused(false);
      // the attempt may still run once the proxy forwards it: it is cancelled by its request id
      assertTrue(other.lock(name).tryLock(10, TimeUnit.SECONDS), "nothing left held by the refused call");
      other.lock(name).unlock();
    }
  }
}
