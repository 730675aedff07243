package io.github.turnstile;

import static io.github.turnstile.TestSupport.awaitWaiting;
import static io.github.turnstile.TestSupport.start;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Local hand-off between async acquisitions: a hold's release hands the lock straight to the head
 * of this JVM's async acquisitions (one script, a new fencing token, no wake-up through Redis);
 * heads queued behind a hold of their own JVM send nothing to Redis until it is handed to them;
 * and after {@code localHandoffLimit} hand-offs in a row other clients get their turn.
 */
@ExtendWith(RedisExtension.class)
class AsyncLocalHandoffTest {
  private final TestRedis redis;

  AsyncLocalHandoffTest(TestRedis redis) {
    this.redis = redis;
  }

  /** Three holds in a row in one JVM: two hand-off scripts and one release, nothing else. */
  @Test
  void aReleaseHandsTheLockToTheNextAsyncAcquisition() throws Exception {
    try (Turnstile t = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock lock = t.lock(unique("async-handoff"));
      lock.lockAsync().get(30, TimeUnit.SECONDS).release().toCompletableFuture().get(30, TimeUnit.SECONDS); // scripts loaded
      LockHold first = lock.lockAsync().get(30, TimeUnit.SECONDS);
      Map<String, Long> before = TestSupport.commandStats(redis);
      CompletableFuture<LockHold> second = lock.lockAsync();
      CompletableFuture<LockHold> third = lock.lockAsync();
      assertFalse(second.isDone(), "held by the first hold");

      long t1 = first.fencingToken();
      first.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      LockHold h2 = second.get(30, TimeUnit.SECONDS);
      long t2 = h2.fencingToken();
      assertFalse(third.isDone(), "held by the second hold");
      h2.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      LockHold h3 = third.get(30, TimeUnit.SECONDS);
      long t3 = h3.fencingToken();
      h3.release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      Map<String, Long> after = TestSupport.commandStats(redis);

      assertTrue(t1 < t2 && t2 < t3, "each hand-off a new, larger token: " + t1 + ", " + t2 + ", " + t3);
      assertEquals(3, TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval"),
          "two hand-offs and one release; the waiting heads attempted nothing in Redis: " + after);
      assertEquals(TestSupport.totalCalls(before, "subscribe", "ssubscribe"), TestSupport.totalCalls(after, "subscribe", "ssubscribe"),
          "nobody subscribed");
      assertEquals(TestSupport.totalCalls(before, "blpop"), TestSupport.totalCalls(after, "blpop"), "nobody was woken through Redis");
      assertFalse(lock.isLocked(), "free after the last release");
    }
  }

  /**
   * Three async acquirers of one client take the lock in turn without end; a thread of another
   * client that waits still gets it: after {@code localHandoffLimit} (2) hand-offs in a row the
   * hold is released in Redis, and this JVM's head stands back for the other client's waiter.
   * Without the limit the local acquirers would pass the lock among themselves for ever.
   */
  @Test
  void anotherClientGetsItsTurn() throws Exception {
    String name = unique("async-handoff-limit");
    TurnstileOptions options = TurnstileOptions.builder().lockCaching(false).localHandoffLimit(2).build();
    try (Turnstile local = Turnstile.connect(redis.uri(), options);
        Turnstile remote = Turnstile.connect(redis.uri(), options)) {
      DistributedLock a = local.lock(name);
      List<String> order = new CopyOnWriteArrayList<>();
      AtomicBoolean stop = new AtomicBoolean();
      List<CompletableFuture<Void>> chains = new ArrayList<>();
      LockHold start = a.lockAsync().get(30, TimeUnit.SECONDS);
      for (int i = 0; i < 3; i++) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        chains.add(done);
        loop(a, order, stop, done);
      }
      DistributedLock b = remote.lock(name);
      Thread remoteWaiter = start("remote", () -> {
        b.lock();
        order.add("remote");
        b.unlock();
      });
      awaitWaiting(remoteWaiter);
      // The count starts once the remote waiter waits in Redis: the limit bounds the hand-offs that
      // pass over a client that waits, and holds before its first attempt lands pass over nobody
      TestSupport.awaitBlockedInRedis(redis, remote);
      int queuedAt = order.size();
      start.release();
      remoteWaiter.join(60_000);
      stop.set(true);
      for (CompletableFuture<Void> c : chains) {
        c.get(60, TimeUnit.SECONDS);
      }
      int remoteAt = order.indexOf("remote");
      // Printed so that a slow run shows how the turns went: a lapsed wait is a turn the remote
      // waiter missed (woken, it did not attempt within the stand-back)
      System.out.println("remote waiter after " + (remoteAt - queuedAt) + " local holds; queue-first waits "
          + local.engine().queueFirstWaits.sum() + ", lapsed " + local.engine().queueFirstLapsed.sum());
      assertTrue(remoteAt >= 0, "the remote waiter got the lock: " + order.size() + " local holds, none remote");
      // 1 + limit local holds before it when it is quick; a loaded host may miss a few turns
      assertTrue(remoteAt - queuedAt <= 30, "the remote waiter got the lock after " + (remoteAt - queuedAt) + " local holds");
    }
  }

  private static void loop(DistributedLock lock, List<String> order, AtomicBoolean stop, CompletableFuture<Void> done) {
    if (stop.get()) {
      done.complete(null);
      return;
    }
    lock.lockAsync().whenComplete((h, e) -> {
      if (e != null) {
        done.completeExceptionally(e);
        return;
      }
      order.add("local");
      h.release().whenComplete((v, x) -> {
        if (x != null) {
          done.completeExceptionally(x);
          return;
        }
        loop(lock, order, stop, done);
      });
    });
  }
}
