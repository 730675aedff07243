/**
 * ShedLock support: {@link io.github.turnstile.shedlock.TurnstileLockProvider}, a ShedLock
 * {@code LockProvider} of Turnstile locks. ShedLock is an optional dependency; the core never
 * loads this package.
 */
package io.github.turnstile.shedlock;
