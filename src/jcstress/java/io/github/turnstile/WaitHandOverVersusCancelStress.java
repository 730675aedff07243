package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * A local hand-off of permits to the gate's head, which hands its wait in Redis (its request and
 * its blocked wait on the wake list) to the acquisition behind it
 * ({@link AsyncAcquisition#passWaitTo}), racing that acquisition's cancel. Whichever comes first,
 * the request is ended exactly once (by the head's grant if it kept it, by the heir's withdrawal
 * if it took it) and the blocked wait is abandoned (by whichever of the two ends holding it). A request never ended leaves a waiting mark in Redis that wakes nobody; one ended
 * twice frees a memo slot twice. Runs the real {@link AsyncGate} and {@link AsyncAcquisition} on
 * Redis-free stand-ins: the head's attempt is refused, and it waits on a list wait that never ends
 * by itself.
 */
@JCStressTest
@Description("A head handing its Redis wait to the next acquisition, racing that acquisition's cancel")
@Outcome(id = "1, 1, 1", expect = Expect.ACCEPTABLE, desc = "handed over, then cancelled: the heir ended both")
@Outcome(id = "1, 1, 0", expect = Expect.ACCEPTABLE, desc = "cancelled first: the head kept and ended both")
@Outcome(id = "1, 0, .*", expect = Expect.FORBIDDEN, desc = "the list wait leaked: its connection stays blocked")
@Outcome(id = "0, .*", expect = Expect.FORBIDDEN, desc = "the request leaked: its waiting mark stays in Redis")
@Outcome(expect = Expect.FORBIDDEN, desc = "the request ended twice")
@State
public class WaitHandOverVersusCancelStress {
  /**
   * The one list wait: never woken; abandoning it is idempotent, as {@code ListWait}'s is (an
   * acquisition's timers and its wake callback may both abandon it), so what counts is whether it
   * was abandoned at all.
   */
  static final class ListWait implements Wake {
    final CompletableFuture<Boolean> woken = new CompletableFuture<>();
    final AtomicInteger abandoned = new AtomicInteger();

    @Override public CompletableFuture<Boolean> woken() { return woken; }
    @Override public void used() { }
    @Override public void abandon() { abandoned.compareAndSet(0, 1); }
  }

  /** Attempts refused; the side's state is a request, ended by a local grant or a withdrawal. */
  static final class Side extends AcquisitionSide<LockHold> {
    final AtomicInteger ended = new AtomicInteger();

    Side() {
      super("semaphore 's'", null, "semaphore 's'", "ch", Metrics.Primitive.NOOP);
    }

    @Override String wakeKey() { return "wake"; }
    @Override CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      if (w.sideState == null) {
        w.sideState = "request";
      }
      return CompletableFuture.completedFuture(new Attempt(false, 0, 30_000));
    }
    @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      if (w.handedLocally && w.sideState != null) {
        w.sideState = null;
        ended.incrementAndGet(); // as PermitSide: a local hand-off withdraws the request it kept
      }
      return new AsyncFakes.Hold(new AsyncFakes.Side(0), a.token);
    }
    @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
    @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) {
      if (w.sideState != null) {
        w.sideState = null;
        ended.incrementAndGet();
      }
    }
    @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }
  }

  private final ListWait wait = new ListWait();
  private final Side side = new Side();
  private final AsyncAcquisition<LockHold> head;
  private final AsyncAcquisition<LockHold> heir;

  public WaitHandOverVersusCancelStress() {
    AsyncStubEnv env = new AsyncStubEnv() {
      @Override
      public Wake waitOnList(String key, long sliceNanos, Runnable passWakeup) {
        return wait;
      }
    };
    AsyncGate<LockHold> gate = new AsyncGate<>(env, side);
    head = gate.enqueue(Call.untimed(false), 1, null); // refused at once: it waits on the list
    heir = gate.enqueue(Call.untimed(false), 1, null); // in line behind it
  }

  private int passed;

  @Actor
  public void release() {
    passed = head.passWaitTo(heir) ? 1 : 0;
    head.handedPermits(new Attempt(true, 1, 0, 0));
  }

  @Actor
  public void cancelHeir() {
    heir.result.cancel(false);
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = side.ended.get();
    r.r2 = wait.abandoned.get();
    r.r3 = passed;
  }
}
