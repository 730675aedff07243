package io.github.turnstile;

/** The outcome of one attempt script. */
final class Attempt {
  final boolean acquired;
  /** The fencing token when acquired. */
  final long token;
  /** When not acquired: how long the current holder's lease still runs, in ms (-1 unknown). */
  final long retryMillis;
  /** A semaphore's grant: the epoch of the registration the permits count under (0: none, counting mode). */
  final long epoch;
  /** When not acquired: the owner id of the holder in the way, if the script said (a lock's), else null. */
  String holder;
  /** When not acquired: another client caches the lock's grant, and was asked to give it up (lock_acquire.lua). */
  boolean cachedHolder;
  /** When not acquired: another client caches the lock's grant, and answered that one of its threads uses it. */
  boolean cachedInUse;
  /**
   * A take from this JVM's cached grant ({@link LockCache}): the Redis request that holds the lock
   * (the cache's, not the acquisition's own), and the cache; null otherwise.
   */
  String request;
  LockCache cache;

  Attempt(boolean acquired, long token, long retryMillis) {
    this(acquired, token, retryMillis, 0);
  }

  Attempt(boolean acquired, long token, long retryMillis, long epoch) {
    this.acquired = acquired;
    this.token = token;
    this.retryMillis = retryMillis;
    this.epoch = epoch;
  }
}
