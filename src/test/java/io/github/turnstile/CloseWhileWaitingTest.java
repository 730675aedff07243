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
          () -> pool.borrow("", java.util.concurrent.TimeUnit.SECONDS.toNanos(1)));
      assertInstanceOf(TurnstileException.class, thrown, "try " + i + ": " + thrown);
      assertTrue(thrown.getMessage().contains("closed"), thrown.getMessage());
    }
  }

  /**
   * A thread of the closing client holds the lock, and four threads of that client wait
   * behind it in {@code lock()}, {@code lockInterruptibly()} and {@code tryLock(60 s)}. They wait on
   * no Redis command (the gate holder parks for the local hand-off, the others queue at the local
   * gate), so the close used to leave them waiting: {@code tryLock} until its deadline,
   * {@code lock()} until the holder's lease ran out (0 of 4 ended within 1.5 s). Now every one ends
   * with {@link TurnstileException}; a {@code lock()} called after the close fails at once instead
   * of queueing behind them; {@code turnstile.lock(name)} fails; the holder may still unlock (the
   * hold ends locally, the call returns), and a thread that never held it is told so, by id.
   */
  @Test
  void waitersBehindAHolderOfTheSameClientEndWhenItCloses() throws Exception {
    String name = unique("close-local");
    Turnstile t = Turnstile.connect(redis.uri());
    DistributedLock lock = t.lock(name);
    lock.lock();
    List<Wait> waits = List.of(
        lock::lock,
        lock::lockInterruptibly,
        () -> lock.tryLock(60, java.util.concurrent.TimeUnit.SECONDS),
        () -> lock.tryLock(60, java.util.concurrent.TimeUnit.SECONDS));
    List<AtomicReference<Throwable>> ended = waits.stream().map(w -> new AtomicReference<Throwable>()).toList();
    List<Thread> threads = new java.util.ArrayList<>();
    for (int i = 0; i < waits.size(); i++) {
      Wait w = waits.get(i);
      AtomicReference<Throwable> end = ended.get(i);
      Thread th = TestSupport.start("local-waiter-" + i, () -> {
        try {
          w.run();
          end.set(new AssertionError("returned while a thread of its client holds the lock"));
        } catch (Throwable e) {
          end.set(e);
        }
      });
      TestSupport.awaitWaiting(th);
      threads.add(th);
    }
    long closing = System.nanoTime();
    t.close();
    long worst = 0;
    for (int i = 0; i < threads.size(); i++) {
      threads.get(i).join(10_000);
      worst = Math.max(worst, TestSupport.millisSince(closing));
      assertTrue(!threads.get(i).isAlive(), "waiter " + i + " still waits 10 s after the close");
      assertInstanceOf(TurnstileException.class, ended.get(i).get(), "waiter " + i + " ended with " + ended.get(i).get());
    }
    System.out.println("CLOSE behind a local holder: 4 of 4 waiters ended with TurnstileException within " + worst + " ms");

    AtomicReference<Throwable> late = new AtomicReference<>();
    long lateStart = System.nanoTime();
    Thread after = TestSupport.start("after-close", () -> {
      try {
        lock.lock();
        late.set(new AssertionError("lock() after close() acquired"));
      } catch (Throwable e) {
        late.set(e);
      }
    });
    after.join(10_000);
    assertTrue(!after.isAlive(), "lock() after close() still waits 10 s later");
    assertInstanceOf(TurnstileException.class, late.get(), String.valueOf(late.get()));
    assertTrue(late.get().getMessage().contains("closed"), late.get().getMessage());
    System.out.println("CLOSE: lock() after close() failed in " + TestSupport.millisSince(lateStart) + " ms");
    assertTrue(org.junit.jupiter.api.Assertions.assertThrows(TurnstileException.class, () -> t.lock(name))
        .getMessage().contains("closed"));
    org.junit.jupiter.api.Assertions.assertThrows(TurnstileException.class, () -> t.readWriteLock(name));
    org.junit.jupiter.api.Assertions.assertThrows(TurnstileException.class, () -> t.semaphore(name, 1));

    AtomicReference<Throwable> tried = new AtomicReference<>();
    AtomicReference<Throwable> stranger = new AtomicReference<>();
    Thread other = TestSupport.start("main", () -> { // the holder's name, another thread
      try {
        lock.tryLock();
      } catch (Throwable e) {
        tried.set(e);
      }
      try {
        lock.unlock();
      } catch (Throwable e) {
        stranger.set(e);
      }
    });
    other.join(10_000);
    assertInstanceOf(TurnstileException.class, tried.get(), "tryLock() after close(): " + tried.get());
    assertInstanceOf(IllegalMonitorStateException.class, stranger.get());
    assertTrue(stranger.get().getMessage().contains("(id " + other.getId() + ") does not hold"), stranger.get().getMessage());

    lock.unlock(); // the holder's unlock after close ends the hold locally and returns
    assertTrue(!lock.isHeldByCurrentThread());
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
