package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/** Several clients on one semaphore: capacity is never exceeded, no permit is ever lost or made. */
@ExtendWith(RedisExtension.class)
class SemaphoreMultiClientTest {

  /**
   * 4 clients × 4 threads do 10,000 acquire/release cycles in every mode (acquire, acquire(2),
   * timed tryAcquire, uninterruptible) under random interrupts and timeouts. A checker fails if
   * more than {@code permits} permits are held at once; at quiescence free + held == capacity,
   * and every thread, multi-permit ones included, made progress.
   */
  @Test
  void neverOverCapacityAndNothingLost(TestRedis redis) throws Exception {
    int permits = 4;
    int clients = 4;
    int threadsPerClient = 4;
    int cycles = 10_000;
    String name = unique("sem-checker");
    List<Turnstile> turnstiles = new ArrayList<>();
    List<DistributedSemaphore> semaphores = new ArrayList<>();
    for (int i = 0; i < clients; i++) {
      Turnstile t = Turnstile.connect(redis.uri());
      turnstiles.add(t);
      semaphores.add(t.semaphore(name, permits));
    }
    AtomicInteger inUse = new AtomicInteger();
    AtomicInteger maxInUse = new AtomicInteger();
    AtomicInteger overCapacity = new AtomicInteger();
    AtomicLong done = new AtomicLong();
    AtomicLong interrupts = new AtomicLong();
    AtomicLong timeouts = new AtomicLong();
    AtomicLongArray perThread = new AtomicLongArray(clients * threadsPerClient);
    List<Thread> threads = new ArrayList<>();
    List<Throwable> errors = new CopyOnWriteArrayList<>();
    try {
      for (int c = 0; c < clients; c++) {
        DistributedSemaphore s = semaphores.get(c);
        for (int t = 0; t < threadsPerClient; t++) {
          int id = c * threadsPerClient + t;
          Thread th = new Thread(() -> {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            while (done.get() < cycles) {
              int n = id % 4 == 1 ? 2 : 1;
              boolean got;
              try {
                switch (id % 4) {
                  case 0, 1 -> { s.acquire(n); got = true; }
                  case 2 -> got = s.tryAcquire(n, rnd.nextInt(1, 20), TimeUnit.MILLISECONDS);
                  default -> { s.acquireUninterruptibly(n); got = true; }
                }
              } catch (InterruptedException e) {
                interrupts.incrementAndGet();
                continue;
              }
              if (!got) {
                timeouts.incrementAndGet();
                continue;
              }
              int now = inUse.addAndGet(n);
              maxInUse.accumulateAndGet(now, Math::max);
              if (now > permits) {
                overCapacity.incrementAndGet();
              }
              long until = System.nanoTime() + 100_000; // hold ~100 us so overlaps can show
              while (System.nanoTime() - until < 0) {
                Thread.onSpinWait();
              }
              inUse.addAndGet(-n);
              done.incrementAndGet();
              perThread.incrementAndGet(id);
              Thread.interrupted(); // an interrupt meant for the wait may land here; drop it
              s.release(n);
            }
          }, "c" + c + "t" + t);
          th.setDaemon(true);
          th.setUncaughtExceptionHandler((x, e) -> errors.add(e));
          threads.add(th);
          th.start();
        }
      }
      ThreadLocalRandom rnd = ThreadLocalRandom.current();
      long safety = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (done.get() < cycles && System.nanoTime() - safety < 0 && errors.isEmpty()) {
        Thread.sleep(rnd.nextInt(2, 15));
        threads.get(rnd.nextInt(threads.size())).interrupt();
      }
      for (Thread t : threads) {
        t.join(30_000);
        assertTrue(!t.isAlive(), t.getName() + " finished");
      }
      assertEquals(List.of(), errors);
      System.out.printf("cycles=%d interrupts=%d timeouts=%d maxInUse=%d perThread=%s%n",
          done.get(), interrupts.get(), timeouts.get(), maxInUse.get(), perThread);
      assertTrue(done.get() >= cycles);
      assertEquals(0, overCapacity.get(), "more than " + permits + " permits held at once");
      for (int i = 0; i < perThread.length(); i++) {
        if (i % 4 != 2) { // timed tryAcquire threads may lose every race
          assertTrue(perThread.get(i) > 0, "thread " + i + " starved: " + perThread);
        }
      }
      for (DistributedSemaphore s : semaphores) {
        assertEquals(0, s.heldPermits());
      }
      long[] state = ((RedisSemaphore) semaphores.get(0)).state();
      assertEquals(0, state[1], "no debt: " + Arrays.toString(state));
      assertEquals(permits, state[2], "all permits free at quiescence: " + Arrays.toString(state));
      assertEquals(0, state[3], "none held: " + Arrays.toString(state));
    } finally {
      for (Turnstile t : turnstiles) {
        t.close();
      }
    }
  }

  /** Blocked waiters of different clients are served in the order they started waiting. */
  @Test
  void blockedWaitersAcrossClientsAreServedFifo(TestRedis redis) throws Exception {
    String name = unique("sem-fifo");
    int waiters = 5;
    List<Turnstile> turnstiles = new ArrayList<>();
    try {
      Turnstile holderClient = Turnstile.connect(redis.uri());
      turnstiles.add(holderClient);
      DistributedSemaphore holder = holderClient.semaphore(name, 1);
      holder.acquire();
      List<Integer> order = new CopyOnWriteArrayList<>();
      List<Thread> threads = new ArrayList<>();
      int blockedBefore = blockedClients(redis);
      for (int i = 0; i < waiters; i++) {
        Turnstile t = Turnstile.connect(redis.uri());
        turnstiles.add(t);
        DistributedSemaphore s = t.semaphore(name, 1);
        int id = i;
        threads.add(TestSupport.start("w" + i, () -> {
          s.acquire();
          order.add(id);
          s.release();
        }));
        int expected = blockedBefore + i + 1;
        TestSupport.await("waiter " + i + " blocked in Redis", Duration.ofSeconds(5),
            () -> blockedClients(redis) >= expected);
      }
      holder.release();
      for (Thread t : threads) {
        t.join(10_000);
      }
      assertEquals(List.of(0, 1, 2, 3, 4), order);
    } finally {
      for (Turnstile t : turnstiles) {
        t.close();
      }
    }
  }

  private static int blockedClients(TestRedis redis) {
    for (String line : redis.command("INFO", "clients").split("\r?\n")) {
      if (line.startsWith("blocked_clients:")) {
        return Integer.parseInt(line.substring("blocked_clients:".length()).trim());
      }
    }
    throw new AssertionError("no blocked_clients in INFO");
  }

  /** A holder JVM killed with kill -9: its permits are back within lease + 1 s; none lost. */
  @Test
  void permitsOfKilledHolderAreReclaimed(TestRedis redis) throws Exception {
    long leaseMs = 2000;
    String name = unique("sem-crash");
    try (JvmProcess holder = JvmProcess.start(SemaphoreHolderMain.class, redis.uri(), name, "3", "2",
            Long.toString(leaseMs));
        Turnstile turnstile = Turnstile.connect(redis.uri())) {
      holder.awaitLine("HELD ", Duration.ofSeconds(30));
      DistributedSemaphore s = turnstile.semaphore(name, 3);
      s.acquire(); // the one free permit
      assertTrue(!s.tryAcquire(leaseMs + 500, TimeUnit.MILLISECONDS), "a live holder keeps its permits");
      AtomicLong acquiredAt = new AtomicLong();
      Thread waiter = TestSupport.start("waiter", () -> {
        s.acquire(2);
        acquiredAt.set(System.nanoTime());
      });
      TestSupport.awaitWaiting(waiter);
      Thread.sleep(200);
      long killedAt = System.nanoTime();
      holder.kill9();
      waiter.join(leaseMs + 5000);
      long recoveryMs = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - killedAt);
      System.out.println("semaphore recovery after kill -9: " + recoveryMs + " ms (lease " + leaseMs + " ms)");
      assertTrue(acquiredAt.get() != 0, "waiter got the dead holder's permits");
      assertTrue(recoveryMs <= leaseMs + Bounds.OVERRUN_MS, "recovered in " + recoveryMs + " ms");
      assertEquals(3, s.heldPermits());
      s.release(3);
      long[] state = ((RedisSemaphore) s).state();
      assertEquals(3, state[2], "all 3 permits free again: " + Arrays.toString(state));
      assertEquals(0, state[3], Arrays.toString(state));
    }
  }
}
