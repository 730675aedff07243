package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A head whose wait on the wake list fails (no blocking connection could be opened: the node is
 * down, as during a Cluster failover) waits by pub/sub from then on; its acquisition goes on. A
 * check added for the token a wait took read the failed wait's outcome a second time, outside the
 * handler of that failure, and threw: the acquisition failed ("async acquisition failed
 * unexpectedly", a semaphore worker of the Cluster failover loop). Deterministic: a stand-in engine
 * whose list wait fails at once, no Redis involved.
 */
class AsyncListWaitFailureTest {

  @Test
  void aFailedListWaitFallsBackToPubSub() throws Exception {
    AtomicInteger listWaits = new AtomicInteger();
    AsyncStubEnv env = new AsyncStubEnv() {
      @Override
      public Wake waitOnList(String key, long sliceNanos, Runnable passWakeup) {
        listWaits.incrementAndGet();
        CompletableFuture<Boolean> failed = CompletableFuture.failedFuture(
            new TurnstileException("cannot connect to Redis (blocking connection to 127.0.0.1:1)"));
        return new Wake() {
          @Override public CompletableFuture<Boolean> woken() { return failed; }
          @Override public void used() { }
          @Override public void abandon() { }
        };
      }
    };
    AtomicInteger attempts = new AtomicInteger();
    AcquisitionSide<LockHold> side = new AcquisitionSide<>("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP) {
      @Override String wakeKey() { return "wake"; }
      @Override CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
        // refused until it waits by pub/sub, then granted
        return CompletableFuture.completedFuture(attempts.incrementAndGet() == 1 || !subscribed
            ? new Attempt(false, 0, 30_000) : new Attempt(true, 7, 0));
      }
      @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
        return new StubHold(a.token);
      }
      @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
      @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { }
      @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }
    };
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    LockHold h = gate.acquire(Call.untimed(false), 1).get(30, TimeUnit.SECONDS);
    assertNotNull(h);
    assertEquals(7, h.fencingToken());
    assertEquals(1, listWaits.get(), "one wait on the list, then pub/sub only");
  }
}
