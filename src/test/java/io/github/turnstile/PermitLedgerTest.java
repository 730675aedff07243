package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The reconciliation rules of {@link PermitLedger} through its {@link PermitLedger.Io} seam, where
 * the interleaving matters and Redis cannot be made to produce it on demand: what the ledger sends
 * when a trim fails, and when it abandons a BLMOVE after an ambiguous trim. The Redis-side effect
 * of the second is {@code SemaphoreAccountingTest} 2e.
 */
class PermitLedgerTest {
  /** An Io whose trims are answered by the test (or at once, if {@link #answerAtOnce} is set). */
  private static final class FakeIo implements PermitLedger.Io {
    final List<long[]> sent = new ArrayList<>();
    final List<CompletableFuture<long[]>> replies = new ArrayList<>();
    CompletableFuture<long[]> answerAtOnce;

    @Override
    public synchronized CompletableFuture<long[]> trim(long low, long high, long seq) {
      sent.add(new long[] {low, high, seq});
      CompletableFuture<long[]> f = answerAtOnce != null ? answerAtOnce : new CompletableFuture<>();
      replies.add(f);
      return f;
    }

    @Override
    public boolean connected() {
      return true;
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

    synchronized int count() {
      return sent.size();
    }

    synchronized CompletableFuture<long[]> last() {
      return replies.get(replies.size() - 1);
    }
  }

  /**
   * A failed trim waits for the next command to end; it is not re-sent at once. A first version
   * of the "ambiguous, nothing in flight: trim again at once" rule also re-sent failed trims: a
   * refusal (an ACL, LOADING, OOM) made every semaphore spin trims at round-trip speed, and an Io
   * that fails synchronously recursed until the stack overflowed.
   */
  @Test
  void aFailedTrimIsNotResentUntilACommandEnds() {
    FakeIo io = new FakeIo();
    io.answerAtOnce = CompletableFuture.failedFuture(new RuntimeException("NOPERM"));
    PermitLedger ledger = new PermitLedger(io, Ticker.SYSTEM);
    ledger.reconcile();
    assertEquals(1, io.count(), "one trim per reason to trim");
    ledger.track(1);
    ledger.untrack(1, false); // a command ends: the due trim is sent again, once
    assertEquals(2, io.count());
  }

  /**
   * An ambiguous trim whose range allowed for commands that have all ended by its reply is
   * repeated at once, with {@code high == low}, and only once.
   */
  @Test
  void anAmbiguousTrimIsRepeatedOnceWhenNothingIsLeftInFlight() {
    FakeIo io = new FakeIo();
    PermitLedger ledger = new PermitLedger(io, Ticker.SYSTEM);
    ledger.track(1); // e.g. a release in flight
    ledger.reconcile();
    assertEquals(1, io.count());
    assertEquals(1, io.sent.get(0)[1] - io.sent.get(0)[0], "the range allows for the command in flight");
    ledger.untrack(1, false); // it ends while the trim runs (no trim: one is in flight)
    assertEquals(1, io.count());
    io.last().complete(new long[] {0, 0, 1}); // Redis attributes 1, counted 0: ambiguous
    assertEquals(2, io.count(), "repeated at once");
    assertEquals(io.sent.get(1)[0], io.sent.get(1)[1], "without slack");
    io.last().complete(new long[] {1, 0, 0});
    assertEquals(2, io.count(), "settled: nothing more is sent");
  }

  /**
   * A BLMOVE in the range of an ambiguous trim is asked to stop, but only after a grace: the
   * excess may be the token it has just taken, whose reply is on its way (stopping it at once
   * would give that hand-off back). Ended within the grace, it is not disturbed.
   */
  @Test
  void aBlmoveInAnAmbiguousTrimsRangeIsAbandonedAfterAGrace() throws Exception {
    FakeIo io = new FakeIo();
    PermitLedger ledger = new PermitLedger(io, Ticker.SYSTEM);
    CompletableFuture<Void> stale = ledger.beginMove(TimeUnit.SECONDS.toNanos(1), false);
    assertNotNull(stale);
    ledger.reconcile(); // sent while the BLMOVE blocks (a recovery event, say)
    assertEquals(1, io.count());
    assertEquals(1, io.sent.get(0)[1] - io.sent.get(0)[0], "the BLMOVE is in the range");
    long answered = System.nanoTime();
    io.last().complete(new long[] {0, 0, 1}); // ambiguous
    assertFalse(stale.isDone(), "not at once");
    stale.get(5, TimeUnit.SECONDS);
    assertTrue(System.nanoTime() - answered >= TimeUnit.MILLISECONDS.toNanos(PermitLedger.MOVE_GRACE_MILLIS));
    ledger.endMove(stale, false); // the waiter abandoned it (nothing taken): the next trim has no slack
    assertEquals(2, io.count());
    assertEquals(io.sent.get(1)[0], io.sent.get(1)[1]);
  }
}
