package io.github.turnstile;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

/**
 * Local hand-off versus a successor that gives up: the gate holder registers as the owner's
 * successor and its deadline passes at that very instant, while the owner's final unlock looks
 * for a successor to hand the lock to. Either the successor withdrew and the owner found nobody
 * (it then releases in Redis), or the owner took it and the successor learns the hand-over
 * (it then holds the lock), or the owner took it but the successor abandoned the wait at its
 * deadline first, and the owner's hand-over is refused (it then gives the hold back). A hand-over
 * nobody receives, or a successor the owner never completes, would leave the lock held by nobody
 * until its lease ran out. Runs
 * {@link LocalOwnership#awaitHandoff} and {@link LocalOwnership#awaitSuccessor} without Redis.
 */
@JCStressTest
@Description("LocalOwnership: a successor withdrawing at its deadline versus the owner's unlock taking it")
@Outcome(id = "0, 0", expect = Expect.ACCEPTABLE, desc = "successor withdrew (owner found nobody), or abandoned before the hand-over (refused, given back)")
@Outcome(id = "1, 1", expect = Expect.ACCEPTABLE, desc = "owner took the successor; the successor got the hand-over")
@Outcome(id = "0, 1", expect = Expect.FORBIDDEN, desc = "owner handed the lock to a successor that had left: hand-over lost")
@Outcome(id = "1, 0", expect = Expect.FORBIDDEN, desc = "successor saw a hand-over nobody made")
@State
public class SuccessorWithdrawVersusHandoffStress {
  private final LocalOwnership local = new LocalOwnership("n", "lock 'n'");
  private volatile int successorGotIt;
  private volatile int ownerHanded;

  public SuccessorWithdrawVersusHandoffStress() {
    // an owner thread that is not an actor: the unlock below is done on its behalf
    local.grant(Thread.currentThread(), new Lease("k", "r", 30_000, 1, "t", System.nanoTime(), (l, reason) -> { }));
  }

  @Actor
  public void successor() {
    // deadline already passed: register, then withdraw at once unless the owner took it
    LocalOwnership.Successor s = local.awaitHandoff("r2", true, System.nanoTime(), false, Ticker.SYSTEM);
    successorGotIt = s != null && s.outcome() == LocalOwnership.Successor.HANDED ? 1 : 0;
  }

  @Actor
  public void owner() {
    LocalOwnership.Successor s = local.awaitSuccessor(0); // no wait: only the race itself
    if (s != null && s.handed(2, System.nanoTime(), 1)) {
      ownerHanded = 1;
    }
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = successorGotIt;
    r.r2 = ownerHanded;
  }
}
