package io.github.turnstile;

import java.util.concurrent.atomic.AtomicReference;

/**
 * One acquisition's lease as this client sees it: the Redis key holding it, the request id that
 * owns it there, and the latest instant (this JVM's {@link System#nanoTime()}) up to which Redis
 * has confirmed it. The watchdog renews every registered lease; a lease is lost when a renewal is
 * refused or when the confirmed instant passes without a renewal. Loss is final and is reported
 * exactly once.
 */
final class Lease {
  /** Called once, on the thread that detects the loss, after the lease is marked lost. */
  interface LossHandler {
    void leaseLost(Lease lease, String reason);
  }

  /**
   * A semaphore registration's renewal: a second key (the state hash), and a check of the permits
   * Redis ever granted under the registration against the grants the client was answered.
   */
  interface Registration {
    /** The state hash, renewed with the registration (same hash tag). */
    String stateKey();

    /**
     * Whether the registration {@code lease} is intact: {@code granted} is what renew.lua found
     * (-1: gone). Called as the reply is read, on the connection's event loop.
     *
     * @return false if Redis lost it, or lost a grant the client was answered
     */
    boolean intact(long granted, Lease lease);
  }

  final String key;
  final String requestId;
  /** Set for a semaphore registration (see {@link Registration}); null for a lease hash. */
  volatile Registration registration;
  /**
   * Set for a lock grant that this client caches ({@link LockCache}): renewed by renew.lua's
   * {@code ~} kind, whose reply re-anchors the cache's fencing tokens; null otherwise.
   */
  volatile LockCache cache;
  /** Whether this is a cached grant's idle lease, which no thread holds (a take's lease is its own). */
  boolean idle;
  final long leaseMillis;
  final long token;
  final String holder;
  private final LossHandler handler;
  /** The recorder of the primitive this lease holds (read by the longest-hold gauge). */
  final Metrics.Primitive metrics;
  private volatile long confirmedUntilNanos;
  private final AtomicReference<String> lostReason = new AtomicReference<>();
  volatile long lostAtMillis;
  /** {@link Ticker} time read before the acquiring command was sent: when the hold began, locally. */
  final long grantedAtNanos;
  // What the hold is on, for Turnstile.activity() and the identity record: set by the primitive
  // before it registers the lease with the watchdog (which publishes them), never changed after.
  Inspection.Kind kind;
  String name;
  /** The holding thread's id, or -1 (an async hold, a semaphore registration). */
  long threadId = -1;
  /** The semaphore whose registration this is, or null. */
  DistributedSemaphore semaphore;

  /**
   * @param sentAtNanos {@code System.nanoTime()} read before the acquiring command was sent; the
   *     lease is assumed to run from then, which errs on the side of expiring early
   */
  Lease(String key, String requestId, long leaseMillis, long token, String holder, long sentAtNanos,
      LossHandler handler) {
    this(key, requestId, leaseMillis, token, holder, sentAtNanos, handler, Metrics.Primitive.NOOP);
  }

  /** @param metrics told of this lease's renewals and renewal failures */
  Lease(String key, String requestId, long leaseMillis, long token, String holder, long sentAtNanos,
      LossHandler handler, Metrics.Primitive metrics) {
    this.metrics = metrics;
    this.key = key;
    this.requestId = requestId;
    this.leaseMillis = leaseMillis;
    this.token = token;
    this.holder = holder;
    this.handler = handler;
    this.confirmedUntilNanos = sentAtNanos + leaseMillis * 1_000_000L;
    this.grantedAtNanos = sentAtNanos;
  }

  /** Says what this lease holds (before it is registered with the watchdog); returns this lease. */
  Lease on(Inspection.Kind kind, String name, long threadId) {
    this.kind = kind;
    this.name = name;
    this.threadId = threadId;
    return this;
  }

  /**
   * Returns the instant from which this lease runs, as of its latest confirmation: the confirmed
   * instant minus the lease. A lock handed on at unlock passes it to its successor, whose lease
   * then ends when this one would have (the hand-off moves the hold, not its expiry in Redis).
   */
  long sinceNanos() {
    return confirmedUntilNanos - leaseMillis * 1_000_000L;
  }

  /** Records a renewal sent at {@code sentAtNanos} and confirmed by Redis. */
  void confirmed(long sentAtNanos) {
    long until = sentAtNanos + leaseMillis * 1_000_000L;
    if (until - confirmedUntilNanos > 0) {
      confirmedUntilNanos = until;
    }
  }

  /** Records a watchdog renewal sent at {@code sentAtNanos} and confirmed by Redis. */
  void renewed(long sentAtNanos) {
    metrics.renewed();
    confirmed(sentAtNanos);
  }

  /** Records a watchdog renewal of this lease that was refused or got no answer. */
  void renewalFailed() {
    metrics.renewalFailed();
  }

  /** Returns true if not lost and not past the confirmed instant (marking it lost if it is). */
  boolean alive(long nowNanos) {
    if (lostReason.get() != null) {
      return false;
    }
    if (nowNanos - confirmedUntilNanos >= 0) {
      lose("lease of " + leaseMillis + " ms ran out without a confirmed renewal");
      return false;
    }
    return true;
  }

  /** Returns ms until the confirmed instant (0 or less when past it, or when lost). */
  long remainingMillis(long nowNanos) {
    if (lostReason.get() != null) {
      return 0;
    }
    return java.util.concurrent.TimeUnit.NANOSECONDS.toMillis(confirmedUntilNanos - nowNanos);
  }

  String lostReason() {
    return lostReason.get();
  }

  /** Marks the lease lost; the first caller reports it, later calls do nothing. */
  void lose(String reason) {
    if (lostReason.compareAndSet(null, reason)) {
      lostAtMillis = System.currentTimeMillis();
      handler.leaseLost(this, reason);
    }
  }

  /** Ends the lease without loss (released); it can no longer be reported lost. */
  boolean end() {
    return lostReason.compareAndSet(null, "released");
  }

  @Override
  public String toString() {
    return "Lease{" + key + ", request=" + requestId + ", token=" + token + '}';
  }
}
