package io.github.turnstile;

import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * A release of this JVM hands permits to a semaphore thread's acquisition by local hand-off
 * ({@link AsyncAcquisition#handedPermits}) just as its deadline passes (the deadline timer's
 * {@link AcquisitionState#timeout}: the acquisition leaves the gate and its future completes with a
 * timeout; the thread then returns from its park): either the thread
 * returns with them, or it times out and they are given back once: the hand-off reports
 * them not taken (the releasing caller then releases them in Redis), or, delivered just after the
 * deadline completed the future, the hold made for them is released at once. Never lost to every
 * client (neither held nor given back) nor counted twice (held and given back). No ticket is left
 * over either way. Runs the real
 * {@link AsyncGate}, {@link AsyncAcquisition} and ticket parking on the stand-ins of
 * {@link AsyncFakes}.
 */
@JCStressTest
@Description("A local hand-off of permits racing the waiting thread's deadline: held xor given back")
@Outcome(id = "1, 0, 0", expect = Expect.ACCEPTABLE, desc = "handed over; the thread holds them")
@Outcome(id = "0, 1, 0", expect = Expect.ACCEPTABLE, desc = "timed out first; given back once")
@Outcome(id = "0, 0, 0", expect = Expect.FORBIDDEN, desc = "lost: neither held nor given back")
@Outcome(id = "1, 1, 0", expect = Expect.FORBIDDEN, desc = "counted twice: held, yet given back")
@Outcome(expect = Expect.FORBIDDEN, desc = "a ticket lost or left over, or given back twice")
@State
public class HandedPermitsVersusDeadlineStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(1);
  private final Semaphore lot = new Semaphore(0, true);
  private final Waits.Tickets tickets = PermitFakes.tickets(lot);
  private final Call call = Call.until(System.nanoTime() + TimeUnit.MINUTES.toNanos(10), true);
  private final AsyncAcquisition<LockHold> acquisition;
  private int held;
  private int delivered;

  public HandedPermitsVersusDeadlineStress() {
    AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
    acquisition = gate.enqueue(call, 1, null); // the head: its attempt (replies[0]) never answers
  }

  /** The deadline: what the acquisition's deadline timer does when it fires (leaves the gate, then completes the future). */
  @Actor
  public void deadline() {
    acquisition.timeout();
  }

  @Actor
  public void releaser() {
    delivered = acquisition.handedPermits(new Attempt(true, 1, 0, 7)) ? 1 : 0;
  }

  @Arbiter
  public void arbiter(III_Result r) {
    try {
      held = Waits.park(acquisition, call, tickets) != null ? 1 : 0; // the waiting thread's return
    } catch (InterruptedException e) {
      held = -1;
    }
    r.r1 = held;
    r.r2 = (delivered == 1 ? 0 : 1) + side.holdsReleased.get();
    r.r3 = lot.availablePermits();
    // the attempt's reply, so that nothing of this state outlives it (its reply wait's re-check
    // timer is armed for the stand-in's ten-minute command timeout until then)
    side.replies.get(0).complete(new Attempt(false, 0, -1));
  }
}
