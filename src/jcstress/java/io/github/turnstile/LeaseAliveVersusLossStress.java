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
 * The owner's isHeldByCurrentThread() (Lease.alive) on an expired lease racing the watchdog's scan
 * of the same lease: both see it dead, and the loss is reported exactly once, not twice.
 */
@JCStressTest
@Description("Lease.alive() past the deadline racing the watchdog's lose(): one report, both see it dead")
@Outcome(id = "0, 1", expect = Expect.ACCEPTABLE, desc = "dead, reported once")
@Outcome(id = "1, 1", expect = Expect.FORBIDDEN, desc = "an expired lease looked alive")
@Outcome(id = "0, 2", expect = Expect.FORBIDDEN, desc = "reported twice")
@Outcome(id = "0, 0", expect = Expect.FORBIDDEN, desc = "never reported")
@State
public class LeaseAliveVersusLossStress {
  private final java.util.concurrent.atomic.AtomicInteger reported = new java.util.concurrent.atomic.AtomicInteger();
  // lease of 100 ms that started 1 s ago: already past its confirmed instant
  private final Lease lease = new Lease("k", "r", 100, 1, "t", System.nanoTime() - 1_000_000_000L,
      (l, reason) -> reported.incrementAndGet());
  private int alive;

  @Actor
  public void owner() {
    alive = lease.alive(System.nanoTime()) ? 1 : 0;
  }

  @Actor
  public void watchdog() {
    lease.lose("renewal refused");
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = alive;
    r.r2 = reported.get();
  }
}
