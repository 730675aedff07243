package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Redis-free stand-ins for the async acquisition's engine ({@link AcquisitionEnv}) and a
 * lock's Redis operations ({@link AcquisitionSide}): attempts return futures the scenario
 * completes, and every undo, withdrawal and hold is counted.
 */
final class AsyncFakes {
  private AsyncFakes() {}

  /** Connected, never closed, no fault; subscriptions are confirmed at once (see {@link AsyncStubEnv}). */
  static final class Env extends AsyncStubEnv {}

  /** Attempts answered by the scenario, in order; undos counted. */
  static final class Side extends AcquisitionSide<LockHold> {
    /** The replies the attempts get, one per attempt sent. */
    final java.util.List<CompletableFuture<Attempt>> replies = new java.util.ArrayList<>();
    final AtomicInteger sent = new AtomicInteger();
    final AtomicInteger granted = new AtomicInteger();
    final AtomicInteger cancelledGrants = new AtomicInteger();
    final AtomicInteger withdrawn = new AtomicInteger();
    final AtomicInteger holdsReleased = new AtomicInteger();

    Side(int attempts) {
      super("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP);
      for (int i = 0; i < attempts; i++) {
        replies.add(new CompletableFuture<>());
      }
    }

    /** What {@link #runMode} answers (see {@link AsyncGate#enter}). */
    volatile int runMode = AsyncGate.RUN_NEVER;

    @Override int runMode(AsyncAcquisition<LockHold> w) { return runMode; }
    @Override CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      return replies.get(sent.getAndIncrement());
    }
    @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      granted.incrementAndGet();
      return new Hold(this, a.token);
    }
    @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { cancelledGrants.incrementAndGet(); }
    @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { withdrawn.incrementAndGet(); }
    @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }

    /** Grants undone: cancelled grants plus delivered-too-late holds released. */
    int undone() {
      return cancelledGrants.get() + holdsReleased.get();
    }
  }

  /** A lock hold's I/O that sends nothing: releases succeed at once, losses are counted. */
  static final class Io implements AsyncHold.Io {
    final AtomicInteger lost = new AtomicInteger();

    @Override public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
      return CompletableFuture.completedFuture(true);
    }
    @Override public boolean connected() { return true; }
    @Override public void stopRenewal(Lease lease) { }
    @Override public void lost(LeaseLostEvent event) { lost.incrementAndGet(); }
  }

  /** A real lock hold (its own lease of 30 s) on {@code io}. */
  static AsyncHold.Lock lockHold(Io io, long token) {
    return new AsyncHold.Lock("n", io, Ticker.SYSTEM, "k", "r", 30_000, token, "t", System.nanoTime(),
        Metrics.Primitive.NOOP);
  }

  /** A hold that only counts its releases. */
  static final class Hold implements LockHold {
    private final Side side;
    private final long token;
    private final AtomicInteger released = new AtomicInteger();

    Hold(Side side, long token) {
      this.side = side;
      this.token = token;
    }

    @Override public String name() { return "n"; }
    @Override public boolean isValid() { return released.get() == 0; }
    @Override public CompletionStage<LeaseLostEvent> lost() { return new CompletableFuture<>(); }
    @Override public CompletionStage<Void> release() {
      if (released.getAndIncrement() == 0) {
        side.holdsReleased.incrementAndGet();
      }
      return CompletableFuture.completedFuture(null);
    }
    @Override public void close() { release(); }
    @Override public long fencingToken() { return token; }
  }
}
