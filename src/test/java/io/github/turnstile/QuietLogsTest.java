package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the README's Logging section promises, checked on the log records themselves. Turnstile
 * logs through {@code System.Logger} and Lettuce through Netty's logger, both to
 * {@code java.util.logging} in this JVM (as in an application without SLF4J), so one handler on
 * the root logger sees every record.
 */
@ExtendWith(RedisExtension.class)
class QuietLogsTest {
  private final List<LogRecord> records = new CopyOnWriteArrayList<>();
  private final Handler handler = new Handler() {
    @Override
    public void publish(LogRecord r) {
      records.add(r);
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  };

  @BeforeEach
  void capture() {
    assertEquals("io.netty.util.internal.logging.JdkLoggerFactory",
        io.netty.util.internal.logging.InternalLoggerFactory.getDefaultFactory().getClass().getName(),
        "Lettuce logs through java.util.logging here");
    Logger.getLogger("").addHandler(handler);
  }

  @AfterEach
  void release() {
    Logger.getLogger("").removeHandler(handler);
  }

  private List<String> at(Level least, String loggerPrefix) {
    return records.stream()
        .filter(r -> r.getLevel().intValue() >= least.intValue() && r.getLoggerName() != null
            && r.getLoggerName().startsWith(loggerPrefix))
        .map(r -> r.getLevel() + " " + r.getLoggerName() + ": " + r.getMessage())
        .toList();
  }

  /**
   * A client's whole life without faults (connect, contended locks with waiters in Redis and by
   * pub/sub, a read/write lock, a semaphore, close) logs nothing at INFO or above, Turnstile's or
   * Lettuce's.
   */
  @Test
  void aClientsLifeWithoutFaultsLogsNothing(TestRedis redis) throws Exception {
    String name = unique("quiet");
    try (Turnstile a = Turnstile.connect(redis.uri()); Turnstile b = Turnstile.connect(redis.uri())) {
      DistributedLock lock = a.lock(name);
      lock.lock();
      Thread waiter = TestSupport.start("waiter", () -> {
        DistributedLock theirs = b.lock(name);
        if (theirs.tryLock(10, TimeUnit.SECONDS)) {
          theirs.unlock();
        }
      });
      TestSupport.awaitWaiting(waiter);
      Thread.sleep(100);
      lock.unlock();
      waiter.join(10_000);
      DistributedReadWriteLock rw = a.readWriteLock(name);
      rw.writeLock().lock();
      rw.writeLock().unlock();
      DistributedSemaphore s = b.semaphore(name, 2);
      s.acquire();
      s.release();
    }
    assertEquals(List.of(), at(Level.INFO, "io.github.turnstile"), "Turnstile's own records");
    assertEquals(List.of(), at(Level.INFO, "io.lettuce"), "Lettuce's records");
  }

  /**
   * A client closed right after its first unlock, whose lock caching has just started opening the
   * subscriber connection, logs nothing: the connection is closed as it opens, before the client
   * shuts down (it was closed twice, and Lettuce logged "Connection is already closed": 1 run of
   * .ci/run in 3).
   */
  @Test
  void closingAsTheSubscriberConnectionOpensLogsNothing(TestRedis redis) {
    for (int i = 0; i < 20; i++) {
      try (Turnstile t = Turnstile.connect(redis.uri())) {
        DistributedLock lock = t.lock(unique("quiet-close"));
        lock.lock();
        lock.unlock();
      }
    }
    assertEquals(List.of(), at(Level.INFO, "io.github.turnstile"), "Turnstile's own records");
    assertEquals(List.of(), at(Level.INFO, "io.lettuce"), "Lettuce's records");
  }

  /**
   * After an outage, every close of a connection that had dropped logged Lettuce's
   * WARNING "Connection is already closed": the topology closes a dropped blocking connection at
   * once (it must never reconnect), and the waiter then closed it again. A waiter blocked in Redis
   * while the server is killed and restarted, then the client closes: no such record. (Lettuce's
   * own reconnect messages during the outage are expected; the README says how to silence them.)
   */
  @Test
  void noSecondCloseOfADroppedConnection() throws Exception {
    String name = unique("quiet-outage");
    try (RedisServerProcess server = RedisServerProcess.start()) {
      Turnstile a = Turnstile.connect(server.uri());
      Turnstile b = Turnstile.connect(server.uri());
      DistributedLock lock = a.lock(name);
      lock.lock();
      AtomicBoolean got = new AtomicBoolean();
      Thread waiter = TestSupport.start("waiter", () -> {
        DistributedLock theirs = b.lock(name);
        if (theirs.tryLock(60, TimeUnit.SECONDS)) {
          got.set(true);
          theirs.unlock();
        }
      });
      TestSupport.await("the waiter blocked in Redis", java.time.Duration.ofSeconds(5),
          () -> server.command("INFO", "clients").contains("blocked_clients:1"));
      server.kill9();
      Thread.sleep(1500);
      server.restart();
      waiter.join(60_000); // the restart lost the lock: the waiter takes it
      assertTrue(got.get(), "the waiter acquired after the restart");
      try {
        lock.unlock();
      } catch (LockLostException expected) {
        // the restart lost the holder's lease
      }
      a.close();
      b.close();
    }
    Thread.sleep(200); // closes complete asynchronously
    // The second close this test is about logs "Connection is already closed". Lettuce's INFO
    // "Closing channel because endpoint is already closed" is another event: a connection that
    // became active after its client was closed, which Lettuce closes (once). It was seen once in
    // CI (2026-11-27) and is not counted here (RELIABILITY, known open defects).
    List<String> twice = at(Level.ALL, "io.lettuce").stream()
        .filter(m -> m.contains("Connection is already closed")).toList();
    assertEquals(List.of(), twice);
  }
}
