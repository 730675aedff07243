package io.github.turnstile;

import static io.github.turnstile.AsyncLockContractTest.await;
import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * Async acquisitions on a Redis Cluster (3 masters + 3 replicas from redis-server processes):
 * waiters on names spread over every master subscribe where each name's slot lives (sharded
 * pub/sub on Redis 7) and are woken by the release, for locks, both read/write sides and
 * semaphores, against async and blocking holders.
 */
@ExtendWith(RedisExtension.class)
@RedisTopology(RedisTopology.Kind.CLUSTER)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AsyncOnClusterTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  AsyncOnClusterTest(TestRedis redis) {
    this.redis = redis;
  }

  @BeforeAll
  void connect() throws Exception {
    t1 = Turnstile.connect(redis.uri());
    t2 = Turnstile.connect(redis.uri());
    AsyncLockContractTest.warmUp(t1, t2);
  }

  @AfterAll
  void close() {
    t1.close();
    t2.close();
  }

  /** Twelve names over the masters: each async waiter is woken by its holder's release, async or blocking. */
  @Test
  void waitersOnEveryNodeAreWoken() throws Exception {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      names.add(unique("cluster-async-" + i));
    }
    List<LockHold> held = new ArrayList<>();
    List<CompletableFuture<LockHold>> waiting = new ArrayList<>();
    for (String name : names) {
      held.add(await(t1.lock(name).lockAsync()));
      waiting.add(t2.lock(name).lockAsync());
    }
    Thread.sleep(500);
    for (CompletableFuture<LockHold> w : waiting) {
      assertFalse(w.isDone());
    }
    for (int i = 0; i < names.size(); i++) {
      long start = System.nanoTime();
      await(held.get(i).release().toCompletableFuture());
      LockHold got = waiting.get(i).get(5, TimeUnit.SECONDS);
      assertTrue(millisSince(start) < Bounds.PROMPT_MS, "woken promptly on " + names.get(i));
      // and a blocking holder of the other client wakes an async waiter too
      DistributedLock blocking = t1.lock(names.get(i));
      CompletableFuture<LockHold> again = t1.lock(names.get(i)).lockAsync();
      await(got.release().toCompletableFuture());
      LockHold third = again.get(5, TimeUnit.SECONDS);
      assertFalse(blocking.tryLock(), "the async hold excludes the blocking side");
      third.close();
    }
  }

  /** Read/write lock and semaphore waiters on a Cluster. */
  @Test
  void readWriteAndSemaphore() throws Exception {
    String name = unique("cluster-async-rw");
    LockHold writer = await(t1.readWriteLock(name).writeLock().lockAsync());
    CompletableFuture<LockHold> reader = t2.readWriteLock(name).readLock().lockAsync();
    Thread.sleep(300);
    assertFalse(reader.isDone());
    writer.close();
    reader.get(5, TimeUnit.SECONDS).close();

    String sem = unique("cluster-async-sem");
    PermitHold all = await(t1.semaphore(sem, 2).acquireAsync(2));
    CompletableFuture<PermitHold> one = t2.semaphore(sem, 2).acquireAsync(1);
    Thread.sleep(300);
    assertFalse(one.isDone());
    all.close();
    PermitHold got = one.get(5, TimeUnit.SECONDS);
    assertEquals(1, got.permits());
    await(got.release().toCompletableFuture());
    assertEquals(2, t1.semaphore(sem, 2).availablePermits());
  }
}
