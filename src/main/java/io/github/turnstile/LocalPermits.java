package io.github.turnstile;

import java.util.ArrayDeque;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-JVM half of a {@link RedisSemaphore}, with no Redis in it: the FIFO queue of this JVM's
 * threads that wait for permits, and how permits that this client holds reach them. Kept apart
 * from the Redis I/O so that its races can be stress-tested on their own (src/jcstress).
 *
 * <p><b>Waiting.</b> A waiting thread parks in the semaphore superclass's own queue ({@link
 * Tickets}), so that {@code hasQueuedThreads()}, {@code getQueueLength()} and
 * {@code getQueuedThreads()}, which {@code Semaphore} makes final or ties to its queue, count it,
 * and an untimed wait parks untimed. The superclass's permits are <em>tickets</em>, not
 * permits: when permits are assigned to a waiter ({@link #assign}), the waiter is marked granted
 * and one ticket is released. A thread that takes a ticket checks its own mark; a ticket that is
 * not its own (the superclass queue and this queue can order two threads that arrive together
 * differently) is passed on. Every granted (or failed) waiter consumes exactly one ticket before
 * it returns, so the tickets released never exceed the waiters that are owed one, and a passed
 * ticket always reaches its owner.
 *
 * <p><b>Assignment.</b> Permits reach waiters in FIFO order, all of a waiter's permits at once:
 * the head takes what it needs if that many are being assigned, and the rest goes on to the next
 * waiter, or back to the caller (which releases it in Redis). A waiter never holds part of what
 * it asked for, so no client hoards permits while it waits, and two clients cannot deadlock.
 *
 * <p>Every method that reads or changes the queue runs under {@link #lock()}.
 */
final class LocalPermits {
  /** The parking lot: the semaphore superclass's permits, used as tickets. */
  interface Tickets {
    /** Releases one ticket. */
    void release();

    /** Takes one ticket, waiting untimed and interruptibly. */
    void acquire() throws InterruptedException;

    /** Takes one ticket, waiting untimed; an interrupt is re-asserted on return. */
    void acquireUninterruptibly();

    /** Takes one ticket within {@code nanos}, interruptibly. */
    boolean tryAcquire(long nanos) throws InterruptedException;
  }

  /** A waiting acquisition of {@link #permits} by one thread. */
  static final class Waiter {
    static final int WAITING = 0;
    static final int GRANTED = 1;
    static final int FAILED = 2;

    final int permits;
    final Thread thread;
    final Engine.Call call;
    /** Guarded by the lock. */
    int state;
    /** Set with FAILED. */
    RuntimeException failure;

    Waiter(int permits, Thread thread, Engine.Call call) {
      this.permits = permits;
      this.thread = thread;
      this.call = call;
    }

    @Override
    public String toString() {
      return "Waiter{" + thread.getName() + ", " + RedisSemaphore.permits(permits) + ", state " + state + '}';
    }
  }

  private final ReentrantLock lock = new ReentrantLock();
  private final ArrayDeque<Waiter> queue = new ArrayDeque<>();
  private final Tickets tickets;
  /** Told (under the lock) when the head of the queue changed or the queue emptied. */
  private final Runnable headChanged;

  LocalPermits(Tickets tickets, Runnable headChanged) {
    this.tickets = tickets;
    this.headChanged = headChanged;
  }

  ReentrantLock lock() {
    return lock;
  }

  /** Queues a waiter (under the lock). */
  Waiter enqueue(int permits, Engine.Call call) {
    Waiter w = new Waiter(permits, Thread.currentThread(), call);
    boolean first = queue.isEmpty();
    queue.addLast(w);
    if (first) {
      headChanged.run();
    }
    return w;
  }

  boolean isEmpty() {
    return queue.isEmpty();
  }

  /**
   * Returns the head of the queue, or null (under the lock).
   *
   * @return the head of the queue, or null
   */
  Waiter head() {
    return queue.peekFirst();
  }

  /**
   * Returns whether a waiting call has no deadline (under the lock).
   *
   * @return whether a waiting call has no deadline
   */
  boolean anyUntimed() {
    for (Waiter w : queue) {
      if (!w.call.timed) {
        return true;
      }
    }
    return false;
  }

  /**
   * Returns the latest deadline of the waiting calls (under the lock; meaningful when all are timed).
   *
   * @return the latest deadline of the waiting calls
   */
  long latestDeadline() {
    long latest = 0;
    boolean any = false;
    for (Waiter w : queue) {
      if (!any || w.call.deadline - latest > 0) {
        latest = w.call.deadline;
        any = true;
      }
    }
    return latest;
  }

  /**
   * Assigns {@code permits} to the waiters in FIFO order, each taking all it asked for (under the
   * lock): the head first, while what is left covers it.
   *
   * @return what is left, for the caller to keep or release
   */
  int assign(int permits) {
    int left = permits;
    boolean changed = false;
    while (!queue.isEmpty() && queue.peekFirst().permits <= left) {
      Waiter w = queue.pollFirst();
      left -= w.permits;
      w.state = Waiter.GRANTED;
      tickets.release();
      changed = true;
    }
    if (changed) {
      headChanged.run();
    }
    return left;
  }

  /**
   * Returns how many waiters from the head an assignment of {@code permits} would serve (under the lock).
   *
   * @return how many waiters from the head an assignment of {@code permits} would serve
   */
  int wouldServe(int permits) {
    int left = permits;
    int served = 0;
    for (Waiter w : queue) {
      if (w.permits > left) {
        break;
      }
      left -= w.permits;
      served++;
    }
    return served;
  }

  /**
   * Fails the waiting calls that {@code which} selects with {@code failure} (under the lock).
   *
   * @return how many were failed
   */
  int fail(java.util.function.Predicate<Waiter> which, RuntimeException failure) {
    int failed = 0;
    for (java.util.Iterator<Waiter> it = queue.iterator(); it.hasNext();) {
      Waiter w = it.next();
      if (which.test(w)) {
        it.remove();
        w.state = Waiter.FAILED;
        w.failure = failure;
        tickets.release();
        failed++;
      }
    }
    if (failed > 0) {
      headChanged.run();
    }
    return failed;
  }

  /** Withdraws a waiter that gives up (under the lock). */
  private void withdraw(Waiter w) {
    boolean wasHead = queue.peekFirst() == w;
    queue.remove(w);
    if (wasHead) {
      headChanged.run();
    }
  }

  /**
   * Parks the calling thread, which queued {@code w}, until {@code w} is granted or failed, or its
   * call's deadline passes or (if interruptible) the thread is interrupted. One of these happens:
   * it returns true (granted: the permits are the caller's); it returns false (the deadline
   * passed, nothing is held); it throws {@link InterruptedException} (nothing is held: permits
   * granted at the same moment are handed to {@code giveBack}); or it throws the waiter's failure
   * (nothing is held).
   */
  boolean await(Waiter w, java.util.function.IntConsumer giveBack) throws InterruptedException {
    Engine.Call call = w.call;
    while (true) {
      boolean got;
      try {
        if (!call.timed) {
          if (call.interruptible) {
            tickets.acquire();
          } else {
            tickets.acquireUninterruptibly();
          }
          got = true;
        } else {
          long left = call.remaining();
          got = left > 0 && tickets.tryAcquire(left);
        }
      } catch (InterruptedException e) {
        lock.lock();
        try {
          if (w.state == Waiter.WAITING) {
            withdraw(w);
            throw e;
          }
        } finally {
          lock.unlock();
        }
        // decided just now: a ticket is owed to this thread; take it, give back what was granted
        tickets.acquireUninterruptibly();
        Thread.interrupted(); // the interrupt is reported by the exception
        if (w.state == Waiter.GRANTED) {
          giveBack.accept(w.permits);
        }
        throw e;
      }
      lock.lock();
      try {
        if (got) {
          if (w.state != Waiter.WAITING) {
            return outcome(w);
          }
          tickets.release(); // another waiter's ticket: pass it on and queue again
        } else if (w.state == Waiter.WAITING) {
          withdraw(w);
          return false;
        }
      } finally {
        lock.unlock();
      }
      if (!got) {
        tickets.acquireUninterruptibly(); // decided just as the time ran out: the ticket is owed to this thread
        return outcome(w);
      }
      Thread.yield(); // let the ticket's owner, if it is not parked yet, get there
    }
  }

  private static boolean outcome(Waiter w) {
    if (w.state == Waiter.FAILED) {
      throw w.failure;
    }
    return true;
  }
}
