package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.fault.BrokenLock;
import io.github.turnstile.fault.FencedStore;
import io.github.turnstile.fault.History;
import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import io.github.turnstile.testing.Bounds;

/**
 * Fault injection against real redis-server processes (each test starts its own), with a history
 * checker ({@link History}) and a fenced store ({@link FencedStore}). Every test prints one
 * {@code RELIABILITY ...} summary line per primitive, collected into docs/RELIABILITY.md.
 *
 * <p>The churn test runs {@value #CHURN_SECONDS_DEFAULT} s by default; with
 * {@code -Dturnstile.test.long=true} it runs {@code turnstile.test.churnSeconds} (default 300) s.
 */
class FaultInjectionTest {
  private static final long LEASE_MS = 1000;
  static final int CHURN_SECONDS_DEFAULT = 20;
  private static final int CAPACITY = 2;

  private static TurnstileOptions lease(long ms) {
    return TurnstileOptions.builder().leaseTime(Duration.ofMillis(ms)).build();
  }

  // ------------------------------------------------------------------ workers

  /** Loops until {@code stop}: tryLock, write to the store, confirm the hold a few times, unlock. */
  private static Runnable lockWorker(DistributedLock lock, String client, History history, FencedStore store,
      AtomicBoolean stop) {
    return () -> {
      ThreadLocalRandom rnd = ThreadLocalRandom.current();
      while (!stop.get()) {
        try {
          if (!lock.tryLock(200, TimeUnit.MILLISECONDS)) {
            continue;
          }
        } catch (TurnstileException e) {
          sleep(20);
          continue;
        } catch (InterruptedException e) {
          return;
        }
        long start = System.nanoTime();
        long end = start;
        long token = 0;
        try {
          token = lock.fencingToken();
          store.write(token, client);
          for (int i = 0; i < 3; i++) {
            sleep(rnd.nextInt(1, 6));
            long t = System.nanoTime();
            if (!lock.isHeldByCurrentThread()) {
              break;
            }
            end = t;
          }
        } catch (LockLostException e) {
          // lost before fencingToken(): nothing was done under it
        } finally {
          try {
            lock.unlock();
          } catch (IllegalMonitorStateException | TurnstileException e) {
            // lost (LockLostException), or Redis unreachable: the lease runs out
          }
          if (token != 0) {
            history.add(client, token, 1, start, end);
          }
        }
      }
    };
  }

  /** Loops until {@code stop}: tryAcquire one permit, hold it briefly, release. */
  private static Runnable permitWorker(DistributedSemaphore sem, String client, History history,
      AtomicLong lostAtNanos, AtomicBoolean stop) {
    return () -> {
      ThreadLocalRandom rnd = ThreadLocalRandom.current();
      while (!stop.get()) {
        try {
          if (!sem.tryAcquire(200, TimeUnit.MILLISECONDS)) {
            continue;
          }
        } catch (TurnstileException e) {
          sleep(20);
          continue;
        } catch (InterruptedException e) {
          return;
        }
        long start = System.nanoTime();
        sleep(rnd.nextInt(1, 10));
        long end = System.nanoTime();
        try {
          sem.release();
        } catch (IllegalStateException | TurnstileException e) {
          // LockLostException (an IllegalMonitorStateException) or Redis unreachable
          long lost = lostAtNanos.get();
          if (lost != 0 && lost - start > 0) {
            end = Math.min(end, lost);
          }
        }
        history.add(client, 0, 1, start, end);
      }
    };
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Quiescence: waits up to lease + 2 s for every permit to be free again; records the rest as leaked. */
  private static void checkLeaks(String uri, String lockName, String semName, History lockH, History semH) {
    try (Turnstile t = Turnstile.connect(uri)) {
      RedisLock lock = (RedisLock) t.lock(lockName);
      DistributedSemaphore sem = t.semaphore(semName, CAPACITY);
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEASE_MS + 2000);
      while (System.nanoTime() - deadline < 0 && (sem.availablePermits() != CAPACITY || lock.isLocked())) {
        sleep(50);
      }
      semH.leaked(CAPACITY - sem.availablePermits());
      lockH.leaked(lock.isLocked() ? 1 : 0);
    }
  }

  /**
   * Runs 3 clients x (1 lock thread + 1 permit thread) for {@code seconds}, calling {@code fault}
   * once after a second; returns the instant (nanoTime) the fault ended, as {@code fault} reports it.
   */
  private static long contend(String uri, String lockName, String semName, History lockH, History semH,
      FencedStore store, double seconds, java.util.function.LongSupplier fault) throws Exception {
    List<Turnstile> clients = new ArrayList<>();
    List<Thread> threads = new ArrayList<>();
    AtomicBoolean stop = new AtomicBoolean();
    long faultEnd;
    try {
      for (int i = 0; i < 3; i++) {
        String c = "c" + i;
        AtomicLong lostAt = new AtomicLong();
        Turnstile t = Turnstile.connect(uri, TurnstileOptions.builder().leaseTime(Duration.ofMillis(LEASE_MS))
            .leaseLossListener(e -> lostAt.compareAndSet(0, System.nanoTime())).build());
        clients.add(t);
        threads.add(TestSupport.start("lock-" + c,
            () -> lockWorker(t.lock(lockName), c, lockH, store, stop).run()));
        DistributedSemaphore sem = t.semaphore(semName, CAPACITY);
        threads.add(TestSupport.start("sem-" + c, () -> permitWorker(sem, c, semH, lostAt, stop).run()));
      }
      Thread.sleep(1000);
      faultEnd = fault.getAsLong();
      Thread.sleep((long) (seconds * 1000) - 1000);
    } finally {
      stop.set(true);
      for (Thread th : threads) {
        th.join(10_000);
      }
      for (Turnstile t : clients) {
        t.close();
      }
    }
    for (Thread th : threads) {
      assertFalse(th.isAlive(), th.getName() + " finished");
    }
    return faultEnd;
  }

  /** Recovery: from the end of the fault to the first acquisition that started after it. */
  private static long recoveryMillis(List<History.Hold> holds, long faultEnd) {
    return holds.stream().mapToLong(History.Hold::startNanos).filter(s -> s - faultEnd >= 0).min()
        .stream().map(s -> History.millis(s - faultEnd)).findFirst().orElse(-1);
  }

  private static void assertClean(History.Report r) {
    assertEquals(0, r.overlaps(), "overlaps: " + r);
    assertEquals(0, r.overCapacity(), "over capacity: " + r);
    assertEquals(0, r.tokenViolations(), "token order: " + r);
    assertEquals(0, r.leaked(), "leaked: " + r);
    assertTrue(r.acquisitions() > 0, "no acquisitions: " + r);
  }

  // ------------------------------------------------------------------ scenarios

  /**
   * Holder JVM frozen (SIGSTOP) past its lease: another client acquires and writes; after SIGCONT
   * the stale holder writes without checking (the store rejects it), then learns it lost the lease.
   */
  @Test
  void holderJvmPausedPastLease() throws Exception {
    String name = unique("stale");
    Path control = Files.createTempFile("turnstile-stale-", ".go");
    Files.delete(control);
    History history = new History();
    FencedStore store = new FencedStore();
    try (RedisServerProcess server = RedisServerProcess.start();
        JvmProcess holder = JvmProcess.start(StaleHolderMain.class, server.uri(), name, Long.toString(LEASE_MS),
            control.toString());
        Turnstile turnstile = Turnstile.connect(server.uri(), lease(LEASE_MS))) {
      String[] locked = holder.awaitLine("LOCKED ", Duration.ofSeconds(30)).split(" ");
      long staleToken = Long.parseLong(locked[1]);
      long staleStart = Long.parseLong(locked[2]);
      assertTrue(store.write(staleToken, "stale holder, before the pause"));
      holder.awaitLine("VALID ", Duration.ofSeconds(5));
      holder.stop();
      long stoppedAt = System.nanoTime();
      DistributedLock lock = turnstile.lock(name);
      assertTrue(lock.tryLock(LEASE_MS + 2000, TimeUnit.MILLISECONDS), "Redis expired the frozen holder's lease");
      long start = System.nanoTime();
      long recovery = History.millis(start - stoppedAt);
      long token = lock.fencingToken();
      assertTrue(store.write(token, "new holder"));
      holder.cont();
      Files.createFile(control);
      long written = Long.parseLong(holder.awaitLine("WRITE ", Duration.ofSeconds(10)).substring(6));
      boolean staleAccepted = store.write(written, "stale holder, after the pause");
      String held = holder.awaitLine("HELD ", Duration.ofSeconds(5));
      String unlock = holder.awaitLine("UNLOCK ", Duration.ofSeconds(5));
      long end = System.nanoTime();
      assertTrue(lock.isHeldByCurrentThread(), "the stale holder did not disturb the new one");
      lock.unlock();
      long lastValid = holder.output().stream().filter(l -> l.startsWith("VALID "))
          .mapToLong(l -> Long.parseLong(l.substring(6))).max().orElse(staleStart);
      history.add("frozen-jvm", staleToken, 1, staleStart, lastValid);
      history.add("test", token, 1, start, end);
      history.recovery(recovery);
      history.staleWritesRejected(store.rejected());
      History.Report r = history.checkAndPrint("holder-jvm-sigstop", "lock", 1);
      assertFalse(staleAccepted, "the fenced store rejects the stale holder's write");
      assertEquals("HELD false", held, "the resumed holder learns it lost the lease");
      assertEquals("UNLOCK lost", unlock, "its unlock throws LockLostException");
      assertTrue(token > staleToken);
      assertClean(r);
      assertTrue(recovery <= LEASE_MS + 1000, "recovered in " + recovery + " ms");
    } finally {
      Files.deleteIfExists(control);
    }
  }

  /** Redis frozen (SIGSTOP) for lease + 500 ms under contention, then SIGCONT: lock and semaphore stay safe. */
  @Test
  void redisPausedUnderContention() throws Exception {
    History lockH = new History();
    History semH = new History();
    FencedStore store = new FencedStore();
    String lockName = unique("pause-lock");
    String semName = unique("pause-sem");
    try (RedisServerProcess server = RedisServerProcess.start()) {
      long resumedAt = contend(server.uri(), lockName, semName, lockH, semH, store, 5, () -> {
        server.pause();
        sleep(LEASE_MS + 500);
        server.resume();
        return System.nanoTime();
      });
      checkLeaks(server.uri(), lockName, semName, lockH, semH);
      lockH.recovery(recoveryMillis(holdsOf(lockH), resumedAt));
      semH.recovery(recoveryMillis(holdsOf(semH), resumedAt));
      lockH.staleWritesRejected(store.rejected());
      History.Report lr = lockH.checkAndPrint("redis-sigstop", "lock", 1);
      History.Report sr = semH.checkAndPrint("redis-sigstop", "semaphore", CAPACITY);
      assertClean(lr);
      assertClean(sr);
      assertTrue(lr.maxRecoveryMillis() >= 0 && lr.maxRecoveryMillis() <= LEASE_MS + Bounds.OVERRUN_MS, lr.summaryLine());
      assertTrue(sr.maxRecoveryMillis() >= 0 && sr.maxRecoveryMillis() <= LEASE_MS + Bounds.OVERRUN_MS, sr.summaryLine());
    }
  }

  /** SCRIPT FLUSH every 100 ms under contention: NOSCRIPT falls back to EVAL, nothing breaks. */
  @Test
  void scriptFlushUnderContention() throws Exception {
    History lockH = new History();
    History semH = new History();
    FencedStore store = new FencedStore();
    String lockName = unique("flush-lock");
    String semName = unique("flush-sem");
    try (RedisServerProcess server = RedisServerProcess.start()) {
      AtomicBoolean flushing = new AtomicBoolean(true);
      Thread flusher = TestSupport.start("flusher", () -> {
        while (flushing.get()) {
          server.command("SCRIPT", "FLUSH");
          Thread.sleep(100);
        }
      });
      try {
        contend(server.uri(), lockName, semName, lockH, semH, store, 4, System::nanoTime);
      } finally {
        flushing.set(false);
        flusher.join(5000);
      }
      checkLeaks(server.uri(), lockName, semName, lockH, semH);
      String stats = server.command("INFO", "commandstats");
      assertTrue(stats.contains("cmdstat_eval:"), "fell back to EVAL");
      assertClean(lockH.checkAndPrint("script-flush", "lock", 1));
      assertClean(semH.checkAndPrint("script-flush", "semaphore", CAPACITY));
    }
  }

  /**
   * Redis killed and restarted with its data lost while a client holds the lock: the holder learns
   * of the loss at its next renewal, the lock is free, and fencing tokens keep growing (they
   * continue from the server clock).
   */
  @Test
  void redisRestartWithDataLoss() throws Exception {
    History history = new History();
    FencedStore store = new FencedStore();
    String name = unique("restart");
    try (RedisServerProcess server = RedisServerProcess.start()) {
      List<LeaseLostEvent> lost = new CopyOnWriteArrayList<>();
      TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(LEASE_MS))
          .leaseLossListener(lost::add).build();
      try (Turnstile a = Turnstile.connect(server.uri(), options);
          Turnstile b = Turnstile.connect(server.uri(), options)) {
        DistributedLock la = a.lock(name);
        la.lock();
        long start = System.nanoTime();
        long t1 = la.fencingToken();
        assertTrue(store.write(t1, "a"));
        server.restart(); // SIGKILL, no persistence: every key is gone
        long restartedAt = System.nanoTime();
        TestSupport.await("holder learns of the loss", Duration.ofMillis(LEASE_MS + 3000), () -> !la.isHeldByCurrentThread());
        long lostAt = System.nanoTime();
        history.add("a", t1, 1, start, restartedAt);
        DistributedLock lb = b.lock(name);
        long recovery = -1;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() - deadline < 0) {
          try {
            if (lb.tryLock(500, TimeUnit.MILLISECONDS)) {
              recovery = History.millis(System.nanoTime() - restartedAt);
              break;
            }
          } catch (TurnstileException e) {
            sleep(50); // still reconnecting
          }
        }
        assertTrue(recovery >= 0, "acquired after the restart");
        long start2 = System.nanoTime();
        long t2 = lb.fencingToken();
        assertTrue(store.write(t2, "b"));
        assertFalse(store.write(t1, "a, stale"), "stale token rejected");
        lb.unlock();
        history.add("b", t2, 1, start2, System.nanoTime());
        try {
          la.unlock();
        } catch (IllegalMonitorStateException | TurnstileException expected) {
          // LockLostException
        }
        history.recovery(recovery);
        history.staleWritesRejected(store.rejected());
        History.Report r = history.checkAndPrint("redis-restart-data-loss", "lock", 1);
        assertTrue(t2 > t1, "tokens keep growing across the data loss: " + t1 + " then " + t2);
        // listeners are told on the client's event thread, asynchronously
        TestSupport.await("holder told of the loss", Duration.ofSeconds(2), () -> !lost.isEmpty());
        assertTrue(History.millis(lostAt - restartedAt) <= LEASE_MS + 1000, "loss noticed within the lease");
        assertClean(r);
      }
    }
  }

  /**
   * Network cut between a holder and Redis past its lease (its connections are cut and new ones
   * refused): it declares the lease lost by its own clock, Redis expires it, another client gets
   * the lock, and after the network heals the stale holder's write is rejected by the store.
   */
  @Test
  void networkCutPastLease() throws Exception {
    History history = new History();
    FencedStore store = new FencedStore();
    String name = unique("cut");
    try (RedisServerProcess server = RedisServerProcess.start();
        TcpProxy proxy = TcpProxy.start(server.host(), server.port());
        Turnstile cut = Turnstile.connect(proxy.uri(), lease(LEASE_MS));
        Turnstile other = Turnstile.connect(server.uri(), lease(LEASE_MS))) {
      DistributedLock stale = cut.lock(name);
      stale.lock();
      long start = System.nanoTime();
      long staleToken = stale.fencingToken();
      assertTrue(store.write(staleToken, "stale, before the cut"));
      proxy.setRefuseNew(true);
      proxy.cutAll();
      long cutAt = System.nanoTime();
      long lastValid = start;
      while (true) {
        long t = System.nanoTime();
        if (!stale.isHeldByCurrentThread()) {
          break;
        }
        lastValid = t;
        sleep(5);
      }
      long noticed = History.millis(System.nanoTime() - cutAt);
      history.add("cut", staleToken, 1, start, lastValid);
      DistributedLock theirs = other.lock(name);
      assertTrue(theirs.tryLock(LEASE_MS + 2000, TimeUnit.MILLISECONDS));
      long start2 = System.nanoTime();
      long recovery = History.millis(start2 - cutAt);
      long token = theirs.fencingToken();
      assertTrue(store.write(token, "other"));
      proxy.setRefuseNew(false);
      boolean staleAccepted = store.write(staleToken, "stale, after the cut");
      try {
        stale.unlock();
      } catch (IllegalMonitorStateException | TurnstileException expected) {
        // LockLostException, or still reconnecting
      }
      assertTrue(theirs.isHeldByCurrentThread());
      theirs.unlock();
      history.add("other", token, 1, start2, System.nanoTime());
      history.recovery(recovery);
      history.staleWritesRejected(store.rejected());
      History.Report r = history.checkAndPrint("network-cut", "lock", 1);
      assertFalse(staleAccepted);
      assertTrue(noticed <= LEASE_MS + 300, "holder noticed in " + noticed + " ms");
      assertTrue(recovery <= LEASE_MS + 1000, "recovered in " + recovery + " ms");
      assertClean(r);
    }
  }

  /**
   * Server-side clock jump, simulated by cutting the lease short with PEXPIRE: the holder learns of
   * the loss at its next renewal, a waiter gets the lock, the store rejects the stale holder.
   */
  @Test
  void leaseCutShortOnServer() throws Exception {
    History history = new History();
    FencedStore store = new FencedStore();
    String name = unique("pexpire");
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(3000))
        .renewInterval(Duration.ofMillis(200)).build();
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile a = Turnstile.connect(server.uri(), options);
        Turnstile b = Turnstile.connect(server.uri(), options)) {
      RedisLock holder = (RedisLock) a.lock(name);
      holder.lock();
      long start = System.nanoTime();
      long staleToken = holder.fencingToken();
      assertTrue(store.write(staleToken, "a"));
      AtomicLong acquiredAt = new AtomicLong();
      AtomicLong token = new AtomicLong();
      DistributedLock waiterLock = b.lock(name);
      java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch written = new java.util.concurrent.CountDownLatch(1);
      Thread waiter = TestSupport.start("waiter", () -> {
        waiterLock.lock();
        acquiredAt.set(System.nanoTime());
        token.set(waiterLock.fencingToken());
        store.write(token.get(), "b");
        written.countDown();
        release.await();
        waiterLock.unlock();
      });
      TestSupport.awaitWaiting(waiter);
      Thread.sleep(100);
      server.command("PEXPIRE", holder.lockKey, "1"); // the server's clock jumped ahead by the lease
      long jumpedAt = System.nanoTime();
      long lastValid = start;
      while (true) {
        long t = System.nanoTime();
        if (!holder.isHeldByCurrentThread()) {
          break;
        }
        lastValid = t;
        sleep(5);
      }
      long noticed = History.millis(System.nanoTime() - jumpedAt);
      // the stale write comes after the new holder's: waiting for the acquisition alone let it
      // overtake that write under load (CI run 24), and the store rightly accepted it then
      assertTrue(written.await(5, TimeUnit.SECONDS), "waiter acquired and wrote");
      boolean staleAccepted = store.write(staleToken, "a, stale");
      release.countDown();
      waiter.join(5000);
      history.add("a", staleToken, 1, start, lastValid);
      history.add("b", token.get(), 1, acquiredAt.get(), System.nanoTime());
      history.recovery(History.millis(acquiredAt.get() - jumpedAt));
      history.staleWritesRejected(store.rejected());
      History.Report r = history.checkAndPrint("server-clock-jump-pexpire", "lock", 1);
      assertFalse(staleAccepted);
      assertTrue(noticed <= 1000 + Bounds.OVERRUN_MS, "renewal refused within a tick or two: " + noticed + " ms");
      // no wake token is pushed when a key expires: the waiter wakes at its BLPOP timeout (the PTTL it saw)
      assertTrue(r.maxRecoveryMillis() <= 3000 + Bounds.OVERRUN_MS, r.summaryLine());
      try {
        holder.unlock();
        throw new AssertionError("unlock of a lost lease must throw");
      } catch (LockLostException expected) {
        // loud
      }
      assertClean(r);
    }
  }

  /**
   * Many clients churning: each connects, acquires the lock or a permit, and then either releases
   * and closes, or dies holding it (closes its Turnstile without releasing: no release, no more
   * renewals). Plus a child JVM holding a permit, killed with -9 halfway. Afterwards every permit
   * and the lock are free again, and the history has no overlap and never more than the capacity.
   */
  @Test
  void manyClientsChurning() throws Exception {
    boolean longRun = Boolean.getBoolean("turnstile.test.long");
    int seconds = longRun ? Integer.getInteger("turnstile.test.churnSeconds", 300) : CHURN_SECONDS_DEFAULT;
    History lockH = new History();
    History semH = new History();
    FencedStore store = new FencedStore();
    String lockName = unique("churn-lock");
    String semName = unique("churn-sem");
    AtomicLong connects = new AtomicLong();
    AtomicLong deaths = new AtomicLong();
    List<long[]> lockDeaths = new CopyOnWriteArrayList<>(); // {deathNanos}
    try (RedisServerProcess server = RedisServerProcess.start()) {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      List<Thread> threads = new ArrayList<>();
      for (int w = 0; w < 4; w++) {
        boolean locks = w % 2 == 0;
        String id = "w" + w;
        threads.add(TestSupport.start("churn-" + id, () -> {
          ThreadLocalRandom rnd = ThreadLocalRandom.current();
          int n = 0;
          while (System.nanoTime() - end < 0) {
            String client = id + "-" + n++;
            Turnstile t = Turnstile.connect(server.uri(), lease(LEASE_MS));
            connects.incrementAndGet();
            boolean die = rnd.nextInt(4) == 0;
            try {
              if (locks) {
                DistributedLock lock = t.lock(lockName);
                if (!lock.tryLock(3, TimeUnit.SECONDS)) {
                  continue;
                }
                long start = System.nanoTime();
                long token = lock.fencingToken();
                store.write(token, client);
                sleep(rnd.nextInt(1, 20));
                long stamp = System.nanoTime();
                long validEnd = lock.isHeldByCurrentThread() ? stamp : start;
                if (die) {
                  lockDeaths.add(new long[] {System.nanoTime()});
                  deaths.incrementAndGet();
                } else {
                  lock.unlock();
                }
                lockH.add(client, token, 1, start, validEnd);
              } else {
                DistributedSemaphore sem = t.semaphore(semName, CAPACITY);
                if (!sem.tryAcquire(3, TimeUnit.SECONDS)) {
                  continue;
                }
                long start = System.nanoTime();
                sleep(rnd.nextInt(1, 20));
                long stamp = System.nanoTime();
                // as for the lock: a hold counts while its lease is valid (a thread starved past
                // the 1 s lease, watchdog included, has lost the permit: heldPermits() says so)
                long validEnd = sem.heldPermits() > 0 ? stamp : start;
                if (die) {
                  deaths.incrementAndGet();
                } else {
                  sem.release();
                }
                semH.add(client, 0, 1, start, validEnd);
              }
            } finally {
              t.close(); // after "die": no release, no renewal: like a crash, as far as Redis knows
            }
          }
        }));
      }
      // a child JVM holding one permit, killed -9 halfway through
      try (JvmProcess child = JvmProcess.start(SemaphoreHolderMain.class, server.uri(), semName,
          Integer.toString(CAPACITY), "1", Long.toString(LEASE_MS))) {
        String childId = child.awaitLine("HELD ", Duration.ofSeconds(60)).split(" ")[2];
        long childStart = System.nanoTime();
        Thread.sleep(TimeUnit.SECONDS.toMillis(seconds) / 2);
        // the child's hold counts until the kill only if its permit was still its own then: a JVM
        // descheduled past its 1 s lease (a loaded machine) loses it to the next acquisition, which
        // is the lease doing its job, not two holders (2026-11-27, JDK 25 beside burners: 5 instants)
        boolean stillHeld;
        try (Turnstile observer = Turnstile.connect(server.uri())) {
          stillHeld = observer.semaphore(semName, CAPACITY).inspect().holders().stream()
              .anyMatch(h -> h.clientId().equals(childId));
        }
        long childEnd = System.nanoTime();
        child.kill9();
        semH.add("child-jvm", 0, 1, childStart, stillHeld ? childEnd : childStart);
        System.out.println("churn: the child JVM's permit was " + (stillHeld ? "still its own" : "reclaimed")
            + " when it was killed");
        deaths.incrementAndGet();
      }
      for (Thread th : threads) {
        th.join(TimeUnit.SECONDS.toMillis(seconds) + 30_000);
        assertFalse(th.isAlive(), th.getName() + " finished");
      }
      checkLeaks(server.uri(), lockName, semName, lockH, semH);
      // recovery after each lock holder's death: until the next acquisition started
      List<History.Hold> holds = holdsOf(lockH);
      for (long[] d : lockDeaths) {
        long r = recoveryMillis(holds, d[0]);
        if (r >= 0) {
          lockH.recovery(r);
        }
      }
      lockH.staleWritesRejected(store.rejected());
      System.out.println("churn: seconds=" + seconds + " connects=" + connects + " deaths=" + deaths);
      History.Report lr = lockH.checkAndPrint(longRun ? "churn-long" : "churn", "lock", 1);
      History.Report sr = semH.checkAndPrint(longRun ? "churn-long" : "churn", "semaphore", CAPACITY);
      assertClean(lr);
      assertClean(sr);
      assertTrue(lr.maxRecoveryMillis() <= LEASE_MS + Bounds.OVERRUN_MS, lr.summaryLine());
    }
  }

  /**
   * What the churn scenario's checker must allow for: a holder JVM frozen past its lease loses its
   * permit to the next acquisition (the lease doing its job), and is told when it runs again. A
   * history that counted the frozen JVM's hold until it was killed saw three holders of two permits
   * (a JDK 25 run beside burners at load 15-23); the scenario now counts each hold while its lease
   * was valid, as it always did for the lock.
   */
  @Test
  void aHolderJvmFrozenPastItsLeaseLosesItsPermitAndIsTold() throws Exception {
    String name = unique("frozen-sem");
    try (RedisServerProcess server = RedisServerProcess.start();
        JvmProcess child = JvmProcess.start(SemaphoreHolderMain.class, server.uri(), name, "1", "1",
            Long.toString(LEASE_MS))) {
      String childId = child.awaitLine("HELD ", Duration.ofSeconds(60)).split(" ")[2];
      child.stop();
      try (Turnstile t = Turnstile.connect(server.uri(), lease(LEASE_MS))) {
        DistributedSemaphore s = t.semaphore(name, 1);
        assertTrue(s.tryAcquire(30, TimeUnit.SECONDS), "the frozen JVM's permit comes back after its lease");
        assertFalse(s.inspect().holders().stream().anyMatch(h -> h.clientId().equals(childId)),
            "the permit is no longer the frozen JVM's");
        child.cont();
        child.awaitLine("LOST ", Duration.ofSeconds(30));
        s.release();
      }
    }
  }

  private static List<History.Hold> holdsOf(History h) {
    return h.holds();
  }

  /**
   * Check the checker: a broken lock (no owner check on unlock, no renewal) whose holders sometimes
   * outlive their TTL. The checker must report overlaps; the same workload on DistributedLock is
   * clean.
   */
  @Test
  void checkerCatchesABrokenLock() throws Exception {
    String name = unique("broken");
    long ttl = 50;
    History broken = new History();
    try (RedisServerProcess server = RedisServerProcess.start()) {
      RedisClient client = RedisClient.create(server.uri());
      List<StatefulRedisConnection<String, String>> conns = new ArrayList<>();
      List<Thread> threads = new ArrayList<>();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
      try {
        for (int i = 0; i < 3; i++) {
          StatefulRedisConnection<String, String> c = client.connect();
          conns.add(c);
          BrokenLock lock = new BrokenLock(c.sync(), name, ttl);
          String me = "b" + i;
          threads.add(TestSupport.start(me, () -> {
            ThreadLocalRandom rnd = ThreadLocalRandom.current();
            while (System.nanoTime() - end < 0) {
              lock.lock(me);
              long start = System.nanoTime();
              long hold = rnd.nextInt(4) == 0 ? ttl + 30 : 5; // sometimes past the TTL
              Thread.sleep(hold);
              lock.unlock();
              // its own (wrong) belief: valid until it released, or until its TTL ran out
              broken.add(me, 0, 1, start, Math.min(System.nanoTime(), start + TimeUnit.MILLISECONDS.toNanos(ttl)));
            }
          }));
        }
        for (Thread t : threads) {
          t.join(10_000);
        }
      } finally {
        conns.forEach(StatefulRedisConnection::close);
        client.shutdown();
      }
      History.Report r = broken.checkAndPrint("checker-vs-broken-lock", "broken-lock", 1);
      assertTrue(r.overlaps() > 0 || r.overCapacity() > 0, "the checker must catch the broken lock: " + r);
      // and a fenced store catches it too: tokens would be needed, the broken lock has none
      FencedStore store = new FencedStore();
      assertTrue(store.write(5, "x"));
      assertFalse(store.write(4, "y"));
      assertTrue(store.write(5, "z"));
      assertEquals(1, store.rejected());
    }
  }
}
