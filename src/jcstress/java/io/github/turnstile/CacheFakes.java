package io.github.turnstile;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Redis-free stand-ins for a lock cache ({@link LockCache}): its engine and Redis
 * ({@link LockCache.Io}: Redis marks the grant cached at once; releases are recorded, not sent;
 * revocation messages arrive when a scenario says), and a lock side whose head takes from the
 * cache as {@link AsyncSides.LockSide} does. A cache is made idle through the real
 * {@link LockCache#keep}: a grant's final release, kept.
 */
final class CacheFakes {
  private CacheFakes() {}

  /** The request that holds the lock in Redis, the token Redis granted it, the server's clock (µs). */
  static final String REQUEST = "c:1";
  static final long GRANT_TOKEN = 7;
  static final long SERVER_MICROS = 1_000_000;

  /**
   * One registry for all the scenarios' caches, each on its own key: nothing is evicted for the
   * bound or the idle time during a run (each cache would start a scheduler's timer of its own).
   */
  private static final LockCache.Registry REGISTRY = new LockCache.Registry(TurnstileOptions.builder()
      .lockCaching(1 << 20, Duration.ofHours(1)).build());
  private static final AtomicLong KEYS = new AtomicLong();

  /** A cache's engine and Redis: records the releases of the grant and who sent them. */
  static final class Io implements LockCache.Io {
    /** The future the next revocation message completes. */
    private final AtomicReference<CompletableFuture<Void>> revocation =
        new AtomicReference<>(new CompletableFuture<>());
    final AtomicInteger releases = new AtomicInteger();
    final AtomicInteger closed = new AtomicInteger();
    volatile String releasedRequest;
    volatile long releasedGrant;
    volatile long releasedLast;
    volatile Thread releasedBy;

    /** Another client's attempt: Redis publishes {@code r} on the lock's channel. */
    void revocation() {
      revocation.getAndSet(new CompletableFuture<>()).complete(null);
    }

    @Override public long now() { return System.nanoTime(); }
    @Override public boolean open() { return true; }
    @Override public Lease lease(String request, long token, long sinceNanos, Lease.LossHandler handler) {
      return new Lease("k", request, 30_000, token, "cached", sinceNanos, handler);
    }
    @Override public void renewing(Lease lease, boolean on) { }
    @Override public void ended(AsyncHold.Lock hold) { }
    @Override public WakeChannel subscribe() {
      return new WakeChannel() {
        @Override public CompletableFuture<Void> ready() { return CompletableFuture.completedFuture(null); }
        @Override public CompletableFuture<Void> next() { return revocation.get(); }
        @Override public void close() { closed.incrementAndGet(); }
      };
    }
    @Override public CompletableFuture<List<Object>> markCached(String request) {
      return CompletableFuture.completedFuture(List.of(List.of(1L, SERVER_MICROS, 0L))); // nobody waits
    }
    @Override public CompletableFuture<Boolean> release(String request, long grantToken, long lastToken,
        long leaseEndNanos) {
      releasedRequest = request;
      releasedGrant = grantToken;
      releasedLast = lastToken;
      releasedBy = Thread.currentThread();
      releases.incrementAndGet();
      return CompletableFuture.completedFuture(true);
    }

    /** Whether the (last) release named the grant and carried {@code lastToken}. */
    boolean releasedWith(long lastToken) {
      return REQUEST.equals(releasedRequest) && releasedGrant == GRANT_TOKEN && releasedLast == lastToken;
    }
  }

  /**
   * A lock on a cache: a head takes the cached grant before any attempt in Redis (which is refused:
   * another client's cache holds the lock); a take's hold is released through the cache, as
   * {@link AsyncSides.LockSide} does.
   */
  static final class Side extends AcquisitionSide<LockHold> implements AsyncHold.Io {
    final Io io = new Io();
    final LockCache cache = new LockCache("k" + KEYS.incrementAndGet(), "f", 30_000, io, REGISTRY);
    /** Holds released as plain holds (not through the cache). */
    final AtomicInteger plainReleases = new AtomicInteger();

    Side() {
      super("lock 'n'", null, "lock 'n'", "ch", Metrics.Primitive.NOOP);
    }

    /** A grant from Redis, released and kept by the cache: it is cached idle, anchored, when this returns. */
    Side cached() {
      AsyncHold.Lock granted = new AsyncHold.Lock("n", this, Ticker.SYSTEM, "k", REQUEST, 30_000, GRANT_TOKEN, "t",
          System.nanoTime(), Metrics.Primitive.NOOP);
      if (cache.keep(granted, null) == null || !cache.idleHere()) {
        throw new IllegalStateException("not cached");
      }
      return this;
    }

    @Override boolean fromCache(AsyncAcquisition<LockHold> w) { return cache.take(w); }
    @Override CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      return CompletableFuture.completedFuture(new Attempt(false, 0, 30_000));
    }
    @Override LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      AsyncHold.Lock hold = new AsyncHold.Lock("n", this, Ticker.SYSTEM, "k", a.request != null ? a.request : w.request,
          30_000, a.token, "t", sentAtTicks, Metrics.Primitive.NOOP);
      if (a.cache != null) {
        hold.lease().cache = a.cache;
        a.cache.took(hold);
      }
      return hold;
    }
    @Override void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) { }
    @Override void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) { }
    @Override String leaseKey(AsyncAcquisition<LockHold> w) { return "k"; }

    @Override public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
      if (cache.isTake(hold)) {
        return cache.endTake((AsyncHold.Lock) hold, null);
      }
      plainReleases.incrementAndGet();
      return CompletableFuture.completedFuture(true);
    }
    @Override public boolean connected() { return false; } // a release completes locally, at once
    @Override public void stopRenewal(Lease lease) { }
    @Override public void lost(LeaseLostEvent event) { }
  }
}
