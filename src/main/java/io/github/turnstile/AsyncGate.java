package io.github.turnstile;

import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The acquisitions of one primitive (one lock, one side of a read/write lock, one semaphore) in this
 * JVM, threads' and futures' alike, in arrival order: only the head contends in Redis, so a release
 * wakes one acquisition per JVM and primitive, not all of them (DESIGN §5, <i>The gate</i>). The
 * gate also keeps the subscription to the primitive's channel while it has acquisitions, so that
 * consecutive heads share it (the last to leave closes it); for a lock, the local hand-off's books
 * ({@link #successor}); on a shared side (readers), the runners that attempt beside the head
 * ({@link #enter}); for a semaphore, who a release's permits go to by local hand-off
 * ({@link #servedBy}).
 */
final class AsyncGate<H extends Hold> {
  private final AcquisitionEnv env;
  private final AcquisitionSide<H> side;
  private final ReentrantLock lock = new ReentrantLock();
  /**
   * FIFO behind the head; a set with insertion order so that one that ends early (cancelled, timed
   * out) leaves in constant time: with many pending on one name, a deque's remove made a mass
   * cancellation quadratic. Guarded by lock.
   */
  private final LinkedHashSet<AsyncAcquisition<H>> queue = new LinkedHashSet<>();
  private AsyncAcquisition<H> head; // guarded by lock
  /** Acquisitions attempting beside the head (readers while nobody waits: see {@link #enter}); guarded by lock. */
  private final java.util.Set<AsyncAcquisition<H>> runners = new java.util.HashSet<>();
  private WakeChannel channel; // guarded by lock
  /**
   * Read side only: the server time (ms) since which the readers now queued here wait (0: not
   * known), set by a refusal of the head and handed to every queued acquisition that has none
   * yet; reset by the first grant made with it (the readers it stood for were admitted) and when
   * the gate empties. An acquisition takes it when it enqueues ({@link AsyncAcquisition#readSince})
   * and sends its own copy: resetting only when the gate emptied, a steady stream of readers
   * kept sending the first refusal's time, older than every later write release, and passed
   * waiting writers for ever (see rwlock.lua, op read).
   */
  private long waitingSince; // guarded by lock
  /** Local hand-offs in a row while another client waits (see {@link #successor}); guarded by lock. */
  private int streak;
  /** When ({@link System#nanoTime()}) this JVM last released in Redis to give other clients their turn; guarded by lock. */
  private long yieldedAtNanos;
  private boolean yielded; // guarded by lock
  /** Releases in Redis at the hand-off limit so far; guarded by lock. */
  private long yields;
  /** The hold granted through this gate that holds the primitive now, exclusive sides only (null: none); guarded by lock. */
  private Hold localHold;
  /** Completes when {@link #localHold} ends other than by a hand-off to this gate's head; guarded by lock. */
  private CompletableFuture<Void> localEnd;

  AsyncGate(AcquisitionEnv env, AcquisitionSide<H> side) {
    this.env = env;
    this.side = side;
  }

  /** Returns the Redis operations of this gate's acquisitions. */
  AcquisitionSide<H> side() {
    return side;
  }

  /**
   * Describes this gate when it has a head, queued acquisitions or a subscription; null when it
   * has none of them (for diagnostics in tests).
   */
  String describe() {
    lock.lock();
    try {
      if (head == null && queue.isEmpty() && channel == null && runners.isEmpty()) {
        return null;
      }
      StringBuilder beside = new StringBuilder();
      for (AsyncAcquisition<H> r : runners) {
        beside.append(' ').append(r.describe());
      }
      return "head=" + (head == null ? "none" : head.describe())
          + " queued=" + queue.size() + " channel=" + (channel == null ? "none" : "held")
          + (runners.isEmpty() ? "" : " runners:" + beside);
    } finally {
      lock.unlock();
    }
  }

  /** Returns whether this gate's head waits on nothing (see {@link AsyncAcquisition#stranded}). */
  boolean stranded() {
    AsyncAcquisition<H> h = locked(lock, () -> head);
    return h != null && h.stranded();
  }

  /** Returns {@code read}'s value, read holding {@code lock}. */
  static <T> T locked(java.util.concurrent.locks.Lock lock, java.util.function.Supplier<T> read) {
    lock.lock();
    try {
      return read.get();
    } finally {
      lock.unlock();
    }
  }

  /** A head that a releasing hold of this JVM may hand the primitive to: its ids in Redis. */
  record Successor<H extends Hold>(AsyncAcquisition<H> acquisition, String owner, String request) {}

  /**
   * Picks the head for a local hand-off from a releasing hold of this JVM, or null: none is
   * waiting, or {@code limit} hand-offs in a row went to this JVM while another client waited
   * (then the release goes through Redis, which gives other clients their turn; see
   * {@link #handedOff}).
   *
   * @param limit the local hand-off limit (0: no local hand-off)
   * @return the head to hand to, or null to release in Redis
   */
  Successor<H> successor(int limit) {
    if (limit <= 0) {
      return null;
    }
    lock.lock();
    try {
      String[] ids = head == null ? null : head.handOffIds();
      if (ids == null || yieldAt(limit)) {
        return null;
      }
      streak++;
      return new Successor<>(head, ids[0], ids[1]);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Permits: the acquisitions that {@code permits} released by this JVM serve by local hand-off,
   * in FIFO order (the head, then those in line), each taking all it asked for while what is left
   * covers it; empty if none is served, or if {@code limit} hand-offs in a row went to this JVM
   * (then the release goes through Redis, where other clients' waiters get their turn, and this
   * JVM's head stands back: {@link #standBack}). The caller delivers to each
   * ({@link AsyncAcquisition#handedPermits}) and releases in Redis what none took.
   *
   * @param limit the local hand-off limit (0: no local hand-off)
   * @return the acquisitions to hand to, in order
   */
  java.util.List<AsyncAcquisition<H>> servedBy(int permits, int limit) {
    if (limit <= 0 || permits <= 0) {
      return java.util.List.of();
    }
    lock.lock();
    try {
      java.util.List<AsyncAcquisition<H>> served = new java.util.ArrayList<>();
      int left = permits;
      if (head != null && head.open()) {
        if (head.permits > left) {
          return served;
        }
        served.add(head);
        left -= head.permits;
      }
      for (AsyncAcquisition<H> q : queue) {
        if (q.permits > left) {
          break;
        }
        if (q.open()) {
          served.add(q);
          left -= q.permits;
        }
      }
      if (served.isEmpty() || yieldAt(limit)) {
        return java.util.List.of();
      }
      streak += served.size();
      return served;
    } finally {
      lock.unlock();
    }
  }

  /** Whether this JVM yields at {@code limit} hand-offs in a row (released in Redis, the head stands back); lock held. */
  private boolean yieldAt(int limit) {
    if (streak < limit) {
      return false;
    }
    streak = 0;
    yielded = true;
    yields++;
    yieldedAtNanos = System.nanoTime();
    return true;
  }

  /** Returns the releases in Redis at the hand-off limit so far (for tests). */
  long yields() {
    return locked(lock, () -> yields);
  }

  /**
   * Returns the first acquisition in line that is not in {@code served} and has not ended, if the
   * head is among {@code served}: the one that becomes head once they are served (it may take over
   * the head's wait in Redis: {@link AsyncAcquisition#passWaitTo}); else null.
   */
  AsyncAcquisition<H> heirOf(java.util.List<AsyncAcquisition<H>> served) {
    lock.lock();
    try {
      if (head == null || !served.contains(head)) {
        return null;
      }
      for (AsyncAcquisition<H> q : queue) {
        if (!served.contains(q) && q.open()) {
          return q;
        }
      }
      return null;
    } finally {
      lock.unlock();
    }
  }

  /** A grant from Redis: the run of local hand-offs in a row starts again. */
  void grantedInRedis() {
    lock.lock();
    try {
      streak = 0;
    } finally {
      lock.unlock();
    }
  }

  /**
   * A local hand-off granted; {@code othersWait} says whether another client waits. With nobody
   * else waiting there is nobody to pass over, and hand-offs go on without limit.
   */
  void handedOff(boolean othersWait) {
    if (!othersWait) {
      grantedInRedis();
    }
  }

  /**
   * Returns whether this JVM has just yielded (a release in Redis at the hand-off limit) and its
   * head has not stood back yet: the yielding release then marks this client as waiting, so that
   * the release that follows wakes this JVM's head in turn.
   */
  boolean yieldPending() {
    return locked(lock, () -> yielded);
  }

  /**
   * After this JVM released in Redis to give other clients their turn, its head stands back: it
   * waits what is left of {@code maxNanos} since that release before its next attempt, instead of
   * racing the other clients' waiters for the release it just made. Asked once per such release.
   *
   * @return how long to stand back (0: attempt now)
   */
  long standBack(long maxNanos) {
    lock.lock();
    try {
      if (!yielded) {
        return 0;
      }
      yielded = false;
      long left = maxNanos - (System.nanoTime() - yieldedAtNanos);
      return Math.max(0, left);
    } finally {
      lock.unlock();
    }
  }

  /** {@code h}, granted through this gate, holds the (exclusive) primitive now. */
  void heldLocally(Hold h) {
    CompletableFuture<Void> old = Locks.locked(lock, () -> {
      CompletableFuture<Void> was = localEnd;
      localHold = h;
      localEnd = new CompletableFuture<>();
      return was;
    });
    if (old != null) {
      old.complete(null);
    }
  }

  /** {@code h} no longer holds the primitive (released in Redis, lost, or handed to no one). */
  void endedLocally(Hold h) {
    CompletableFuture<Void> end;
    lock.lock();
    try {
      if (localHold != h) {
        return;
      }
      end = localEnd;
      localHold = null;
      localEnd = null;
    } finally {
      lock.unlock();
    }
    end.complete(null);
  }

  /**
   * Returns a future that completes when the hold of this JVM on the primitive ends other than by
   * a hand-off to the head, or null if no valid hold of this JVM holds it: a new head then waits
   * for that hold's hand-off instead of attempting in Redis, where the attempt could only be
   * refused.
   */
  CompletableFuture<Void> localEnd() {
    return locked(lock, () -> localHold != null && localHold.isValid() ? localEnd : null);
  }

  /** Starts an asynchronous acquisition of {@code permits} for {@code call}. */
  CompletableFuture<H> acquire(Call call, int permits) {
    return enqueue(call, permits, null).result;
  }

  /**
   * A thread's acquisition of {@code permits}: queues it and parks the calling thread on it until
   * it ends ({@link Waits#park}); an interrupt is counted in {@code metrics}.
   *
   * @return the hold, or null if the call timed out
   * @throws InterruptedException if the call is interruptible and the thread was interrupted
   */
  H await(Call call, int permits, Metrics.Primitive metrics) throws InterruptedException {
    try {
      return Waits.park(enqueue(call, permits, Thread.currentThread()), call);
    } catch (InterruptedException e) {
      metrics.interrupted();
      throw e;
    }
  }

  /**
   * Starts an acquisition of {@code permits} for {@code call} on behalf of {@code thread}, which
   * parks on it ({@link Waits#park}), or of nobody (null: an asynchronous call).
   *
   * @return the acquisition, started
   */
  AsyncAcquisition<H> enqueue(Call call, int permits, Thread thread) {
    AsyncAcquisition<H> a = new AsyncAcquisition<>(env, side, this, permits, call, thread);
    a.start();
    return a;
  }

  /** {@link #enter}'s answers. */
  static final int QUEUED = 0;
  static final int HEAD = 1;
  static final int RUNNER = 2;

  /** {@link AcquisitionSide#runMode}: never a runner; a runner while the gate is idle; always. */
  static final int RUN_NEVER = 0;
  static final int RUN_WHEN_IDLE = 1;
  static final int RUN_ALWAYS = 2;

  /**
   * Queues {@code a}, or (a shared side: readers) lets it attempt at once beside the others as a
   * <i>runner</i>, while nobody of this gate waits in Redis ({@code runMode}
   * {@link #RUN_WHEN_IDLE}: no head, nobody queued) or always ({@link #RUN_ALWAYS}: a downgrade, or
   * a {@code tryLock()} that barges). Runners share; a refused runner takes its place in line
   * ({@link #runnerRefused}).
   *
   * @return {@link #HEAD} if it is the head now, {@link #RUNNER} if it runs beside the head, both
   *     starting at once; {@link #QUEUED} otherwise
   */
  int enter(AsyncAcquisition<H> a, int runMode) {
    lock.lock();
    try {
      a.readSince = waitingSince;
      if (runMode == RUN_ALWAYS || (runMode == RUN_WHEN_IDLE && head == null && queue.isEmpty())) {
        runners.add(a);
        return RUNNER;
      }
      if (head == null) {
        head = a;
        return HEAD;
      }
      queue.add(a);
      return QUEUED;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The runner {@code a} was refused: it waits in line from now on, as the head if there is none,
   * else behind those queued.
   *
   * @return true if it is the head now (its loop goes on); false if it is queued (its loop stops
   *     until it becomes head) or has left the gate meanwhile (it ended)
   */
  boolean runnerRefused(AsyncAcquisition<H> a) {
    lock.lock();
    try {
      if (!runners.remove(a)) {
        return false; // it ended meanwhile and left
      }
      if (head == null) {
        head = a;
        return true;
      }
      queue.add(a);
      a.inLine();
      return false;
    } finally {
      lock.unlock();
    }
  }

  /** Removes and returns the first queued acquisition, or null; lock held. */
  private AsyncAcquisition<H> poll() {
    Iterator<AsyncAcquisition<H>> it = queue.iterator();
    if (!it.hasNext()) {
      return null;
    }
    AsyncAcquisition<H> first = it.next();
    it.remove();
    return first;
  }

  /** {@code a} ended: it leaves the queue; if it was the head, the next one becomes head. */
  void leave(AsyncAcquisition<H> a) {
    AsyncAcquisition<H> next = null;
    WakeChannel idle = null;
    lock.lock();
    try {
      if (head != a) {
        if (!runners.remove(a)) {
          queue.remove(a);
        }
        a.leftGate(); // under the lock: whoever sees it gone sees the gate without it
        return;
      }
      do {
        next = poll();
      } while (next != null && next.isOver());
      head = next;
      if (next == null) {
        idle = channel;
        channel = null;
        waitingSince = 0;
      }
      a.leftGate();
    } finally {
      lock.unlock();
    }
    if (idle != null) {
      idle.close();
    }
    if (next != null) {
      Trampoline.run(next::becomeHead);
    }
  }

  /**
   * Read side: {@code a}'s attempt was refused at server time {@code nowMs}. If {@code a} is still
   * the head (a reply of an acquisition that left is stale) and no time is known, the readers
   * queued here wait since then.
   */
  void readRefused(AsyncAcquisition<H> a, long nowMs) {
    lock.lock();
    try {
      if (head != a && !runners.contains(a)) {
        return;
      }
      if (a.readSince == 0) {
        a.readSince = nowMs;
      }
      if (waitingSince == 0) {
        waitingSince = a.readSince;
        for (AsyncAcquisition<H> q : queue) {
          if (q.readSince == 0) {
            q.readSince = waitingSince;
          }
        }
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * Read side: an attempt sent with {@code since} was granted. The first grant made with the
   * gate's time ends it: acquisitions that enqueue from now on start without one.
   */
  void readGranted(long since) {
    if (since == 0) {
      return;
    }
    lock.lock();
    try {
      if (waitingSince == since) {
        waitingSince = 0;
      }
    } finally {
      lock.unlock();
    }
  }

  /** Returns the subscription the heads share, or null. */
  WakeChannel channel() {
    return locked(lock, () -> channel);
  }

  /**
   * The head {@code a} subscribed: heads share {@code c} from now on. If {@code a} is no longer
   * the head (it ended while it subscribed: cancelled, timed out), {@code c} is given back at once
   * instead: installed, it would outlive the gate's last acquisition, or replace the subscription
   * of the head after it, and nobody would close it.
   *
   * @return whether {@code c} was installed ({@code a} is still the head)
   */
  boolean install(AsyncAcquisition<H> a, WakeChannel c) {
    WakeChannel old = null;
    boolean head;
    lock.lock();
    try {
      head = this.head == a;
      if (head) {
        old = channel;
        channel = c;
      }
    } finally {
      lock.unlock();
    }
    if (!head) {
      c.close();
      return false;
    }
    if (old != null && old != c) {
      old.close();
    }
    return true;
  }

  /** {@code c} can no longer be waited on: close it (the head subscribes again). */
  void drop(WakeChannel c) {
    lock.lock();
    try {
      if (channel != c) {
        return;
      }
      channel = null;
    } finally {
      lock.unlock();
    }
    c.close();
  }

  /** Returns the number of acquisitions queued or contending (for tests and the lock's hand-off policy). */
  int size() {
    return locked(lock, () -> queue.size() + runners.size() + (head == null ? 0 : 1));
  }
}
