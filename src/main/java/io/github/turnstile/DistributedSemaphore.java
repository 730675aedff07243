package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * A counting {@link Semaphore} shared by every JVM that names it. Obtain one with
 * {@link Turnstile#semaphore(String, int)} (leased permits, the default) or
 * {@link Turnstile#countingSemaphore(String, int)} (the JDK's exact counting semantics); it can be
 * passed wherever a {@code Semaphore} is expected. Every public method of {@code Semaphore} acts on
 * the shared state in Redis, with the JDK's contract unless a method says otherwise.
 *
 * <p><b>Two modes.</b>
 * <ul>
 *   <li><b>Leased</b> ({@link Turnstile#semaphore(String, int)}): a permit is held by a
 *       <em>client</em> (one {@link Turnstile}), not by a thread, and only while the client is
 *       alive. Any thread of the client may release a permit another of its threads acquired, as
 *       with {@code Semaphore}. The client's permits are kept by a lease that its watchdog renews;
 *       when a client dies (or is cut off for longer than its lease), its permits return to the
 *       others within the lease. Unlike {@code Semaphore}, a client cannot release more permits
 *       than it holds: that throws {@link IllegalStateException} and changes nothing, so a crash
 *       can never leak a permit and a buggy caller can never create one. Use this mode to bound
 *       concurrency (N calls to a partner API at a time).</li>
 *   <li><b>Counting</b> ({@link Turnstile#countingSemaphore(String, int)}): exactly
 *       {@code Semaphore}: {@link #release()} adds a permit whether or not the caller acquired one,
 *       nothing is leased and nothing is ever reclaimed, so a permit taken by a client that then
 *       crashes is gone for good. Use this mode to signal between JVMs ({@code new Semaphore(0)}:
 *       one JVM releases, another acquires).</li>
 * </ul>
 *
 * <p><b>Waiting.</b> Within one JVM, waiting threads queue in FIFO order in this semaphore's own
 * queue ({@link #hasQueuedThreads()}, {@link #getQueueLength()} and {@code getQueuedThreads()}
 * count every one of them, and an untimed wait parks untimed), and one thread per semaphore and JVM
 * waits in Redis on their behalf: blocked on a wake list while a pooled blocking connection is
 * free, by pub/sub otherwise. Redis decides every acquisition: wake-ups are only hints. A waiter's
 * permits are taken all at once, never a few at a time, so waiters cannot deadlock one another by
 * each holding part of what they need. When a thread releases permits while another thread of
 * the same JVM waits for that many, they pass to it without a round trip (a local hand-off), at
 * most {@link TurnstileOptions#localHandoffLimit()} times in a row while other clients wait.
 *
 * <p><b>Fairness.</b> Non-fair, like {@code new Semaphore(n)}: {@link #tryAcquire()} takes a free
 * permit whether or not others wait, an acquirer that finds no local queue tries at once, and
 * across JVMs the waiter that is woken first (blocked longest) tries first, but a waiter that
 * needs many permits can be overtaken by waiters that need fewer, as with {@code Semaphore}.
 * {@link #isFair()} is false.
 *
 * <p><b>Capacity.</b> A leased semaphore stores its capacity (the permits it was created with,
 * changed by {@link #addPermits(int)} and {@link #reducePermits(int)}):
 * {@link Turnstile#semaphore(String, int)} with a different number fails with an error naming both.
 * A counting semaphore stores only its free permits; the number it is obtained with is used only
 * when it does not exist yet. Any {@code int} is fine, negative ones included: the work of every
 * call in Redis is bounded, whatever its arguments.
 *
 * <p><b>Asynchronous acquisition.</b> {@link #acquireAsync(int)} and
 * {@link #tryAcquireAsync(int, long, TimeUnit)} acquire without blocking a thread and complete a
 * future with a {@link PermitHold}: the permits, taken together, released together by the hold
 * from any thread.
 *
 * <p><b>Memory consistency effects.</b> Within one JVM, actions in a thread prior to calling a
 * release method such as {@code release()} happen-before actions following a successful acquire
 * method such as {@code acquire()} in another thread, as for {@code Semaphore}. Across JVMs the
 * data the permits guard must live in a shared store.
 *
 * <p><b>Failure model.</b> Waiting survives Redis faults: the untimed acquires keep waiting
 * through a restart, a failover, a pause or dropped connections, and throw
 * {@link TurnstileException} (holding no new permit) only after
 * {@link TurnstileOptions#outageTolerance()} of continuous unavailability; the timed ones return
 * {@code false} when their time runs out. A release while Redis is unreachable, or that Redis
 * does not answer within 250 ms, finishes locally and completes in Redis as soon as it answers;
 * what that answer reports can then no longer be thrown: a lost lease goes to the listeners, and
 * a counting semaphore's overflow (the {@link Error} of {@link #release()}) is logged, with
 * nothing changed. The immediate {@link #tryAcquire()}, the
 * queries and {@link #drainPermits()} throw {@link TurnstileException} while Redis cannot be
 * reached. In leased mode, if this client's lease is lost while it holds permits (a long pause, a
 * network cut), the permits go back to the others: the listeners are told, and releasing them
 * throws {@link LockLostException}.
 */
public abstract class DistributedSemaphore extends Semaphore {
  private static final long serialVersionUID = 1L;

  /*
   * The superclass's own state is a fair semaphore of tickets that the waiting threads of this
   * JVM park on (see Waits.park with tickets): so the final methods hasQueuedThreads() and getQueueLength(),
   * and getQueuedThreads(), which Semaphore does not let subclasses change, count every waiting
   * thread. Every other public method is overridden to act on Redis.
   */
  DistributedSemaphore() {
    super(0, true);
  }

  /**
   * Returns who holds this semaphore's permits in Redis and how many wait, from any client: the
   * clients holding permits (identity, permits, since when, lease left; at most
   * {@value Inspection#MAX_LISTED} of them, those whose leases run out first), the free permits and
   * the waiters Redis counts. A counting semaphore's permits belong to nobody: its holders are
   * empty. Read-only and bounded as {@link DistributedLock#inspect()}.
   *
   * @return a snapshot of the semaphore's holders and waiters
   * @throws TurnstileException if Redis cannot be reached, or the Turnstile is closed
   */
  public abstract Inspection inspect();

  /**
   * {@return the superclass's queue as the tickets that waiting threads park on
   * ({@link Waits.Tickets})}
   */
  final Waits.Tickets tickets() {
    return new Waits.Tickets() {
      @Override
      public void release() {
        DistributedSemaphore.super.release();
      }

      @Override
      public void acquire() throws InterruptedException {
        DistributedSemaphore.super.acquire();
      }

      @Override
      public void acquireUninterruptibly() {
        DistributedSemaphore.super.acquireUninterruptibly();
      }

      @Override
      public boolean tryAcquire(long nanos) throws InterruptedException {
        return DistributedSemaphore.super.tryAcquire(1, nanos, TimeUnit.NANOSECONDS);
      }
    };
  }

  /**
   * Acquires {@code permits} permits asynchronously, waiting without limit: returns at once a
   * future that completes with a {@link PermitHold} of all of them once they are acquired,
   * together. No thread waits meanwhile: a pending acquisition costs memory, not a thread.
   *
   * <p>The permits count among this client's ({@link #heldPermits()}) while the hold holds them,
   * and are released together by the hold, from any thread; release them through the hold, not
   * through {@link #release(int)}. They are taken all at once or not at all: this JVM's async
   * acquisitions of this semaphore are served in FIFO order, and each tries for all its permits at
   * every wake-up. {@code permits} == 0 completes at once with an empty hold.
   *
   * <p>One of these happens to the future: it completes with the hold; Redis stays unreachable for
   * longer than {@link TurnstileOptions#outageTolerance()} without a break, or answers with an
   * error that is not an outage, and it completes exceptionally with {@link TurnstileException}
   * (nothing is held); or the caller cancels it (or completes it otherwise), and the acquisition is
   * withdrawn: permits a grant in flight took are given back as soon as its reply arrives, which
   * wakes the next waiter as any release does.
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
   * held; by then the acquisition is no longer ahead of this JVM's next one. The time is
   * measured with {@link System#nanoTime()} and covers the wait behind this JVM's other async
   * acquisitions and the wait in Redis together; a time of zero or less makes
   * one attempt unless another async acquisition of this JVM is ahead of it.
   *
   * @param permits the number of permits to acquire
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return a future of the hold, completed as above
   * @throws IllegalArgumentException if {@code permits} is negative
   */
  public abstract CompletableFuture<PermitHold> tryAcquireAsync(int permits, long timeout, TimeUnit unit);

  /** {@return the name this semaphore was obtained with} */
  public abstract String name();

  /**
   * Returns whether permits are leased (held by a live client, reclaimed after its crash) rather
   * than counted as {@code Semaphore} counts them.
   *
   * @return true for {@link Turnstile#semaphore(String, int)}, false for
   *     {@link Turnstile#countingSemaphore(String, int)}
   */
  public abstract boolean isLeased();

  /**
   * Acquires a permit, waiting until one is available or the thread is interrupted.
   *
   * <p>One of these happens: a permit is acquired; the thread is interrupted (before or while
   * waiting, promptly even while this JVM waits in Redis) and {@link InterruptedException} is
   * thrown with no permit taken; or Redis stays unreachable for longer than the outage tolerance
   * and {@link TurnstileException} is thrown with no permit taken (shorter outages are waited
   * through).
   *
   * @throws InterruptedException if the current thread is interrupted
   */
  @Override
  public abstract void acquire() throws InterruptedException;

  /**
   * Acquires {@code permits} permits, all at once, waiting until that many are available or the
   * thread is interrupted; as {@link #acquire()} otherwise. More permits than the capacity are
   * waited for until permits are added. {@code acquire(0)} returns at once unless the free
   * permits are negative (after {@link #reducePermits(int)}), as with {@code Semaphore}.
   *
   * @param permits the number of permits to acquire
   * @throws InterruptedException if the current thread is interrupted
   * @throws IllegalArgumentException if permits is negative
   */
  @Override
  public abstract void acquire(int permits) throws InterruptedException;

  /**
   * Acquires a permit, waiting until one is available. One of two things happens: a permit is
   * acquired, or Redis stays unreachable for longer than the outage tolerance and
   * {@link TurnstileException} is thrown with no permit taken (shorter outages are waited
   * through). An interrupt does not stop the wait; the interrupt status is set on return.
   */
  @Override
  public abstract void acquireUninterruptibly();

  /**
   * Acquires {@code permits} permits, all at once, waiting until that many are available; as
   * {@link #acquireUninterruptibly()} otherwise.
   *
   * @param permits the number of permits to acquire
   * @throws IllegalArgumentException if permits is negative
   */
  @Override
  public abstract void acquireUninterruptibly(int permits);

  /**
   * Acquires a permit if one is free at the time of the call, whether or not other threads wait
   * (one round trip). One of these happens: it returns true (acquired), false (none free, never an
   * exception for lack of permits), or it throws {@link TurnstileException} if Redis cannot be
   * reached (a deviation: a local {@code Semaphore} cannot fail that way).
   *
   * @return {@code true} if a permit was acquired
   */
  @Override
  public abstract boolean tryAcquire();

  /**
   * Acquires {@code permits} permits if that many are free at the time of the call (all or none);
   * as {@link #tryAcquire()} otherwise. More than the capacity is never free: false.
   *
   * @param permits the number of permits to acquire
   * @return {@code true} if they were acquired
   * @throws IllegalArgumentException if permits is negative
   */
  @Override
  public abstract boolean tryAcquire(int permits);

  /**
   * Acquires a permit if one becomes available within the waiting time. One of these happens: it
   * is acquired ({@code true}); the time elapses ({@code false}, nothing held); the thread is
   * interrupted ({@link InterruptedException}, promptly, nothing held). An outage does not end the
   * wait early: if Redis is unreachable when the time runs out, {@code false} is returned. The time
   * covers the local and the remote wait together. Until Redis has answered one attempt of the
   * call, the reply is awaited for at least 250 ms after the attempt was sent, so that a zero or
   * short timeout still takes a free permit from a Redis that answers slowly (as
   * {@link DistributedLock#tryLock(long, TimeUnit)}).
   *
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return {@code true} if a permit was acquired, {@code false} if the time elapsed
   * @throws InterruptedException if the current thread is interrupted
   */
  @Override
  public abstract boolean tryAcquire(long timeout, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires {@code permits} permits, all at once, if that many become available within the
   * waiting time; as {@link #tryAcquire(long, TimeUnit)} otherwise.
   *
   * @param permits the number of permits to acquire
   * @param timeout the maximum time to wait
   * @param unit the unit of {@code timeout}
   * @return {@code true} if the permits were acquired, {@code false} if the time elapsed
   * @throws InterruptedException if the current thread is interrupted
   * @throws IllegalArgumentException if permits is negative
   */
  @Override
  public abstract boolean tryAcquire(int permits, long timeout, TimeUnit unit) throws InterruptedException;

  /**
   * Releases a permit: to a thread of this JVM that waits for one, or in Redis, where it wakes the
   * next waiter. Leased: the permit must be one this client holds.
   *
   * @throws IllegalStateException (leased) if this client holds no permit: nothing changes (a
   *     deviation from {@code Semaphore}, which would create one; use a counting semaphore for that)
   * @throws LockLostException (leased) if this client's permits were reclaimed after its lease was
   *     lost: the permit is counted as released
   * @throws Error (counting) if the free permits would exceed {@link Integer#MAX_VALUE}, as
   *     {@code Semaphore} throws
   */
  @Override
  public abstract void release();

  /**
   * Releases {@code permits} permits, as {@link #release()} does.
   *
   * @param permits the number of permits to release
   * @throws IllegalArgumentException if permits is negative
   * @throws IllegalStateException (leased) if this client holds fewer permits: nothing changes
   * @throws LockLostException (leased) if some of them were reclaimed after this client's lease was
   *     lost: they are counted as released, and the others are released
   */
  @Override
  public abstract void release(int permits);

  /**
   * Returns the permits free right now across all clients (one round trip); negative after
   * {@link #reducePermits(int)} took more than were free. Leased: permits of clients whose lease
   * ran out count as free.
   *
   * @return the permits free right now
   */
  @Override
  public abstract int availablePermits();

  /**
   * Acquires and returns all permits that are free right now, or, if the free permits are
   * negative, sets them to zero and returns the negative number, as {@code Semaphore} does (a
   * leased semaphore's capacity then grows by it). Leased: the acquired permits are this client's.
   *
   * @return the number of permits acquired, or, if negative, the number released
   */
  @Override
  public abstract int drainPermits();

  /**
   * Shrinks the free permits by {@code reduction}, which may take them below zero (acquisitions
   * then wait until releases pay the debt), as {@code Semaphore} does. A leased semaphore's
   * capacity shrinks by as much.
   *
   * @param reduction the number of permits to remove
   * @throws IllegalArgumentException if reduction is negative
   * @throws Error if the free permits would go below {@link Integer#MIN_VALUE}, as {@code Semaphore} throws
   */
  @Override
  public abstract void reducePermits(int reduction);

  /**
   * Adds {@code permits} free permits: a leased semaphore's capacity grows by as much; a counting
   * semaphore's free permits grow as by {@link #release(int)}. Wakes waiters that can use them.
   *
   * @param permits the number of permits to add
   * @throws IllegalArgumentException if permits is negative, or the capacity or the free permits
   *     would exceed {@link Integer#MAX_VALUE} (nothing changes)
   */
  public abstract void addPermits(int permits);

  /**
   * {@return the number of permits this client holds, by this client's books (no round trip):
   * leased, the permits its threads and holds acquired and did not release, and that are not lost;
   * counting, always 0 (permits are not owned)}
   */
  public abstract int heldPermits();

  /** {@return false: see the class documentation on fairness} */
  @Override
  public abstract boolean isFair();

  /**
   * {@return the number of threads of this JVM waiting to acquire (as {@link #getQueueLength()})}
   */
  public abstract int waitingThreads();

  /**
   * Registers a listener told when this client's lease on the semaphore is lost while it holds
   * permits (leased mode).
   *
   * @param listener the listener
   */
  public abstract void addLeaseLossListener(LeaseLossListener listener);

  /**
   * Returns a string naming this semaphore, its mode, the permits this client holds (leased) and
   * the threads of this JVM waiting, without a round trip. Unlike {@code Semaphore}'s, it does not
   * show the free permits ({@code "Permits = n"}): that would need Redis (see
   * {@link #availablePermits()}).
   *
   * @return a string identifying this semaphore and its local state
   */
  @Override
  public abstract String toString();
}
