package io.github.turnstile;

import static io.github.turnstile.TestSupport.start;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * One gate per primitive and JVM, whatever the API: threads in {@code lock()} and futures of
 * {@code lockAsync()} queue together in arrival order, only the head waits in Redis, and a release
 * by either hands the lock straight to the next one, thread or future (one script each, no wake-up
 * through Redis).
 */
@ExtendWith(RedisExtension.class)
class OneGateTest {
  private static final Duration PATIENCE = Duration.ofSeconds(30);
  private final TestRedis redis;

  OneGateTest(TestRedis redis) {
    this.redis = redis;
  }

  /** The waits of {@code t}'s activity on {@code name}. */
  private static List<Activity> waits(Turnstile t, String name) {
    return t.activity().stream().filter(a -> !a.isHeld() && a.name().equals(name)).collect(java.util.stream.Collectors.toList());
  }

  private static int queued(DistributedLock lock) {
    AsyncGate<LockHold> g = ((RedisLock) lock).asyncGate();
    return g == null ? 0 : g.size();
  }

  /**
   * A thread, a future, a thread and a future wait, in that order, while another client holds the
   * lock: they get it in that order, and each but the first by a hand-off from the one before.
   */
  @Test
  void threadsAndFuturesAreServedInArrivalOrder() throws Exception {
    String name = unique("one-gate-fifo");
    try (Turnstile holder = Turnstile.connect(redis.uri(), TestSupport.UNCACHED); Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock held = holder.lock(name);
      held.lock();
      DistributedLock lock = t.lock(name);
      List<String> order = new CopyOnWriteArrayList<>();
      Thread first = start("thread-1", () -> {
        lock.lock();
        order.add("thread-1");
        Thread.sleep(20);
        lock.unlock();
      });
      TestSupport.await("thread-1 queued", PATIENCE, () -> queued(lock) == 1);
      CompletableFuture<Void> second = lock.lockAsync().thenCompose(h -> {
        order.add("future-2");
        return h.release();
      }).toCompletableFuture();
      TestSupport.await("future-2 queued", PATIENCE, () -> queued(lock) == 2);
      Thread third = start("thread-3", () -> {
        lock.lock();
        order.add("thread-3");
        lock.unlock();
      });
      TestSupport.await("thread-3 queued", PATIENCE, () -> queued(lock) == 3);
      CompletableFuture<Void> fourth = lock.lockAsync().thenCompose(h -> {
        order.add("future-4");
        return h.release();
      }).toCompletableFuture();
      TestSupport.await("future-4 queued", PATIENCE, () -> queued(lock) == 4);
      // the head, a thread, waits in Redis, and three queue behind it: one wait in the activity
      TestSupport.await("the head's wait listed", PATIENCE, () -> waits(t, name).size() == 1);
      Activity wait = waits(t, name).get(0);
      assertEquals("thread-1", wait.thread());
      assertEquals(3, wait.queued());
      held.unlock();
      first.join(PATIENCE.toMillis());
      second.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
      third.join(PATIENCE.toMillis());
      fourth.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
      assertEquals(List.of("thread-1", "future-2", "thread-3", "future-4"), order);
      TestSupport.await("the gate empty", PATIENCE, () -> queued(lock) == 0);
      assertFalse(lock.isLocked());
    }
  }

  /**
   * A thread's unlock hands the lock to a waiting future, and the future's release to a waiting
   * thread: one script each, nothing woken through Redis, a larger fencing token each time.
   */
  @Test
  void handOffCrossesTheApis() throws Exception {
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock lock = t.lock(unique("one-gate-handoff"));
      lock.lock(); // scripts loaded
      lock.unlock();
      lock.lock();
      long t1 = lock.fencingToken();
      Map<String, Long> before = TestSupport.commandStats(redis);
      CompletableFuture<LockHold> future = lock.lockAsync();
      TestSupport.await("the future queued", PATIENCE, () -> queued(lock) == 1);
      long[] threadToken = new long[1];
      CompletableFuture<LockHold> thenFuture = new CompletableFuture<>();
      Thread thread = start("thread", () -> {
        lock.lock();
        threadToken[0] = lock.fencingToken();
        lock.unlock();
      });
      TestSupport.await("the thread queued", PATIENCE, () -> queued(lock) == 2);
      lock.unlock(); // to the future
      LockHold h = future.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
      long t2 = h.fencingToken();
      assertTrue(thread.isAlive(), "the thread waits behind the future");
      h.release().toCompletableFuture().get(PATIENCE.toSeconds(), TimeUnit.SECONDS); // to the thread
      thread.join(PATIENCE.toMillis());
      assertFalse(thread.isAlive());
      Map<String, Long> after = TestSupport.commandStats(redis);
      assertTrue(t1 < t2 && t2 < threadToken[0], "each hand-off a larger token: " + t1 + ", " + t2 + ", " + threadToken[0]);
      assertEquals(3, TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval"),
          "two hand-offs and the thread's release; the waiting heads attempted nothing: " + after);
      assertEquals(TestSupport.totalCalls(before, "blpop"), TestSupport.totalCalls(after, "blpop"), "nobody woken through Redis");
      assertFalse(lock.isLocked());
      assertFalse(thenFuture.isDone());
    }
  }

  /** An interrupted thread leaves the gate, and the future behind it is served. */
  @Test
  void anInterruptedThreadLeavesTheGateToTheFutureBehindIt() throws Exception {
    String name = unique("one-gate-interrupt");
    try (Turnstile holder = Turnstile.connect(redis.uri(), TestSupport.UNCACHED); Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock held = holder.lock(name);
      held.lock();
      DistributedLock lock = t.lock(name);
      CompletableFuture<Throwable> thrown = new CompletableFuture<>();
      Thread waiter = new Thread(() -> {
        try {
          lock.lockInterruptibly();
          thrown.complete(null);
        } catch (Throwable e) {
          thrown.complete(e);
        }
      }, "interruptible");
      waiter.start();
      TestSupport.await("the thread queued", PATIENCE, () -> queued(lock) == 1);
      CompletableFuture<LockHold> future = lock.lockAsync();
      TestSupport.await("the future queued", PATIENCE, () -> queued(lock) == 2);
      TestSupport.await("the thread's wait listed", PATIENCE, () -> waits(t, name).size() == 1);
      waiter.interrupt();
      assertTrue(thrown.get(PATIENCE.toSeconds(), TimeUnit.SECONDS) instanceof InterruptedException);
      assertFalse(lock.isHeldByCurrentThread());
      // the future is the head now, and waits in Redis: listed as an async acquisition
      TestSupport.await("the future's wait listed", PATIENCE, () -> waits(t, name).size() == 1
          && waits(t, name).get(0).thread().startsWith("async acquisition "));
      held.unlock();
      LockHold h = future.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
      assertTrue(h.isValid());
      h.release().toCompletableFuture().get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
      assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }
  }

  /**
   * A read lock's {@code tryLock()} is one attempt: refused while a reader of its JVM waits in
   * line for a writer of another client, it returns false at once. It attempts beside the line
   * (it barges), and a refused one used to take its place in line like a waiting reader's
   * attempt, so it parked until the writer released.
   */
  @Test
  void aRefusedReadTryLockDoesNotWaitInLine() throws Exception {
    String name = unique("one-gate-read-try");
    try (Turnstile writer = Turnstile.connect(redis.uri(), TestSupport.UNCACHED); Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedReadWriteLock held = writer.readWriteLock(name);
      held.writeLock().lock();
      DistributedReadWriteLock rw = t.readWriteLock(name);
      Thread waiting = start("reader", () -> {
        rw.readLock().lock();
        rw.readLock().unlock();
      });
      TestSupport.await("the reader waits", PATIENCE, () -> waits(t, name).size() == 1);
      CompletableFuture<Boolean> tried = CompletableFuture.supplyAsync(() -> rw.readLock().tryLock());
      assertFalse(tried.get(PATIENCE.toSeconds(), TimeUnit.SECONDS), "refused while the writer holds");
      held.writeLock().unlock();
      waiting.join(PATIENCE.toMillis());
      assertFalse(waiting.isAlive(), "the waiting reader got the lock after the writer");
    }
  }
}
