/**
 * Reactor adapters for Turnstile's asynchronous acquisitions: {@code Mono}s of holds, and a
 * {@code usingWhen} that releases the hold however the work ends.
 *
 * <p>Reactor is not a dependency Turnstile adds: Lettuce, which Turnstile runs on, depends on
 * {@code reactor-core}, so it is on every Turnstile classpath. Nothing outside this package
 * refers to it. Each method here is a one-liner over the core API; code that prefers not to
 * depend on this package writes the same:
 *
 * <pre>{@code
 * Mono.usingWhen(Mono.fromFuture(lock::lockAsync, false),        // false: a cancel withdraws the waiter
 *     hold -> work(hold.fencingToken()),
 *     hold -> Mono.fromCompletionStage(hold::release));
 * }</pre>
 */
package io.github.turnstile.reactor;
