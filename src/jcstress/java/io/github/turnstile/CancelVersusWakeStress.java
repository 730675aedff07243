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
 * Async acquisition, cancel versus wake-up: an async acquisition was refused and waits (subscribed) for a
 * release's message; the message arrives while the caller cancels. Whatever the order, the waiter
 * is withdrawn from Redis exactly once (its waiting marks removed, so it holds nobody back), no
 * attempt is sent after the withdrawal was decided without being answered and withdrawn again,
 * and nothing is held. If the wake-up came first, its new attempt is in flight at the cancel: the
 * reply (completed by the arbiter as a refusal) then does the withdrawal. Runs the real
 * {@link AsyncAcquisition} state machine on a fake engine.
 */
@JCStressTest
@Description("AsyncAcquisition: the caller's cancel racing a pub/sub wake-up: withdrawn exactly once")
@Outcome(id = "1, 2, 0", expect = Expect.ACCEPTABLE, desc = "cancelled while waiting: withdrawn, no further attempt")
@Outcome(id = "1, 3, 0", expect = Expect.ACCEPTABLE, desc = "woken first: the attempt's reply withdrew it")
@Outcome(id = "0, .*, .*", expect = Expect.FORBIDDEN, desc = "never withdrawn: its waiting marks stay")
@Outcome(id = "[2-9], .*, .*", expect = Expect.FORBIDDEN, desc = "withdrawn twice")
@Outcome(id = ".*, .*, [1-9]", expect = Expect.FORBIDDEN, desc = "something was granted")
@State
public class CancelVersusWakeStress {
  private final AsyncFakes.Env env = new AsyncFakes.Env();
  private final AsyncFakes.Side side = new AsyncFakes.Side(3);
  private final CompletableFuture<LockHold> result;

  public CancelVersusWakeStress() {
    result = new AsyncGate<>(env, side).acquire(Call.untimed(false), 1);
    Attempt refused = new Attempt(false, 0, 30_000);
    side.replies.get(0).complete(refused); // the first attempt (not subscribed): refused; it subscribes
    side.replies.get(1).complete(refused); // the subscribed attempt: refused; it waits for the message
  }

  @Actor
  public void message() {
    env.event.complete(null);
  }

  @Actor
  public void cancel() {
    result.cancel(false);
  }

  @Arbiter
  public void arbiter(III_Result r) {
    side.replies.get(2).complete(new Attempt(false, 0, 30_000)); // a woken attempt's reply, if it was sent
    r.r1 = side.withdrawn.get();
    r.r2 = side.sent.get();
    r.r3 = side.granted.get() + side.cancelledGrants.get();
  }
}
