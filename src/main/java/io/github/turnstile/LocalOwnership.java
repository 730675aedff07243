package io.github.turnstile;

/**
 * The thread that owns a {@link RedisLock} in this JVM, its hold count and its hold: what makes a
 * hold of the one acquisition engine ({@link AsyncAcquisition}) a thread's reentrant lock. Kept
 * apart from the Redis I/O so that its races can be stress-tested on their own (src/jcstress).
 *
 * <p>Rules: {@code holds} is read and written only by the owner thread; {@code owner} and
 * {@code hold} are volatile, written by the owner (at its grant and final unlock) and read by any
 * thread; {@code owner} is written last at a grant and cleared first at the final unlock, so a
 * thread that sees itself as owner sees its hold and hold count.
 */
final class LocalOwnership {
  private final String name;
  private final String describe;
  private volatile Thread owner;
  private int holds; // accessed only by the owner thread
  private volatile AsyncHold.Lock hold;
  /**
   * Written by every final unlock before its release is sent, read by every grant: a grant in this
   * JVM that follows a release in this JVM through Redis (which the memory model does not see)
   * reads this write, which gives the happens-before edge {@code ReentrantLock} promises.
   */
  private volatile long releases;

  LocalOwnership(String name, String describe) {
    this.name = name;
    this.describe = describe;
  }

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
    Lease l = hold.lease();
    if (!l.alive(nowNanos)) {
      throw lost(l);
    }
    if (holds == Integer.MAX_VALUE) {
      throw new Error("Maximum lock count exceeded");
    }
    holds++;
    return true;
  }

  /** Makes {@code me} the owner with one hold: {@code h}, granted to it by the engine. */
  void grant(Thread me, AsyncHold.Lock h) {
    long seen = releases; // volatile read: happens-after every earlier local release (see field)
    hold = h;
    holds = 1;
    owner = me;
  }

  /**
   * One unlock by {@code me}.
   *
   * @return null if holds remain; on the final unlock, the hold that just ended (the lock is then
   *     no longer owned by a thread of this JVM; the caller releases the hold)
   * @throws IllegalMonitorStateException if {@code me} does not own the lock
   * @throws LockLostException if holds remain but the lease is lost
   */
  AsyncHold.Lock unlock(Thread me, long nowNanos) {
    if (owner != me) {
      throw new IllegalMonitorStateException("current thread " + threadName(me) + " does not hold " + describe
          + " (held by " + ownerName() + ")");
    }
    AsyncHold.Lock h = hold;
    if (--holds > 0) {
      if (!h.lease().alive(nowNanos)) {
        throw lost(h.lease());
      }
      return null;
    }
    owner = null;
    hold = null;
    releases++; // single writer at a time: only the owner thread gets here
    return h;
  }

  boolean isHeldBy(Thread me, long nowNanos) {
    return owner == me && hold.lease().alive(nowNanos);
  }

  int holdCount(Thread me, long nowNanos) {
    return isHeldBy(me, nowNanos) ? holds : 0;
  }

  /** Returns whether a thread of this JVM holds the lock on a live lease. */
  boolean heldLocally(long nowNanos) {
    AsyncHold.Lock h = hold;
    return owner != null && h != null && h.lease().alive(nowNanos);
  }

  /** Returns the owner's fencing token. */
  long fencingToken(Thread me, long nowNanos) {
    if (owner != me) {
      throw new IllegalMonitorStateException("current thread does not hold " + describe);
    }
    Lease l = hold.lease();
    if (!l.alive(nowNanos)) {
      throw lost(l);
    }
    return l.token;
  }

  /** Returns the current lease (null when no thread of this JVM owns the lock); for tests and diagnostics. */
  Lease lease() {
    AsyncHold.Lock h = hold;
    return h == null ? null : h.lease();
  }

  LockLostException lost(Lease l) {
    return new LockLostException(name, l.token, l.lostAtMillis, l.lostReason());
  }

  String ownerName() {
    Thread o = owner;
    return o == null ? "no thread of this JVM" : "thread " + threadName(o);
  }

  /** A thread's name and id: two threads may share a name (every JVM's first thread is "main"). */
  static String threadName(Thread t) {
    return t.getName() + " (id " + t.getId() + ")";
  }

  Thread owner() {
    return owner;
  }
}
