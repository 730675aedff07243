package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * A semaphore waiter's BLMOVE returns a token just as the client's liveness lease is declared
 * lost (issue 13, interleaving 1). Either the token was counted before the loss, and the loss
 * voided it with the rest (the count is 0, Redis may give the permit to others, the holders are
 * told), or the loss came first and the token is not counted at all. Both leave a reconciliation
 * due, which gives back whatever Redis still attributes to the client. A token counted after the
 * loss is over-admission: the client counts a permit that nothing renews and another client's
 * reclaim hands out again. Runs {@link PermitLedger} without Redis.
 */
@JCStressTest
@Description("PermitLedger: a late BLMOVE token versus the loss of the lease it was taken under")
@Outcome(id = "1, 0, 1", expect = Expect.ACCEPTABLE, desc = "counted, then voided by the loss; reconciliation due")
@Outcome(id = "0, 0, 1", expect = Expect.ACCEPTABLE, desc = "loss first: not counted; reconciliation due")
@Outcome(id = "1, 1, 1", expect = Expect.FORBIDDEN, desc = "counted after the loss: over-admission")
@Outcome(id = "0, 1, 1", expect = Expect.FORBIDDEN, desc = "not counted, yet collected")
@Outcome(id = ".*, .*, 0", expect = Expect.FORBIDDEN, desc = "no reconciliation after a loss")
@State
public class LateTokenVersusLeaseLossStress {
  private final PermitLedger ledger = new PermitLedger(new PermitLedger.Io() {
    @Override
    public CompletableFuture<long[]> trim(long low, long high, long seq) {
      return new CompletableFuture<>();
    }

    @Override
    public boolean connected() {
      return false; // no trim is sent: the test only looks at whether one is due
    }

    @Override
    public Lease newLease(long sentAtNanos) {
      return new Lease("alive", "c", 30_000, 0, "client c", sentAtNanos, (l, reason) -> { });
    }

    @Override
    public void stopLease(Lease lease) {
    }

    @Override
    public void watchRecoveries(boolean on) {
    }
  }, Ticker.SYSTEM);
  private final Lease under;
  private final PermitLedger.Collection collection;
  private volatile int counted;

  public LateTokenVersusLeaseLossStress() {
    ledger.refreshed(System.nanoTime()); // the waiter's refused acquire registered the client
    under = ledger.lease();
    collection = ledger.collection();
  }

  @Actor
  public void blmoveReturns() {
    counted = collection.addMove(under) ? 1 : 0;
  }

  @Actor
  public void leaseLost() {
    ledger.lose(under);
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = counted;
    r.r2 = ledger.partial() + ledger.held();
    r.r3 = ledger.trimDue() ? 1 : 0;
  }
}
