package io.github.turnstile;

/**
 * A hold on a {@link DistributedLock}, or on either side of a {@link DistributedReadWriteLock},
 * acquired with {@link DistributedLock#lockAsync()} or
 * {@link DistributedLock#tryLockAsync(long, java.util.concurrent.TimeUnit)}. See {@link Hold} for
 * ownership, leases and release.
 */
public interface LockHold extends Hold {

  /**
   * Returns the fencing token of this acquisition: strictly larger than the token of every earlier
   * acquisition of this name by any client, hold or thread. Pass it with every write to a store
   * that refuses tokens lower than the highest it has seen. Tokens are server time in
   * microseconds, made strictly increasing per name: see {@link DistributedLock#fencingToken()}
   * for what they are and what the store compares.
   *
   * @return the fencing token
   * @throws LockLostException if the lease of this hold was lost
   * @throws IllegalStateException if this hold was released
   */
  long fencingToken();
}
