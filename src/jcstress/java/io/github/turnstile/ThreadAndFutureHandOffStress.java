package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

/**
 * One gate, a thread and a future: a thread's acquisition ({@code lockInterruptibly()}) is the
 * head of the lock's gate (its attempt in flight, never answered), and a {@code tryLockAsync}
 * future queues behind it. A releasing hold of this JVM hands the lock to the gate's head at the
 * moment the thread's acquisition is cancelled (what {@link Waits#park} does on an interrupt; the
 * park itself races a grant in {@code InterruptVersusGrantStress}) and the future's deadline passes.
 * Whoever the hand-off reached, the grant ends exactly once: held by the thread, held by the
 * future's caller, or undone; never held by both, never lost. Two actors, so that it runs on two
 * CPUs. Runs the real {@link AsyncGate} and {@link AsyncAcquisition} on the Redis-free stand-ins of
 * {@link AsyncFakes}.
 */
@JCStressTest
@Description("Gate hand-off racing a thread waiter's cancel and a future waiter's timeout: held once or undone")
@Outcome(id = "1, 1, 0, 0", expect = Expect.ACCEPTABLE, desc = "handed to the thread, which holds it")
@Outcome(id = "1, 0, 1, 0", expect = Expect.ACCEPTABLE, desc = "the thread left; handed to the future's caller")
@Outcome(id = "1, 0, 0, 1", expect = Expect.ACCEPTABLE, desc = "handed to a waiter that gave up: undone")
@Outcome(id = "0, 0, 0, 0", expect = Expect.ACCEPTABLE, desc = "both gave up before the release: nobody to hand to")
@Outcome(id = ".*", expect = Expect.FORBIDDEN, desc = "held twice, lost, or undone twice")
@State
public class ThreadAndFutureHandOffStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(2);
  private final AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
  private final AsyncAcquisition<LockHold> thread;
  private final CompletableFuture<LockHold> future;
  private int handed;

  public ThreadAndFutureHandOffStress() {
    thread = gate.enqueue(Call.untimed(true), 1, null); // head at once: its attempt is replies[0]
    future = gate.acquire(Call.untimed(false), 1); // queued behind it
  }

  @Actor
  public void release() {
    AsyncGate.Successor<LockHold> next = gate.successor(8);
    if (next != null) {
      handed = 1;
      next.acquisition().handedOver(new Attempt(true, 43, 0), 0);
    }
  }

  @Actor
  public void interruptAndDeadline() {
    if (!thread.result.cancel(false)) { // Waits.park's give-up on an interrupt
      LockHold h = thread.result.join(); // delivered first: released, as the park releases it
      h.close();
    }
    future.completeExceptionally(new TimeoutException("deadline")); // what its deadline timer does
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    r.r1 = handed;
    // the thread holds it if its acquisition delivered a hold it did not give back
    boolean threadHolds = thread.result.isDone() && !thread.result.isCompletedExceptionally()
        && thread.result.join().isValid();
    r.r2 = threadHolds ? 1 : 0;
    r.r3 = future.isDone() && !future.isCompletedExceptionally() ? 1 : 0;
    r.r4 = side.undone();
    // end the attempts still in flight (their re-check timers): refused
    for (CompletableFuture<Attempt> reply : side.replies) {
      reply.complete(new Attempt(false, 0, 30_000));
    }
  }
}
