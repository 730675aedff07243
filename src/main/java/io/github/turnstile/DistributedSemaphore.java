package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * A counting {@link Semaphore} shared by every JVM that names it: at most {@code permits} permits
 * are held at any time, across all clients. Obtain one with
 * {@link Turnstile#semaphore(String, int)}; it can be passed wherever a {@code Semaphore} is
 * expected. Every public method of {@code Semaphore} is overridden to act on the shared state in
 * Redis; none falls through to the local superclass.
 *
 * <p><b>Permits and ownership.</b> A permit is held by a <em>client</em> (one
 * {@link Turnstile}), not by a thread: any thread of the client may release
 * a permit another of its threads acquired, as with {@code Semaphore}. Unlike {@code Semaphore},
 * a client cannot release more permits than it holds: that throws {@link IllegalStateException}
 * and changes nothing (as Hazelcast's session-aware semaphore does), so a buggy caller can never
 * inflate the number of permits. Permits may be added and removed explicitly with
 * {@link #addPermits(int)} and {@link #reducePermits(int)}.
 *
 * <p><b>Asynchronous acquisition.</b> {@link #acquireAsync(int)} and
 * {@link #tryAcquireAsync(int, long, TimeUnit)} acquire without blocking a thread and complete a
 * future with a {@link PermitHold}: the permits, taken together, released together by the hold
 * from any thread. They count among the client's permits, with the same liveness lease.
 *
 * <p><b>Capacity.</b> The capacity is stored in Redis by the first client that uses the name.
 * {@link Turnstile#semaphore(String, int)} with a different number fails with an error naming
 * both numbers; {@code addPermits}/{@code reducePermits} change the stored capacity.
 *
 * <p><b>Capacity and cost.</b> Any {@code int} number of permits is fine: the work of every call
 * in Redis is bounded, whatever its arguments (free and held permits are counters, plus a short
 * list of hand-off tokens), so a huge capacity or {@code addPermits(Integer.MAX_VALUE)} cannot
 * stall the shared Redis.
 *
 * <p><b>Waiting.</b> A waiter blocks inside Redis with {@code BLMOVE} from a hand-off list into its
 * client's inflight list, so taking a permit and recording who holds it is one atomic step, and
 * Redis serves blocked waiters in FIFO order. A release puts the permit on the hand-off list,
 * which hands it to the longest-waiting client inside Redis, in the same step. Waiters beyond the
 * client's blocking connections wait by pub/sub instead. Within one JVM, threads queue locally in
 * FIFO order and only one per semaphore waits in Redis. Multi-permit acquisitions cannot deadlock
 * one another: a waiter that must collect permits one by one first takes a per-semaphore mutex,
 * so at most one client ever holds part of what it needs, and it returns partial permits on
 * timeout or interrupt.
 *
 * <p><b>Queue queries.</b> {@code Semaphore} makes {@link #hasQueuedThreads()},
 * {@link #getQueueLength()} and {@code getQueuedThreads()} final, so they cannot act on Redis.
 * Here they report the threads of this JVM queued behind the one thread that waits in Redis on
 * this JVM's behalf (no round trip). {@link #waitingThreads()} counts that thread too.
 *
 * <p><b>Fairness.</b> Non-fair, like {@code new Semaphore(n)}: waiters are served in FIFO order,
 * but an arriving acquirer takes a free permit without queueing, and a multi-permit acquirer
 * that cannot be satisfied at once waits behind the collecting one. {@link #isFair()} is false.
 *
 * <p><b>Leases.</b> While a client holds or waits for permits, a liveness key of the client is
 * renewed by its watchdog (batched with every other lease of the client). When a client dies, its
 * liveness key expires, and the next operation of any other client on the semaphore returns the
 * dead client's permits to the free ones, within lease + 1 s; no background process is needed.
 * If this client's liveness is lost while it holds permits (a long pause, a network cut), its
 * permits are given to others; its listeners are told, and releasing those permits throws
 * {@link LockLostException}.
 *
 * <p><b>Memory consistency effects.</b> Within one JVM, actions in a thread prior to releasing
 * permits happen-before actions following a successful acquire in another thread of the same JVM
 * that obtained a released permit, as for {@code Semaphore}. Across JVMs the data the permits
 * guard must live in a shared store.
 *
 * <p><b>Failure model.</b> Waiting survives Redis faults: the untimed acquires keep waiting
 * through a restart, a failover, a pause or dropped connections, and throw
 * {@link TurnstileException} (holding no new permit) only after
 * {@link TurnstileOptions#outageTolerance()} of continuous unavailability; the timed ones return
 * {@code false} when their time runs out. A {@link #release()} while Redis is unreachable
 * finishes locally at once and gives the permits back in Redis as soon as it answers (or the
 * client's liveness lease runs out and other clients reclaim them). The immediate
 * {@link #tryAcquire()} and the queries throw {@link TurnstileException} while Redis cannot be
 * reached.
 */
public abstract class DistributedSemaphore extends Semaphore {
  private static final long serialVersionUID = 1L;

  /*
   * The superclass's own state is used for one thing only: it is a fair binary semaphore that
   * queues this JVM's waiters (the "gate"); its holder is the one thread that waits in Redis. So
   * the final methods hasQueuedThreads(), getQueueLength() and getQueuedThreads(), which
   * Semaphore does not let subclasses override, truthfully report the threads of this JVM queued
   * behind that thread. Every other public method is overridden to act on Redis.
   */
  DistributedSemaphore() {
    super(1, true);
  }

  /** Enters the local gate if free now. */
  final boolean gateTryEnter() {
    return super.tryAcquire();
  }

  /** Enters the local gate within the time, interruptibly or not (interrupt re-asserted). */
  final boolean gateEnter(long timeoutNanos, boolean interruptible) throws InterruptedException {
    return Waits.timed(n -> super.tryAcquire(n, TimeUnit.NANOSECONDS), timeoutNanos, interruptible);
  }

  /** Leaves the local gate. */
  final void gateExit() {
    super.release();
  }

  /**
   * Acquires {@code permits} permits asynchronously, waiting without limit: returns at once a
   * future that completes with a {@link PermitHold} of all of them once they are acquired,
   * together. No thread waits meanwhile: a pending acquisition costs memory, not a thread.
   *
   * <p>The permits count among this client's ({@link #heldPermits()}) while the hold holds them,
   * and are released together by the hold, from any thread; release them through the hold, not
   * through {@link #release(int)}. They are taken all at once or not at all: this JVM's async
   * acquisitions of this semaphore are served in FIFO order, and a multi-permit acquisition tries
   * for all its permits at every wake-up, so single-permit acquirers of other clients may keep
   * it waiting while permits trickle back (the blocking {@link #acquire(int)} collects them one by
   * one instead, under a per-semaphore mutex). {@code permits} == 0 completes at once with an
   * empty hold.
   *
   * <p>One of these happens to the future: it completes with the hold; {@code permits} exceeds
   * the capacity, and it completes exceptionally with {@link IllegalArgumentException}; Redis
   * stays unreachable for longer than {@link TurnstileOptions#outageTolerance()} without a break,
   * or answers with an error that is not an outage, and it completes exceptionally with
   * {@link TurnstileException} (nothing is held); or the caller cancels it (or completes it
   * otherwise), and the acquisition is withdrawn: permits a grant in flight took are given back
   * as soon as its reply arrives, which wakes the next waiter as any release does.
   *
   * @param permits the number of permits to acquire
   * @return a future of the hold, completed as above
   * @throws IllegalArgumentException if {@code permits} is negative
   */
  public abstract CompletableFuture<PermitHold> acquireAsync(int permits);

  /**
   * Acquires {@code permits} permits asynchronously if they become free within the given waiting
   * time: as {@link #acquireAsync(int)}, except that when the time runs out first the future
   * completes exceptionally with {@link java.util.concurrent.TimeoutException} and no permit is
   * held. The time is measured with {@link System#nanoTime()} and covers the wait behind this
   * JVM's other async acquisitions and the wait in Redis together; a time of zero or less makes
   * one attempt unless another async acquisition of this JVM is ahead of it.
   *
   * @param permits the number of permits to acquire
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return a future of the hold, completed as above
   * @throws IllegalArgumentException if {@code permits} is negative
   */
  public abstract CompletableFuture<PermitHold> tryAcquireAsync(int permits, long timeout, TimeUnit unit);

  /**
   * Returns the name this semaphore was obtained with.
   *
   * @return the name this semaphore was obtained with
   */
  public abstract String name();

  /**
   * Acquires a permit, waiting until one is available or the thread is interrupted.
   *
   * <p>One of these happens: a permit is acquired; the thread is interrupted (before or while
   * waiting, promptly even while blocked in Redis) and {@link InterruptedException} is thrown with
   * no permit taken; or Redis stays unreachable for longer than the outage tolerance and
   * {@link TurnstileException} is thrown (shorter outages are waited through).
   *
   * @throws InterruptedException if the current thread is interrupted
   */
  @Override
  public abstract void acquire() throws InterruptedException;

  /**
   * Acquires {@code permits} permits, waiting until all are available or the thread is interrupted.
   * On interrupt, permits already collected are returned.
   *
   * @param permits how many; at most the capacity
   * @throws InterruptedException if the current thread is interrupted
   * @throws IllegalArgumentException if permits is negative or exceeds the capacity
   */
  @Override
  public abstract void acquire(int permits) throws InterruptedException;

  /**
   * Acquires a permit, waiting until one is available. One of two things happens: a permit is
   * acquired, or Redis stays unreachable for longer than the outage tolerance and
   * {@link TurnstileException} is thrown with no permit taken (shorter outages are waited
   * through). Interrupts do not stop the wait; the interrupt status is set on return if one arrived.
   */
  @Override
  public abstract void acquireUninterruptibly();

  /**
   * Acquires {@code permits} permits, waiting until all are available; not interruptible.
   *
   * @param permits how many; at most the capacity
   * @throws IllegalArgumentException if permits is negative or exceeds the capacity
   */
  @Override
  public abstract void acquireUninterruptibly(int permits);

  /**
   * Acquires a permit only if one is free at the time of the call (one round trip), or returns
   * false at once; false without a round trip if another thread of this JVM is already waiting.
   *
   * @return {@code true} if a permit was acquired
   * @throws TurnstileException if Redis cannot be reached
   */
  @Override
  public abstract boolean tryAcquire();

  /**
   * Acquires {@code permits} permits only if all are free at the time of the call (all or none).
   *
   * @param permits how many
   * @return {@code true} if they were acquired
   * @throws IllegalArgumentException if permits is negative or exceeds the capacity
   * @throws TurnstileException if Redis cannot be reached
   */
  @Override
  public abstract boolean tryAcquire(int permits);

  /**
   * Acquires a permit if one becomes available within the waiting time. One of these happens: it
   * is acquired ({@code true}); the time elapses ({@code false}); the thread is interrupted
   * ({@link InterruptedException}, promptly even while blocked in Redis, with no permit taken).
   * An outage does not end the wait early: if Redis is unreachable when the time runs out,
   * {@code false} is returned. The time covers the local and the remote wait together, and the
   * method returns within a few tens of milliseconds after it.
   *
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return {@code true} if a permit was acquired, {@code false} if the time elapsed
   * @throws InterruptedException if the current thread is interrupted
   */
  @Override
  public abstract boolean tryAcquire(long timeout, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires {@code permits} permits if all become available within the waiting time. One of
   * these happens: all are acquired ({@code true}); the time elapses ({@code false}); the thread
   * is interrupted ({@link InterruptedException}). An outage does not end the wait early. When
   * not all were acquired, permits collected along the way are returned.
   *
   * @param permits how many; at most the capacity
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return {@code true} if the permits were acquired, {@code false} if the time elapsed
   * @throws InterruptedException if the current thread is interrupted
   * @throws IllegalArgumentException if permits is negative or exceeds the capacity
   */
  @Override
  public abstract boolean tryAcquire(int permits, long timeout, TimeUnit unit) throws InterruptedException;

  /**
   * Returns a permit that this client holds, handing it to the longest-waiting client if any.
   *
   * @throws IllegalStateException if this client holds no permit (a deviation from
   *     {@code Semaphore}, which would create one)
   * @throws LockLostException if this client's permits were reclaimed after its lease was lost
   */
  @Override
  public abstract void release();

  /**
   * Returns {@code permits} permits that this client holds.
   *
   * @throws IllegalArgumentException if permits is negative
   * @throws IllegalStateException if this client holds fewer permits (nothing is released)
   * @throws LockLostException if this client's permits were reclaimed after its lease was lost
   */
  @Override
  public abstract void release(int permits);

  /**
   * Returns the permits free right now across all clients (one round trip; may be negative after reducePermits).
   *
   * @return the permits free right now across all clients (one round trip; may be negative after reducePermits)
   */
  @Override
  public abstract int availablePermits();

  /**
   * Acquires all permits that are free right now, for this client.
   *
   * @return how many were acquired (never negative: a debt left by {@link #reducePermits(int)}
   *     stays until releases pay it off, a documented deviation)
   */
  @Override
  public abstract int drainPermits();

  /**
   * Shrinks the capacity by {@code reduction}: free permits are removed at once, and permits held
   * now are removed when they are released.
   *
   * @param reduction how many permits to remove
   * @throws IllegalArgumentException if reduction is negative or exceeds the capacity (nothing changes)
   */
  @Override
  public abstract void reducePermits(int reduction);

  /**
   * Grows the capacity by {@code permits} (first paying off any debt left by reducePermits).
   *
   * @param permits how many permits to add
   * @throws IllegalArgumentException if permits is negative, or the capacity would exceed
   *     {@code Integer.MAX_VALUE} (nothing changes)
   */
  public abstract void addPermits(int permits);

  /**
   * Returns the number of permits this client holds (no round trip).
   *
   * @return the number of permits this client holds (no round trip)
   */
  public abstract int heldPermits();

  /**
   * Returns false: see the class documentation on fairness.
   *
   * @return false: see the class documentation on fairness
   */
  @Override
  public abstract boolean isFair();

  /**
   * Returns the number of threads of this JVM inside an acquire call, queued or waiting in Redis.
   *
   * @return the number of threads of this JVM inside an acquire call, queued or waiting in Redis
   */
  public abstract int waitingThreads();

  /**
   * Registers a listener told when this client's lease on the semaphore is lost while it holds
   * permits.
   *
   * @param listener the listener
   */
  public abstract void addLeaseLossListener(LeaseLossListener listener);

  @Override
  public abstract String toString();
}
