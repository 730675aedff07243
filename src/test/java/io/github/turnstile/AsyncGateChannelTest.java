package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The subscription an async gate's head makes is given back however the head ends, even when it
 * ends while it is subscribing. Deterministic: the engine (a stand-in for {@link AcquisitionEnv},
 * no Redis involved) holds the head inside {@code subscribe} while the caller cancels it.
 *
 * <p>Found from a subscription left open after {@code AsyncScaleTest} (1 run in 10 beside 4
 * burners): its warm-up races a 1 ms {@code tryLockAsync} against its own subscription.
 */
class AsyncGateChannelTest {

  /** Stands in for the engine: subscriptions are counted, and {@code subscribe} can be held. */
  static final class Env extends AsyncStubEnv {
    final AtomicInteger opened = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();
    final CountDownLatch subscribing = new CountDownLatch(1);
    final CountDownLatch proceed = new CountDownLatch(1);

    @Override
    public WakeChannel subscribe(String channel) {
      opened.incrementAndGet();
      subscribing.countDown();
      try {
        assertTrue(proceed.await(30, TimeUnit.SECONDS), "the test let the subscription through");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return channel(closed::incrementAndGet);
    }
  }

  /** Every attempt is refused (another client holds the lock for 30 s); withdrawals counted. */
  static final class Side extends AcquisitionSide<LockHold> {
    final AtomicInteger attempts = new AtomicInteger();
    final AtomicInteger withdrawn = new AtomicInteger();
    /** The first attempt's reply, completed by the test (on a thread of its own). */
    final CompletableFuture<Attempt> first = new CompletableFuture<>();

    Side() {
      super("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP);
    }

    @Override
    CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      return attempts.getAndIncrement() == 0 ? first
          : CompletableFuture.completedFuture(new Attempt(false, 0, 30_000));
    }

    @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      throw new AssertionError("nothing is granted here");
    }
    @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
    @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { withdrawn.incrementAndGet(); }
    @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }
  }

  @Test
  void aHeadCancelledWhileItSubscribesGivesTheSubscriptionBack() throws Exception {
    Env env = new Env();
    Side side = new Side();
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    CompletableFuture<LockHold> acquisition = gate.acquire(Call.untimed(false), 1);
    assertEquals(1, side.attempts.get(), "the head's first attempt, sent without a subscription");

    // refused: the head goes on to subscribe, on the replying thread, and is held there
    Thread replying = new Thread(() -> side.first.complete(new Attempt(false, 0, 30_000)), "replying");
    replying.start();
    assertTrue(env.subscribing.await(30, TimeUnit.SECONDS), "the head subscribes after its refusal");

    acquisition.cancel(false); // the caller gives up: the head leaves the gate, which is now empty
    env.proceed.countDown();
    replying.join(30_000);

    assertEquals(1, env.opened.get(), "one subscription made");
    assertEquals(1, env.closed.get(), "the subscription of a head that ended is given back");
    assertNull(gate.describe(), "the gate is idle: no head, no queue, no subscription");
    assertEquals(1, side.withdrawn.get(), "the refused head withdrew its waiting mark");
  }
}
