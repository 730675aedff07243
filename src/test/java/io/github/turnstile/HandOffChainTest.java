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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A chain of local hand-offs longer than a lease. A hand-off moves the hold to the next waiter of
 * the JVM with one script, and the watchdog's renewal of a hold that has already been handed on is
 * refused (it names the old request). With holds that last less than a round trip, nearly every
 * renewal lands after a hand-off, so a chain carried its first grant's lease along: it ran out a
 * lease after the chain began (AsyncScaleTest's drain beside 4 CPU burners: "lease of 30000 ms ran
 * out without a confirmed renewal" on a hold just handed over). A hand-off of a hold whose lease
 * has run a third of its time now renews it in the same script.
 */
@ExtendWith(RedisExtension.class)
class HandOffChainTest {
  private static final long LEASE_MS = 1_000;
  private final TestRedis redis;

  HandOffChainTest(TestRedis redis) {
    this.redis = redis;
  }

  /** Two acquirers of one client hand the lock to each other for five leases: no hold is lost. */
  @Test
  void aChainOfHandOffsOutlivesTheLease() throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(LEASE_MS)).build();
    try (Turnstile t = Turnstile.connect(redis.uri(), options)) {
      DistributedLock lock = t.lock(unique("handoff-chain"));
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(5 * LEASE_MS);
      AtomicInteger holds = new AtomicInteger();
      AtomicReference<Throwable> failure = new AtomicReference<>();
      List<CompletableFuture<Void>> loops = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        loops.add(loop(lock, until, holds, failure));
      }
      CompletableFuture.allOf(loops.toArray(new CompletableFuture<?>[0])).get(60, TimeUnit.SECONDS);
      System.out.println("HANDOFF-CHAIN: " + holds.get() + " holds over " + 5 * LEASE_MS + " ms, lease " + LEASE_MS + " ms");
      assertEquals(null, failure.get(), "every hold of the chain valid when delivered");
      assertTrue(holds.get() > 100, "a chain of hand-offs: " + holds.get());
      TestSupport.await("released", Duration.ofSeconds(10), () -> !lock.isLocked());
      assertFalse(lock.isLocked());
    }
  }

  /**
   * Acquires; then, holding, queues its next acquisition before it releases, so that every
   * release finds a waiter of this JVM to hand to (an unbroken chain); checks each hold (its
   * fencing token throws once its lease is lost); until {@code until}.
   */
  private static CompletableFuture<Void> loop(DistributedLock lock, long until, AtomicInteger holds,
      AtomicReference<Throwable> failure) {
    return next(lock, lock.lockAsync(), until, holds, failure);
  }

  private static CompletableFuture<Void> next(DistributedLock lock, CompletableFuture<LockHold> acquired, long until,
      AtomicInteger holds, AtomicReference<Throwable> failure) {
    return acquired.thenCompose(h -> {
      holds.incrementAndGet();
      try {
        h.fencingToken();
      } catch (RuntimeException e) {
        failure.compareAndSet(null, e);
      }
      boolean more = System.nanoTime() - until < 0 && failure.get() == null;
      CompletableFuture<LockHold> following = more ? lock.lockAsync() : null; // queued before the release
      return h.release().handle((v, e) -> {
        if (e != null) {
          failure.compareAndSet(null, e);
        }
        return following;
      });
    }).thenCompose(following -> following == null ? CompletableFuture.completedFuture(null)
        : next(lock, following, until, holds, failure));
  }
}
