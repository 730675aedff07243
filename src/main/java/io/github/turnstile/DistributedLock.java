package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A reentrant mutual-exclusion {@link Lock} shared by every JVM that names it, with the contract
 * of {@link java.util.concurrent.locks.ReentrantLock} wherever a distributed lock can keep it.
 * Obtain one with {@link Turnstile#lock(String)}.
 *
 * <p><b>Ownership and reentrancy.</b> A lock is owned by a thread, as a {@code ReentrantLock} is:
 * the thread that last acquired it and has not yet released it. A thread that owns the lock may
 * acquire it again; each acquisition increments a hold count kept in this JVM, costs no Redis round
 * trip, and must be matched by one {@link #unlock()}. Only the owning thread may unlock; any other
 * thread gets an {@link IllegalMonitorStateException}. Code that hops threads (reactive pipelines,
 * {@code CompletableFuture} stages) uses {@link #lockAsync()} instead, whose hold any thread may
 * release. Virtual threads are threads like any other: waiting parks them, and no
 * Turnstile code holds a monitor, so a waiting virtual thread does not pin its carrier.
 *
 * <p><b>Leases and the watchdog.</b> In Redis the lock is a key with an expiry (the lease, 30 s by
 * default, measured by the Redis server's clock). While a thread holds it, the client's watchdog
 * renews the lease, in one batched round trip per tick for all leases the client holds. If the
 * holder's process dies, its lease runs out and the lock is free again within the lease.
 *
 * <p><b>Lease loss is loud.</b> If the lease ends while the thread still holds the lock locally
 * (renewals could not reach Redis before it expired, or the key was deleted or taken over), then
 * {@link #isHeldByCurrentThread()} returns {@code false}, {@link #getHoldCount()} returns 0,
 * every remaining {@link #unlock()} throws {@link LockLostException}, a reentrant acquire throws
 * {@link LockLostException}, and each {@link LeaseLossListener} is called once.
 *
 * <p><b>Fencing.</b> Every acquisition by a new owner gets a {@linkplain #fencingToken() fencing
 * token} larger than any token handed out before for the same name. Pass it with every write to a
 * downstream store and have the store refuse a token lower than the highest it has seen: a holder
 * that lost its lease without noticing (a long GC pause, say) is then refused instead of
 * overwriting a newer holder's work.
 *
 * <p><b>Fairness.</b> Waiting threads do not poll. Inside one JVM they queue in FIFO order and only
 * the head waits in Redis; across JVMs the heads wait in Redis in FIFO order, woken one at a time
 * by a token that the releasing client pushes. Like a non-fair {@code ReentrantLock}, a thread
 * that arrives just as the lock is released may take it before a woken waiter does; the woken
 * waiter then waits again.
 *
 * <p><b>Memory consistency effects.</b> Within one JVM, actions in a thread prior to releasing the
 * lock <i>happen-before</i> actions subsequent to a successful acquisition by another thread of
 * the same JVM, as for {@code ReentrantLock}. Across JVMs there is no shared memory: the lock
 * orders the critical sections, and the data they protect must live in a store that all parties
 * read and write.
 *
 * <p><b>Failure model.</b> Waiting survives Redis faults. If Redis becomes unreachable (a
 * restart, a failover, a pause, dropped connections), {@link #lock()} and
 * {@link #lockInterruptibly()} keep waiting and acquire once Redis answers again; they throw
 * {@link TurnstileException}, holding nothing, only after
 * {@link TurnstileOptions#outageTolerance()} of continuous unavailability.
 * {@link #tryLock(long, TimeUnit)} returns {@code false} when its time runs out, whatever the
 * cause. {@link #unlock()} finishes locally at once and completes in Redis when it answers. After
 * any reconnect every waiter asks Redis again at once. The guarantees assume one Redis server, or
 * a primary whose writes are not lost on failover; see the project's failure-model documentation.
 *
 * <p><b>Observability.</b> With a registry configured
 * ({@link TurnstileOptions.Builder#meterRegistry}), acquisitions, wait and hold times, timeouts,
 * interrupts, renewals, lease losses and reclaimed crashed holders are recorded per lock name.
 *
 * <p><b>Asynchronous acquisition.</b> {@link #lockAsync()} and {@link #tryLockAsync(long, TimeUnit)}
 * acquire without blocking a thread and complete a future with a {@link LockHold}: a hold owned by
 * that value rather than by a thread, which any thread may release, for {@code CompletableFuture}
 * and reactive code. It has the same leases, loss reporting, fencing and outage behaviour as the
 * blocking acquisitions, and excludes them.
 *
 * <p>{@link #newCondition()} is not supported.
 */
public interface DistributedLock extends Lock {

  /**
   * Returns who holds this lock in Redis and how many wait for it, from any client: the holder's
   * client identity ({@link TurnstileOptions.Builder#clientName application name}, host, process
   * id), thread, fencing token, when it acquired and how much of its lease is left. For a read or
   * write lock of a {@link DistributedReadWriteLock}, the read/write lock's inspection
   * ({@link DistributedReadWriteLock#inspect()}). The holder is named from the moment its
   * acquisition returned: each client stores its identity in Redis when it connects, before
   * {@code connect} returns.
   *
   * <p>Read-only and bounded: no key created, nothing acquired; the answer may be out of date the
   * moment it returns. Unlike {@link #isLocked()}, it always asks Redis. It costs one round trip
   * when this Turnstile already knows the identity of every client it names, and two otherwise:
   * one script reads the holders from the primitive's keys, and only its answer says whose identity
   * records to read (one pipelined {@code HMGET} for all of them). The two reads cannot be one
   * script: a primitive's keys share one hash slot (its name's hash tag) and the identity records
   * another ({@code {prefix:}}), and on a Redis Cluster a script may touch one slot only (on one
   * server a script could read them only as keys it is not given, which Turnstile's scripts
   * avoid); keeping a copy of the identity in each primitive's slot would cost a write per
   * acquisition. Identities
   * never change, so they are cached (up to 1,024 clients): the second round trip is paid the
   * first time a client is named, and again only for a holding thread whose name the cached
   * record lacks.
   *
   * @return a snapshot of the lock's holder and waiters
   * @throws TurnstileException if Redis cannot be reached, or the Turnstile is closed
   */
  Inspection inspect();

  /** {@return the name this lock was obtained with} */
  String name();

  /**
   * Acquires the lock, waiting without limit.
   *
   * <p>If the current thread already holds the lock, the hold count is incremented and the method
   * returns at once, with no Redis round trip. Otherwise the thread waits until one of these
   * happens: it acquires the lock (hold count 1, a new fencing token), or Redis stays unreachable
   * for longer than {@link TurnstileOptions#outageTolerance()} without a break, in which case
   * {@link TurnstileException} is thrown and nothing is held. Shorter outages are waited through.
   *
   * <p>Like {@code ReentrantLock.lock()}, this method does not respond to interruption: if the
   * thread is interrupted while waiting, it keeps waiting, and returns with its interrupt status
   * set.
   *
   * @throws LockLostException if the current thread holds the lock but its lease was lost
   * @throws TurnstileException if Redis was unreachable for longer than the outage tolerance, or
   *     the {@link Turnstile} was closed before or during the wait (see {@link Turnstile#close()})
   */
  @Override
  void lock();

  /**
   * Acquires the lock unless the current thread is interrupted.
   *
   * <p>One of three things happens: the lock is acquired (or re-entered); the thread is
   * interrupted, before or while waiting, and {@link InterruptedException} is thrown with its
   * interrupt status cleared; or Redis stays unreachable for longer than
   * {@link TurnstileOptions#outageTolerance()} and {@link TurnstileException} is thrown (shorter
   * outages are waited through). An interrupt is acted on promptly even while the thread waits inside Redis: the
   * blocked command is cancelled with {@code CLIENT UNBLOCK}, a wake-up it may have consumed is
   * handed on, and no hold or blocked connection is left behind.
   *
   * @throws InterruptedException if the current thread is interrupted
   * @throws LockLostException if the current thread holds the lock but its lease was lost
   * @throws TurnstileException if Redis was unreachable for longer than the outage tolerance, or
   *     the {@link Turnstile} was closed before or during the wait
   */
  @Override
  void lockInterruptibly() throws InterruptedException;

  /**
   * Acquires the lock only if no other thread, in this or any JVM, holds it at the time of the
   * call. Costs one round trip unless the current thread already holds the lock (then none), or
   * another thread of this JVM is already waiting for it (then none, and the result is false).
   * With {@link TurnstileOptions.Builder#lockCaching lock caching}, a lock that another JVM keeps
   * idle is held by no thread: that JVM is asked to give it up, and this call waits for its answer
   * (the lock, or "a thread uses it": false), at most 1 s if it gives none.
   *
   * @return {@code true} if the lock was acquired or re-entered, {@code false} otherwise
   * @throws LockLostException if the current thread holds the lock but its lease was lost
   * @throws TurnstileException if the connection to Redis is down, or Redis does not answer
   *     within the command timeout (this method does not wait for an outage to end), or the
   *     {@link Turnstile} was closed
   */
  @Override
  boolean tryLock();

  /**
   * Acquires the lock if it becomes free within the given waiting time and the current thread is
   * not interrupted.
   *
   * <p>One of these happens: the lock is acquired (or re-entered) and {@code true} is returned;
   * the waiting time elapses and {@code false} is returned, also when Redis was unreachable
   * meanwhile; or the thread is interrupted and {@link InterruptedException} is thrown. The
   * waiting time is measured with {@link System#nanoTime()} and covers the whole wait, in this
   * JVM's queue and in Redis together. The method returns within a few tens of milliseconds after
   * it, except that until Redis has answered one attempt of the call, the reply is awaited for at
   * least 250 ms after the attempt was sent: a zero or short time still takes a free lock from a
   * Redis that answers slowly (a busy host), and when Redis does not answer at all the method
   * returns {@code false} after the greater of its time and about 250 ms. A time of zero or less
   * makes one attempt.
   *
   * @param time the maximum time to wait
   * @param unit the unit of {@code time}
   * @return {@code true} if the lock was acquired, {@code false} if the waiting time elapsed
   * @throws InterruptedException if the current thread is interrupted
   * @throws LockLostException if the current thread holds the lock but its lease was lost
   * @throws TurnstileException if Redis answers with an error that is not an outage, or the
   *     {@link Turnstile} was closed before or during the wait
   */
  @Override
  boolean tryLock(long time, TimeUnit unit) throws InterruptedException;

  /**
   * Releases one hold. If the hold count is then zero, the lock is released in Redis (or handed
   * straight to the next waiting thread of this JVM), its lease is no longer renewed, and a
   * waiter is woken. If Redis is unreachable, the final unlock returns at once: the hold ends
   * locally, and the release is completed in Redis as soon as it answers (it is idempotent), or
   * made moot by the lease running out.
   *
   * <p>After the {@link Turnstile} was closed, the holder's unlock still ends its hold in this
   * JVM and returns, but the release cannot reach Redis: the lock stays held there until its
   * lease runs out.
   *
   * @throws IllegalMonitorStateException if the current thread does not hold this lock
   * @throws LockLostException if the current thread held the lock but its lease was lost; the
   *     hold count is still decremented, so every matching unlock throws this
   * @throws TurnstileException if Redis answers the release with an error that is not an outage
   */
  @Override
  void unlock();

  /**
   * Acquires the lock asynchronously, waiting without limit: returns at once a future that
   * completes with a {@link LockHold} once the lock is acquired. No thread waits meanwhile: the
   * wait rides on Redis's replies, pub/sub wake-ups and timers, so a pending acquisition costs
   * memory, not a thread.
   *
   * <p>The hold belongs to the returned {@code LockHold}, not to a thread (see {@link Hold}): any
   * thread may release it, it has its own fencing token and lease, and it is not reentrant. It
   * excludes every other hold and every thread, in this JVM and all others: a thread's
   * {@link #lock()} waits for it, and it waits for a thread's hold. This JVM's async acquisitions
   * of this lock are served in FIFO order; across clients, as for {@link #lock()}.
   *
   * <p>One of these happens to the future:
   * <ul>
   *   <li>it completes with a hold (a new fencing token, a lease renewed by the watchdog);</li>
   *   <li>Redis stays unreachable for longer than {@link TurnstileOptions#outageTolerance()}
   *       without a break: it completes exceptionally with {@link TurnstileException} and nothing
   *       is held (shorter outages are waited through, and after any reconnect the acquisition
   *       asks Redis again at once);</li>
   *   <li>Redis answers with an error that is not an outage (for example an ACL refusal): it
   *       completes exceptionally with {@link TurnstileException};</li>
   *   <li>the caller cancels it (or completes it otherwise): the acquisition is withdrawn. No hold is
   *       left behind: a grant that was in flight is released as soon as its reply arrives, which
   *       wakes the next waiter as any release does, and the waiting marks are removed.</li>
   * </ul>
   *
   * <p>Dependent stages of the returned future may run on Turnstile's or Lettuce's threads: keep
   * them short and non-blocking, or use the {@code ...Async(fn, executor)} forms.
   *
   * @return a future of the hold, completed as above
   */
  CompletableFuture<LockHold> lockAsync();

  /**
   * Acquires the lock asynchronously if it becomes free within the given waiting time: as
   * {@link #lockAsync()}, except that when the time runs out first the future completes
   * exceptionally with {@link TimeoutException} and nothing is held, also when Redis was
   * unreachable meanwhile; by then the acquisition is no longer ahead of this JVM's next one. The
   * time covers the wait behind this JVM's other async acquisitions and the wait in Redis
   * together, measured with {@link System#nanoTime()}; the future completes
   * within a few tens of milliseconds after it, except that until Redis has answered one attempt,
   * the reply is awaited for at least 250 ms after the attempt was sent (as for
   * {@link #tryLock(long, TimeUnit)}). A time of zero or less makes one attempt, unless another
   * async acquisition of this JVM is ahead of it.
   *
   * @param time the maximum time to wait
   * @param unit the unit of {@code time}
   * @return a future of the hold, completed as above
   */
  CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit);

  /**
   * Not supported: a distributed condition queue is outside Turnstile's contract.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  Condition newCondition();

  /**
   * Queries the number of holds on this lock by the current thread. Costs no round trip.
   *
   * @return the hold count, or 0 if the current thread does not hold the lock or its lease was
   *     lost
   */
  int getHoldCount();

  /**
   * Queries if the current thread holds this lock with a live lease. Costs no round trip: the
   * answer is {@code false} as soon as the watchdog learns of a loss, or as soon as the lease
   * has run past its last confirmed renewal by this client's monotonic clock.
   *
   * @return {@code true} if the current thread holds this lock
   */
  boolean isHeldByCurrentThread();

  /**
   * Queries if any thread in any JVM holds this lock. Answered locally if a thread of this JVM
   * holds it, otherwise with one round trip. The answer may be stale by the time it returns; use
   * it for monitoring, not for synchronization. A lock that a JVM keeps idle by
   * {@link TurnstileOptions.Builder#lockCaching lock caching} is held by no thread: this JVM's own
   * answers at once; another JVM's is asked to give it up, and this call waits for its answer as
   * {@link #tryLock()} does (so it revokes that JVM's idle grant).
   *
   * @return {@code true} if some thread holds this lock
   * @throws TurnstileException if Redis cannot be reached
   */
  boolean isLocked();

  /**
   * Returns the fencing token of the current thread's acquisition: strictly larger than the token
   * of every earlier acquisition of this name by any client. Re-entering does not change it.
   *
   * <p><b>What a token is.</b> The Redis server's clock ({@code TIME}) when it granted the
   * acquisition, in microseconds since the epoch ({@code 1795685439387197} was granted on
   * 2026-11-26 at 09:30:39.387197 UTC), made strictly increasing per name: when the clock has not
   * passed the previous token of the name (two grants in one microsecond, a server clock that went
   * back), the token is the previous one plus one. Only its order carries meaning; do not read it
   * as the time of anything. The tokens of one name come from one counter for every client, every
   * thread and every {@link #lockAsync() asynchronous hold} (for a read/write lock, for both its
   * sides). Tokens of different names are not comparable. An acquisition taken from this JVM's
   * idle grant ({@link TurnstileOptions.Builder#lockCaching lock caching}, no round trip) gets the
   * server time of the grant's latest renewal plus the microseconds that passed here since, or the
   * previous token plus one if that is larger: the same scale, and the same promise, since each
   * renewal raised the name's counter above every token the cache may issue before the next.
   *
   * <p><b>What a store compares.</b> Send the token with every write made under the lock. The
   * store keeps, per resource the lock guards, the highest token it has accepted, and refuses a
   * write whose token is lower; an equal token is the same acquisition writing again, and is
   * accepted. In SQL: {@code UPDATE t SET v = ?, fence = ? WHERE id = ? AND fence <= ?} (the new
   * token twice), and a write that updates no row was refused. A holder paused past its lease
   * (a long GC, a frozen VM) still has its old token when it resumes, lower than that of whoever
   * acquired the lock meanwhile, so its late writes are refused instead of overwriting newer work.
   * After a restart that lost the counter, or a failover to a replica that had not received it,
   * tokens continue from the serving node's clock: still larger than every earlier token, unless
   * that node's clock is behind the old one's (see the project's failure-model documentation).
   *
   * @return the fencing token
   * @throws IllegalMonitorStateException if the current thread does not hold this lock
   * @throws LockLostException if the current thread held the lock but its lease was lost
   */
  long fencingToken();

  /**
   * Registers a listener told when a lease of this lock is lost while held. Listeners registered
   * in {@link TurnstileOptions} are told as well.
   *
   * @param listener the listener
   */
  void addLeaseLossListener(LeaseLossListener listener);

  /**
   * Removes a listener registered with {@link #addLeaseLossListener}.
   *
   * @param listener the listener
   */
  void removeLeaseLossListener(LeaseLossListener listener);
}
