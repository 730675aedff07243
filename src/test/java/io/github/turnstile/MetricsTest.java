package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.ValueAtPercentile;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A scripted workload against a real Redis, recorded in a {@link SimpleMeterRegistry}: counts are
 * checked exactly, timers for plausibility. "Other clients" and "crashed holders" are Turnstiles
 * without a registry; a crash is a Turnstile closed while it holds (its watchdog stops, so its
 * lease runs out in Redis, as after kill -9).
 */
@ExtendWith(RedisExtension.class)
class MetricsTest {
  private static final Duration CRASH_LEASE = Duration.ofMillis(700);

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  /** turnstile.hold.longest: the longest current hold per primitive, rising while held, 0 once released. */
  @Test
  void longestHoldGauge(TestRedis redis) throws Exception {
    String name = unique("m-longest");
    String other = unique("m-longest-other");
    TurnstileOptions options = TurnstileOptions.builder().meterRegistry(registry).metricsNameLimit(1).build();
    try (Turnstile t = Turnstile.connect(redis.uri(), options)) {
      DistributedLock lock = t.lock(name);
      DistributedLock beyondLimit = t.lock(other); // recorded as name=other
      lock.lock();
      beyondLimit.lock();
      Gauge g = registry.find("turnstile.hold.longest").tags("primitive", "lock", "name", name,
          "client", t.clientId()).gauge();
      assertNotNull(g, "the gauge of " + name);
      assertNotNull(registry.find("turnstile.hold.longest").tags("name", MicrometerMetrics.OTHER).gauge(),
          "names beyond the limit share one gauge");
      Thread.sleep(1200);
      double first = g.value();
      assertTrue(first >= 1.0, "held for more than a second: " + first);
      Thread.sleep(1200);
      assertTrue(g.value() > first, "rises while held: " + first + " then " + g.value());
      lock.unlock();
      beyondLimit.unlock();
      Thread.sleep(1100); // the leases are read at most once a second
      assertEquals(0.0, g.value(), "none held");
    }
    assertNull(registry.find("turnstile.hold.longest").tags("name", name).gauge(), "removed at close");
  }

  @Test
  void scriptedWorkload(TestRedis redis) throws Exception {
    String lockName = unique("m-lock");
    String lostName = unique("m-lost");
    String crashName = unique("m-crash");
    String semName = unique("m-sem");
    String rwName = unique("m-rw");
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(100))
        .meterRegistry(registry)
        .metricsNameLimit(5)
        .build();
    try (Turnstile t1 = Turnstile.connect(redis.uri(), options);
        Turnstile t2 = Turnstile.connect(redis.uri())) {
      // the first five names get their own tag (in the order this client first uses them)
      DistributedLock lock = t1.lock(lockName);
      RedisLock lost = (RedisLock) t1.lock(lostName);
      DistributedLock crashLock = t1.lock(crashName);
      DistributedSemaphore sem = t1.semaphore(semName, 2);
      DistributedReadWriteLock rw = t1.readWriteLock(rwName);

      // ---- lock: 3 acquisitions (re-entries not counted), 2 timeouts, 1 interrupt
      lock.lock();
      lock.lock();
      Thread.sleep(50);
      lock.unlock();
      lock.unlock();
      assertTrue(lock.tryLock());
      lock.unlock();
      DistributedLock theirs = t2.lock(lockName);
      CountDownLatch held = new CountDownLatch(1);
      CountDownLatch letGo = new CountDownLatch(1);
      Thread holder = TestSupport.start("other-client-holder", () -> {
        theirs.lock();
        held.countDown();
        letGo.await();
        Thread.sleep(200);
        theirs.unlock();
      });
      assertTrue(held.await(5, TimeUnit.SECONDS));
      assertFalse(lock.tryLock(100, TimeUnit.MILLISECONDS));
      assertFalse(lock.tryLock());
      AtomicReference<Throwable> seen = new AtomicReference<>();
      Thread waiter = TestSupport.start("interrupted-waiter", () -> {
        try {
          lock.lockInterruptibly();
        } catch (InterruptedException e) {
          seen.set(e);
        }
      });
      // while it blocks in Redis, it holds one blocking connection
      TestSupport.await("a blocking connection in use", Duration.ofSeconds(5),
          () -> gauge("turnstile.pool.connections.active") == 1.0);
      assertEquals(16.0, gauge("turnstile.pool.connections.max"));
      waiter.interrupt();
      waiter.join(5000);
      assertTrue(seen.get() instanceof InterruptedException);
      TestSupport.await("the connection returned", Duration.ofSeconds(5),
          () -> gauge("turnstile.pool.connections.active") == 0.0);
      letGo.countDown();
      lock.lock(); // waits about 200 ms
      holder.join(5000);
      Thread.sleep(350); // held across a few renewals (every 100 ms)
      assertEquals(1.0, gauge("turnstile.leases.active"));
      lock.unlock();

      assertEquals(3, count("turnstile.acquisitions", "lock", lockName));
      assertEquals(2, count("turnstile.timeouts", "lock", lockName));
      assertEquals(1, count("turnstile.interrupts", "lock", lockName));
      assertEquals(0, count("turnstile.lease.losses", "lock", lockName));
      assertEquals(0, count("turnstile.lease.renewal.failures", "lock", lockName));
      assertTrue(count("turnstile.lease.renewals", "lock", lockName) >= 2,
          "renewals: " + count("turnstile.lease.renewals", "lock", lockName));
      Timer wait = timer("turnstile.wait", "lock", lockName);
      assertEquals(3, wait.count());
      assertTrue(wait.max(TimeUnit.MILLISECONDS) >= 150, "longest wait " + wait.max(TimeUnit.MILLISECONDS));
      assertTrue(wait.max(TimeUnit.MILLISECONDS) < 5000, "longest wait " + wait.max(TimeUnit.MILLISECONDS));
      ValueAtPercentile[] percentiles = wait.takeSnapshot().percentileValues();
      assertEquals(3, percentiles.length, "p50, p90, p99 published");
      Timer hold = timer("turnstile.hold", "lock", lockName);
      assertEquals(3, hold.count());
      assertTrue(hold.totalTime(TimeUnit.MILLISECONDS) >= 400, "held " + hold.totalTime(TimeUnit.MILLISECONDS));
      assertTrue(hold.max(TimeUnit.MILLISECONDS) >= 350);

      // ---- lease loss: the key is deleted behind the holder's back
      lost.lock();
      redis.command("DEL", lost.lockKey);
      TestSupport.await("loss detected", Duration.ofSeconds(3), () -> !lost.isHeldByCurrentThread());
      assertThrows(LockLostException.class, lost::unlock);
      assertEquals(1, count("turnstile.lease.losses", "lock", lostName));
      assertEquals(1, count("turnstile.lease.renewal.failures", "lock", lostName));
      assertEquals(1, count("turnstile.acquisitions", "lock", lostName));

      // ---- reclaim of a crashed lock holder
      Turnstile crasher = Turnstile.connect(redis.uri(), TurnstileOptions.builder().leaseTime(CRASH_LEASE).build());
      crasher.lock(crashName).lock();
      crasher.close(); // "crashes" holding the lock
      long start = System.nanoTime();
      crashLock.lock(); // refused, then waits for the lease to run out
      assertTrue(TestSupport.millisSince(start) >= 300, "waited for the crashed holder's lease");
      crashLock.unlock();
      assertEquals(1, count("turnstile.reclaims", "lock", crashName));
      assertEquals(0, count("turnstile.reclaims", "lock", lockName), "a released lock is no reclaim");

      // ---- semaphore: 3 acquisitions, 2 timeouts, 1 reclaimed crashed client
      sem.acquire();
      sem.acquire();
      assertFalse(sem.tryAcquire());
      assertFalse(sem.tryAcquire(100, TimeUnit.MILLISECONDS));
      sem.release(2);
      Turnstile semCrasher = Turnstile.connect(redis.uri(), TurnstileOptions.builder().leaseTime(CRASH_LEASE).build());
      semCrasher.semaphore(semName, 2).acquire();
      semCrasher.close();
      sem.acquire(2); // one permit is free, the other comes back when the crashed client is reclaimed
      sem.release(2);
      assertEquals(3, count("turnstile.acquisitions", "semaphore", semName));
      assertEquals(2, count("turnstile.timeouts", "semaphore", semName));
      assertEquals(1, count("turnstile.reclaims", "semaphore", semName));
      assertEquals(3, timer("turnstile.wait", "semaphore", semName).count());

      // ---- read/write lock: a crashed reader is reclaimed by the writer's attempt
      rw.readLock().lock();
      rw.readLock().unlock();
      rw.writeLock().lock();
      rw.writeLock().unlock();
      Turnstile rwCrasher = Turnstile.connect(redis.uri(), TurnstileOptions.builder().leaseTime(CRASH_LEASE).build());
      rwCrasher.readWriteLock(rwName).readLock().lock();
      rwCrasher.close();
      rw.writeLock().lock();
      rw.writeLock().unlock();
      assertEquals(1, count("turnstile.acquisitions", "read", rwName));
      assertEquals(2, count("turnstile.acquisitions", "write", rwName));
      assertEquals(1, count("turnstile.reclaims", "read", rwName));
      assertEquals(1, timer("turnstile.hold", "read", rwName).count());
      assertEquals(2, timer("turnstile.hold", "write", rwName).count());

      // ---- bounded cardinality: names beyond the limit of 5 share the tag "other"
      for (int i = 0; i < 3; i++) {
        DistributedLock extra = t1.lock(unique("m-extra"));
        extra.lock();
        extra.unlock();
      }
      assertEquals(3, count("turnstile.acquisitions", "lock", MicrometerMetrics.OTHER));
      long names = registry.find("turnstile.acquisitions").counters().stream()
          .map(c -> c.getId().getTag("name")).distinct().count();
      assertEquals(6, names, "five names and 'other'");
    }
    assertNull(registry.find("turnstile.pool.connections.active").gauge(), "gauges removed on close");
    assertNotNull(registry.find("turnstile.acquisitions").counter(), "counters stay");
  }

  private long count(String meter, String primitive, String name) {
    Counter c = registry.find(meter).tag("primitive", primitive).tag("name", name).counter();
    return c == null ? 0 : (long) c.count();
  }

  private Timer timer(String meter, String primitive, String name) {
    Timer t = registry.find(meter).tag("primitive", primitive).tag("name", name).timer();
    assertNotNull(t, meter + " " + primitive + " " + name);
    return t;
  }

  private double gauge(String meter) {
    Gauge g = registry.find(meter).gauge();
    assertNotNull(g, meter);
    return g.value();
  }
}
