package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A one-attempt call ({@code tryLock()}, {@code tryAcquire()}) whose attempt is in flight when a
 * recovery event comes waits on for its reply; the event, already done, must not wake that wait
 * again at once. It did: the wait re-armed itself on the done event in a loop, the reply that came
 * next was never read, and the caller hung until its park's 60 s bound (the semaphore fault run,
 * whose {@code tryAcquire()} runs on the one engine: its workers were still parked 30 s after the
 * stop). Deterministic: a stand-in engine whose recovery event the test fires, no Redis involved.
 */
class OnceCallFaultTest {

  @Test
  void aOneAttemptCallReadsItsReplyAfterARecoveryEvent() throws Exception {
    AtomicReference<CompletableFuture<Void>> events = new AtomicReference<>(new CompletableFuture<>());
    AsyncStubEnv env = new AsyncStubEnv() {
      @Override
      public CompletableFuture<Void> faults() {
        return events.get();
      }
    };
    CompletableFuture<Attempt> reply = new CompletableFuture<>();
    AcquisitionSide<LockHold> side = new AcquisitionSide<>("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP) {
      @Override CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
        return reply;
      }
      @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
        return new StubHold(a.token);
      }
      @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
      @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { }
      @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }
    };
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    CompletableFuture<LockHold> acquired = gate.acquire(Call.once(), 1);
    CompletableFuture<Void> event = events.getAndSet(new CompletableFuture<>());
    event.complete(null); // a reconnect while the attempt is in flight
    reply.complete(new Attempt(true, 42, 0));
    assertEquals(42, acquired.get(10, TimeUnit.SECONDS).fencingToken());
  }
}
