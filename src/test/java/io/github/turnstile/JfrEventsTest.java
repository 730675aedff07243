package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The JDK Flight Recorder events: a wait, a timed-out wait, a hold, a lease loss and an outage,
 * each recorded with {@link Recording} at the events' default settings and read back from the
 * recording file, as {@code jfr print} would show them.
 */
@ExtendWith(RedisExtension.class)
class JfrEventsTest {
  private final TestRedis redis;

  JfrEventsTest(TestRedis redis) {
    this.redis = redis;
  }

  /** Records {@code body} with every Turnstile event enabled at its default threshold; returns the Turnstile events. */
  private static List<RecordedEvent> record(ThrowingRunnable body) throws Exception {
    Path file = Files.createTempFile("turnstile", ".jfr");
    try (Recording r = new Recording()) {
      for (String e : List.of("Wait", "Hold", "LeaseLost", "Outage")) {
        r.enable("io.github.turnstile." + e);
      }
      r.start();
      body.run();
      r.stop();
      r.dump(file);
      String keep = System.getProperty("turnstile.test.jfrDump"); // a directory: keep the recordings (docs)
      if (keep != null) {
        Files.copy(file, Path.of(keep).resolve(file.getFileName()));
      }
      return RecordingFile.readAllEvents(file).stream()
          .filter(e -> e.getEventType().getName().startsWith("io.github.turnstile."))
          .collect(Collectors.toList());
    } finally {
      Files.deleteIfExists(file);
    }
  }

  interface ThrowingRunnable {
    void run() throws Exception;
  }

  private static List<RecordedEvent> named(List<RecordedEvent> events, String type, String name) {
    return events.stream()
        .filter(e -> e.getEventType().getName().equals("io.github.turnstile." + type))
        .filter(e -> name == null || name.equals(e.getString("name")))
        .collect(Collectors.toList());
  }

  /**
   * A thread waits about 1 s for a lock another client holds: one wait event, committed on the
   * waiting thread, lasting the wait, acquired, naming the holder's owner id; and the hold that
   * followed, with its fencing token.
   */
  @Test
  void aThreadsWaitForALockHeldByAnotherClient() throws Exception {
    String name = unique("jfr-wait");
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock held = holder.lock(name);
      DistributedLock lock = t.lock(name);
      long[] token = new long[1];
      List<RecordedEvent> events = record(() -> {
        CountDownLatch locked = new CountDownLatch(1);
        Thread h = TestSupport.start("jfr-holder", () -> {
          held.lock();
          locked.countDown();
          Thread.sleep(1000);
          held.unlock();
        });
        assertTrue(locked.await(30, TimeUnit.SECONDS));
        Thread w = TestSupport.start("jfr-waiter", () -> {
          lock.lock();
          token[0] = lock.fencingToken();
          Thread.sleep(150); // above the hold event's 100 ms threshold
          lock.unlock();
        });
        w.join(60_000);
        h.join(60_000);
      });
      // the holder's own acquisition may be recorded too (its first script load can pass 20 ms)
      List<RecordedEvent> waits = named(events, "Wait", name).stream()
          .filter(e -> e.getThread() != null && "jfr-waiter".equals(e.getThread().getJavaName()))
          .collect(Collectors.toList());
      assertEquals(1, waits.size(), "one wait event of the waiter, committed on its thread: " + events);
      RecordedEvent wait = waits.get(0);
      assertEquals("lock", wait.getString("primitive"));
      assertEquals("acquired", wait.getString("outcome"));
      assertEquals(1, wait.getInt("permits"));
      assertTrue(wait.getDuration().toMillis() >= 500, "it lasted the wait: " + wait.getDuration());
      assertTrue(wait.getString("holder").startsWith(holder.engine().clientId + ":"),
          "the holder in the way: " + wait.getString("holder"));
      assertFalse(wait.getString("tier").equals("none"), "it waited in Redis: " + wait.getString("tier"));
      List<RecordedEvent> holds = named(events, "Hold", name).stream()
          .filter(e -> e.getThread() != null && "jfr-waiter".equals(e.getThread().getJavaName()))
          .collect(Collectors.toList());
      assertEquals(1, holds.size(), "the waiter's hold, committed at its unlock: " + events);
      assertEquals(token[0], holds.get(0).getLong("fencingToken"));
      assertFalse(holds.get(0).getBoolean("lost"));
    }
  }

  /** A timed-out {@code tryLock}: a wait event with outcome "timed out", lasting the timeout. */
  @Test
  void aTimedOutTryLock() throws Exception {
    String name = unique("jfr-timeout");
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock held = holder.lock(name);
      held.lock();
      try {
        List<RecordedEvent> events = record(() -> assertFalse(t.lock(name).tryLock(300, TimeUnit.MILLISECONDS)));
        List<RecordedEvent> waits = named(events, "Wait", name);
        assertEquals(1, waits.size(), "one wait event: " + events);
        assertEquals("timed out", waits.get(0).getString("outcome"));
        assertTrue(waits.get(0).getDuration().toMillis() >= 250, "it lasted the timeout: " + waits.get(0).getDuration());
      } finally {
        held.unlock();
      }
    }
  }

  /** A future's wait: committed when it completes (on whichever thread completes it). */
  @Test
  void anAsyncWaitAndASemaphoreWait() throws Exception {
    String name = unique("jfr-async");
    try (Turnstile holder = Turnstile.connect(redis.uri()); Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedSemaphore held = holder.semaphore(name, 1);
      held.acquire();
      List<RecordedEvent> events = record(() -> {
        java.util.concurrent.CompletableFuture<PermitHold> f = t.semaphore(name, 1).acquireAsync(1).toCompletableFuture();
        Thread.sleep(300);
        held.release();
        f.get(30, TimeUnit.SECONDS).close();
      });
      List<RecordedEvent> waits = named(events, "Wait", name);
      assertEquals(1, waits.size(), "one wait event: " + events);
      assertEquals("semaphore", waits.get(0).getString("primitive"));
      assertEquals("acquired", waits.get(0).getString("outcome"));
      assertTrue(waits.get(0).getDuration().toMillis() >= 200, "it lasted the wait: " + waits.get(0).getDuration());
    }
  }

  /** A lease lost (the client's clock moved past it): one LeaseLost event naming the lock. */
  @Test
  void aLeaseLoss() throws Exception {
    String name = unique("jfr-lost");
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      DistributedLock lock = t.lock(name);
      List<RecordedEvent> events = record(() -> {
        lock.lock();
        t.engine().ticker = () -> System.nanoTime() + TimeUnit.SECONDS.toNanos(31);
        assertFalse(lock.isHeldByCurrentThread(), "the lease ran out by the client's clock");
        t.engine().ticker = Ticker.SYSTEM;
      });
      List<RecordedEvent> lost = named(events, "LeaseLost", name);
      assertEquals(1, lost.size(), "one lease loss: " + events);
      assertEquals("lock", lost.get(0).getString("primitive"));
      assertTrue(lost.get(0).getLong("fencingToken") > 0);
    }
  }

  /**
   * An outage: the server is killed while a timed {@code tryLock} is called, and started again
   * a second later; the call rides through it. One Outage event, lasting about that second.
   */
  @Test
  void anOutage() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile t = Turnstile.connect(server.uri())) {
      DistributedLock lock = t.lock(unique("jfr-outage"));
      List<RecordedEvent> events = record(() -> {
        server.kill9();
        Thread restart = TestSupport.start("restart", () -> {
          Thread.sleep(1000);
          server.restart();
        });
        assertTrue(lock.tryLock(60, TimeUnit.SECONDS), "rode through the outage");
        lock.unlock();
        restart.join(60_000);
      });
      List<RecordedEvent> outages = named(events, "Outage", null);
      assertEquals(1, outages.size(), "one outage: " + events);
      Duration d = outages.get(0).getDuration();
      assertTrue(d.toMillis() >= 500 && d.toMillis() < 60_000, "about the second Redis was down: " + d);
    }
  }
}
