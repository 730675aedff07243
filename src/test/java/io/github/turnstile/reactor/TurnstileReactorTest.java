package io.github.turnstile.reactor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.LockHold;
import io.github.turnstile.PermitHold;
import io.github.turnstile.Turnstile;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The Reactor adapter: lazy Monos of holds, cancellation that withdraws, and using() that always releases. */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TurnstileReactorTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  TurnstileReactorTest(TestRedis redis) {
    this.redis = redis;
  }

  @BeforeAll
  void connect() {
    t1 = Turnstile.connect(redis.uri());
    t2 = Turnstile.connect(redis.uri());
  }

  @AfterAll
  void close() {
    t1.close();
    t2.close();
  }

  /** The lock's keys as Redis has them now, for a failure message. */
  private String lockState(String name) {
    io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(redis.uri());
    try (var c = client.connect()) {
      var r = c.sync();
      String key = "{turnstile:" + name + "}:lock";
      return key + " " + r.hgetall(key) + " pttl " + r.pttl(key) + ", wake list " + r.llen("{turnstile:" + name + "}:wake")
          + ", t1 says locked: " + t1.lock(name).isLocked();
    } finally {
      client.shutdown();
    }
  }

  private static String unique(String prefix) {
    return prefix + ":" + UUID.randomUUID();
  }

  /** using() holds the lock while the work runs and releases it when the work completes. */
  @Test
  void usingReleasesAfterTheWork() {
    String name = unique("reactor-using");
    DistributedLock lock = t1.lock(name);
    AtomicReference<Long> token = new AtomicReference<>();
    List<String> out = TurnstileReactor.using(TurnstileReactor.lock(lock), hold -> {
      token.set(hold.fencingToken());
      return Flux.just("a", "b").delayElements(Duration.ofMillis(50))
          .doOnNext(x -> assertTrue(t2.lock(name).isLocked(), "held during the work"));
    }).collectList().block(Duration.ofSeconds(10));
    assertEquals(List.of("a", "b"), out);
    assertTrue(token.get() > 0);
    assertFalse(t2.lock(name).isLocked(), "released when the work completed");
  }

  /** A failing work still releases the hold, and its error comes through. */
  @Test
  void usingReleasesAfterAnError() {
    String name = unique("reactor-error");
    DistributedLock lock = t1.lock(name);
    Flux<Object> failing = TurnstileReactor.using(TurnstileReactor.lock(lock),
        hold -> Mono.error(new IllegalStateException("boom")));
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> failing.blockLast(Duration.ofSeconds(10)));
    assertEquals("boom", e.getMessage());
    assertFalse(t2.lock(name).isLocked());
  }

  /** Nothing is acquired before subscription; cancelling a waiting subscription withdraws the acquisition. */
  @Test
  void cancelWithdraws() throws Exception {
    String name = unique("reactor-cancel");
    Mono<LockHold> lazy = TurnstileReactor.lock(t1.lock(name));
    assertFalse(t2.lock(name).isLocked(), "lazy: nothing acquired yet");
    DistributedLock holder = t2.lock(name);
    holder.lock();
    AtomicReference<LockHold> leaked = new AtomicReference<>();
    Disposable waiting = lazy.subscribe(leaked::set);
    Thread.sleep(300);
    waiting.dispose();
    holder.unlock();
    // the withdrawn acquisition takes nothing: another client gets the lock at once
    DistributedLock other = t2.lock(name);
    assertTrue(other.tryLock(2, TimeUnit.SECONDS));
    other.unlock();
    assertEquals(null, leaked.get());
  }

  /** tryLock and tryAcquire time out with TimeoutException; permits are released by using(). */
  @Test
  void timeoutsAndPermits() {
    String name = unique("reactor-sem");
    DistributedSemaphore sem = t1.semaphore(name, 2);
    PermitHold two = TurnstileReactor.acquire(sem, 2).block(Duration.ofSeconds(10));
    assertEquals(2, two.permits());
    RuntimeException e = assertThrows(RuntimeException.class,
        () -> TurnstileReactor.tryAcquire(sem, 1, Duration.ofMillis(100)).block(Duration.ofSeconds(10)));
    assertInstanceOf(TimeoutException.class, e.getCause());
    two.release().toCompletableFuture().join();
    Integer held = TurnstileReactor.using(TurnstileReactor.tryAcquire(sem, 1, Duration.ofSeconds(5)),
        hold -> Mono.just(sem.heldPermits())).blockLast(Duration.ofSeconds(10));
    assertEquals(1, held);
    assertEquals(0, sem.heldPermits());
    String lockName = unique("reactor-trylock");
    LockHold h = TurnstileReactor.lock(t2.lock(lockName)).block(Duration.ofSeconds(10));
    RuntimeException te = assertThrows(RuntimeException.class,
        () -> TurnstileReactor.tryLock(t1.lock(lockName), Duration.ofMillis(100)).block(Duration.ofSeconds(10)));
    assertInstanceOf(TimeoutException.class, te.getCause());
    h.close();
  }

  /**
   * The adapter's side of Reactive Streams §2.8, made deterministic: once it has decided to emit,
   * a cancel arriving before the subscriber has recorded the hold does not take the hold back. The
   * subscriber receives a valid hold after its {@code dispose()} returned, and must release it.
   * (CI run 16's failure of the loop below was this: the loop read what its subscriber had
   * recorded right after {@code dispose()}, and missed a hold whose {@code onNext} was still on
   * its way, so nobody released it.)
   */
  @Test
  void aHoldEmittedAsTheSubscriberCancelsIsStillTheSubscribers() throws Exception {
    String name = unique("reactor-late-next");
    java.util.concurrent.CountDownLatch inOnNext = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch disposed = new java.util.concurrent.CountDownLatch(1);
    AtomicReference<LockHold> received = new AtomicReference<>();
    reactor.core.publisher.BaseSubscriber<LockHold> subscriber = new reactor.core.publisher.BaseSubscriber<>() {
      @Override
      protected void hookOnSubscribe(org.reactivestreams.Subscription s) {
        s.request(1);
      }

      @Override
      protected void hookOnNext(LockHold hold) {
        inOnNext.countDown();
        try {
          // the emitting thread is preempted here, before the subscriber records the hold
          assertTrue(disposed.await(10, TimeUnit.SECONDS));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        received.set(hold);
      }
    };
    // subscribed from another thread: the grant may come so fast that onNext runs inside subscribe()
    Thread emitter = new Thread(() -> TurnstileReactor.lock(t1.lock(name)).subscribe(subscriber), "emitter");
    emitter.start();
    assertTrue(inOnNext.await(10, TimeUnit.SECONDS));
    subscriber.dispose();
    assertEquals(null, received.get(), "nothing recorded yet when dispose() returns");
    disposed.countDown();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (received.get() == null && System.nanoTime() < end) {
      Thread.sleep(1);
    }
    LockHold hold = received.get();
    assertTrue(hold != null && hold.isValid(), "the late onNext carries a hold that is still held");
    assertTrue(t2.lock(name).isLocked());
    hold.release().toCompletableFuture().get(5, TimeUnit.SECONDS);
    assertFalse(t2.lock(name).isLocked(), "released by the subscriber, as §2.8 requires of it");
  }

  /**
   * A hold produced after the subscription was cancelled, or before anything was requested, is
   * released, never dropped: cancellation raced against completion on an uncontended lock, many
   * times, leaves the lock free in Redis (a dropped hold would keep it, renewed by the watchdog).
   */
  @Test
  void cancelRacingCompletionNeverLeaksAHold() throws Exception {
    java.util.concurrent.ThreadLocalRandom random = java.util.concurrent.ThreadLocalRandom.current();
    DistributedLock probe;
    for (int i = 0; i < Integer.getInteger("turnstile.test.reactorRaceIterations", 300); i++) {
      String name = unique("reactor-race");
      boolean requestFirst = i % 3 != 0;
      // What a correct subscriber does (Reactive Streams §2.8): an onNext may still arrive after
      // its cancel (the publisher decided to emit just before it), and then the hold is its own
      // to release. One CAS decides between "emitted before the cancel" and "after".
      AtomicReference<Object> state = new AtomicReference<>();
      java.util.concurrent.CountDownLatch subscribed = new java.util.concurrent.CountDownLatch(1);
      reactor.core.publisher.BaseSubscriber<LockHold> subscriber = new reactor.core.publisher.BaseSubscriber<>() {
        @Override
        protected void hookOnSubscribe(org.reactivestreams.Subscription s) {
          if (requestFirst) {
            s.request(1);
          }
          subscribed.countDown();
        }

        @Override
        protected void hookOnNext(LockHold hold) {
          if (!state.compareAndSet(null, hold)) {
            hold.release(); // emitted after this subscriber cancelled: still its hold
          }
        }
      };
      TurnstileReactor.lock(t1.lock(name)).subscribe(subscriber);
      subscribed.await();
      // cancel from 0 to ~2 ms after subscribing: before, around and after the grant's reply
      long spin = requestFirst ? random.nextLong(2_000_000) : random.nextLong(5_000_000);
      long until = System.nanoTime() + spin;
      while (System.nanoTime() < until) {
        Thread.onSpinWait();
      }
      Object before = state.getAndSet("cancelled");
      subscriber.dispose();
      LockHold hold = before instanceof LockHold ? (LockHold) before : null;
      if (hold != null) {
        hold.release().toCompletableFuture().get(5, TimeUnit.SECONDS);
      }
      // another client gets it: an attempt still in flight is undone or refused, a dropped hold
      // would keep it (renewed by the watchdog) until the client closes
      probe = t2.lock(name);
      if (!probe.tryLock(3, TimeUnit.SECONDS)) {
        fail("iteration " + i + " (request first: " + requestFirst + ", cancelled after " + spin / 1000
            + " us, delivered: " + (hold != null) + "): a hold nobody got is still held; in Redis now: "
            + lockState(name));
      }
      probe.unlock();
    }
  }
}
