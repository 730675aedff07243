package io.github.turnstile;

import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The asynchronous acquisitions of one primitive (one lock, one side of a read/write lock, one
 * semaphore) in this JVM: the async counterpart of the local gate. They queue in FIFO order and
 * only the head contends in Redis, so a release wakes one async acquisition per JVM and primitive,
 * not all of them (100 pending acquisitions of one name cost one attempt per release, not 100).
 * When the head ends (granted, cancelled, timed out, failed), the next one becomes head at once.
 *
 * <p>The gate also keeps the subscription to the primitive's channel while it has acquisitions,
 * so that consecutive heads share it instead of unsubscribing and subscribing again; the last
 * acquisition to leave closes it. Only the head uses it.
 *
 * <p>Blocking threads queue at the primitive's own gate; a primitive may thus have one blocking
 * and one asynchronous waiter in Redis per JVM, and Redis decides between them.
 */
final class AsyncGate<H extends Hold> {
  private final AsyncAcquisition.Env env;
  private final AsyncAcquisition.Side<H> side;
  private final ReentrantLock lock = new ReentrantLock();
  /**
   * FIFO behind the head; a set with insertion order so that one that ends early (cancelled, timed
   * out) leaves in constant time: with many pending on one name, a deque's remove made a mass
   * cancellation quadratic. Guarded by lock.
   */
  private final LinkedHashSet<AsyncAcquisition<H>> queue = new LinkedHashSet<>();
  private AsyncAcquisition<H> head; // guarded by lock
  private AsyncAcquisition.Channel channel; // guarded by lock
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

  AsyncGate(AsyncAcquisition.Env env, AsyncAcquisition.Side<H> side) {
    this.env = env;
    this.side = side;
  }

  /**
   * Returns the Redis operations of this gate's acquisitions.
   *
   * @return the Redis operations of this gate's acquisitions
   */
  AsyncAcquisition.Side<H> side() {
    return side;
  }

  /**
   * Describes this gate when it has a head, queued acquisitions or a subscription; null when it
   * has none of them (for diagnostics in tests).
   *
   * @return the description, or null
   */
  String describe() {
    lock.lock();
    try {
      if (head == null && queue.isEmpty() && channel == null) {
        return null;
      }
      return "head=" + (head == null ? "none" : head.describe())
          + " queued=" + queue.size() + " channel=" + (channel == null ? "none" : "held");
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns whether this gate's head waits on nothing (see {@link AsyncAcquisition#stranded}).
   *
   * @return whether this gate's head waits on nothing
   */
  boolean stranded() {
    AsyncAcquisition<H> h;
    lock.lock();
    try {
      h = head;
    } finally {
      lock.unlock();
    }
    return h != null && h.stranded();
  }

  /** Starts an acquisition of {@code permits} for {@code call}. */
  CompletableFuture<H> acquire(Engine.Call call, int permits) {
    return new AsyncAcquisition<>(env, side, this, permits, call).start();
  }

  /**
   * Queues {@code a}.
   *
   * @return true if it is the head now (it starts at once)
   */
  boolean enter(AsyncAcquisition<H> a) {
    lock.lock();
    try {
      a.readSince = waitingSince;
      if (head == null) {
        head = a;
        return true;
      }
      queue.add(a);
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
    AsyncAcquisition.Channel idle = null;
    lock.lock();
    try {
      if (head != a) {
        queue.remove(a);
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
      if (head != a) {
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

  /**
   * Returns the subscription the heads share, or null.
   *
   * @return the subscription the heads share, or null
   */
  AsyncAcquisition.Channel channel() {
    lock.lock();
    try {
      return channel;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The head {@code a} subscribed: heads share {@code c} from now on. If {@code a} is no longer
   * the head (it ended while it subscribed: cancelled, timed out), {@code c} is given back at once
   * instead: installed, it would outlive the gate's last acquisition, or replace the subscription
   * of the head after it, and nobody would close it.
   *
   * @return whether {@code c} was installed ({@code a} is still the head)
   */
  boolean install(AsyncAcquisition<H> a, AsyncAcquisition.Channel c) {
    AsyncAcquisition.Channel old = null;
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
  void drop(AsyncAcquisition.Channel c) {
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

  /**
   * Returns the number of acquisitions queued or contending (for tests and the lock's hand-off policy).
   *
   * @return the number of acquisitions queued or contending
   */
  int size() {
    lock.lock();
    try {
      return queue.size() + (head == null ? 0 : 1);
    } finally {
      lock.unlock();
    }
  }
}
