package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

/**
 * One gate, a thread and a future: a thread parked in {@code lockInterruptibly()} is the head of
 * the lock's gate (its attempt in flight, never answered), and a {@code tryLockAsync} future
 * queues behind it. A releasing hold of this JVM hands the lock to the gate's head at the moment
 * the thread is interrupted and the future's deadline passes. Whoever the hand-off reached, the
 * grant ends exactly once: held by the thread, held by the future's caller, or undone; never held
 * by both, never lost. Runs the real {@link AsyncGate}, {@link AsyncAcquisition} and
 * {@link Waits#park} on the Redis-free stand-ins of {@link AsyncFakes}.
 */
@JCStressTest
@Description("Gate hand-off racing a thread waiter's interrupt and a future waiter's timeout: held once or undone")
@Outcome(id = "1, 1, 0, 0", expect = Expect.ACCEPTABLE, desc = "handed to the thread, which holds it")
@Outcome(id = "1, 0, 1, 0", expect = Expect.ACCEPTABLE, desc = "the thread left; handed to the future's caller")
@Outcome(id = "1, 0, 0, 1", expect = Expect.ACCEPTABLE, desc = "handed to a waiter that gave up: undone")
@Outcome(id = "0, 0, 0, 0", expect = Expect.ACCEPTABLE, desc = "both gave up before the release: nobody to hand to")
@Outcome(id = ".*", expect = Expect.FORBIDDEN, desc = "held twice, lost, or undone twice")
@State
public class ThreadAndFutureHandOffStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(2);
  private final AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
  private final Engine.Call threadCall = Engine.Call.untimed(true);
  private final AsyncAcquisition<LockHold> thread;
  private final CompletableFuture<LockHold> future;
  private final AtomicInteger phase = new AtomicInteger(); // 0 not started, 1 waiting, 2 done
  private volatile Thread parked;
  private int threadHolds;
  private int handed;

  public ThreadAndFutureHandOffStress() {
    thread = gate.enqueue(threadCall, 1, null); // head at once: its attempt is replies[0]
    future = gate.acquire(Engine.Call.untimed(false), 1); // queued behind it
  }

  @Actor
  public void threadWaiter() {
    parked = Thread.currentThread();
    phase.set(1);
    try {
      threadHolds = Waits.park(thread, threadCall) != null ? 1 : 0;
    } catch (InterruptedException e) {
      threadHolds = 0;
    } finally {
      synchronized (this) {
        phase.set(2);
      }
      Thread.interrupted();
    }
  }

  @Actor
  public void interrupter() {
    while (phase.get() == 0) {
      Thread.onSpinWait();
    }
    synchronized (this) {
      if (phase.get() == 1) {
        parked.interrupt();
      }
    }
  }

  @Actor
  public void futureDeadline() {
    future.completeExceptionally(new TimeoutException("deadline")); // what its deadline timer does
  }

  @Actor
  public void release() {
    AsyncGate.Successor<LockHold> next = gate.successor(8);
    if (next != null) {
      handed = 1;
      next.acquisition().handedOver(new Engine.Attempt(true, 43, 0), 0);
    }
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    r.r1 = handed;
    r.r2 = threadHolds;
    r.r3 = future.isDone() && !future.isCompletedExceptionally() ? 1 : 0;
    r.r4 = side.undone();
    // end the attempts still in flight (their re-check timers): refused
    for (CompletableFuture<Engine.Attempt> reply : side.replies) {
      reply.complete(new Engine.Attempt(false, 0, 30_000));
    }
  }
}
