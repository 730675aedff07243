/**
 * Spring Integration support: {@link io.github.turnstile.spring.TurnstileLockRegistry}, a
 * {@code LockRegistry} of Turnstile locks. Spring Integration is an optional dependency; the core
 * never loads this package.
 */
package io.github.turnstile.spring;
