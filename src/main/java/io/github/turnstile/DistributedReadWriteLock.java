package io.github.turnstile;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A {@link ReadWriteLock} shared by every JVM that names it: many readers across all clients, or
 * one writer. A drop-in for {@link java.util.concurrent.locks.ReentrantReadWriteLock} where a
 * distributed lock can keep its contract. Obtain one with {@link Turnstile#readWriteLock(String)}.
 *
 * <p><b>Ownership and reentrancy.</b> Both locks are owned by threads and are reentrant, with hold
 * counts kept in this JVM: re-entry costs no round trip. Each reading thread has its own lease and
 * fencing token; reentrant read holds of one thread share them. Either side can also be acquired
 * asynchronously ({@link DistributedLock#lockAsync()}): the {@link LockHold} is then its own owner,
 * not reentrant, released from any thread, with its own lease and token.
 *
 * <p><b>Downgrade and upgrade.</b> A thread that holds the write lock may acquire the read lock,
 * then release the write lock (downgrade), as with {@code ReentrantReadWriteLock}; it gets the read
 * lock at once, also while other threads of its JVM wait for the read lock. A thread that
 * holds only the read lock and asks for the write lock gets an {@link IllegalMonitorStateException}
 * at once, instead of the deadlock that {@code ReentrantReadWriteLock} (and Redisson) give it.
 *
 * <p><b>Fairness (phase-fair).</b> Once a writer waits, readers that arrive later queue behind it,
 * so a steady stream of readers cannot starve writers. When a writer releases, every reader that
 * was already waiting is admitted at once, even ahead of other waiting writers, so a stream of
 * writers cannot starve readers either. {@code ReentrantReadWriteLock} in non-fair mode lets
 * readers barge unless a writer heads its queue (writers can be delayed); in fair mode it is
 * strictly FIFO (readers that arrive behind a writer wait for it, as here). The last reader to
 * leave wakes one waiting writer. This policy is for the calls that may wait ({@code lock()},
 * {@code lockInterruptibly()}, {@code tryLock(time, unit)}, {@code tryLock(0, unit)} included).
 * {@code readLock().tryLock()} barges as {@code ReentrantReadWriteLock}'s does, even in fair
 * mode: it takes the read lock if no other thread holds the write lock, whether or not writers or
 * readers wait. {@code writeLock().tryLock()} takes the write lock if nobody holds either lock
 * (and no other thread of this JVM is queued for it, as for {@link DistributedLock#tryLock()}).
 *
 * <p><b>Waking.</b> Waiters never poll. A waiting writer blocks inside Redis (BLPOP on the
 * writers' wake list) while the pool of blocking connections lasts, and waits by pub/sub after
 * that; waiting readers always wait by pub/sub, so a write release wakes all of them with one
 * message, whatever their number. A read release wakes a writer only when it was the last reader.
 * Wake-ups are hints: every one is followed by an attempt that checks the state in Redis, and a
 * lost one costs at most the remaining lease of whatever held the waiter up.
 *
 * <p><b>Leases.</b> The writer and every reading thread hold leases renewed by the client's
 * watchdog (one batched round trip per tick for all of them). A crashed writer or reader is gone
 * within its lease; a dead waiting writer stops holding readers back within one lease. Lease loss
 * is loud, as for {@link DistributedLock}.
 *
 * <p><b>Fencing.</b> Every acquisition, read or write, gets a fencing token from one counter per
 * name, strictly increasing: server time in microseconds, as described at
 * {@link DistributedLock#fencingToken()}, with what a store compares.
 *
 * <p><b>Memory consistency effects.</b> Within one JVM, actions in a thread prior to releasing
 * either lock <i>happen-before</i> actions subsequent to a successful acquisition of either lock by
 * another thread of the same JVM that the release let in, as for
 * {@code ReentrantReadWriteLock}. Across JVMs there is no shared memory: the data the lock guards
 * must live in a store that every party reads and writes.
 *
 * <p><b>Failure model.</b> As for {@link DistributedLock}: both sides' untimed acquisitions wait
 * through Redis outages and throw {@link TurnstileException} (holding nothing) only after
 * {@link TurnstileOptions#outageTolerance()} of continuous unavailability; timed ones return
 * {@code false} at their deadline; unlocks during an outage finish locally and complete later.
 * Interrupts and timeouts while waiting withdraw the waiter, so a writer that gives up stops
 * holding readers back at once. Waiting readers are woken by one pub/sub message per write
 * release, whatever their number.
 */
public interface DistributedReadWriteLock extends ReadWriteLock {

  /**
   * Returns who holds this lock in Redis and how many wait for it, from any client: the writer
   * (identity, thread, fencing token, when it acquired, lease left) or the readers (how many, and
   * the clients of up to {@value Inspection#MAX_LISTED} of them), and the waiting writers and
   * readers. Read-only and bounded as {@link DistributedLock#inspect()}.
   *
   * @return a snapshot of the lock's holders and waiters
   * @throws TurnstileException if Redis cannot be reached, or the Turnstile is closed
   */
  Inspection inspect();

  /** {@return the name this lock was obtained with} */
  String name();

  /** {@return the read lock: shared; its {@code newCondition()} is unsupported} */
  @Override
  DistributedLock readLock();

  /** {@return the write lock: exclusive; its {@code newCondition()} is unsupported} */
  @Override
  DistributedLock writeLock();

  /**
   * Queries the number of threads, in all JVMs, that hold the read lock (one round trip). Unlike
   * {@code ReentrantReadWriteLock}, a thread's reentrant holds count once. The answer may be stale
   * by the time it returns; use it for monitoring.
   *
   * @return the number of reading threads
   * @throws TurnstileException if Redis cannot be reached
   */
  int getReadLockCount();

  /** {@return the current thread's read holds (no round trip)} */
  int getReadHoldCount();

  /**
   * Queries whether any thread in any JVM holds the write lock: locally if a thread of this JVM
   * holds it, else with one round trip.
   *
   * @return whether the write lock is held
   * @throws TurnstileException if Redis cannot be reached
   */
  boolean isWriteLocked();

  /** {@return whether the current thread holds the write lock with a live lease} */
  boolean isWriteLockedByCurrentThread();

  /** {@return the current thread's write holds (no round trip)} */
  int getWriteHoldCount();
}
