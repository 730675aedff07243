package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/**
 * The pub/sub tier of waiting: a client waiting on more distinct primitives than it has blocking
 * connections is woken by messages on one subscriber connection, promptly and with bounded
 * connections; releases publish only when a waiter subscribed; one message admits every waiting
 * reader.
 */
@ExtendWith(RedisExtension.class)
class PubSubWaitingTest {
  private static final int POOL = 2;
  private static final int WAITS = 12;
  private final TestRedis redis;

  PubSubWaitingTest(TestRedis redis) {
    this.redis = redis;
  }

  private static TurnstileOptions pool(int size) {
    return TurnstileOptions.builder().blockingPoolSize(size).build();
  }

  /** Connections the server sees for one Turnstile client (its connections are named after its id). */
  private long connectionsOf(Turnstile t) {
    String list = redis.command("CLIENT", "LIST");
    return list.lines().filter(l -> l.contains("name=turnstile:" + t.engine().clientId)).count();
  }

  /**
   * 12 waits on 12 distinct locks with a pool of 2: the waiters past the pool wait by pub/sub;
   * released in the reverse of their arrival, each is acquired promptly after its release, and
   * the client never has more than pool + 2 connections (main, subscriber, pool).
   */
  @Test
  void waitsPastThePoolWakeOnRelease() throws Exception {
    Map<String, Long> before = TestSupport.commandStats(redis);
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile waiter = Turnstile.connect(redis.uri(), pool(POOL))) {
      List<DistributedLock> held = new ArrayList<>();
      for (int i = 0; i < WAITS; i++) {
        DistributedLock l = holder.lock(unique("ps-lock-" + i));
        l.lock();
        held.add(l);
      }
      AtomicLongArray acquiredAt = new AtomicLongArray(WAITS);
      CountDownLatch done = new CountDownLatch(WAITS);
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < WAITS; i++) {
        int k = i;
        DistributedLock mine = waiter.lock(held.get(i).name());
        threads.add(TestSupport.start("waiter-" + i, () -> {
          mine.lock();
          acquiredAt.set(k, System.nanoTime());
          mine.unlock();
          done.countDown();
        }));
        Thread.sleep(20); // arrival order
      }
      TestSupport.await("every waiter waits in Redis", Duration.ofSeconds(10),
          () -> TestSupport.waitersInRedis(redis) >= WAITS);
      assertTrue(connectionsOf(waiter) <= POOL + 2, "connections: " + connectionsOf(waiter));
      long[] releasedAt = new long[WAITS];
      for (int i = WAITS - 1; i >= 0; i--) {
        held.get(i).unlock();
        releasedAt[i] = System.nanoTime();
        Thread.sleep(20);
      }
      assertTrue(done.await(10, TimeUnit.SECONDS), "every waiter acquired; left: " + done.getCount());
      long worst = 0;
      for (int i = 0; i < WAITS; i++) {
        worst = Math.max(worst, TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(i) - releasedAt[i]));
      }
      System.out.println("pub/sub tier: worst wake latency " + worst + " ms over " + WAITS + " locks, pool " + POOL);
      assertTrue(worst < Bounds.PROMPT_MS, "worst wake latency " + worst + " ms");
      assertTrue(connectionsOf(waiter) <= POOL + 2, "connections: " + connectionsOf(waiter));
    }
    Map<String, Long> after = TestSupport.commandStats(redis);
    assertTrue(TestSupport.totalCalls(after, "publish") - TestSupport.totalCalls(before, "publish") >= WAITS - POOL,
        "releases published to the waiters past the pool");
  }

  /** The same with semaphores of one permit: a release publishes to the waiter past the pool. */
  @Test
  void semaphoreWaitsPastThePoolWakeOnRelease() throws Exception {
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile waiter = Turnstile.connect(redis.uri(), pool(POOL))) {
      List<DistributedSemaphore> held = new ArrayList<>();
      for (int i = 0; i < WAITS; i++) {
        DistributedSemaphore s = holder.semaphore(unique("ps-sem-" + i), 1);
        s.acquire();
        held.add(s);
      }
      AtomicLongArray acquiredAt = new AtomicLongArray(WAITS);
      CountDownLatch done = new CountDownLatch(WAITS);
      for (int i = 0; i < WAITS; i++) {
        int k = i;
        DistributedSemaphore mine = waiter.semaphore(held.get(i).name(), 1);
        TestSupport.start("waiter-" + i, () -> {
          mine.acquire();
          acquiredAt.set(k, System.nanoTime());
          mine.release();
          done.countDown();
        });
        Thread.sleep(20);
      }
      TestSupport.await("every waiter waits in Redis", Duration.ofSeconds(10),
          () -> TestSupport.waitersInRedis(redis) >= WAITS);
      assertTrue(connectionsOf(waiter) <= POOL + 2, "connections: " + connectionsOf(waiter));
      long[] releasedAt = new long[WAITS];
      for (int i = WAITS - 1; i >= 0; i--) {
        held.get(i).release();
        releasedAt[i] = System.nanoTime();
        Thread.sleep(20);
      }
      assertTrue(done.await(10, TimeUnit.SECONDS), "every waiter acquired; left: " + done.getCount());
      long worst = 0;
      for (int i = 0; i < WAITS; i++) {
        worst = Math.max(worst, TimeUnit.NANOSECONDS.toMillis(acquiredAt.get(i) - releasedAt[i]));
      }
      assertTrue(worst < Bounds.PROMPT_MS, "worst wake latency " + worst + " ms");
      for (DistributedSemaphore s : held) {
        assertEquals(1, s.availablePermits(), s.name());
      }
    }
  }

  /**
   * Below the pool bound every waiter blocks on a token list, and releases publish nothing: the
   * pub/sub tier costs no command where it is not used.
   */
  @Test
  void noPublishWhileThePoolSuffices() throws Exception {
    Map<String, Long> before = TestSupport.commandStats(redis);
    String name = unique("ps-quiet");
    try (Turnstile a = Turnstile.connect(redis.uri(), TestSupport.UNCACHED);
        Turnstile b = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      List<Thread> threads = new ArrayList<>();
      for (Turnstile t : List.of(a, b)) {
        for (int k = 0; k < 3; k++) {
          DistributedLock l = t.lock(name);
          threads.add(TestSupport.start("w" + k, () -> {
            for (int i = 0; i < 40; i++) {
              l.lock();
              try {
                Thread.sleep(1);
              } finally {
                l.unlock();
              }
            }
          }));
        }
      }
      for (Thread th : threads) {
        th.join(60_000);
        assertFalse(th.isAlive());
      }
    }
    Map<String, Long> after = TestSupport.commandStats(redis);
    assertEquals(TestSupport.totalCalls(before, "publish", "spublish", "subscribe", "ssubscribe"),
        TestSupport.totalCalls(after, "publish", "spublish", "subscribe", "ssubscribe"), "no pub/sub traffic");
  }

  /**
   * Five clients' readers wait behind a writer; the write release admits all of them with one
   * message on the readers' channel (no token per reader).
   */
  @Test
  void oneMessageAdmitsEveryWaitingReader() throws Exception {
    String name = unique("ps-readers");
    List<Turnstile> clients = new ArrayList<>();
    try (Turnstile writer = Turnstile.connect(redis.uri())) {
      DistributedReadWriteLock w = writer.readWriteLock(name);
      w.writeLock().lock();
      CountDownLatch in = new CountDownLatch(5);
      CountDownLatch leave = new CountDownLatch(1);
      for (int i = 0; i < 5; i++) {
        Turnstile t = Turnstile.connect(redis.uri());
        clients.add(t);
        DistributedReadWriteLock rw = t.readWriteLock(name);
        TestSupport.start("reader-" + i, () -> {
          rw.readLock().lock();
          in.countDown();
          leave.await();
          rw.readLock().unlock();
        });
      }
      TestSupport.await("five readers subscribed", Duration.ofSeconds(10), () -> TestSupport.waitersInRedis(redis) >= 5);
      Thread.sleep(100);
      Map<String, Long> before = TestSupport.commandStats(redis);
      long releasedAt = System.nanoTime();
      w.writeLock().unlock();
      assertTrue(in.await(5, TimeUnit.SECONDS), "all readers admitted; left: " + in.getCount());
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - releasedAt);
      Map<String, Long> after = TestSupport.commandStats(redis);
      assertEquals(1, TestSupport.totalCalls(after, "publish") - TestSupport.totalCalls(before, "publish"),
          "one message for all readers");
      assertEquals(0, TestSupport.totalCalls(after, "rpush") - TestSupport.totalCalls(before, "rpush"),
          "no token per reader");
      assertTrue(ms < Bounds.PROMPT_MS, "readers admitted within " + ms + " ms");
      assertEquals(5, w.getReadLockCount());
      leave.countDown();
    } finally {
      for (Turnstile t : clients) {
        t.close();
      }
    }
  }
}
