package io.github.turnstile;

import java.util.concurrent.TimeUnit;

/**
 * The time and outage bookkeeping of one acquisition call: its deadline (if timed), whether it
 * may be interrupted, and since when Redis has been continuously unreachable for it.
 */
final class Call {
  /**
   * The least time a reply is waited for, even when the caller's deadline is closer, once the
   * call has had an answer from Redis (a refusal): a waiter's attempt near its deadline stretches
   * the call by at most this much.
   */
  static final long MIN_REPLY_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
  /**
   * The least time the reply to a call's attempt is waited for until the call has had an answer
   * from Redis: a zero or short timeout still learns whether the primitive is free from a Redis
   * that answers, on a busy host too (a free lock is taken, as the JDK's {@code tryLock(0, unit)}
   * takes it; {@link #MIN_REPLY_NANOS} was too short for a loaded machine, RELIABILITY). A Redis
   * that does not answer at all makes a timed call return at most this long after it began.
   */
  static final long FIRST_REPLY_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

  final boolean timed;
  final long deadline;
  final boolean interruptible;
  /**
   * One attempt and no wait ({@code tryLock()}, {@code tryAcquire()}): its reply is awaited for
   * the command timeout, and a failure or no reply fails the call rather than timing it out.
   */
  final boolean once;
  /** nanoTime since which Redis has been unreachable for this call; meaningful while unreachable. */
  long unreachableSince;
  boolean unreachable;
  /** When the call began: its outage clock starts no earlier (see {@link Outages#unreachable}). */
  final long startNanos = System.nanoTime();
  /**
   * Whether the latest refusal of this call's attempts was by another client's cache that was
   * asked to give the grant up and has not answered yet: see {@link #afterCacheRefusal}.
   */
  volatile boolean refusedByCache;
  /**
   * Whether the latest refusal was by a hold: a thread's, here or in another JVM, including a
   * cache that answered that one of its threads uses the grant (lock_busy.lua). A call stretched
   * for a cache's answer ({@link #afterCacheRefusal}) then ends, as a {@code tryLock()} ends at a
   * held lock.
   */
  volatile boolean refusedHeld;
  /** Whether this call is the stretch after a cache's refusal ({@link #afterCacheRefusal}). */
  private final boolean stretched;
  /** Whether an attempt of this call has had its answer (see {@link #FIRST_REPLY_NANOS}). */
  private boolean answered;

  /** Records that an attempt of this call had its answer from Redis. */
  void answered() {
    answered = true;
  }

  /** The least wait for an attempt's reply: {@link #FIRST_REPLY_NANOS} until one was answered. */
  long minReplyNanos() {
    return answered ? MIN_REPLY_NANOS : FIRST_REPLY_NANOS;
  }

  private Call(boolean timed, long deadline, boolean interruptible, boolean once) {
    this(timed, deadline, interruptible, once, false);
  }

  private Call(boolean timed, long deadline, boolean interruptible, boolean once, boolean stretched) {
    this.timed = timed;
    this.deadline = deadline;
    this.interruptible = interruptible;
    this.once = once;
    this.stretched = stretched;
  }

  /** One attempt and no wait, never interrupted ({@code tryLock()}). */
  static Call once() {
    return new Call(true, System.nanoTime(), false, true);
  }

  /** An untimed call ({@code lock()}, {@code acquire()}). */
  static Call untimed(boolean interruptible) {
    return new Call(false, 0, interruptible, false);
  }

  /** A timed call, interruptible as {@code tryLock(t)} is. */
  static Call until(long deadline) {
    return new Call(true, deadline, true, false);
  }

  /** A timed call with the given interruptibility. */
  static Call until(long deadline, boolean interruptible) {
    return new Call(true, deadline, interruptible, false);
  }

  /**
   * Returns the call that goes on after this one ended refused by another client's cache, which
   * was asked to give the grant up: a lock no thread holds is taken, as the JDK's {@code tryLock()}
   * takes a free lock, so a short timeout (or none, {@link #once}) is stretched to the
   * revocation's bound, {@link LockCache#REVOCATION_WAIT_MILLIS} from this call's start (from
   * now for a {@code tryLock()}). Null if not refused by a cache, or if the deadline is later.
   */
  Call afterCacheRefusal() {
    long floor = (once ? System.nanoTime() : startNanos) + TimeUnit.MILLISECONDS.toNanos(LockCache.REVOCATION_WAIT_MILLIS);
    return refusedByCache && floor - deadline > 0 ? new Call(true, floor, interruptible, false, true) : null;
  }

  /** Returns the nanoseconds left before the deadline ({@link Long#MAX_VALUE} when untimed). */
  long remaining() {
    return timed ? deadline - System.nanoTime() : Long.MAX_VALUE;
  }

  /** Whether a timed call's deadline has passed, or a stretched call was refused by a hold. */
  boolean expired() {
    return timed && (deadline - System.nanoTime() <= 0 || stretched && refusedHeld);
  }

  void reachable() {
    unreachable = false;
  }
}
