package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
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
 * Async acquisition, a hold's release versus the loss of its lease: the caller releases an async lock hold
 * (from any thread) while the watchdog marks its lease lost (a refused renewal). Exactly one wins.
 * Released first: the release completes normally, {@code lost()} never completes and nobody is
 * told of a loss. Lost first: {@code lost()} completes, the listeners are told exactly once, and
 * the release completes with {@link LockLostException} (it is still sent, and frees the key if it
 * is still this hold's). Runs {@link AsyncHold.Lock} with a fake {@link AsyncHold.Io}.
 */
@JCStressTest
@Description("AsyncHold: release() racing the lease's loss: released xor lost, reported once")
@Outcome(id = "1, 0, 0", expect = Expect.ACCEPTABLE, desc = "released first; the loss is ignored")
@Outcome(id = "2, 1, 1", expect = Expect.ACCEPTABLE, desc = "lost first; the release reports it, listeners told once")
@Outcome(id = "1, 1, .*", expect = Expect.FORBIDDEN, desc = "released normally AND reported lost")
@Outcome(id = "2, 0, .*", expect = Expect.FORBIDDEN, desc = "the release says lost, but lost() never completed")
@Outcome(id = ".*, .*, [2-9]", expect = Expect.FORBIDDEN, desc = "the loss was reported twice")
@Outcome(id = "0, .*, .*", expect = Expect.FORBIDDEN, desc = "the release never completed")
@State
public class HoldReleaseVersusLossStress {
  private final AtomicInteger reported = new AtomicInteger();
  private final AsyncHold.Lock hold = new AsyncHold.Lock("n", new AsyncHold.Io() {
    @Override
    public CompletableFuture<Boolean> release(AsyncHold h, long leaseEndNanos) {
      return CompletableFuture.completedFuture(Boolean.TRUE); // Redis: released
    }

    @Override
    public boolean connected() {
      return false; // no patience timer: the release completes locally
    }

    @Override
    public void stopRenewal(Lease lease) {
    }

    @Override
    public void lost(LeaseLostEvent event) {
      reported.incrementAndGet();
    }
  }, Ticker.SYSTEM, "k", "r", 30_000, 7, "async hold c:h1", System.nanoTime(), Metrics.Primitive.NOOP);
  private volatile CompletableFuture<Void> released;

  @Actor
  public void release() {
    released = hold.release().toCompletableFuture();
  }

  @Actor
  public void watchdog() {
    hold.lease().lose("Redis refused the renewal");
  }

  @Arbiter
  public void arbiter(III_Result r) {
    CompletableFuture<Void> f = released;
    if (!f.isDone()) {
      r.r1 = 0;
    } else {
      try {
        f.join();
        r.r1 = 1;
      } catch (CompletionException e) {
        r.r1 = e.getCause() instanceof LockLostException ? 2 : 3;
      }
    }
    r.r2 = hold.lost().toCompletableFuture().isDone() ? 1 : 0;
    r.r3 = reported.get();
  }
}
