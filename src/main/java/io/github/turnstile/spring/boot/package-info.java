/**
 * Spring Boot auto-configuration (Spring Boot 3.5 and 4.x):
 * {@link io.github.turnstile.spring.boot.TurnstileAutoConfiguration} creates a
 * {@link io.github.turnstile.Turnstile} from the {@code turnstile.*} properties
 * ({@link io.github.turnstile.spring.boot.TurnstileProperties}), or from Spring Data Redis's
 * {@code spring.data.redis.*} when {@code turnstile.uri} is not set, and adds a Spring Integration
 * {@code LockRegistry}, a ShedLock {@code LockProvider}, Micrometer metrics and an Actuator health
 * indicator when those libraries are present. Spring Boot is an optional dependency; the core
 * never loads this package.
 */
package io.github.turnstile.spring.boot;
