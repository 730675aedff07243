package io.github.turnstile;

import static io.github.turnstile.AsyncLockContractTest.assertPending;
import static io.github.turnstile.AsyncLockContractTest.await;
import static io.github.turnstile.AsyncLockContractTest.failure;
import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/** Async acquisition of both sides of a read/write lock, against blocking holds and across clients. */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AsyncReadWriteLockContractTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  AsyncReadWriteLockContractTest(TestRedis redis) {
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

  /** Async readers of two clients share; an async writer waits for both, and is let in at the last release. */
  @Test
  void readersShareWriterWaits() throws Exception {
    String name = unique("async-rw-share");
    LockHold r1 = await(t1.readWriteLock(name).readLock().lockAsync());
    LockHold r2 = await(t2.readWriteLock(name).readLock().lockAsync());
    LockHold r3 = await(t1.readWriteLock(name).readLock().lockAsync()); // a second async reader of one client
    assertEquals(3, t1.readWriteLock(name).getReadLockCount());
    CompletableFuture<LockHold> writer = t2.readWriteLock(name).writeLock().lockAsync();
    assertPending(writer, 300);
    r1.close();
    r2.close();
    assertPending(writer, 200);
    long start = System.nanoTime();
    r3.close();
    LockHold w = await(writer);
    assertTrue(millisSince(start) < Bounds.PROMPT_MS, "the last reader out woke the writer");
    assertTrue(w.fencingToken() > 0);
    assertTrue(t1.readWriteLock(name).isWriteLocked());
    await(w.release().toCompletableFuture()); // close() would not wait for Redis's answer
    assertFalse(t1.readWriteLock(name).isWriteLocked());
  }

  /** An async write hold excludes blocking readers and writers of every client; a blocking reader waits for it. */
  @Test
  void asyncWriterExcludesBlocking() throws Exception {
    String name = unique("async-rw-excl");
    DistributedReadWriteLock rw = t1.readWriteLock(name);
    LockHold w = await(rw.writeLock().lockAsync());
    assertFalse(rw.readLock().tryLock(), "same client, another owner: no downgrade for an async hold");
    assertFalse(rw.writeLock().tryLock());
    assertFalse(t2.readWriteLock(name).readLock().tryLock(200, TimeUnit.MILLISECONDS));
    AtomicLong readAt = new AtomicLong();
    Thread reader = TestSupport.start("reader", () -> {
      DistributedLock r = t2.readWriteLock(name).readLock();
      r.lock();
      readAt.set(System.nanoTime());
      r.unlock();
    });
    Thread.sleep(200);
    long released = System.nanoTime();
    w.close();
    reader.join(5000);
    assertTrue(readAt.get() != 0 && TimeUnit.NANOSECONDS.toMillis(readAt.get() - released) < Bounds.PROMPT_MS,
        "the waiting reader was admitted promptly");
  }

  /** A blocking writer excludes async readers, which are admitted together by its release. */
  @Test
  void writeReleaseAdmitsAllAsyncReaders() throws Exception {
    String name = unique("async-rw-admit");
    DistributedLock writer = t2.readWriteLock(name).writeLock();
    writer.lock();
    CompletableFuture<LockHold> a = t1.readWriteLock(name).readLock().lockAsync();
    CompletableFuture<LockHold> b = t1.readWriteLock(name).readLock().lockAsync();
    CompletableFuture<LockHold> c = t2.readWriteLock(name).readLock().lockAsync();
    // a second writer waits too: phase fairness still admits the readers that waited first
    CompletableFuture<LockHold> nextWriter = t1.readWriteLock(name).writeLock().lockAsync();
    assertPending(a, 300);
    long start = System.nanoTime();
    writer.unlock();
    LockHold ha = a.get(2, TimeUnit.SECONDS);
    LockHold hb = b.get(2, TimeUnit.SECONDS);
    LockHold hc = c.get(2, TimeUnit.SECONDS);
    assertTrue(millisSince(start) < Bounds.PROMPT_MS, "all readers admitted by the write release");
    assertFalse(nextWriter.isDone(), "the next writer waits for the readers");
    ha.close();
    hb.close();
    hc.close();
    LockHold w = nextWriter.get(2, TimeUnit.SECONDS);
    w.close();
  }

  /** A waiting async writer holds new readers back; cancelling it lets them in at once. */
  @Test
  void cancelledWriterStopsHoldingReadersBack() throws Exception {
    String name = unique("async-rw-cancel");
    DistributedLock blockingReader = t2.readWriteLock(name).readLock();
    blockingReader.lock();
    CompletableFuture<LockHold> writer = t1.readWriteLock(name).writeLock().lockAsync();
    assertPending(writer, 300);
    CompletableFuture<LockHold> lateReader = t2.readWriteLock(name).readLock().lockAsync();
    assertPending(lateReader, 300); // phase-fair: behind the waiting writer
    long start = System.nanoTime();
    assertTrue(writer.cancel(false));
    LockHold r = lateReader.get(2, TimeUnit.SECONDS);
    assertTrue(millisSince(start) < Bounds.PROMPT_MS, "admitted once the writer withdrew");
    r.close();
    blockingReader.unlock();
    assertFalse(t1.readWriteLock(name).isWriteLocked());
    assertEquals(0, t1.readWriteLock(name).getReadLockCount());
  }

  /** Timeouts on both sides; nothing is held afterwards. */
  @Test
  void timeouts() throws Exception {
    String name = unique("async-rw-timeout");
    LockHold w = await(t2.readWriteLock(name).writeLock().lockAsync());
    long start = System.nanoTime();
    assertInstanceOf(TimeoutException.class,
        failure(t1.readWriteLock(name).readLock().tryLockAsync(200, TimeUnit.MILLISECONDS), 3));
    assertInstanceOf(TimeoutException.class,
        failure(t1.readWriteLock(name).writeLock().tryLockAsync(200, TimeUnit.MILLISECONDS), 3));
    assertTrue(millisSince(start) < Bounds.PROMPT_MS, millisSince(start) + " ms");
    // close() does not wait for Redis (Hold.close): wait for the release itself before looking
    w.release().toCompletableFuture().get(Bounds.PROMPT_MS, TimeUnit.MILLISECONDS);
    assertEquals(0, t1.readWriteLock(name).getReadLockCount());
    assertFalse(t1.readWriteLock(name).isWriteLocked());
  }

  /** Tokens of read and write holds, async and blocking, come from one strictly increasing counter. */
  @Test
  void fencingTokensIncrease() {
    String name = unique("async-rw-fence");
    long last = 0;
    for (int i = 0; i < 12; i++) {
      DistributedReadWriteLock rw = (i % 2 == 0 ? t1 : t2).readWriteLock(name);
      long token;
      switch (i % 3) {
        case 0:
          try (LockHold h = await(rw.readLock().lockAsync())) {
            token = h.fencingToken();
          }
          break;
        case 1:
          try (LockHold h = await(rw.writeLock().lockAsync())) {
            token = h.fencingToken();
          }
          break;
        default:
          rw.writeLock().lock();
          token = rw.writeLock().fencingToken();
          rw.writeLock().unlock();
      }
      assertTrue(token > last, token + " after " + last);
      last = token;
    }
  }

  /** A read hold's lease lost (the client's clock jumps): loud, and the release drops the reader in Redis. */
  @Test
  void readHoldLeaseLoss() throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri())) {
      String name = unique("async-rw-loss");
      LockHold r = await(turnstile.readWriteLock(name).readLock().lockAsync());
      turnstile.engine().ticker = () -> System.nanoTime() + TimeUnit.SECONDS.toNanos(31);
      r.lost().toCompletableFuture().get(3, TimeUnit.SECONDS);
      assertFalse(r.isValid());
      assertInstanceOf(LockLostException.class, failure(r.release().toCompletableFuture(), 2));
      TestSupport.await("no reader left", Duration.ofSeconds(2),
          () -> t1.readWriteLock(name).getReadLockCount() == 0);
    }
  }

  /**
   * Sustained async read load does not starve a writer. The readers of one JVM are refused while a
   * writer holds (their gate records since when they wait), admitted by its release, and then keep
   * coming faster than the gate grants them, so it never empties: a writer of another client that
   * starts waiting must still get in once the reads it waits behind end. Before, every reader sent
   * the gate's first "waiting since", older than the write release, and passed the waiting
   * writer for as long as the load went on.
   */
  @Test
  void sustainedAsyncReadsDoNotStarveAWriter() throws Exception {
    String name = unique("async-rw-starve");
    DistributedLock writer = t2.readWriteLock(name).writeLock();
    DistributedLock reader = t1.readWriteLock(name).readLock();
    writer.lock();
    java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
    java.util.concurrent.atomic.AtomicInteger reads = new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.Executor later = CompletableFuture.delayedExecutor(5, TimeUnit.MILLISECONDS);
    Runnable[] chain = new Runnable[1];
    chain[0] = () -> {
      if (stop.get()) {
        return;
      }
      reader.lockAsync().thenAccept(h -> {
        reads.incrementAndGet();
        CompletableFuture.runAsync(() -> {
          h.release().whenComplete((v, e) -> chain[0].run());
        }, later);
      });
    };
    try {
      for (int i = 0; i < 150; i++) { // faster than the gate grants them: it never empties
        chain[0].run();
      }
      Thread.sleep(300); // the readers wait: refused while the writer holds
      writer.unlock(); // admits them
      TestSupport.await("reads going on", Duration.ofSeconds(3), () -> reads.get() >= 100);
      long start = System.nanoTime();
      boolean got = writer.tryLock(3, TimeUnit.SECONDS);
      long waited = millisSince(start);
      if (got) {
        writer.unlock();
      }
      assertTrue(got, "the writer starved behind " + reads.get() + " async reads");
      assertTrue(waited < Bounds.PROMPT_MS, "the writer waited " + waited + " ms");
    } finally {
      stop.set(true);
    }
    Thread.sleep(300);
  }
}
