package io.github.turnstile;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
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
  /** Set by a final unlock while it looks for a successor (see {@link #unlock(Thread, long, boolean)}). */
  private volatile boolean releasing;
  /**
   * Grants in a row to threads of this JVM, by local hand-off or by an attempt right after this
   * client's own release; read at unlock (to decide on a hand-off) and by the next gate holder
   * (to decide whether to queue behind other JVMs first).
   */
  private volatile int streak;
  /** The gate holder, while it waits for the current owner to hand the lock over (see {@link Successor}). */
  private final AtomicReference<Successor> successor = new AtomicReference<>();

  /**
   * The thread at the head of this JVM's queue (the gate holder), waiting for the current owner
   * to hand the lock over directly: one script in Redis moves the hold from the owner's request to
   * this one, with a new fencing token, and no wake-up has to travel through Redis.
   *
   * <p>The owner takes the successor at its final unlock ({@link #takeSuccessor}) and must then
   * complete it exactly once. The successor withdraws by compare-and-set; if that fails, the owner
   * has taken it and the successor waits for the outcome.
   */
  static final class Successor {
    /** Outcomes. */
    static final int PENDING = 0;
    /** Handed over: {@link #token}, {@link #sentAtNanos} and {@link #streak} are set. */
    static final int HANDED = 1;
    /** Released in Redis to give other JVMs their turn: queue on the wake list, behind them. */
    static final int QUEUE = 2;
    /** Not handed over (the owner's lease was lost, or Redis failed): attempt in Redis. */
    static final int ATTEMPT = 3;
    /**
     * The successor stopped waiting (deadline, interrupt) after the owner had taken it: an
     * owner that then hands over must give the hold back (see {@link #handed}).
     */
    static final int ABANDONED = 4;

    final Thread thread;
    final String request;
    long token;
    long sentAtNanos;
    int streak;
    /** Set with ATTEMPT when the owner's hand-off got no answer: it may still have granted {@link #request}. */
    volatile boolean uncertain;
    private final java.util.concurrent.atomic.AtomicInteger outcome = new java.util.concurrent.atomic.AtomicInteger();

    Successor(Thread thread, String request) {
      this.thread = thread;
      this.request = request;
    }

    /**
     * Completes a successor taken by the owner, unless it was abandoned meanwhile.
     *
     * @return false if the successor had abandoned the wait
     */
    boolean complete(int outcome) {
      boolean done = this.outcome.compareAndSet(PENDING, outcome);
      LockSupport.unpark(thread);
      return done;
    }

    /**
     * Completes a taken successor with a hand-over; the fields written before are visible after.
     *
     * @return false if the successor had abandoned the wait: the caller must give the hold back
     */
    boolean handed(long token, long sentAtNanos, int streak) {
      this.token = token;
      this.sentAtNanos = sentAtNanos;
      this.streak = streak;
      return complete(HANDED);
    }

    /**
     * The successor stops waiting for its outcome.
     *
     * @return false if the owner completed it first (read {@link #outcome()})
     */
    boolean abandon() {
      return outcome.compareAndSet(PENDING, ABANDONED);
    }

    int outcome() {
      return outcome.get();
    }
  }

  LocalOwnership(String name, String describe) {
    this.name = name;
    this.describe = describe;
  }

  // ---------------------------------------------------------------- the gate

  /**
   * Whether another thread of this JVM holds this lock or is at its gate (contending in Redis, or
   * queued): a hint, read without locking, for the read side of a read/write lock, whose readers
   * would then be refused (phase-fair).
   *
   * @return whether another thread of this JVM holds this lock or is at its gate
   */
  boolean busyElsewhere(Thread me) {
    Thread o = owner;
    return (o != null && o != me) || gate.isLocked() || gate.hasQueuedThreads();
  }

  /**
   * Returns the fair gate that queues this JVM's waiters (FIFO).
   *
   * @return the fair gate that queues this JVM's waiters (FIFO)
   */
  ReentrantLock gate() {
    return gate;
  }

  /** Queues behind this JVM's other waiters (FIFO) for at most {@code timeoutNanos}. */
  boolean enterGate(long timeoutNanos, boolean interruptible) throws InterruptedException {
    return Waits.lock(gate, timeoutNanos, interruptible);
  }

  /**
   * Returns false at once if another thread of this JVM is in (or waiting for) the gate.
   *
   * @return false at once if another thread of this JVM is in (or waiting for) the gate
   */
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
    grant(me, l, 0);
  }

  /**
   * Makes {@code me} the owner with one hold on lease {@code l}; {@code streak} counts the local
   * hand-offs in a row that led to it (0 for a grant by an attempt in Redis).
   */
  void grant(Thread me, Lease l, int streak) {
    long seen = releases; // volatile read: happens-after every earlier local release (see field)
    lease = l;
    holds = 1;
    this.streak = streak;
    owner = me;
  }

  /**
   * Returns grants in a row to this JVM up to the current (or last) hold.
   *
   * @return grants in a row to this JVM up to the current (or last) hold
   */
  int streak() {
    return streak;
  }

  // ---------------------------------------------------------------- local hand-off

  /**
   * Waits, as the gate holder, for the current owner of this JVM to hand the lock over. Returns
   * the completed successor ({@link Successor#outcome()} HANDED, QUEUE or ATTEMPT), or null if
   * nobody in this JVM holds the lock any more without having taken this successor (then the
   * caller contends in Redis), or if the deadline passed or (when interruptible) the thread was
   * interrupted first (check the time and the interrupt status).
   *
   * <p>If the owner has already taken this successor when the deadline passes or the interrupt
   * comes, the successor abandons the wait ({@link Successor#abandon}) unless the owner completed
   * it at that very moment; an owner that hands over to an abandoned successor gives the hold
   * back. So this returns within the caller's time, however slow the owner's hand-off is. A
   * hand-over that won the race is returned with the interrupt status set, so that the caller can
   * give it back before throwing.
   */
  Successor awaitHandoff(String request, boolean timed, long deadline, boolean interruptible,
      Ticker ticker) {
    return awaitHandoff(request, timed, deadline, interruptible, ticker, () -> false);
  }

  /**
   * As {@link #awaitHandoff(String, boolean, long, boolean, Ticker)}, and {@code stop} ends the
   * wait as a deadline does (the client was closed): checked on every wake-up, so whoever makes it
   * true unparks the thread.
   */
  Successor awaitHandoff(String request, boolean timed, long deadline, boolean interruptible,
      Ticker ticker, java.util.function.BooleanSupplier stop) {
    Successor me = new Successor(Thread.currentThread(), request);
    successor.set(me);
    boolean taken = false;
    while (true) {
      if (me.outcome() != Successor.PENDING) {
        return me;
      }
      long now = ticker.read();
      boolean late = (timed && deadline - now <= 0) || (interruptible && Thread.currentThread().isInterrupted())
          || stop.getAsBoolean();
      if (!taken && (late || !heldLocally(now))) {
        if (successor.compareAndSet(me, null)) {
          return null; // withdrawn: no owner will complete it
        }
        taken = true; // the owner took it at its unlock and completes it within its hand-off
      }
      if (taken && late) {
        return me.abandon() ? null : me;
      }
      long nanos = taken ? TimeUnit.MILLISECONDS.toNanos(10)
          : TimeUnit.MILLISECONDS.toNanos(Math.max(1, heldLocallyMillis(now) + 1));
      if (timed) {
        nanos = Math.min(nanos, deadline - now);
      }
      LockSupport.parkNanos(me, Math.max(nanos, 1));
    }
  }

  /**
   * Called by the owner at its final unlock, after {@link #unlock} cleared the ownership: takes
   * the waiting successor, if any, which the caller must then complete.
   */
  Successor takeSuccessor() {
    return successor.getAndSet(null);
  }

  /**
   * Like {@link #takeSuccessor}, but when no successor is registered yet while another thread of
   * this JVM is queued at, or has just entered, the gate, gives it up to {@code maxNanos} to
   * register (yielding the CPU to it meanwhile): a thread woken from the gate queue needs a few
   * tens of microseconds to get there, which is much less than the round trip a hand-off saves.
   */
  Successor awaitSuccessor(long maxNanos) {
    Successor s = successor.getAndSet(null);
    if (s == null && (gate.isLocked() || gate.hasQueuedThreads())) {
      long start = System.nanoTime();
      while (s == null && System.nanoTime() - start < maxNanos) {
        Thread.yield();
        s = successor.getAndSet(null);
      }
    }
    releasing = false;
    if (s == null) {
      // One that registered between the last look and the line above is told to go to Redis
      // at once, instead of finding out on its next timed wake-up.
      Successor late = successor.getAndSet(null);
      if (late != null) {
        late.complete(Successor.ATTEMPT);
      }
    }
    return s;
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
    return unlock(me, nowNanos, false);
  }

  /**
   * One unlock by {@code me}; if it is the final one and {@code lookForSuccessor}, the lock counts
   * as still held locally (for a gate holder deciding whether to wait for a hand-off) until
   * {@link #awaitSuccessor} has decided.
   */
  Lease unlock(Thread me, long nowNanos, boolean lookForSuccessor) {
    if (owner != me) {
      throw new IllegalMonitorStateException("current thread " + threadName(me) + " does not hold " + describe
          + " (held by " + ownerName() + ")");
    }
    Lease l = lease;
    boolean alive = l.alive(nowNanos);
    if (--holds > 0) {
      if (!alive) {
        throw lost(l);
      }
      return null;
    }
    if (lookForSuccessor) {
      releasing = true; // before owner is cleared: a gate holder sees one or the other
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

  /**
   * @return whether some thread of this JVM holds the lock on a live lease, or is in the middle of
   *     its final unlock, looking for a successor to hand it to
   */
  boolean heldLocally(long nowNanos) {
    if (releasing) {
      return true;
    }
    Lease l = lease;
    return owner != null && l != null && l.alive(nowNanos);
  }

  /**
   * Returns the remaining lease of this JVM's holder in ms, or 0 if no thread of this JVM holds it.
   *
   * @return the remaining lease of this JVM's holder in ms, or 0 if no thread of this JVM holds it
   */
  long heldLocallyMillis(long nowNanos) {
    Lease l = lease;
    if (owner == null || l == null) {
      return releasing ? 1 : 0;
    }
    return Math.max(0, l.remainingMillis(nowNanos));
  }

  /**
   * Returns the owner's fencing token.
   *
   * @return the owner's fencing token
   */
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

  /**
   * Returns the current lease (null when not held in this JVM); for tests and diagnostics.
   *
   * @return the current lease (null when not held in this JVM); for tests and diagnostics
   */
  Lease lease() {
    return lease;
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
