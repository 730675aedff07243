package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A waiting thread's permits that the registration's lease lost after they were counted, before
 * they reached the thread, are revoked: the thread asks again, and never returns holding permits
 * that Redis already gave back. Before, the thread returned with them, and its release threw
 * {@link LockLostException}. The loss is placed deterministically in that window by the
 * semaphore's seam ({@code RedisSemaphore.beforeAbsorb}), which moves the client's clock past the
 * lease there, so that the books' liveness check declares the registration lost.
 */
@ExtendWith(RedisExtension.class)
class PermitRevocationTest {

  @Test
  void permitsLostBeforeTheyReachTheWaitingThreadAreRevokedAndAskedForAgain(TestRedis redis) throws Exception {
    String name = unique("revoke");
    try (Turnstile waiterClient = Turnstile.connect(redis.uri());
        Turnstile other = Turnstile.connect(redis.uri())) {
      DistributedSemaphore held = other.semaphore(name, 1);
      held.acquire();
      RedisSemaphore s = (RedisSemaphore) waiterClient.semaphore(name, 1);
      AtomicInteger losses = new AtomicInteger();
      s.addLeaseLossListener(e -> losses.incrementAndGet());
      AtomicInteger grantsReached = new AtomicInteger();
      s.beforeAbsorb = () -> {
        if (grantsReached.incrementAndGet() == 1) {
          // past the lease, from the first grant on: its registration is lost when the thread takes it
          waiterClient.engine().ticker = () -> System.nanoTime() + TimeUnit.SECONDS.toNanos(31);
        }
      };
      CountDownLatch returned = new CountDownLatch(1);
      AtomicReference<Throwable> failure = new AtomicReference<>();
      Thread t = new Thread(() -> {
        try {
          s.acquire();
          returned.countDown();
        } catch (Throwable e) {
          failure.set(e);
        }
      }, "revoke-waiter");
      t.start();
      TestSupport.await("the thread waits", java.time.Duration.ofSeconds(60), () -> s.getQueueLength() == 1);
      held.release();
      assertTrue(returned.await(60, TimeUnit.SECONDS), "acquire() returned");
      assertNull(failure.get());
      assertTrue(grantsReached.get() >= 2, "the revoked grant was asked for again (" + grantsReached.get() + " grants)");
      assertEquals(1, s.heldPermits(), "the thread holds the permit of its second grant");
      s.release(); // did throw LockLostException: the thread held permits lost before it returned
      assertEquals(0, s.heldPermits());
      assertEquals(1, held.availablePermits());
      assertFalse(t.isAlive() && t.getState() == Thread.State.WAITING);
      t.join(10_000);
    }
  }
}
