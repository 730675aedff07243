package io.github.turnstile;

import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

/**
 * Scenario 5, interrupt versus grant: a {@code lockInterruptibly()} parks on its acquisition's
 * future ({@link Waits#park}, the blocking API's wait on the one engine) while another thread
 * interrupts it and then the attempt's reply arrives saying "granted". Either the acquire returns
 * with the hold, or it throws InterruptedException and the grant is undone (the cancelled
 * acquisition's reply decides: {@link AcquisitionSide#cancelGrant}; or a hold delivered just
 * before the cancel is released). Never both, never neither: a grant that nobody holds and nobody
 * undoes stays locked in Redis until its lease runs out. Runs the real {@link AsyncGate} and
 * {@link AsyncAcquisition} on the Redis-free stand-ins of {@link AsyncFakes}.
 *
 * <p>The interrupt is delivered only while the acquirer is inside its acquire (a guarded window),
 * so it never leaks into the harness.
 */
@JCStressTest
@Description("lockInterruptibly's park on its acquisition racing an interrupt and the grant: held xor undone once")
@Outcome(id = "1, 0", expect = Expect.ACCEPTABLE, desc = "acquired; the lock is held")
@Outcome(id = "0, 1", expect = Expect.ACCEPTABLE, desc = "interrupted; the grant was undone")
@Outcome(id = "0, 0", expect = Expect.FORBIDDEN, desc = "leaked: granted in Redis, neither held nor undone")
@Outcome(id = "1, [1-9]", expect = Expect.FORBIDDEN, desc = "held, yet its grant was undone")
@Outcome(id = "0, [2-9]", expect = Expect.FORBIDDEN, desc = "undone twice")
@State
public class InterruptVersusGrantStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(1);
  private final Call call = Call.untimed(true);
  private final AsyncAcquisition<LockHold> acquisition;
  private final AtomicInteger phase = new AtomicInteger(); // 0 not started, 1 waiting, 2 done
  private volatile Thread acquirer;
  private int held;

  public InterruptVersusGrantStress() {
    AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
    acquisition = gate.enqueue(call, 1, null); // head at once: its attempt is replies[0]
  }

  @Actor
  public void acquirer() {
    acquirer = Thread.currentThread();
    phase.set(1);
    try {
      held = Waits.park(acquisition, call) != null ? 1 : 0;
    } catch (InterruptedException e) {
      held = 0;
    } finally {
      synchronized (this) {
        phase.set(2); // no interrupt can arrive after this
      }
      Thread.interrupted();
    }
  }

  @Actor
  public void interrupterThenGrant() {
    while (phase.get() == 0) {
      Thread.onSpinWait();
    }
    synchronized (this) {
      if (phase.get() == 1) {
        acquirer.interrupt();
      }
    }
    side.replies.get(0).complete(new Attempt(true, 42, 0));
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = held;
    r.r2 = side.undone();
  }
}
