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
