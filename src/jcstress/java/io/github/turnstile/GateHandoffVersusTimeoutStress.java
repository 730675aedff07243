package io.github.turnstile;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * Scenario 3, local handoff versus timeout: the thread in the gate (this JVM's remote waiter) was
 * granted the lock and leaves the gate, handing it to the next local waiter, whose
 * {@code tryLock(t)} times out at that very instant (a 1 us timed wait). The handoff must not be
 * lost: either the waiter got the gate, or it gave up and the gate is free for the next thread.
 * Runs RedisLock's local gate ({@link LocalOwnership#enterGate}, i.e. Waits.lock on the fair gate)
 * without Redis.
 */
@JCStressTest
@Description("LocalOwnership gate: a waiter's timed enter expiring as the gate holder leaves")
@Outcome(id = "1, 1, 1", expect = Expect.ACCEPTABLE, desc = "holder left first; waiter got the gate")
@Outcome(id = "1, 0, 1", expect = Expect.ACCEPTABLE, desc = "waiter timed out while held; gate free afterwards")
@Outcome(id = "0, 1, 1", expect = Expect.ACCEPTABLE, desc = "waiter came first")
@Outcome(id = ".*, .*, 0", expect = Expect.FORBIDDEN, desc = "handoff lost: gate stuck with nobody in it")
@Outcome(id = "0, 0, .*", expect = Expect.FORBIDDEN, desc = "neither thread got the gate")
@State
public class GateHandoffVersusTimeoutStress {
  private final LocalOwnership local = new LocalOwnership("n", "lock 'n'");
  private final Lease lease = new Lease("k", "r", 30_000, 1, "t", System.nanoTime(), (l, reason) -> { });
  private int holderIn;
  private int waiterIn;

  @Actor
  public void gateHolder() {
    if (local.tryEnterGate()) {
      holderIn = 1;
      local.grant(Thread.currentThread(), lease); // granted in Redis: now it owns the lock
      local.leaveGate(); // hand the gate to the next local waiter
    }
  }

  @Actor
  public void timedWaiter() {
    try {
      if (local.enterGate(1_000, true)) {
        waiterIn = 1;
        local.leaveGate();
      }
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = holderIn;
    r.r2 = waiterIn;
    boolean free = local.tryEnterGate();
    if (free) {
      local.leaveGate();
    }
    r.r3 = free ? 1 : 0;
  }
}
