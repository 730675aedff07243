package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A Redis-free stand-in for the async acquisition's engine ({@link AcquisitionEnv}):
 * connected, never closed, no fault; subscriptions are confirmed at once and share one event
 * ({@link #event}). No re-check timer fires during a test: every completion happens on the test's
 * threads. Shared by the unit tests and the jcstress scenarios ({@code AsyncFakes}); a test
 * overrides what it needs to control.
 */
class AsyncStubEnv implements AcquisitionEnv {
  final CompletableFuture<Void> faults = new CompletableFuture<>();
  final CompletableFuture<Void> event = new CompletableFuture<>();

  @Override public boolean closed() { return false; }
  @Override public boolean connected() { return true; }
  @Override public CompletableFuture<Void> faults() { return faults; }

  @Override
  public WakeChannel subscribe(String channel) {
    return channel(() -> { });
  }

  /** A confirmed channel on {@link #event} that runs {@code onClose} when closed. */
  WakeChannel channel(Runnable onClose) {
    return new WakeChannel() {
      @Override public CompletableFuture<Void> ready() { return CompletableFuture.completedFuture(null); }
      @Override public CompletableFuture<Void> next() { return event; }
      @Override public void close() { onClose.run(); }
    };
  }

  @Override public boolean stale(WakeChannel c) { return false; }
  @Override public void reset(WakeChannel c) { }
  @Override public void unreachable(Call call, long sinceNanos, String what, Throwable cause) { }
  @Override public void suspect() { }
  @Override public long commandTimeoutNanos() { return TimeUnit.MINUTES.toNanos(10); }
  @Override public long recheckNanos() { return TimeUnit.MINUTES.toNanos(10); }
  @Override public long jitterNanos() { return 0; } // a woken head attempts on the waking thread
  @Override public long leaseMillis() { return 30_000; }
  @Override public long ticker() { return System.nanoTime(); }
  @Override public String newRequestId() { return "c:1"; }
  @Override public int replicaAcks() { return 0; }
  @Override public void awaitReplicas(String leaseKey, String request) { }
}
