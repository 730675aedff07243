package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * Phase fairness among one JVM's queued readers (DESIGN §10): a write release admits the readers
 * that were waiting, past a waiting writer, and no reader that arrives after that admission. The
 * blocking read side used one waiting-since time for the whole JVM and reset it only when its gate
 * emptied, so while readers kept queueing, each new one sent the first refusal's time and passed
 * the waiting writer (CHANGELOG.md).
 *
 * <p>The interleaving is made deterministic with a proxy that delays the readers' client: every
 * command of theirs takes at least 600 ms, so the reader that arrives after the admission is
 * certainly queued at the gate while the admitted reader behind the first one is still attempting.
 * Each step waits for what Redis or the gate shows; nothing is timed against the wall clock except
 * the generous limits of those waits.
 */
class ReadAdmissionTest {
  private static final Duration PATIENCE = Duration.ofSeconds(60);

  @Test
  void aReaderArrivingAfterTheAdmissionWaitsBehindTheWaitingWriter() throws Exception {
    String name = unique("admission");
    String rwait = "{turnstile:" + name + "}:rw:rwait";
    String wwait = "{turnstile:" + name + "}:rw:wwait";
    ExecutorService threads = Executors.newCachedThreadPool();
    try (RedisServerProcess server = RedisServerProcess.start();
        TcpProxy proxy = TcpProxy.start(server.host(), server.port());
        Turnstile writers = Turnstile.connect(server.uri());
        Turnstile otherWriter = Turnstile.connect(server.uri());
        Turnstile readers = Turnstile.connect(proxy.uri())) {
      RedisClient observerClient = RedisClient.create(server.uri());
      try (StatefulRedisConnection<String, String> observer = observerClient.connect()) {
        DistributedReadWriteLock onWriters = writers.readWriteLock(name);
        DistributedReadWriteLock onOther = otherWriter.readWriteLock(name);
        RedisReadWriteLock onReaders = (RedisReadWriteLock) readers.readWriteLock(name);
        RedisReadWriteLock.ReadSide gate = (RedisReadWriteLock.ReadSide) onReaders.readLock();

        onWriters.writeLock().lock(); // W1

        // R1 is refused (W1 holds): the readers' JVM waits since that refusal; R1 holds the gate
        CountDownLatch r1Granted = new CountDownLatch(1);
        CountDownLatch releaseFirstTwo = new CountDownLatch(1);
        Future<?> r1 = threads.submit(() -> holdRead(gate, r1Granted, releaseFirstTwo));
        TestSupport.await("R1's refusal recorded", PATIENCE, () -> observer.sync().zcard(rwait) >= 1);
        // R1b arrives while R1 waits: queued at the gate, it waits with R1
        CountDownLatch r1bGranted = new CountDownLatch(1);
        Future<?> r1b = threads.submit(() -> holdRead(gate, r1bGranted, releaseFirstTwo));
        TestSupport.await("R1b queued at the gate", PATIENCE, gate::gateQueued);

        // W2 (another client) waits for the write lock
        CountDownLatch w2Granted = new CountDownLatch(1);
        AtomicBoolean r2Granted = new AtomicBoolean();
        AtomicBoolean w2BeforeR2 = new AtomicBoolean();
        Future<Boolean> w2 = threads.submit(() -> {
          boolean got = onOther.writeLock().tryLock(PATIENCE.toSeconds(), TimeUnit.SECONDS);
          if (got) {
            w2BeforeR2.set(!r2Granted.get());
            w2Granted.countDown();
            onOther.writeLock().unlock();
          }
          return got;
        });
        TestSupport.await("W2 waiting", PATIENCE, () -> observer.sync().zcard(wwait) >= 1);

        // from now on every command of the readers' client takes at least 600 ms
        proxy.setDelayMillis(300);
        onWriters.writeLock().unlock(); // admits R1 and R1b (waiting), past W2
        assertTrue(r1Granted.await(PATIENCE.toSeconds(), TimeUnit.SECONDS), "R1 admitted");
        // R1 was granted and left the gate; R1b now attempts (600 ms). R2 arrives now, after the
        // admission: it queues at the gate behind R1b
        Future<?> r2 = threads.submit(() -> {
          gate.lock();
          r2Granted.set(true);
          gate.unlock();
        });
        TestSupport.await("R2 queued at the gate", PATIENCE, gate::gateQueued);
        assertTrue(r1bGranted.await(PATIENCE.toSeconds(), TimeUnit.SECONDS), "R1b admitted");
        // R2 attempts once R1b left the gate: it must be refused (a writer waits, and R2 did not
        // wait before the admission), which records its waiting entry; a grant would not
        TestSupport.await("R2's attempt answered", PATIENCE,
            () -> r2Granted.get() || observer.sync().zcard(rwait) >= 1);
        assertFalse(r2Granted.get(), "R2, arriving after the admission, passed the waiting writer");

        proxy.setDelayMillis(0);
        releaseFirstTwo.countDown(); // the last reader out wakes W2
        assertTrue(w2.get(PATIENCE.toSeconds(), TimeUnit.SECONDS), "W2 acquired");
        assertTrue(w2BeforeR2.get(), "W2 acquired after R2");
        r1.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
        r1b.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
        r2.get(PATIENCE.toSeconds(), TimeUnit.SECONDS);
        assertTrue(r2Granted.get(), "R2 acquired after W2");
      } finally {
        observerClient.shutdown();
      }
    } finally {
      threads.shutdownNow();
    }
  }

  private static void holdRead(DistributedLock read, CountDownLatch granted, CountDownLatch release) {
    read.lock();
    try {
      granted.countDown();
      release.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      read.unlock();
    }
  }
}
