package io.github.turnstile;

import java.util.concurrent.CompletableFuture;

/** A primitive's Redis operations, for one kind of primitive (the {@link AsyncAcquisition}'s side). */
abstract class AcquisitionSide<H extends Hold> {
  /** The primitive as messages name it ("lock 'n'"). */
  final String describe;
  /** The primitive's kind and name, for {@link Turnstile#activity()} (kind null: not one of them). */
  final Inspection.Kind kind;
  final String primitiveName;
  /** The pub/sub channel its releases publish to when a waiter subscribed (tier 2). */
  final String channel;
  final Metrics.Primitive metrics;

  AcquisitionSide(String describe, Inspection.Kind kind, String primitiveName, String channel,
      Metrics.Primitive metrics) {
    this.describe = describe;
    this.kind = kind;
    this.primitiveName = primitiveName;
    this.channel = channel;
    this.metrics = metrics;
  }

  /**
   * Returns the list that releases push wake tokens to (the token-list tier), or null if
   * acquisitions of this side wait by pub/sub only.
   */
  String wakeKey() {
    return null;
  }

  /**
   * Returns the wake list that {@code w} waits on, or null if it waits by pub/sub (by default
   * {@link #wakeKey()}; a semaphore's multi-permit acquisitions wait by pub/sub).
   */
  String wakeKey(AsyncAcquisition<H> w) {
    return wakeKey();
  }

  /** Hands on a wake token that was (or may have been) taken and will not be used. */
  void passWakeup() {}

  /**
   * Returns whether {@code w} may attempt at once beside the gate's head rather than queue
   * ({@link AsyncGate#RUN_NEVER}, {@link AsyncGate#RUN_WHEN_IDLE}, {@link AsyncGate#RUN_ALWAYS}):
   * a shared side's (readers share while nobody waits).
   */
  int runMode(AsyncAcquisition<H> w) {
    return AsyncGate.RUN_NEVER;
  }

  /**
   * Sends one attempt for {@code w} ({@link AsyncAcquisition#request}, {@link AsyncAcquisition#owner}).
   *
   * @param subscribed the acquisition waits by pub/sub: a refusal asks the next release to publish
   */
  abstract CompletableFuture<Attempt> attempt(AsyncAcquisition<H> w, boolean subscribed);

  /** The attempt was refused (its reply arrived), whether or not the acquisition goes on. */
  void refused(AsyncAcquisition<H> w, Attempt a) {}

  /**
   * The attempt granted, and the caller may still want it: start the hold (lease, watchdog).
   *
   * @return the hold, or null if the grant could not be counted (it was given back): go round
   */
  abstract H grant(AsyncAcquisition<H> w, Attempt a, long sentAtTicks);

  /** The attempt granted, but the acquisition was abandoned first: undo the grant, waking the next waiter. */
  abstract void cancelGrant(AsyncAcquisition<H> w, Attempt a);

  /**
   * The attempt {@code f} failed, or got no reply in time (it may still run): its outcome is
   * unknown. Runs once per such attempt.
   */
  void failed(AsyncAcquisition<H> w, CompletableFuture<Attempt> f) {}

  /**
   * The acquisition gave up after it attempted: withdraw what marks it as waiting and, if
   * {@code uncertain} (a copy of an attempt may have run unseen), undo what it may hold.
   */
  abstract void withdraw(AsyncAcquisition<H> w, boolean uncertain);

  /**
   * A fault cut the replicas' acknowledgement of grant {@code a} and the acquisition goes on. By
   * default the next attempt carries the same request id, so it replays the grant where the
   * primary has it: the grant is left as it is, and may be held.
   *
   * @return whether {@code w} may still hold the grant (undone if it gives up)
   */
  boolean acknowledgementCut(AsyncAcquisition<H> w, Attempt a) {
    return true;
  }

  /**
   * Returns a future that completes when the hold of this JVM that holds the primitive ends other
   * than by a hand-off to {@code w}, or null if none does (see {@link AsyncGate#localEnd}).
   */
  CompletableFuture<Void> localEnd(AsyncAcquisition<H> w) {
    return null;
  }

  /**
   * Before an attempt in Redis: hands the head {@code w} a grant this JVM keeps, if one is idle
   * (a lock's {@link LockCache}).
   *
   * @return true if {@code w} was handed one (it attempts nothing)
   */
  boolean fromCache(AsyncAcquisition<H> w) {
    return false;
  }

  /** The key whose existence is the hold {@code w} took (for {@code WAIT}, replicaAcks). */
  abstract String leaseKey(AsyncAcquisition<H> w);

  /** The request id in field {@code r} of {@link #leaseKey}, or null if it has none (a semaphore call's memo, whose existence alone is the record). */
  String leaseRequest(AsyncAcquisition<H> w) {
    return w.request;
  }
}
