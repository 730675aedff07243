package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * A waiter that gives up (interrupt, timeout) leaves nothing behind: no hold, no lease, no
 * renewal, and no swallowed wake-up. The proxy holds replies back so that the races are forced,
 * not hoped for.
 */
@ExtendWith(RedisExtension.class)
class GiveUpTest {

  /**
   * The acquire script is in flight when the thread is interrupted. The thread throws at once;
   * when Redis later runs the acquire (the proxy resumes), the engine cancels it: the lock ends up
   * free and no lease is ever renewed for it.
   */
  @Test
  void interruptedAcquireThatSucceedsLaterIsCancelled(TestRedis redis) throws Exception {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile turnstile = Turnstile.connect(proxy.uri())) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("cancel"));
      proxy.setPaused(true);
      AtomicReference<Throwable> thrown = new AtomicReference<>();
      AtomicLong reacted = new AtomicLong();
      Thread t = TestSupport.start("acquirer", () -> {
        try {
          lock.lockInterruptibly();
        } catch (Throwable e) {
          thrown.set(e);
        }
        reacted.set(System.nanoTime());
      });
      Thread.sleep(300); // the attempt is written and held in the proxy
      long interruptedAt = System.nanoTime();
      t.interrupt();
      t.join(2000);
      assertTrue(thrown.get() instanceof InterruptedException, "threw " + thrown.get());
      assertTrue(TimeUnit.NANOSECONDS.toMillis(reacted.get() - interruptedAt) < Bounds.OVERRUN_MS, "prompt: "
          + TimeUnit.NANOSECONDS.toMillis(reacted.get() - interruptedAt) + " ms");
      proxy.setPaused(false); // Redis now runs the acquire, then the cancel chained on its reply
      // the acquire ran (it issued a token) and was then cancelled (released: o gone, the record
      // of the hold, r and t, kept)
      TestSupport.await("acquired then cancelled in Redis", Duration.ofSeconds(5),
          () -> "1".equals(redis.command("EXISTS", lock.fenceKey))
              && "0".equals(redis.command("HEXISTS", lock.lockKey, "o"))
              && "1".equals(redis.command("HEXISTS", lock.lockKey, "r")));
      assertEquals(0, turnstile.engine().watchdog.size(), "no lease registered, nothing renewed");
      assertFalse(lock.isLocked());
    }
  }

  /**
   * Redis hands the wake token to waiter A, but A is interrupted before the reply reaches it.
   * A must hand the wake-up on: waiter B, blocked behind A, then gets the lock at once instead of
   * sleeping until the old holder's 30 s lease would have run out.
   */
  @Test
  void interruptedWaiterHandsOnAConsumedWakeup(TestRedis redis) throws Exception {
    String name = unique("pass");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile clientA = Turnstile.connect(proxy.uri());
        Turnstile clientB = Turnstile.connect(redis.uri());
        Turnstile holderClient = Turnstile.connect(redis.uri())) {
      DistributedLock holder = holderClient.lock(name);
      holder.lock();
      DistributedLock a = clientA.lock(name);
      AtomicReference<Throwable> aThrew = new AtomicReference<>();
      Thread ta = TestSupport.start("A", () -> {
        try {
          a.lockInterruptibly();
          a.unlock();
        } catch (Throwable e) {
          aThrew.set(e);
        }
      });
      awaitBlockedClients(redis, 1);
      DistributedLock b = clientB.lock(name);
      AtomicLong bAcquiredAt = new AtomicLong();
      Thread tb = TestSupport.start("B", () -> {
        b.lock();
        bAcquiredAt.set(System.nanoTime());
        b.unlock();
      });
      awaitBlockedClients(redis, 2); // A blocked first, so Redis serves A first
      proxy.setPaused(true);
      holder.unlock(); // Redis pops the token for A; the reply sits in the paused proxy
      awaitBlockedClients(redis, 1); // A was served, B still blocked
      ta.interrupt();
      ta.join(2000);
      assertTrue(aThrew.get() instanceof InterruptedException, "A threw " + aThrew.get());
      long resumedAt = System.nanoTime();
      proxy.setPaused(false);
      tb.join(30_000);
      assertTrue(bAcquiredAt.get() != 0, "B acquired");
      long ms = TimeUnit.NANOSECONDS.toMillis(bAcquiredAt.get() - resumedAt);
      assertTrue(ms < Bounds.PROMPT_MS, "B woke " + ms + " ms after A gave up, not at the 30 s lease");
      assertFalse(a.isLocked());
    }
  }

  private static void awaitBlockedClients(TestRedis redis, int n) {
    TestSupport.await("blocked_clients:" + n, Duration.ofSeconds(5),
        () -> redis.command("INFO", "clients").contains("blocked_clients:" + n + "\r")
            || redis.command("INFO", "clients").contains("blocked_clients:" + n + "\n"));
  }
}
