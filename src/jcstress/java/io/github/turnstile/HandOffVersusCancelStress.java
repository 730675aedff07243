package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * Local hand-off versus cancel: a releasing hold of this JVM handed the lock to the head of the
 * async gate (Redis granted the head's request, {@link AsyncAcquisition#handedOver}) while the
 * head's caller cancels its future; the head's own attempt is still in flight and never answers.
 * Exactly one of two things must happen: the caller gets the hold, or the future is cancelled and
 * the handed grant is undone once (before a hold was made, or by releasing the hold made just too
 * late). A cancelled head whose handed grant nobody undoes would keep the lock held in Redis until
 * its lease ran out. Runs the real {@link AsyncAcquisition} and {@link AsyncGate} on a fake engine.
 */
@JCStressTest
@Description("AsyncAcquisition: a local hand-off racing the caller's cancel: held xor undone once")
@Outcome(id = "1, 0, 1", expect = Expect.ACCEPTABLE, desc = "handed first: the caller holds it")
@Outcome(id = "0, 1, 0", expect = Expect.ACCEPTABLE, desc = "cancelled first: the handed grant is undone")
@Outcome(id = "0, 1, 1", expect = Expect.ACCEPTABLE, desc = "a hold was made just after the cancel: released at once")
@Outcome(id = "0, 0, .*", expect = Expect.FORBIDDEN, desc = "leaked: cancelled, yet handed in Redis and never undone")
@Outcome(id = "1, [1-9], .*", expect = Expect.FORBIDDEN, desc = "the caller holds a grant that was undone")
@Outcome(id = ".*, [2-9], .*", expect = Expect.FORBIDDEN, desc = "undone twice")
@State
public class HandOffVersusCancelStress {
  private final AsyncFakes.Env env = new AsyncFakes.Env();
  private final AsyncFakes.Side side = new AsyncFakes.Side(1);
  private final CompletableFuture<LockHold> result;
  private final AsyncAcquisition<LockHold> head;

  public HandOffVersusCancelStress() {
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    // becomes head at once and sends its first attempt: replies[0], which stays unanswered
    result = gate.acquire(Call.untimed(false), 1);
    head = gate.successor(8).acquisition();
  }

  @Actor
  public void handOff() {
    head.handedOver(new Attempt(true, 43, 0), 0);
  }

  @Actor
  public void cancel() {
    result.cancel(false);
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = result.isDone() && !result.isCompletedExceptionally() ? 1 : 0;
    r.r2 = side.undone();
    r.r3 = side.granted.get();
    // the head's own attempt, refused at last: ends its reply's re-check timer (else each state
    // would keep one for the stand-in engine's 10 minutes)
    side.replies.get(0).complete(new Attempt(false, 0, 30_000));
  }
}
