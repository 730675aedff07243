package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The semaphore and the read/write lock keep the lock's promises: a waiter sends O(1) commands
 * while it waits (no polling), and a lost lease is loud. Each test runs its own redis-server so
 * that command counts are its own.
 */
class WaitCostAndLeaseLossTest {
  private static final String[] WAIT_COMMANDS = {"evalsha", "eval", "blpop", "blmove"};
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

  /**
   * The waiting commands Redis ran in the next {@code millis}, less the identity record's writes
   * (DESIGN §16; {@link TestSupport#identityWrites}): those are per client, at a watchdog scan (the
   * holder's thread named after its first hold, a rewrite once a lease), not sent by waiting. At
   * most one per client, of the two here.
   */
  private long waitCommandsDuring(long millis) throws InterruptedException {
    Map<String, Long> before = TestSupport.commandStats(redis);
    Thread.sleep(millis);
    Map<String, Long> after = TestSupport.commandStats(redis);
    long identity = TestSupport.identityWrites(before, after);
    assertTrue(identity <= 2, "identity writes in " + millis + " ms, at most one per client: " + identity);
    return TestSupport.totalCalls(after, WAIT_COMMANDS) - TestSupport.totalCalls(before, WAIT_COMMANDS) - identity;
  }

  /** A semaphore waiter blocked 3 s behind another client's permits sends O(1) commands. */
  @Test
  void semaphoreWaiterDoesNotPoll() throws Exception {
    String name = unique("sem-no-poll");
    try (Turnstile holderClient = Turnstile.connect(redis.uri());
        Turnstile waiterClient = Turnstile.connect(redis.uri())) {
      DistributedSemaphore holder = holderClient.semaphore(name, 1);
      holder.acquire();
      DistributedSemaphore s = waiterClient.semaphore(name, 1);
      CountDownLatch got = new CountDownLatch(1);
      Thread waiter = TestSupport.start("waiter", () -> {
        s.acquire();
        got.countDown();
        s.release();
      });
      TestSupport.awaitWaiting(waiter);
      long commands = waitCommandsDuring(3000);
      System.out.println("semaphore waiter: " + commands + " commands in 3 s");
      assertTrue(commands <= 2, "waiter sent " + commands + " commands in 3 s");
      holder.release();
      assertTrue(got.await(2, TimeUnit.SECONDS), "woken by the release");
      waiter.join();
    }
  }

  /** Readers waiting behind a writer, and a writer waiting behind a reader, send O(1) commands. */
  @Test
  void readWriteWaitersDoNotPoll() throws Exception {
    String name = unique("rw-no-poll");
    try (Turnstile a = Turnstile.connect(redis.uri()); Turnstile b = Turnstile.connect(redis.uri())) {
      DistributedReadWriteLock mine = a.readWriteLock(name);
      DistributedReadWriteLock theirs = b.readWriteLock(name);
      for (boolean writerHolds : new boolean[] {true, false}) {
        DistributedLock held = writerHolds ? mine.writeLock() : mine.readLock();
        DistributedLock wanted = writerHolds ? theirs.readLock() : theirs.writeLock();
        held.lock();
        CountDownLatch got = new CountDownLatch(1);
        Thread waiter = TestSupport.start("waiter", () -> {
          wanted.lock();
          got.countDown();
          wanted.unlock();
        });
        TestSupport.awaitWaiting(waiter);
        Thread.sleep(100);
        long commands = waitCommandsDuring(3000);
        System.out.println((writerHolds ? "reader" : "writer") + " waiter: " + commands + " commands in 3 s");
        assertTrue(commands <= 2, "waiter sent " + commands + " commands in 3 s");
        held.unlock();
        assertTrue(got.await(2, TimeUnit.SECONDS), "woken by the release");
        waiter.join();
      }
    }
  }

  /**
   * A reader behind a writer of its own JVM, while another reader of that JVM already waits in
   * Redis, sends nothing: readers and threads queue at one gate, and only its head waits in Redis.
   * (It used to attempt once at its own gate, and before that twice.) The write release admits
   * the waiting head, and the reader after it, whose attempt carries the time the JVM's readers
   * have waited since, is admitted too.
   */
  @Test
  void aReaderQueuedBehindItsOwnJvmsWaitingReaderSendsNothing() throws Exception {
    String name = unique("rw-own-writer");
    String rwait = "{turnstile:" + name + "}:rw:rwait";
    try (Turnstile a = Turnstile.connect(redis.uri())) {
      DistributedReadWriteLock rw = a.readWriteLock(name);
      rw.writeLock().lock();
      java.util.concurrent.CompletableFuture<LockHold> first = rw.readLock().lockAsync();
      TestSupport.await("the first reader's waiting entry", Duration.ofSeconds(10),
          () -> redis.command("ZCARD", rwait).trim().equals("1"));
      // the async reader's first attempt does not subscribe; it subscribes and attempts again at
      // once, and that must land before the window: wait until this client has the subscription's
      // confirmation, the head has no attempt in flight, and no script ran for 300 ms (Redis
      // counting the SUBSCRIBE was not enough beside 4 CPU burners: the confirmation reached the
      // client later, and the attempt after it fell in the window)
      RedisReadWriteLock.ReadSide side = (RedisReadWriteLock.ReadSide) rw.readLock();
      TestSupport.await("the first reader subscribed and waits", Duration.ofSeconds(30), () -> {
        String head = side.gateState();
        if (!a.engine().subscriptions.describe().contains("ready=true") || head == null
            || !head.contains("inFlight=none") || !head.contains("waitTimer=armed")) {
          return false;
        }
        Map<String, Long> s1 = TestSupport.commandStats(redis);
        try {
          Thread.sleep(300);
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
        Map<String, Long> s2 = TestSupport.commandStats(redis);
        return s2.getOrDefault("subscribe", 0L) >= 1
            && TestSupport.totalCalls(s2, "evalsha", "eval") == TestSupport.totalCalls(s1, "evalsha", "eval");
      });
      Map<String, Long> before = TestSupport.commandStats(redis);
      CountDownLatch got = new CountDownLatch(1);
      Thread reader = TestSupport.start("reader", () -> {
        rw.readLock().lock();
        got.countDown();
        rw.readLock().unlock();
      });
      TestSupport.awaitWaiting(reader);
      TestSupport.await("queued behind the first reader", Duration.ofSeconds(10),
          ((RedisReadWriteLock.ReadSide) rw.readLock())::gateQueued);
      Thread.sleep(200);
      assertEquals("1", redis.command("ZCARD", rwait).trim(), "one waiting entry: the head's");
      Map<String, Long> after = TestSupport.commandStats(redis);
      // less the identity record's writes (the reader's thread is not named: it holds nothing yet;
      // the writer's may be, at a watchdog scan): per client, not the reader's
      long identity = TestSupport.identityWrites(before, after);
      assertTrue(identity <= 1, "identity writes, at most one for the one client: " + identity);
      long scripts = TestSupport.totalCalls(after, "evalsha", "eval") - TestSupport.totalCalls(before, "evalsha", "eval")
          - identity;
      assertEquals(0L, scripts, "scripts run before the reader waited: " + before + " -> " + after);
      rw.writeLock().unlock();
      assertTrue(got.await(5, TimeUnit.SECONDS), "admitted by the write release");
      first.get(5, TimeUnit.SECONDS).close();
      reader.join();
    }
  }

  /**
   * A semaphore client cut off from Redis past its lease: others reclaim its permits, the client
   * is told (listener), and releasing the lost permits throws LockLostException, not a silent
   * success and not a permit created from nothing.
   */
  @Test
  void semaphoreLeaseLossIsLoud() throws Exception {
    String name = unique("sem-loss");
    List<LeaseLostEvent> events = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofMillis(1000)).build();
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile cutOff = Turnstile.connect(proxy.uri(), options);
        Turnstile other = Turnstile.connect(redis.uri())) {
      DistributedSemaphore s = cutOff.semaphore(name, 2);
      s.addLeaseLossListener(events::add);
      s.acquire(2);
      proxy.setPaused(true);
      DistributedSemaphore theirs = other.semaphore(name, 2);
      assertTrue(theirs.tryAcquire(2, 5, TimeUnit.SECONDS), "the cut-off client's permits were reclaimed");
      TestSupport.await("loss reported", Duration.ofSeconds(3), () -> events.size() == 1);
      assertEquals(0, s.heldPermits());
      proxy.setPaused(false);
      assertThrows(LockLostException.class, () -> s.release(2));
      assertThrows(IllegalStateException.class, s::release, "nothing more to release");
      theirs.release(2);
      long[] state = ((RedisSemaphore) theirs).state();
      assertEquals(2, state[2], "exactly the 2 permits are free: none lost, none made");
      assertEquals(0, state[3]);
    }
  }

  /** A reading thread whose lease key is deleted learns it: not held, unlock throws, listener told. */
  @Test
  void readLeaseLossIsLoud() throws Exception {
    List<LeaseLostEvent> events = new CopyOnWriteArrayList<>();
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(200))
        .leaseLossListener(events::add)
        .build();
    try (Turnstile turnstile = Turnstile.connect(redis.uri(), options)) {
      DistributedReadWriteLock rw = turnstile.readWriteLock(unique("rw-loss"));
      DistributedLock read = rw.readLock();
      read.lock();
      long token = read.fencingToken();
      String leaseKeys = redis.command("KEYS", "*:rw:rd:*");
      for (String key : leaseKeys.split("\n")) {
        redis.command("DEL", key.trim());
      }
      TestSupport.await("loss detected", Duration.ofSeconds(3), () -> !read.isHeldByCurrentThread());
      TestSupport.await("listener told", Duration.ofSeconds(2), () -> events.size() == 1);
      assertEquals(token, events.get(0).fencingToken());
      assertEquals(0, rw.getReadHoldCount());
      assertThrows(LockLostException.class, read::fencingToken);
      assertThrows(LockLostException.class, read::unlock);
      assertFalse(rw.isWriteLocked());
      assertTrue(rw.writeLock().tryLock(), "the lost read hold no longer blocks writers");
      rw.writeLock().unlock();
    }
  }
}
