package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/** Several clients on one read/write lock: exclusion, real read concurrency, progress, crashes. */
@ExtendWith(RedisExtension.class)
class ReadWriteMultiClientTest {

  private static void spin(long micros) {
    long until = System.nanoTime() + micros * 1000;
    while (System.nanoTime() - until < 0) {
      Thread.onSpinWait();
    }
  }

  /**
   * 4 clients × 4 threads, 90% reads: a checker fails if a writer ever overlaps any other holder;
   * readers really overlap (measured concurrency > 1); writers get in; write tokens increase.
   */
  @Test
  void exclusionAndRealReadConcurrency(TestRedis redis) throws Exception {
    String name = unique("rw-checker");
    List<Turnstile> clients = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      clients.add(Turnstile.connect(redis.uri()));
    }
    AtomicInteger readersInside = new AtomicInteger();
    AtomicInteger writersInside = new AtomicInteger();
    AtomicInteger maxReaders = new AtomicInteger();
    AtomicInteger violations = new AtomicInteger();
    AtomicInteger tokenViolations = new AtomicInteger();
    AtomicLong lastWriteToken = new AtomicLong();
    AtomicLong reads = new AtomicLong();
    AtomicLong writes = new AtomicLong();
    List<Throwable> errors = new CopyOnWriteArrayList<>();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
    List<Thread> threads = new ArrayList<>();
    try {
      for (int c = 0; c < 4; c++) {
        DistributedReadWriteLock rw = clients.get(c).readWriteLock(name);
        for (int t = 0; t < 4; t++) {
          Thread th = new Thread(() -> {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            while (System.nanoTime() - end < 0) {
              if (rnd.nextInt(10) == 0) {
                rw.writeLock().lock();
                try {
                  if (writersInside.incrementAndGet() != 1 || readersInside.get() != 0) {
                    violations.incrementAndGet();
                  }
                  long token = rw.writeLock().fencingToken();
                  if (token <= lastWriteToken.get()) {
                    tokenViolations.incrementAndGet();
                  }
                  lastWriteToken.set(token);
                  spin(300);
                  writersInside.decrementAndGet();
                  writes.incrementAndGet();
                } finally {
                  rw.writeLock().unlock();
                }
              } else {
                rw.readLock().lock();
                try {
                  int n = readersInside.incrementAndGet();
                  maxReaders.accumulateAndGet(n, Math::max);
                  if (writersInside.get() != 0) {
                    violations.incrementAndGet();
                  }
                  spin(300);
                  readersInside.decrementAndGet();
                  reads.incrementAndGet();
                } finally {
                  rw.readLock().unlock();
                }
              }
            }
          }, "c" + c + "t" + t);
          th.setDaemon(true);
          th.setUncaughtExceptionHandler((x, e) -> errors.add(e));
          threads.add(th);
          th.start();
        }
      }
      for (Thread t : threads) {
        t.join(30_000);
        assertTrue(!t.isAlive(), t.getName() + " finished");
      }
      System.out.printf("rw checker: reads=%d writes=%d maxConcurrentReaders=%d%n", reads.get(), writes.get(),
          maxReaders.get());
      assertEquals(List.of(), errors);
      assertEquals(0, violations.get(), "a writer overlapped another holder");
      assertEquals(0, tokenViolations.get(), "write tokens not increasing");
      assertTrue(maxReaders.get() > 1, "readers never overlapped: " + maxReaders.get());
      assertTrue(writes.get() > 10, "writers made progress: " + writes.get());
      DistributedReadWriteLock rw = clients.get(0).readWriteLock(name);
      assertEquals(0, rw.getReadLockCount());
      assertTrue(!rw.isWriteLocked());
    } finally {
      clients.forEach(Turnstile::close);
    }
  }

  /** A steady stream of overlapping readers on two clients cannot keep a writer out. */
  @Test
  void writerProgressesUnderSteadyReaders(TestRedis redis) throws Exception {
    String name = unique("rw-starve");
    try (Turnstile a = Turnstile.connect(redis.uri()); Turnstile b = Turnstile.connect(redis.uri());
        Turnstile w = Turnstile.connect(redis.uri())) {
      AtomicBoolean stop = new AtomicBoolean();
      List<Thread> readers = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        DistributedReadWriteLock rw = (i % 2 == 0 ? a : b).readWriteLock(name);
        readers.add(TestSupport.start("reader" + i, () -> {
          while (!stop.get()) {
            rw.readLock().lock();
            try {
              Thread.sleep(ThreadLocalRandom.current().nextInt(5, 20));
            } finally {
              rw.readLock().unlock();
            }
          }
        }));
      }
      Thread.sleep(500); // readers overlapping continuously by now
      DistributedReadWriteLock rw = w.readWriteLock(name);
      long start = System.nanoTime();
      assertTrue(rw.writeLock().tryLock(5, TimeUnit.SECONDS), "writer starved by readers");
      long ms = TestSupport.millisSince(start);
      rw.writeLock().unlock();
      stop.set(true);
      for (Thread t : readers) {
        t.join(5000);
      }
      System.out.println("writer got in under steady readers after " + ms + " ms");
      assertTrue(ms < Bounds.PROMPT_MS, "writer waited " + ms + " ms");
    }
  }

  /** A reader JVM and a writer JVM killed with kill -9: the lock is free within lease + 1 s. */
  @Test
  void crashedReaderAndWriterAreReclaimed(TestRedis redis) throws Exception {
    long leaseMs = 2000;
    for (String mode : new String[] {"read", "write"}) {
      String name = unique("rw-crash-" + mode);
      try (JvmProcess holder = JvmProcess.start(RwHolderMain.class, redis.uri(), name, mode, Long.toString(leaseMs));
          Turnstile turnstile = Turnstile.connect(redis.uri())) {
        long holderToken = Long.parseLong(holder.awaitLine("HELD ", Duration.ofSeconds(30)).substring(5));
        DistributedReadWriteLock rw = turnstile.readWriteLock(name);
        // a writer waits for a crashed reader; a reader waits for a crashed writer
        DistributedLock waiting = "read".equals(mode) ? rw.writeLock() : rw.readLock();
        assertTrue(!waiting.tryLock(leaseMs + 500, TimeUnit.MILLISECONDS), "a live holder keeps it");
        AtomicLong acquiredAt = new AtomicLong();
        AtomicLong token = new AtomicLong();
        Thread waiter = TestSupport.start("waiter", () -> {
          waiting.lock();
          acquiredAt.set(System.nanoTime());
          token.set(waiting.fencingToken());
          waiting.unlock();
        });
        TestSupport.awaitWaiting(waiter);
        Thread.sleep(200);
        long killedAt = System.nanoTime();
        holder.kill9();
        waiter.join(leaseMs + 5000);
        long recoveryMs = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - killedAt);
        System.out.println("rw recovery after kill -9 of a " + mode + " holder: " + recoveryMs + " ms");
        assertTrue(acquiredAt.get() != 0, "waiter acquired after the " + mode + " holder died");
        assertTrue(recoveryMs <= leaseMs + Bounds.OVERRUN_MS, "recovered in " + recoveryMs + " ms");
        assertTrue(token.get() > holderToken);
      }
    }
  }

  /**
   * Open defect 5 (RELIABILITY), reproduced; run only on request ({@code
   * -Dturnstile.test.openDefects=true}), since it fails until the defect is fixed. A reader that
   * died while it waited (its waiting entry live for up to a lease) delays a writer that waits
   * behind a write hold by the writer's hint (half a lease: 10 s here): the write release admits
   * the waiting readers instead of waking the writer, and no reader comes to wake it on its way
   * out. The dead reader is played by one refused read attempt of a client id nobody uses. The
   * bound it should meet is that of a grace for admitted readers (1 s): a writer woken with the
   * readers, held back until they have had their turn. That fix, tried, cut the read/write
   * benchmark's throughput 3.1 times: waiting entries from before an admission stayed ~100 ms
   * with nobody holding, and held every writer back for the grace (RELIABILITY, open defect 5).
   */
  @org.junit.jupiter.api.condition.EnabledIfSystemProperty(named = "turnstile.test.openDefects", matches = "true")
  @Test
  void aWriterIsNotHeldBackByAReaderThatDiedWaiting(TestRedis redis) throws Exception {
    String name = unique("rw-dead-reader");
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofSeconds(20)).build();
    try (Turnstile a = Turnstile.connect(redis.uri(), options);
        Turnstile b = Turnstile.connect(redis.uri(), options)) {
      RedisReadWriteLock rw = (RedisReadWriteLock) a.readWriteLock(name);
      rw.writeLock().lock();
      String dead = "00000000000000de:1";
      java.util.List<Object> refused = a.engine().awaitQuietly(rw.read(dead, dead, 0), "the dead reader's attempt");
      assertEquals(0L, refused.get(0), "refused: the writer holds");
      AtomicLong acquiredAt = new AtomicLong();
      Thread writer = TestSupport.start("writer", () -> {
        DistributedLock w = b.readWriteLock(name).writeLock();
        w.lock();
        acquiredAt.set(System.nanoTime());
        w.unlock();
      });
      TestSupport.awaitBlockedInRedis(redis, b);
      long released = System.nanoTime();
      rw.writeLock().unlock();
      writer.join(30_000);
      long ms = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - released);
      System.out.println("writer behind a dead waiting reader: " + ms + " ms after the write release");
      assertTrue(acquiredAt.get() != 0, "the writer got the lock");
      // a grace of 1 s would pass; the hint is 10 s (half the lease)
      assertTrue(ms < 5_000, "the writer waited " + ms + " ms behind a reader that never came");
    }
  }
}
