package io.github.turnstile.reactor;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Hold;
import io.github.turnstile.LockHold;
import io.github.turnstile.PermitHold;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import org.reactivestreams.Publisher;
import org.reactivestreams.Subscription;
import reactor.core.CoreSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * {@code Mono} factories over {@link DistributedLock#lockAsync()} and
 * {@link DistributedSemaphore#acquireAsync(int)}, and {@link #using} to run work under a hold.
 *
 * <p>Every {@code Mono} here is lazy: nothing is acquired until it is subscribed, and each
 * subscription is an acquisition of its own. Cancelling the subscription while it waits cancels
 * the acquisition's future, which withdraws the waiter (see {@link DistributedLock#lockAsync()}):
 * nothing is left held. A hold that is granted but not emitted (the subscription was cancelled
 * as the grant arrived, or before it requested the value) is released at once, never dropped.
 * A hold emitted to a subscriber ({@code onNext}) is the subscriber's to release, which
 * {@link #using} does for it. That includes a hold whose {@code onNext} arrives just after the
 * subscriber cancelled: the emission was decided before the cancel, which Reactive Streams
 * (§2.8) allows, so a hand-written subscriber releases what it receives after cancelling. An
 * operator downstream that drops an emitted value (for instance
 * {@code timeout} racing the emission) drops a held hold, so prefer {@link #using}.
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
    return new Acquisition<>(lock::lockAsync);
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
    return new Acquisition<>(() -> lock.tryLockAsync(wait.toNanos(), TimeUnit.NANOSECONDS));
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
    return new Acquisition<>(() -> semaphore.acquireAsync(permits));
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
    return new Acquisition<>(() -> semaphore.tryAcquireAsync(permits, wait.toNanos(), TimeUnit.NANOSECONDS));
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

  /**
   * The lazy acquisition. {@code Mono.fromFuture} drops (Operators.onDiscard) a value that
   * completes after a cancel or before a request: a dropped hold is held until the client
   * closes. Here one lock decides between delivering the hold and the cancel, and a hold that
   * is not delivered is closed.
   */
  private static final class Acquisition<H extends Hold> extends Mono<H> {
    private final Supplier<CompletableFuture<H>> acquire;

    Acquisition(Supplier<CompletableFuture<H>> acquire) {
      this.acquire = acquire;
    }

    @Override
    public void subscribe(CoreSubscriber<? super H> actual) {
      Pending<H> pending = new Pending<>(actual);
      actual.onSubscribe(pending);
      CompletableFuture<H> future;
      try {
        future = acquire.get();
      } catch (RuntimeException e) {
        pending.complete(null, e);
        return;
      }
      pending.start(future);
    }
  }

  private static final class Pending<H extends Hold> implements Subscription {
    private final CoreSubscriber<? super H> actual;
    /** Guards the fields below (a lock, not a monitor: no virtual-thread pinning in main code). */
    private final java.util.concurrent.locks.ReentrantLock lock = new java.util.concurrent.locks.ReentrantLock();
    private CompletableFuture<H> future; // guarded by lock
    private H value; // guarded by lock: granted, not yet delivered
    private boolean requested; // guarded by lock
    private boolean done; // guarded by lock: delivered, failed or cancelled

    Pending(CoreSubscriber<? super H> actual) {
      this.actual = actual;
    }

    void start(CompletableFuture<H> f) {
      boolean cancelled;
      lock.lock();
      try {
        cancelled = done;
        future = f;
      } finally {
        lock.unlock();
      }
      if (cancelled) {
        f.cancel(false);
      }
      f.whenComplete(this::complete);
    }

    void complete(H hold, Throwable error) {
      boolean deliver = false;
      boolean drop = false;
      lock.lock();
      try {
        if (done) {
          drop = hold != null;
        } else if (hold == null) {
          done = true;
        } else if (requested) {
          done = true;
          deliver = true;
        } else {
          value = hold;
        }
      } finally {
        lock.unlock();
      }
      if (drop) {
        closeQuietly(hold);
      } else if (deliver) {
        actual.onNext(hold);
        actual.onComplete();
      } else if (hold == null) {
        actual.onError(unwrap(error));
      }
    }

    @Override
    public void request(long n) {
      if (n <= 0) {
        boolean first;
        lock.lock();
        try {
          first = !done;
        } finally {
          lock.unlock();
        }
        if (first) {
          cancel();
          actual.onError(new IllegalArgumentException("§3.9: request must be positive, was " + n));
        }
        return;
      }
      H hold;
      lock.lock();
      try {
        requested = true;
        if (done || value == null) {
          return;
        }
        hold = value;
        value = null;
        done = true;
      } finally {
        lock.unlock();
      }
      actual.onNext(hold);
      actual.onComplete();
    }

    @Override
    public void cancel() {
      CompletableFuture<H> f;
      H hold;
      lock.lock();
      try {
        if (done) {
          return;
        }
        done = true;
        f = future;
        hold = value;
        value = null;
      } finally {
        lock.unlock();
      }
      if (hold != null) {
        closeQuietly(hold);
      } else if (f != null) {
        // a grant completed after this cancel is closed by complete(), which now finds done
        f.cancel(false);
      }
    }

    private static void closeQuietly(Hold hold) {
      try {
        hold.close();
      } catch (RuntimeException ignored) {
        // a loss already detected: nothing is held any more
      }
    }

    private static Throwable unwrap(Throwable error) {
      return error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    }
  }

  private static Mono<Void> release(Hold hold) {
    return Mono.fromCompletionStage(hold::release);
  }
}
