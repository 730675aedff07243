package io.github.turnstile;

import static io.github.turnstile.TestSupport.await;
import static io.github.turnstile.TestSupport.start;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinTask;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A thread of a {@link ForkJoinPool} that waits in Turnstile lets the pool run other tasks: every
 * wait that parks the thread runs as a {@link ForkJoinPool.ManagedBlocker} (as
 * {@code CompletableFuture.get} does), so the pool starts or wakes a spare worker.
 *
 * <p>Each test waits on the only worker of a pool of parallelism 1, then submits to the same pool
 * the task that ends the wait. Without compensation that task could run only after the wait gave
 * up (20 s). This is what a 2-core machine's common pool looks like; on JDK 25 Lettuce's handshake
 * of a new connection runs there, and a semaphore waiter on the common pool's only worker waited
 * for a new blocking connection until Lettuce's 10 s connect timeout (docs/RELIABILITY.md).
 */
@ExtendWith(RedisExtension.class)
class ForkJoinWorkerWaitsTest {
  /** Far longer than the wait takes when the pool compensates (milliseconds), even at load 10. */
  private static final long PATIENCE_SECONDS = 20;

  private final TestRedis redis;
  private final ForkJoinPool pool = new ForkJoinPool(1);

  ForkJoinWorkerWaitsTest(TestRedis redis) {
    this.redis = redis;
  }

  @AfterEach
  void shutdown() {
    pool.shutdownNow();
  }

  /** The worker waits for a permit (in the semaphore's own queue) that a task of the pool releases. */
  @Test
  void aSemaphoreWaiterLetsThePoolRunTheReleasingTask() throws Exception {
    try (Turnstile holderClient = Turnstile.connect(redis.uri()); Turnstile waiterClient = Turnstile.connect(redis.uri())) {
      String name = unique("fj-sem");
      DistributedSemaphore held = holderClient.semaphore(name, 1);
      held.acquire();
      DistributedSemaphore wanted = waiterClient.semaphore(name, 1);
      ForkJoinTask<Boolean> waiter = pool.submit(() -> {
        boolean got = wanted.tryAcquire(PATIENCE_SECONDS, TimeUnit.SECONDS);
        if (got) {
          wanted.release();
        }
        return got;
      });
      await("the worker waiting in the semaphore's queue", Duration.ofSeconds(PATIENCE_SECONDS),
          wanted::hasQueuedThreads);
      ForkJoinTask<?> release = pool.submit((Runnable) held::release);
      assertTrue(waiter.get(2 * PATIENCE_SECONDS, TimeUnit.SECONDS),
          "the worker got the permit the pool's other task released while it waited");
      release.get(PATIENCE_SECONDS, TimeUnit.SECONDS);
    }
  }

  /** The worker waits for a local hand-off from a thread that unlocks once a task of the pool ran. */
  @Test
  void aLockWaiterForALocalHandOffLetsThePoolRun() throws Exception {
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock lock = t.lock(unique("fj-lock"));
      CountDownLatch taskRan = new CountDownLatch(1);
      Thread holder = holdUntil(lock, taskRan);
      ForkJoinTask<Boolean> waiter = pool.submit(() -> acquireAndRelease(lock));
      // at the gate, which it holds while it waits for the hand-off
      await("the worker waiting for the hand-off", Duration.ofSeconds(PATIENCE_SECONDS),
          () -> gateSize(lock) >= 1);
      pool.submit((Runnable) taskRan::countDown);
      assertTrue(waiter.get(2 * PATIENCE_SECONDS, TimeUnit.SECONDS),
          "the worker got the lock, handed over once the pool's other task ran");
      holder.join(TimeUnit.SECONDS.toMillis(PATIENCE_SECONDS));
    }
  }

  /** The worker queues at the JVM's gate behind a thread that waits for the lock itself. */
  @Test
  void aLockWaiterQueuedBehindAnotherThreadLetsThePoolRun() throws Exception {
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock lock = t.lock(unique("fj-gate"));
      CountDownLatch taskRan = new CountDownLatch(1);
      Thread holder = holdUntil(lock, taskRan);
      Thread first = start("first waiter", () -> acquireAndRelease(lock));
      await("the first waiter at the gate", Duration.ofSeconds(PATIENCE_SECONDS),
          () -> gateSize(lock) >= 1);
      ForkJoinTask<Boolean> waiter = pool.submit(() -> acquireAndRelease(lock));
      await("the worker queued behind it", Duration.ofSeconds(PATIENCE_SECONDS),
          () -> gateSize(lock) == 2);
      pool.submit((Runnable) taskRan::countDown);
      assertTrue(waiter.get(2 * PATIENCE_SECONDS, TimeUnit.SECONDS),
          "the worker got the lock after the first waiter, once the pool's other task ran");
      first.join(TimeUnit.SECONDS.toMillis(PATIENCE_SECONDS));
      holder.join(TimeUnit.SECONDS.toMillis(PATIENCE_SECONDS));
    }
  }

  /**
   * {@code lock()} stays uninterruptible on a worker of a pool that is stopping: from JDK 25 the
   * pool refuses to compensate there by throwing {@code InterruptedException}, and the wait then
   * runs unmanaged instead of failing.
   */
  @Test
  void anUninterruptibleWaitOnAStoppingPoolStillWaits() throws Exception {
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock lock = t.lock(unique("fj-stopping"));
      CountDownLatch release = new CountDownLatch(1);
      Thread holder = holdUntil(lock, release);
      CountDownLatch running = new CountDownLatch(1);
      CountDownLatch stopped = new CountDownLatch(1);
      CountDownLatch done = new CountDownLatch(1);
      java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
      pool.execute(() -> {
        running.countDown();
        try {
          stopped.await();
        } catch (InterruptedException e) {
          // shutdownNow()'s interrupt: the task runs on
        }
        try {
          lock.lock(); // on a worker of a stopping pool
          lock.unlock();
        } catch (Throwable e) {
          failure.set(e);
        } finally {
          done.countDown();
        }
      });
      assertTrue(running.await(PATIENCE_SECONDS, TimeUnit.SECONDS));
      pool.shutdownNow(); // the pool stops; its running task goes on
      stopped.countDown();
      await("the worker waiting for the lock", Duration.ofSeconds(PATIENCE_SECONDS),
          () -> gateSize(lock) >= 1 || done.getCount() == 0);
      release.countDown();
      assertTrue(done.await(2 * PATIENCE_SECONDS, TimeUnit.SECONDS), "lock() returned");
      org.junit.jupiter.api.Assertions.assertNull(failure.get(), "lock() neither threw nor failed");
      holder.join(TimeUnit.SECONDS.toMillis(PATIENCE_SECONDS));
    }
  }

  /**
   * A connection opens while the application's tasks occupy every worker of the common pool: the
   * URI's credentials are resolved at once, so Lettuce's handshake does not continue there. (It
   * does so only when {@code CompletableFuture}'s default executor is the common pool: always from
   * JDK 25, and before it on machines where the pool's parallelism is above 1.)
   */
  @Test
  void aConnectionWithCredentialsOpensWhileTheCommonPoolIsBusy() throws Exception {
    String user = unique("fj-user").replace(':', '-');
    redis.command("ACL", "SETUSER", user, "on", ">fj-secret", "~*", "&*", "+@all");
    int workers = ForkJoinPool.getCommonPoolParallelism();
    CountDownLatch busy = new CountDownLatch(workers);
    CountDownLatch done = new CountDownLatch(1);
    for (int i = 0; i < workers; i++) {
      ForkJoinPool.commonPool().execute(() -> {
        busy.countDown();
        try {
          done.await(); // parks unmanaged, as application code may
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
    }
    try {
      assertTrue(busy.await(PATIENCE_SECONDS, TimeUnit.SECONDS), "every worker of the common pool busy");
      String uri = "redis://" + user + ":fj-secret@" + redis.host() + ":" + redis.port();
      try (Turnstile t = Turnstile.connect(uri)) {
        DistributedLock lock = t.lock(unique("fj-connect"));
        lock.lock(); // the main connection's handshake, and the script loads
        lock.unlock();
      }
    } finally {
      done.countDown();
      redis.command("ACL", "DELUSER", user);
    }
  }

  /** A URI parsed by Turnstile carries its credentials in an immediate provider, Sentinels' too. */
  @Test
  void parsedCredentialsAreImmediate() {
    io.lettuce.core.RedisURI u = Turnstile.immediateCredentials(io.lettuce.core.RedisURI.create(
        "redis-sentinel://app:secret@127.0.0.1:26379,127.0.0.1:26380?sentinelMasterId=m"));
    for (io.lettuce.core.RedisURI each : java.util.stream.Stream.concat(java.util.stream.Stream.of(u),
        u.getSentinels().stream()).toList()) {
      assertTrue(each.getCredentialsProvider()
          instanceof io.lettuce.core.RedisCredentialsProvider.ImmediateRedisCredentialsProvider, each.toString());
    }
    io.lettuce.core.RedisCredentials c = ((io.lettuce.core.RedisCredentialsProvider.ImmediateRedisCredentialsProvider)
        u.getCredentialsProvider()).resolveCredentialsNow();
    org.junit.jupiter.api.Assertions.assertEquals("app", c.getUsername());
    org.junit.jupiter.api.Assertions.assertEquals("secret", new String(c.getPassword()));
  }

  /** Starts a thread that locks {@code lock}, and unlocks it once {@code release} is counted down. */
  private static Thread holdUntil(DistributedLock lock, CountDownLatch release) throws InterruptedException {
    CountDownLatch locked = new CountDownLatch(1);
    Thread holder = start("holder", () -> {
      lock.lock();
      try {
        locked.countDown();
        release.await();
      } finally {
        lock.unlock();
      }
    });
    assertTrue(locked.await(PATIENCE_SECONDS, TimeUnit.SECONDS), "the holder locked");
    return holder;
  }

  private static boolean acquireAndRelease(DistributedLock lock) throws InterruptedException {
    if (!lock.tryLock(PATIENCE_SECONDS, TimeUnit.SECONDS)) {
      return false;
    }
    lock.unlock();
    return true;
  }

  /** The acquisitions of this JVM at the lock's gate: its head and those queued behind it. */
  private static int gateSize(DistributedLock lock) {
    AsyncGate<LockHold> g = ((RedisLock) lock).asyncGate();
    return g == null ? 0 : g.size();
  }
}
