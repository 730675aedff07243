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
 * Unlock racing the watchdog's loss detection on the same lease: the owner ends it (release) while
 * the watchdog marks it lost (refused renewal). Exactly one must win: a released lease is never
 * reported lost, and a lost one is reported exactly once and makes the release fail loudly.
 */
@JCStressTest
@Description("Lease.end() (unlock) racing Lease.lose() (watchdog): exactly one wins")
@Outcome(id = "1, 0", expect = Expect.ACCEPTABLE, desc = "released first; the loss is ignored")
@Outcome(id = "0, 1", expect = Expect.ACCEPTABLE, desc = "lost first; unlock sees it and throws")
@Outcome(id = "1, 1", expect = Expect.FORBIDDEN, desc = "released AND reported lost")
@Outcome(id = "0, 0", expect = Expect.FORBIDDEN, desc = "neither: the loss was swallowed")
@State
public class LeaseEndVersusLossStress {
  private int reported;
  private final Lease lease = new Lease("k", "r", 30_000, 1, "t", System.nanoTime(),
      (l, reason) -> reported++);
  private int ended;

  @Actor
  public void unlock() {
    ended = lease.end() ? 1 : 0;
  }

  @Actor
  public void watchdog() {
    lease.lose("renewal refused");
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = ended;
    r.r2 = reported;
  }
}
