package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Waiting never polls, and blocking connections grow with contended locks, not with threads.
 * Each test runs its own redis-server so that command counts and client lists are its own.
 */
class NoPollingAndConnectionsTest {
  private RedisServerProcess server;
  private TestRedis redis;

  @BeforeEach
  void start() {
    server = RedisServerProcess.start();
    redis = TestRedis.of(server.uri(), server.host(), server.port(), "process");
  }

  @AfterEach
  void stop() {
    server.close();
  }

  /** A thread waiting 3 s behind a holder sends O(1) commands, not one per time slice. */
  @Test
  void waiterSendsConstantCommands() throws Exception {
    String name = unique("no-poll");
    try (Turnstile holderClient = Turnstile.connect(redis.uri(), TestSupport.UNCACHED);
        Turnstile waiterClient = Turnstile.connect(redis.uri(), TestSupport.UNCACHED)) {
      DistributedLock holder = holderClient.lock(name);
      holder.lock();
      DistributedLock lock = waiterClient.lock(name);
      Map<String, Long> before = TestSupport.commandStats(redis);
      CountDownLatch acquired = new CountDownLatch(1);
      Thread waiter = TestSupport.start("waiter", () -> {
        lock.lock();
        acquired.countDown();
        lock.unlock();
      });
      Thread.sleep(3000);
      Map<String, Long> during = TestSupport.commandStats(redis);
      holder.unlock();
      assertTrue(acquired.await(5, TimeUnit.SECONDS));
      waiter.join();
      Map<String, Long> after = TestSupport.commandStats(redis);
      // Each window counts every script Redis ran, so it leaves out the identity record's writes
      // (DESIGN §16): they are per client (the holder's thread named at a watchdog scan after its
      // first hold, the waiter's thread after it is granted, once a lease), not sent by waiting,
      // and land when the watchdog's scan does. Bounded apart: at most one per client per window.
      long waitingIdentity = TestSupport.identityWrites(before, during);
      long handoffIdentity = TestSupport.identityWrites(during, after);
      long waitingScripts = TestSupport.totalCalls(during, "evalsha", "eval")
          - TestSupport.totalCalls(before, "evalsha", "eval") - waitingIdentity;
      long handoffScripts = TestSupport.totalCalls(after, "evalsha", "eval")
          - TestSupport.totalCalls(during, "evalsha", "eval") - handoffIdentity;
      // The waiter's blocking commands, over both windows: Redis 7.0 counts a BLPOP when it
      // blocks (the waiting window), Redis 7.2 and Valkey 8 when it returns (the hand-off's).
      long blocking = TestSupport.totalCalls(after, "blpop", "blmove") - TestSupport.totalCalls(before, "blpop", "blmove");
      System.out.println("while waiting 3 s: " + waitingScripts + " scripts, then the hand-off: " + handoffScripts
          + " scripts; " + blocking + " blocking commands in both; identity writes " + waitingIdentity + ", "
          + handoffIdentity + "; " + during + " -> " + after);
      // one failed attempt + one BLPOP; a 10 ms poller would have sent ~300
      long waitingCommands = waitingScripts + blocking;
      assertTrue(waitingCommands <= 3, "waiter sent " + waitingCommands + " commands in 3 s");
      assertTrue(waitingIdentity <= 2, "identity writes while waiting, at most one per client: " + waitingIdentity);
      // release + winning attempt + the waiter's own release (+ at most one stale re-check)
      assertTrue(handoffScripts <= 4, "handoff took " + handoffScripts + " scripts");
      assertTrue(handoffIdentity <= 2, "identity writes in the hand-off, at most one per client: " + handoffIdentity);
    }
  }

  /** 1000 threads waiting on one lock use one blocking connection; nothing stays blocked after. */
  @Test
  void thousandWaitersOneConnection() throws Exception {
    String name = unique("thousand");
    try (Turnstile holderClient = Turnstile.connect(redis.uri());
        Turnstile waiters = Turnstile.connect(redis.uri())) {
      DistributedLock holder = holderClient.lock(name);
      holder.lock();
      DistributedLock lock = waiters.lock(name);
      AtomicInteger done = new AtomicInteger();
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        threads.add(TestSupport.start("w" + i, () -> {
          lock.lock();
          done.incrementAndGet();
          lock.unlock();
        }));
      }
      Thread.sleep(1000);
      assertEquals(1, connections(waiters, "blocking"), "blocking connections for 1000 waiters");
      assertEquals(1, connections(waiters, "main"));
      holder.unlock();
      TestSupport.await("all 1000 acquired", Duration.ofSeconds(60), () -> done.get() == 1000);
      for (Thread t : threads) {
        t.join();
      }
      assertTrue(redis.command("INFO", "clients").contains("blocked_clients:0"));
      assertEquals(1, waiters.engine().pool.openConnections());
    }
  }

  /**
   * More contended locks than blocking connections: connections stay within the pool bound, and
   * every waiter still gets its lock promptly after release (waiters without a connection take
   * one as soon as another waiter is done with it).
   */
  @Test
  void poolBoundHoldsAndWaitersProgress() throws Exception {
    int locks = 20;
    int pool = 4;
    try (Turnstile holderClient = Turnstile.connect(redis.uri());
        Turnstile waiters = Turnstile.connect(redis.uri(),
            TurnstileOptions.builder().blockingPoolSize(pool).build())) {
      List<DistributedLock> held = new ArrayList<>();
      List<String> names = new ArrayList<>();
      for (int i = 0; i < locks; i++) {
        names.add(unique("pool-" + i));
        DistributedLock l = holderClient.lock(names.get(i));
        l.lock();
        held.add(l);
      }
      AtomicInteger done = new AtomicInteger();
      for (int i = 0; i < locks; i++) {
        DistributedLock l = waiters.lock(names.get(i));
        for (int j = 0; j < 5; j++) {
          TestSupport.start("w" + i + "-" + j, () -> {
            l.lock();
            done.incrementAndGet();
            l.unlock();
          });
        }
      }
      Thread.sleep(1000);
      assertTrue(connections(waiters, "blocking") <= pool, "blocking connections within the bound");
      long start = System.nanoTime();
      for (DistributedLock l : held) {
        l.unlock();
      }
      TestSupport.await("all waiters acquired", Duration.ofSeconds(10), () -> done.get() == locks * 5);
      long ms = TestSupport.millisSince(start);
      System.out.println(locks * 5 + " waiters on " + locks + " locks with pool " + pool + " done in " + ms + " ms");
      assertTrue(ms < 5000, "waiters progressed without waiting out leases: " + ms + " ms");
      assertTrue(connections(waiters, "blocking") <= pool);
    }
  }

  private long connections(Turnstile t, String kind) {
    String marker = "name=turnstile:" + t.engine().clientId + ":" + kind;
    return redis.command("CLIENT", "LIST").lines().filter(l -> l.contains(marker + " ")).count();
  }
}
