package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A head waiting for its subscription's confirmation when the re-check timer fires just as the
 * confirmation lands. Deterministic: the confirmation future reports "not done" to the read made
 * when the timer fired, and completes right after that read, so every later read sees it done.
 *
 * <p>The head read the confirmation twice ("is it ready?", then "is it done?"): "not ready" and
 * then "done" sent it into the failed-subscription path, which found the subscription confirmed
 * after all and returned without an attempt, a timer or a message to wake it. The head then waited
 * for ever on a lock that was free in Redis, and every acquisition queued behind it with it: the
 * drain of {@code AsyncScaleTest} that stalled, one name's 100 acquisitions never granted.
 */
class AsyncConfirmationRaceTest {

  /**
   * A confirmation that lands between two reads: the head's first read (before it waits) and its
   * second (when the re-check timer fires) see it pending; it completes right after the second,
   * so the third and every later read see it done.
   */
  static final class LateConfirmation extends CompletableFuture<Void> {
    final AtomicInteger reads = new AtomicInteger();

    @Override
    public boolean isDone() {
      boolean done = super.isDone();
      if (!done && reads.incrementAndGet() == 2) {
        complete(null); // the SUBSCRIBE confirmation arrives between this read and the next
      }
      return done;
    }
  }

  /** Confirmations arrive only through {@link LateConfirmation}; the re-check timer is short. */
  static final class Env extends AsyncStubEnv {
    final LateConfirmation ready = new LateConfirmation();
    final AtomicInteger subscribed = new AtomicInteger();

    @Override
    public WakeChannel subscribe(String channel) {
      subscribed.incrementAndGet();
      return new WakeChannel() {
        @Override public CompletableFuture<Void> ready() { return ready; }
        @Override public CompletableFuture<Void> next() { return event; }
        @Override public void close() { }
      };
    }

    @Override
    public long recheckNanos() {
      return TimeUnit.MILLISECONDS.toNanos(1); // the head re-checks the confirmation after 1 ms
    }
  }

  /** The first attempt is refused; the subscribed one is granted. */
  static final class Side extends AcquisitionSide<LockHold> {
    final AtomicInteger attempts = new AtomicInteger();
    final AtomicInteger subscribedAttempts = new AtomicInteger();

    Side() {
      super("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP);
    }

    @Override
    CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      attempts.incrementAndGet();
      if (!subscribed) {
        return CompletableFuture.completedFuture(new Attempt(false, 0, 30_000));
      }
      subscribedAttempts.incrementAndGet();
      return CompletableFuture.completedFuture(new Attempt(true, 7, 0));
    }

    @Override
    LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      return new Hold(a.token);
    }
    @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
    @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { }
    @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }
  }

  /** A granted hold that only knows its token. */
  record Hold(long fencingToken) implements LockHold {
    @Override public String name() { return "n"; }
    @Override public boolean isValid() { return true; }
    @Override public CompletionStage<LeaseLostEvent> lost() { return new CompletableFuture<>(); }
    @Override public CompletionStage<Void> release() { return CompletableFuture.completedFuture(null); }
    @Override public void close() { }
  }

  @Test
  void aConfirmationLandingBetweenTwoReadsLeadsToTheSubscribedAttempt() throws Exception {
    Env env = new Env();
    Side side = new Side();
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    CompletableFuture<LockHold> acquisition = gate.acquire(Call.untimed(false), 1);

    // Before the fix the head stranded here: no attempt after the first, nothing armed to wake it.
    LockHold hold;
    try {
      hold = acquisition.get(60, TimeUnit.SECONDS);
    } catch (TimeoutException e) {
      throw new AssertionError("the head stalled: stranded=" + gate.stranded() + " " + gate.describe(), e);
    }
    assertEquals(7, hold.fencingToken(), "granted by the attempt made once the subscription was confirmed");
    assertEquals(1, env.subscribed.get(), "one subscription");
    assertEquals(1, side.subscribedAttempts.get(), "one subscribed attempt");
    assertTrue(env.ready.isDone(), "the confirmation landed during the wait for it");
    assertFalse(acquisition.isCompletedExceptionally());
  }
}
