package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

/**
 * A pub/sub message (or a recovery event) racing a waiter that is about to attempt: the waiter
 * takes {@link Signal#next()} before its attempt, the message fires the signal. Either the waiter
 * took the future before the fire, and the fire completed it (it wakes at once and attempts
 * again), or it took the fresh one installed by the fire (its attempt already sees the release).
 * A future taken before the fire and left incomplete is a lost wake-up: the waiter would sleep on
 * a free primitive until its slice ran out.
 */
@JCStressTest
@Description("Signal: fire() racing next(): no future taken before a fire stays incomplete")
@Outcome(id = "1, 0", expect = Expect.ACCEPTABLE, desc = "taken before the fire, and completed by it")
@Outcome(id = "0, 1", expect = Expect.ACCEPTABLE, desc = "taken after the fire: the fresh future")
@Outcome(id = "0, 0", expect = Expect.FORBIDDEN, desc = "taken before the fire, never completed: lost wake-up")
@Outcome(id = "1, 1", expect = Expect.FORBIDDEN, desc = "the current future is already completed")
@State
public class SignalFireVersusNextStress {
  private final Signal signal = new Signal();
  private volatile CompletableFuture<Void> taken;

  @Actor
  public void waiter() {
    taken = signal.next();
  }

  @Actor
  public void message() {
    signal.fire();
  }

  @Arbiter
  public void arbiter(II_Result r) {
    CompletableFuture<Void> f = taken;
    r.r1 = f.isDone() ? 1 : 0;
    r.r2 = signal.next() == f ? 1 : 0;
  }
}
