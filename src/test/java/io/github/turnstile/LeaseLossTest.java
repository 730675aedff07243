package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Lease loss is loud: isHeldByCurrentThread false, unlock throws LockLostException, listeners told. */
@ExtendWith(RedisExtension.class)
class LeaseLossTest {

  /** The lease key is deleted behind the holder's back: the next renewal finds out. */
  @Test
  void keyDeletedIsDetectedByWatchdog(TestRedis redis) throws Exception {
    List<LeaseLostEvent> global = new CopyOnWriteArrayList<>();
    List<LeaseLostEvent> local = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(200))
        .leaseLossListener(global::add)
        .build();
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), options)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("deleted"));
      lock.addLeaseLossListener(local::add);
      lock.lock();
      lock.lock();
      long token = lock.fencingToken();
      redis.command("DEL", lock.lockKey);
      TestSupport.await("loss detected", Duration.ofSeconds(3), () -> !lock.isHeldByCurrentThread());
      assertEquals(0, lock.getHoldCount());
      TestSupport.await("listeners told", Duration.ofSeconds(2), () -> global.size() == 1 && local.size() == 1);
      assertEquals(token, global.get(0).fencingToken());
      assertEquals(lock.name(), local.get(0).name());
      assertThrows(LockLostException.class, lock::lock, "re-entry on a lost lease is refused");
      assertThrows(LockLostException.class, lock::fencingToken);
      LockLostException first = assertThrows(LockLostException.class, lock::unlock);
      assertEquals(token, first.fencingToken());
      assertThrows(LockLostException.class, lock::unlock, "every matching unlock throws");
      assertThrows(IllegalMonitorStateException.class, lock::unlock, "then it is simply not held");
      assertEquals(1, global.size(), "told exactly once");
      // the lock is usable again afterwards
      assertTrue(lock.tryLock());
      lock.unlock();
    }
  }

  /**
   * The lease runs out in Redis and another client takes the lock before the holder's watchdog
   * notices; the holder's unlock finds its acquisition gone. It says why, and the listeners are
   * told. It said "was lost: released" and told nobody: the unlock ended the lease locally first,
   * and the later {@code lose} call did nothing on an ended lease (seen in the fencing example's
   * output). The same for a read hold.
   */
  @Test
  void anUnlockThatFindsTheAcquisitionGoneSaysWhy(TestRedis redis) throws Exception {
    List<LeaseLostEvent> events = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder().leaseLossListener(events::add).build();
    try (Turnstile holder = Turnstile.connect(redis.uri(), options); Turnstile other = Turnstile.connect(redis.uri())) {
      RedisLock lock = (RedisLock) holder.lock(unique("gone-at-unlock"));
      lock.lock();
      redis.command("DEL", lock.lockKey); // the lease ran out (the watchdog renews in 10 s)
      assertTrue(other.lock(lock.name()).tryLock(), "another client takes it");
      LockLostException e = assertThrows(LockLostException.class, lock::unlock);
      assertTrue(e.getMessage().contains("Redis no longer had this hold when its release arrived"), e.getMessage());
      TestSupport.await("the listener told", Duration.ofSeconds(5), () -> events.size() == 1);
      assertEquals(lock.name(), events.get(0).name());
      assertTrue(other.lock(lock.name()).isLocked(), "the other client's hold is untouched");

      DistributedReadWriteLock rw = holder.readWriteLock(unique("read-gone-at-unlock"));
      rw.readLock().lock();
      for (String key : redis.command("KEYS", "*" + rw.name() + "*:rw:rd:*").split("\n")) {
        redis.command("DEL", key);
      }
      LockLostException read = assertThrows(LockLostException.class, rw.readLock()::unlock);
      assertTrue(read.getMessage().contains("Redis no longer had this hold when its release arrived"), read.getMessage());
      TestSupport.await("the listener told of the read hold", Duration.ofSeconds(5), () -> events.size() == 2);
    }
  }

  /**
   * Renewals cannot reach Redis (the connection stalls) past the lease: the holder learns it lost
   * the lock by its own monotonic clock, another client acquires after Redis expires the key, and
   * the stale holder's late unlock neither succeeds nor disturbs the new holder.
   */
  @Test
  void renewalsBlockedPastLease(TestRedis redis) throws Exception {
    List<LeaseLostEvent> events = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(1000))
        .leaseLossListener(events::add)
        .build();
    String name = unique("stalled");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile stalled = Turnstile.connect(proxy.uri(), options);
        Turnstile other = Turnstile.connect(redis.uri())) {
      DistributedLock lock = stalled.lock(name);
      lock.lock();
      long staleToken = lock.fencingToken();
      proxy.setPaused(true);
      TestSupport.await("loss detected locally", Duration.ofSeconds(3), () -> !lock.isHeldByCurrentThread());
      TestSupport.await("listener told", Duration.ofSeconds(2), () -> events.size() == 1);
      DistributedLock theirs = other.lock(name);
      assertTrue(theirs.tryLock(3, TimeUnit.SECONDS), "Redis expired the stalled holder's lease");
      assertTrue(theirs.fencingToken() > staleToken);
      proxy.setPaused(false);
      assertThrows(LockLostException.class, lock::unlock);
      assertTrue(theirs.isHeldByCurrentThread());
      assertTrue(theirs.isLocked());
      assertFalse(lock.isHeldByCurrentThread());
      theirs.unlock();
    }
  }

  /** Renewal really keeps a lock alive well past its lease, and stops at unlock. */
  @Test
  void watchdogKeepsLeaseAliveAndStopsAtUnlock(TestRedis redis) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().lockCaching(false).leaseTime(Duration.ofMillis(600)).build();
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), options)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("renewed"));
      lock.lock();
      Thread.sleep(2000);
      assertTrue(lock.isHeldByCurrentThread());
      long pttl = Long.parseLong(redis.command("PTTL", lock.lockKey));
      assertTrue(pttl > 0 && pttl <= 600, "lease renewed: pttl " + pttl);
      lock.unlock();
      assertEquals(0, turnstile.engine().watchdog.size(), "nothing left to renew");
      assertEquals("0", redis.command("HEXISTS", lock.lockKey, "o"));
    }
  }

  /**
   * The client's clock (its {@link Ticker}) jumps ahead past the lease while Redis still has the
   * lock: the holder presumes the lease lost at once (it errs towards losing, never towards keeping),
   * tells the listeners, and its unlock throws while still releasing the key in Redis.
   */
  @Test
  void clientClockJumpPastLease(TestRedis redis) throws Exception {
    List<LeaseLostEvent> events = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(30))
        .leaseLossListener(events::add)
        .build();
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), options)) {
      RedisLock lock = (RedisLock) turnstile.lock(unique("ticker"));
      lock.lock();
      assertTrue(lock.isHeldByCurrentThread());
      long jump = TimeUnit.SECONDS.toNanos(31);
      turnstile.engine().ticker = () -> System.nanoTime() + jump;
      assertFalse(lock.isHeldByCurrentThread(), "past the lease by the client's clock");
      assertEquals(0, lock.getHoldCount());
      TestSupport.await("listener told", Duration.ofSeconds(2), () -> events.size() == 1);
      assertEquals("1", redis.command("HEXISTS", lock.lockKey, "o"), "Redis's clock did not jump");
      assertThrows(LockLostException.class, lock::unlock);
      TestSupport.await("the unlock still released the key", Duration.ofSeconds(2),
          () -> "0".equals(redis.command("HEXISTS", lock.lockKey, "o")));
      // on the moved clock, a new hold is measured consistently: alive, renewed, released
      assertTrue(lock.tryLock());
      Thread.sleep(300);
      assertTrue(lock.isHeldByCurrentThread());
      lock.unlock();
      assertEquals(1, events.size());
    }
  }

  /**
   * A semaphore's loss is declared (logged) before the registration's permits go back in Redis.
   * The declaring thread is held inside the log line for 300 ms: the lost permits must not be
   * free for another client meanwhile. The registration was retired first and the loss logged
   * after, so a checker that ends holds at the log line saw another client take the permits
   * while the loser still held them (the semaphore fault run at load 15, RELIABILITY).
   */
  @Test
  void aSemaphoreLossIsLoggedBeforeItsPermitsGoBack(TestRedis redis) throws Exception {
    java.util.logging.Logger log = java.util.logging.Logger.getLogger("io.github.turnstile");
    List<String> seen = new CopyOnWriteArrayList<>();
    try (Turnstile holder = Turnstile.connect(redis.uri(), TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(30)).build()); Turnstile other = Turnstile.connect(redis.uri())) {
      String name = unique("loss-order");
      DistributedSemaphore sem = holder.semaphore(name, 3);
      DistributedSemaphore theirs = other.semaphore(name, 3);
      java.util.logging.Handler probe = new java.util.logging.Handler() {
        @Override
        public void publish(java.util.logging.LogRecord r) {
          if (r.getMessage() != null && r.getMessage().startsWith("Turnstile lease lost")) {
            try {
              Thread.sleep(300); // the declaring thread stays here: whatever it does next waits
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            seen.add("free for others while the loss was being logged: " + theirs.availablePermits());
          }
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };
      log.addHandler(probe);
      try {
        sem.acquire(2);
        holder.engine().ticker = () -> System.nanoTime() + TimeUnit.SECONDS.toNanos(31); // past the lease
        TestSupport.await("the loss logged", Duration.ofSeconds(10), () -> seen.size() == 1);
        assertEquals(List.of("free for others while the loss was being logged: 1"), seen);
        assertThrows(LockLostException.class, () -> sem.release(2));
        TestSupport.await("the registration retired after the log line", Duration.ofSeconds(10),
            () -> theirs.availablePermits() == 3);
      } finally {
        log.removeHandler(probe);
      }
    }
  }
}
