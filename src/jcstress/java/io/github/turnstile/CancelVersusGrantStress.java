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
 * Async acquisition, cancel versus grant: an async acquisition's attempt is in flight; its reply says
 * "granted" while the caller cancels the returned future. Exactly one of two things must happen:
 * the caller gets the hold (the future completes with it, nothing is undone), or the future is
 * cancelled and the grant is undone exactly once, either before a hold was made
 * ({@link AcquisitionSide#cancelGrant}, which releases in Redis and wakes the next waiter) or by
 * releasing the hold made just too late. A cancelled future whose grant nobody undoes leaves the
 * lock held in Redis until its lease runs out, and nobody would ever release it. Runs the real
 * {@link AsyncAcquisition} state machine on a fake engine.
 */
@JCStressTest
@Description("AsyncAcquisition: the caller's cancel racing the grant's reply: held xor undone once")
@Outcome(id = "1, 0, 1", expect = Expect.ACCEPTABLE, desc = "granted first: the caller holds it")
@Outcome(id = "0, 1, 0", expect = Expect.ACCEPTABLE, desc = "cancelled first: the grant is undone when its reply comes")
@Outcome(id = "0, 1, 1", expect = Expect.ACCEPTABLE, desc = "a hold was made just after the cancel: released at once")
@Outcome(id = "0, 0, .*", expect = Expect.FORBIDDEN, desc = "leaked: cancelled, yet granted in Redis and never undone")
@Outcome(id = "1, [1-9], .*", expect = Expect.FORBIDDEN, desc = "the caller holds a grant that was undone")
@Outcome(id = ".*, [2-9], .*", expect = Expect.FORBIDDEN, desc = "undone twice")
@State
public class CancelVersusGrantStress {
  private final AsyncFakes.Env env = new AsyncFakes.Env();
  private final AsyncFakes.Side side = new AsyncFakes.Side(1);
  private final CompletableFuture<LockHold> result;

  public CancelVersusGrantStress() {
    // becomes head at once and sends its first attempt: replies[0], which the actor completes
    result = new AsyncGate<>(env, side).acquire(Call.untimed(false), 1);
  }

  @Actor
  public void reply() {
    side.replies.get(0).complete(new Attempt(true, 42, 0));
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
  }
}
