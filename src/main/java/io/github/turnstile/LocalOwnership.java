package io.github.turnstile;

import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-JVM half of a {@link RedisLock}, with no Redis in it: the fair local gate that queues this
 * JVM's waiters, the owning thread, its hold count and its current {@link Lease}. Kept apart from
 * the Redis I/O so that its races can be stress-tested on their own (src/jcstress).
 *
 * <p>Rules: {@code holds} is read and written only by the owner thread; {@code owner} and
 * {@code lease} are volatile, written by the owner (at grant and final unlock) and read by any
 * thread; {@code owner} is written last at a grant and first cleared at the final unlock, so a
 * thread that sees itself as owner sees its lease and hold count.
 */
final class LocalOwnership {
  private final String name;
  private final String describe;
  private final ReentrantLock gate = new ReentrantLock(true);
  private volatile Thread owner;
  private int holds; // accessed only by the owner thread
  private volatile Lease lease;
  /**
   * Written by every final unlock before its release is sent, read by every grant. A grant in this
   * JVM that follows a release in this JVM (through Redis, which the memory model does not see)
   * thereby reads this write, which gives the happens-before edge ReentrantLock promises.
   */
  private volatile long releases;

  LocalOwnership(String name, String describe) {
    this.name = name;
    this.describe = describe;
  }

  // ---------------------------------------------------------------- the gate

  /** Queues behind this JVM's other waiters (FIFO) for at most {@code timeoutNanos}. */
  boolean enterGate(long timeoutNanos, boolean interruptible) throws InterruptedException {
    return Waits.lock(gate, timeoutNanos, interruptible);
  }

  /** @return false at once if another thread of this JVM is in (or waiting for) the gate */
  boolean tryEnterGate() {
    return gate.tryLock();
  }

  void leaveGate() {
    gate.unlock();
  }

  // ---------------------------------------------------------------- ownership

  /**
   * Re-entry by the owner: zero round trips.
   *
   * @return false if {@code me} does not own the lock (the caller must acquire)
   * @throws LockLostException if {@code me} owns it but the lease is lost
   */
  boolean reenter(Thread me, long nowNanos) {
    if (owner != me) {
      return false;
    }
    Lease l = lease;
    if (!l.alive(nowNanos)) {
      throw lost(l);
    }
    if (holds == Integer.MAX_VALUE) {
      throw new Error("Maximum lock count exceeded");
    }
    holds++;
    return true;
  }

  /** Makes {@code me} the owner with one hold on lease {@code l} (after Redis granted it). */
  void grant(Thread me, Lease l) {
    long seen = releases; // volatile read: happens-after every earlier local release (see field)
    lease = l;
    holds = 1;
    owner = me;
  }

  /**
   * One unlock by {@code me}.
   *
   * @return null if holds remain; the lease of the hold that just ended on the final unlock (the
   *     lock is then no longer owned locally; the caller ends the lease and releases in Redis)
   * @throws IllegalMonitorStateException if {@code me} does not own the lock
   * @throws LockLostException if holds remain but the lease is lost
   */
  Lease unlock(Thread me, long nowNanos) {
    if (owner != me) {
      throw new IllegalMonitorStateException(
          "current thread does not hold " + describe + " (held by " + ownerName() + ")");
    }
    Lease l = lease;
    boolean alive = l.alive(nowNanos);
    if (--holds > 0) {
      if (!alive) {
        throw lost(l);
      }
      return null;
    }
    lease = null;
    owner = null;
    releases++; // single writer at a time: only the owner thread gets here
    return l;
  }

  boolean isHeldBy(Thread me, long nowNanos) {
    if (owner != me) {
      return false;
    }
    return lease.alive(nowNanos);
  }

  int holdCount(Thread me, long nowNanos) {
    return isHeldBy(me, nowNanos) ? holds : 0;
  }

  /** @return whether some thread of this JVM holds the lock on a live lease */
  boolean heldLocally(long nowNanos) {
    Lease l = lease;
    return owner != null && l != null && l.alive(nowNanos);
  }

  /** @return the remaining lease of this JVM's holder in ms, or 0 if no thread of this JVM holds it */
  long heldLocallyMillis(long nowNanos) {
    Lease l = lease;
    if (owner == null || l == null) {
      return 0;
    }
    return Math.max(0, l.remainingMillis(nowNanos));
  }

  /** @return the owner's fencing token */
  long fencingToken(Thread me, long nowNanos) {
    if (owner != me) {
      throw new IllegalMonitorStateException("current thread does not hold " + describe);
    }
    Lease l = lease;
    if (!l.alive(nowNanos)) {
      throw lost(l);
    }
    return l.token;
  }

  /** @return the current lease (null when not held in this JVM); for tests and diagnostics */
  Lease lease() {
    return lease;
  }

  LockLostException lost(Lease l) {
    return new LockLostException(name, l.token, l.lostAtMillis, l.lostReason());
  }

  String ownerName() {
    Thread o = owner;
    return o == null ? "nobody in this JVM" : "thread " + o.getName();
  }

  Thread owner() {
    return owner;
  }
}
