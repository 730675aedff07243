package io.github.turnstile;

import java.util.concurrent.Semaphore;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * Two threads of a semaphore parked in its ticket lot ({@link Waits#park(AsyncAcquisition,
 * Call, Waits.Tickets)}: the superclass's fair queue, so that its final queue methods count
 * them) on two acquisitions of one gate, granted in gate order while the threads park in whatever
 * order they arrive. A ticket released for one may reach the other first, which must put it back.
 * Both return with their grants, and no ticket is left over: a ticket lost leaves a granted thread
 * parked for ever, one left over lets a later thread return before its acquisition ended. Runs the
 * real {@link AsyncGate} and {@link AsyncAcquisition} on the Redis-free stand-ins of
 * {@link AsyncFakes}.
 */
@JCStressTest
@Description("Semaphore threads parked in the ticket lot: tickets cross, each thread returns with its own grant")
@Outcome(id = "1, 1, 0", expect = Expect.ACCEPTABLE, desc = "both granted, no ticket left")
@Outcome(expect = Expect.FORBIDDEN, desc = "a grant not returned, or a ticket lost or left over")
@State
public class TicketParkingStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(2);
  private final Semaphore lot = new Semaphore(0, true);
  private final Waits.Tickets tickets = PermitFakes.tickets(lot);
  private final Call call = Call.untimed(true);
  private final AsyncAcquisition<LockHold> first;
  private final AsyncAcquisition<LockHold> second;
  private int held1;
  private int held2;

  public TicketParkingStress() {
    AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
    first = gate.enqueue(call, 1, null); // the head: its attempt is replies[0]
    second = gate.enqueue(call, 1, null); // in line: it attempts (replies[1]) once the head is granted
  }

  @Actor
  public void firstThread() {
    try {
      held1 = Waits.park(first, call, tickets) != null ? 1 : 0;
    } catch (InterruptedException e) {
      held1 = -1;
    }
  }

  @Actor
  public void granterThenSecondThread() {
    side.replies.get(0).complete(new Attempt(true, 1, 0));
    while (side.sent.get() < 2) {
      Thread.onSpinWait();
    }
    side.replies.get(1).complete(new Attempt(true, 1, 0));
    try {
      held2 = Waits.park(second, call, tickets) != null ? 1 : 0;
    } catch (InterruptedException e) {
      held2 = -1;
    }
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = held1;
    r.r2 = held2;
    r.r3 = lot.availablePermits();
  }
}
