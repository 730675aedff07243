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
 * A reader that ran beside the gate's head (a runner, {@link AsyncGate#enter}) is refused, and
 * takes its place in line behind the head ({@link AsyncGate#runnerRefused}), while its caller
 * cancels it. Whatever the order, it is withdrawn exactly once (its waiting entry in Redis goes)
 * and leaves the gate: a runner queued after its cancel would stay in line, to attempt later for
 * nobody; one withdrawn twice, or never, is a leaked or doubled undo. Runs the real
 * {@link AsyncGate} and {@link AsyncAcquisition} on the Redis-free stand-ins of {@link AsyncFakes}.
 */
@JCStressTest
@Description("A refused runner taking its place in line racing its cancel: withdrawn once, gone from the gate")
@Outcome(id = "1, 1", expect = Expect.ACCEPTABLE, desc = "withdrawn once; only the head is left at the gate")
@Outcome(id = ".*", expect = Expect.FORBIDDEN, desc = "withdrawn never or twice, or left in line after its cancel")
@State
public class RunnerRefusedVersusCancelStress {
  private final AsyncFakes.Side side = new AsyncFakes.Side(2);
  private final AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
  private final CompletableFuture<LockHold> head;
  private final CompletableFuture<LockHold> runner;

  public RunnerRefusedVersusCancelStress() {
    head = gate.acquire(Call.untimed(false), 1); // the head: its attempt is replies[0], in flight
    side.runMode = AsyncGate.RUN_ALWAYS;
    runner = gate.acquire(Call.untimed(false), 1); // beside it: replies[1], in flight
  }

  @Actor
  public void refused() {
    side.replies.get(1).complete(new Attempt(false, 0, 30_000));
  }

  @Actor
  public void cancel() {
    runner.cancel(false);
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = side.withdrawn.get();
    r.r2 = gate.size();
    // end the head (its attempt in flight: the reply decides) and its re-check timer
    head.cancel(false);
    side.replies.get(0).complete(new Attempt(false, 0, 30_000));
  }
}
