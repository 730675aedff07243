package io.github.turnstile.reactor;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Hold;
import io.github.turnstile.LockHold;
import io.github.turnstile.PermitHold;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code Mono} factories over {@link DistributedLock#lockAsync()} and
 * {@link DistributedSemaphore#acquireAsync(int)}, and {@link #using} to run work under a hold.
 *
 * <p>Every {@code Mono} here is lazy: nothing is acquired until it is subscribed, and each
 * subscription is an acquisition of its own. Cancelling the subscription while it waits cancels
 * the acquisition's future, which withdraws the waiter (see {@link DistributedLock#lockAsync()}):
 * nothing is left held. A hold emitted to a subscriber is the subscriber's to release, which
 * {@link #using} does for it.
 *
 * <pre>{@code
 * DistributedLock lock = turnstile.lock("orders:42");
 * Flux<Result> results = TurnstileReactor.using(TurnstileReactor.lock(lock),
 *     hold -> store.write(order, hold.fencingToken()));   // released when the work ends, however
 * }</pre>
 */
public final class TurnstileReactor {
  private TurnstileReactor() {}

  /**
   * Returns a {@code Mono} that acquires the lock with {@link DistributedLock#lockAsync()} when
   * subscribed, and emits the hold; cancelling it while it waits withdraws the acquisition.
   *
   * @param lock the lock, or either side of a read/write lock
   * @return the lazy acquisition
   */
  public static Mono<LockHold> lock(DistributedLock lock) {
    return Mono.fromFuture(lock::lockAsync, false);
  }

  /**
   * Returns a {@code Mono} that acquires the lock with
   * {@link DistributedLock#tryLockAsync(long, TimeUnit)} when subscribed: it emits the hold, or
   * fails with {@link java.util.concurrent.TimeoutException} when {@code wait} runs out first.
   *
   * @param lock the lock, or either side of a read/write lock
   * @param wait the longest wait, from the subscription
   * @return the lazy acquisition
   */
  public static Mono<LockHold> tryLock(DistributedLock lock, Duration wait) {
    return Mono.fromFuture(() -> lock.tryLockAsync(wait.toNanos(), TimeUnit.NANOSECONDS), false);
  }

  /**
   * Returns a {@code Mono} that acquires {@code permits} permits with
   * {@link DistributedSemaphore#acquireAsync(int)} when subscribed, and emits their hold.
   *
   * @param semaphore the semaphore
   * @param permits the number of permits, taken together
   * @return the lazy acquisition
   */
  public static Mono<PermitHold> acquire(DistributedSemaphore semaphore, int permits) {
    return Mono.fromFuture(() -> semaphore.acquireAsync(permits), false);
  }

  /**
   * Returns a {@code Mono} that acquires {@code permits} permits with
   * {@link DistributedSemaphore#tryAcquireAsync(int, long, TimeUnit)} when subscribed: it emits
   * their hold, or fails with {@link java.util.concurrent.TimeoutException} when {@code wait}
   * runs out first.
   *
   * @param semaphore the semaphore
   * @param permits the number of permits, taken together
   * @param wait the longest wait, from the subscription
   * @return the lazy acquisition
   */
  public static Mono<PermitHold> tryAcquire(DistributedSemaphore semaphore, int permits, Duration wait) {
    return Mono.fromFuture(() -> semaphore.tryAcquireAsync(permits, wait.toNanos(), TimeUnit.NANOSECONDS), false);
  }

  /**
   * Acquires with {@code acquire}, runs {@code work} with the hold, and releases the hold when the
   * work completes, fails or is cancelled ({@code Flux.usingWhen}). A release that finds the lease
   * lost makes a completed work fail with {@link io.github.turnstile.LockLostException} (added as
   * suppressed to a failed work's error), so a loss is never silent.
   *
   * @param acquire the acquisition, e.g. {@link #lock(DistributedLock)}
   * @param work the work to do under the hold
   * @param <H> the kind of hold
   * @param <T> the work's elements
   * @return the work's elements, emitted while the hold is held
   */
  public static <H extends Hold, T> Flux<T> using(Mono<H> acquire, Function<? super H, ? extends Publisher<? extends T>> work) {
    return Flux.usingWhen(acquire, work, TurnstileReactor::release, (hold, error) -> release(hold),
        TurnstileReactor::release);
  }

  private static Mono<Void> release(Hold hold) {
    return Mono.fromCompletionStage(hold::release);
  }
}
