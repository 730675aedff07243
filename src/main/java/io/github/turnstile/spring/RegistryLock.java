package io.github.turnstile.spring;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.LeaseLossListener;
import io.github.turnstile.LockHold;
import io.github.turnstile.LockLostException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;

/**
 * The lock {@link TurnstileLockRegistry#obtain(Object)} returns: Turnstile's lock of that name,
 * with one difference, the exception of an {@link #unlock()} by a thread that does not hold it.
 * {@code RedisLockRegistry}'s locks throw {@link IllegalStateException} ("You do not own lock at
 * ...") there, which Spring Integration's own tests expect and code migrating from it catches;
 * a {@link DistributedLock} throws {@link IllegalMonitorStateException}, as
 * {@code ReentrantLock} does. A lease that was really lost still throws
 * {@link LockLostException}. Everything else is the lock's own: the same holds, in this JVM
 * and in Redis, as {@code turnstile.lock(name)}. Two views of one lock are equal.
 */
final class RegistryLock implements DistributedLock {
  private final DistributedLock lock;

  RegistryLock(DistributedLock lock) {
    this.lock = lock;
  }

  /**
   * Releases one hold, as {@link DistributedLock#unlock()}.
   *
   * @throws IllegalStateException if the current thread does not hold this lock, as
   *     {@code RedisLockRegistry}'s locks do (the cause is the lock's
   *     {@link IllegalMonitorStateException})
   * @throws LockLostException if the current thread held the lock but its lease was lost
   */
  @Override
  public void unlock() {
    try {
      lock.unlock();
    } catch (LockLostException e) {
      throw e;
    } catch (IllegalMonitorStateException e) {
      throw new IllegalStateException("You do not own lock at " + lock.name() + ": " + e.getMessage(), e);
    }
  }

  @Override
  public String name() {
    return lock.name();
  }

  @Override
  public io.github.turnstile.Inspection inspect() {
    return lock.inspect();
  }

  @Override
  public void lock() {
    lock.lock();
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    lock.lockInterruptibly();
  }

  @Override
  public boolean tryLock() {
    return lock.tryLock();
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    return lock.tryLock(time, unit);
  }

  @Override
  public CompletableFuture<LockHold> lockAsync() {
    return lock.lockAsync();
  }

  @Override
  public CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit) {
    return lock.tryLockAsync(time, unit);
  }

  @Override
  public Condition newCondition() {
    return lock.newCondition();
  }

  @Override
  public int getHoldCount() {
    return lock.getHoldCount();
  }

  @Override
  public boolean isHeldByCurrentThread() {
    return lock.isHeldByCurrentThread();
  }

  @Override
  public boolean isLocked() {
    return lock.isLocked();
  }

  @Override
  public long fencingToken() {
    return lock.fencingToken();
  }

  @Override
  public void addLeaseLossListener(LeaseLossListener listener) {
    lock.addLeaseLossListener(listener);
  }

  @Override
  public void removeLeaseLossListener(LeaseLossListener listener) {
    lock.removeLeaseLossListener(listener);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof RegistryLock && ((RegistryLock) o).lock == lock;
  }

  @Override
  public int hashCode() {
    return System.identityHashCode(lock);
  }

  @Override
  public String toString() {
    return lock.toString();
  }
}
