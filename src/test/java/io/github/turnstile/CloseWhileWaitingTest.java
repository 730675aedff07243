package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Closing a Turnstile while its threads wait: each waiting call ends with a
 * {@link TurnstileException} (the one unchecked root), promptly, whatever step of its wait it was
 * in. The fault loop saw a semaphore waiter end with a {@code RejectedExecutionException} instead:
 * after the close it needed a new blocking connection, and the pool's connector thread was shut
 * down ({@link #aConnectionAskedForAfterTheCloseFailsWithTurnstileException} makes that step
 * deterministic).
 */
@ExtendWith(RedisExtension.class)
class CloseWhileWaitingTest {
  private final TestRedis redis;

  CloseWhileWaitingTest(TestRedis redis) {
    this.redis = redis;
  }

  interface Wait {
    void run() throws InterruptedException;
  }

  /**
   * The step of a waiter that needs a new blocking connection after its Turnstile closed: a
   * {@code TurnstileException}, and the pool's permit is not lost (the second try fails the same
   * way instead of finding the pool exhausted).
   */
  @Test
  void aConnectionAskedForAfterTheCloseFailsWithTurnstileException() {
    Turnstile t = Turnstile.connect(redis.uri());
    BlockingPool pool = t.engine().pool;
    t.close();
    for (int i = 0; i < 2; i++) {
      Throwable thrown = org.junit.jupiter.api.Assertions.assertThrows(Throwable.class,
          () -> pool.tryBorrow("", java.util.concurrent.TimeUnit.SECONDS.toNanos(1)));
      assertInstanceOf(TurnstileException.class, thrown, "try " + i + ": " + thrown);
      assertTrue(thrown.getMessage().contains("closed"), thrown.getMessage());
    }
  }

  @Test
  void waitersEndWithTurnstileExceptionWhenTheirTurnstileCloses() throws Exception {
    String name = unique("close-wait");
    try (Turnstile holder = Turnstile.connect(redis.uri())) {
      DistributedSemaphore held = holder.semaphore(name, 1);
      held.acquire();
      holder.lock(name).lock();
      holder.readWriteLock(name).writeLock().lock();
      for (int round = 0; round < 5; round++) {
        Turnstile waiting = Turnstile.connect(redis.uri());
        List<Wait> waits = List.of(
            () -> waiting.semaphore(name, 1).acquire(),
            () -> waiting.semaphore(name, 1).acquireUninterruptibly(),
            () -> waiting.lock(name).lock(),
            () -> waiting.lock(name).lockInterruptibly(),
            () -> waiting.readWriteLock(name).readLock().lock(),
            () -> waiting.readWriteLock(name).writeLock().lock());
        List<AtomicReference<Throwable>> ended = waits.stream().map(w -> new AtomicReference<Throwable>()).toList();
        List<Thread> threads = new java.util.ArrayList<>();
        for (int i = 0; i < waits.size(); i++) {
          Wait w = waits.get(i);
          AtomicReference<Throwable> end = ended.get(i);
          threads.add(TestSupport.start("waiter-" + i, () -> {
            try {
              w.run();
              end.set(new AssertionError("acquired while another client holds it"));
            } catch (Throwable t) {
              end.set(t);
            }
          }));
        }
        for (Thread t : threads) {
          TestSupport.awaitWaiting(t);
        }
        Thread.sleep(50L * round); // a different step of the wait each round
        long closing = System.nanoTime();
        waiting.close();
        for (Thread t : threads) {
          t.join(10_000);
          assertTrue(!t.isAlive(), t.getName() + " still waits 10 s after the close (round " + round + ")");
        }
        long ms = TestSupport.millisSince(closing);
        for (int i = 0; i < waits.size(); i++) {
          assertInstanceOf(TurnstileException.class, ended.get(i).get(),
              "waiter " + i + " (round " + round + ") ended with " + ended.get(i).get());
        }
        System.out.println("CLOSE round " + round + ": every waiter ended with TurnstileException within " + ms + " ms");
      }
    }
  }
}
