package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.Inspection.Holder;
import io.github.turnstile.Inspection.Kind;
import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * "Who holds it?": inspections from a third client name the right holder (application, host,
 * process, thread), token, lease and waiters; a crashed holder's lease is seen running out; an
 * unknown name answers "not held" and creates no key; bad input is refused before anything is
 * sent.
 */
@ExtendWith(RedisExtension.class)
class InspectionTest {
  private static final long LEASE_MS = 3000;

  /** Polls inspections until one satisfies {@code done}; fails with the last one after 30 s. */
  private static Inspection until(DistributedLock lock, String what, Predicate<Inspection> done) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    Inspection last = null;
    while (System.nanoTime() - deadline < 0) {
      last = lock.inspect();
      if (done.test(last)) {
        return last;
      }
      Thread.sleep(20);
    }
    fail("timed out waiting for " + what + "; last inspection: " + last);
    return null;
  }

  @Test
  void aThirdProcessNamesTheHolderItsThreadTokenAndTheWaiter(TestRedis redis) throws Exception {
    String name = unique("inspect");
    Instant before = Instant.now().minusSeconds(5);
    try (JvmProcess holder = JvmProcess.start(InspectedMain.class, redis.uri(), name, Long.toString(LEASE_MS),
            "payroll", "hold");
        Turnstile third = Turnstile.connect(redis.uri())) {
      String[] locked = holder.awaitLine("LOCKED ", Duration.ofSeconds(60)).split(" ");
      long token = Long.parseLong(locked[1]);
      String threadId = locked[2];
      DistributedLock lock = third.lock(name);
      try (JvmProcess waiter = JvmProcess.start(InspectedMain.class, redis.uri(), name, Long.toString(LEASE_MS),
          "billing", "wait")) {
        waiter.awaitLine("WAITING ", Duration.ofSeconds(60));
        // the holder names its thread in its identity record within a watchdog scan of the grant
        Inspection seen = until(lock, "the holder's thread name and one waiting client",
            i -> i.isHeld() && i.holders().get(0).threadName() != null && i.waiting() == 1);
        System.out.println("inspection: " + seen);
        assertEquals(Kind.LOCK, seen.kind());
        assertEquals(name, seen.name());
        assertEquals(1, seen.holderCount());
        Holder h = seen.holders().get(0);
        assertEquals("payroll", h.clientName());
        assertEquals(holder.pid(), h.pid());
        assertEquals(Identity.hostName(), h.host());
        assertEquals(threadId, h.owner());
        assertEquals("payroll-worker", h.threadName());
        assertEquals(token, h.fencingToken());
        assertEquals(16, h.clientId().length());
        assertFalse(h.isWriter());
        assertNotNull(h.acquiredAt());
        assertTrue(h.acquiredAt().isAfter(before) && h.acquiredAt().isBefore(Instant.now().plusSeconds(5)),
            "acquired at " + h.acquiredAt());
        assertTrue(h.leaseRemaining().toMillis() > 0 && h.leaseRemaining().toMillis() <= LEASE_MS,
            "lease left " + h.leaseRemaining());
        // the same answer by name, without the primitive, and the live holder keeps renewing
        Inspection byName = third.inspect(Kind.LOCK, name);
        assertEquals(h.clientId(), byName.holders().get(0).clientId());
        Thread.sleep(LEASE_MS);
        assertEquals(token, lock.inspect().holders().get(0).fencingToken(), "a live holder keeps the lock");

        // the holder crashes: the waiter (another process) becomes the holder, and is named
        holder.kill9();
        long waiterToken = Long.parseLong(waiter.awaitLine("LOCKED ", Duration.ofSeconds(60)).split(" ")[1]);
        Inspection after = until(lock, "the waiter named as the holder",
            i -> i.isHeld() && "billing-worker".equals(i.holders().get(0).threadName()));
        assertEquals("billing", after.holders().get(0).clientName());
        assertEquals(waiter.pid(), after.holders().get(0).pid());
        assertEquals(waiterToken, after.holders().get(0).fencingToken());
        assertTrue(waiterToken > token);
        assertEquals(0, after.waiting(), after.toString());
      }
    }
  }

  @Test
  void aCrashedHoldersLeaseIsSeenRunningOutThenNobody(TestRedis redis) throws Exception {
    String name = unique("inspect-crash");
    try (JvmProcess holder = JvmProcess.start(InspectedMain.class, redis.uri(), name, Long.toString(LEASE_MS),
            "crasher", "hold");
        Turnstile third = Turnstile.connect(redis.uri())) {
      long token = Long.parseLong(holder.awaitLine("LOCKED ", Duration.ofSeconds(60)).split(" ")[1]);
      DistributedLock lock = third.lock(name);
      until(lock, "the holder named", i -> i.isHeld() && i.holders().get(0).threadName() != null);
      holder.kill9();
      // Without renewals the lease left only shrinks; then nobody holds it.
      List<Long> lefts = new ArrayList<>();
      Inspection i;
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LEASE_MS + 30_000);
      while ((i = lock.inspect()).isHeld()) {
        Holder h = i.holders().get(0);
        assertEquals(token, h.fencingToken());
        assertEquals("crasher", h.clientName(), "the identity outlives the holder's leases");
        lefts.add(h.leaseRemaining().toMillis());
        assertTrue(System.nanoTime() - deadline < 0, "still held long after the lease: " + lefts);
        Thread.sleep(100);
      }
      System.out.println("lease left after kill -9, every 100 ms: " + lefts);
      assertTrue(lefts.size() >= 3, "saw it run out: " + lefts);
      for (int k = 1; k < lefts.size(); k++) {
        assertTrue(lefts.get(k) <= lefts.get(k - 1), "never renewed after the crash: " + lefts);
      }
      assertFalse(i.isHeld());
      assertTrue(i.holders().isEmpty());
      assertEquals(0, i.holderCount());
    }
  }

  @Test
  void unknownNamesAreNotHeldAndCreateNoKeys(TestRedis redis) throws Exception {
    String name = unique("nobody");
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      for (Kind kind : Kind.values()) {
        Inspection i = t.inspect(kind, name);
        assertFalse(i.isHeld(), i.toString());
        assertFalse(i.exists(), i.toString());
        assertEquals(0, i.holderCount());
        assertEquals(0, i.waiting());
        assertTrue(i.holders().isEmpty());
      }
      assertFalse(t.lock(name).inspect().isHeld());
      assertFalse(t.readWriteLock(name).inspect().isHeld());
      assertEquals("", keysOf(redis, name), "no key created for " + name);
    }
  }

  /** The keys whose names contain {@code name}, on every master (a Cluster: InspectionOnClusterTest). */
  private static String keysOf(TestRedis redis, String name) {
    StringBuilder keys = new StringBuilder();
    for (String reply : redis.commandOnEachMaster("KEYS", "*" + name + "*")) {
      keys.append(reply.replace("[", "").replace("]", "").trim());
    }
    return keys.toString();
  }

  /**
   * Runs a command on one key's master: on every master, keeping the reply that is not a
   * redirection (a Cluster); on one server, there.
   */
  private static String onKeysMaster(TestRedis redis, String... args) {
    String reply = null;
    for (String r : redis.commandOnEachMaster(args)) {
      if (r == null || !r.startsWith("-MOVED")) {
        return r;
      }
      reply = r;
    }
    return reply;
  }

  /** The command-line tool, in its own JVM, names the holder; bad arguments exit 2 with a message. */
  @Test
  void commandLine(TestRedis redis) throws Exception {
    String name = unique("inspect-cli");
    try (Turnstile t = Turnstile.connect(redis.uri(), TurnstileOptions.builder().clientName("cli-app").build())) {
      DistributedLock lock = t.lock(name);
      lock.lock();
      try {
        until(lock, "the holder's thread named", i -> i.isHeld() && i.holders().get(0).threadName() != null);
        try (JvmProcess cli = JvmProcess.start(InspectMain.class, redis.uri(), "lock", name)) {
          cli.awaitLine("lock '", Duration.ofSeconds(60));
          cli.awaitLine("  ", Duration.ofSeconds(60)); // the holder's line
          assertEquals(0, cli.waitFor(Duration.ofSeconds(60)), cli.stderr());
          String out = String.join("\n", cli.output());
          assertTrue(out.contains("lock '" + name + "'") && out.contains("1 holder(s)"), out);
          assertTrue(out.contains("cli-app@") && out.contains("thread '" + Thread.currentThread().getName() + "'")
              && out.contains("token " + lock.fencingToken()), out);
        }
      } finally {
        lock.unlock();
      }
      try (JvmProcess cli = JvmProcess.start(InspectMain.class, redis.uri(), "mutex", name)) {
        assertEquals(2, cli.waitFor(Duration.ofSeconds(60)));
        assertTrue(cli.stderr().contains("lock, rwlock or semaphore"), cli.stderr());
      }
    }
  }

  @Test
  void badInputIsRefusedBeforeAnythingIsSent(TestRedis redis) {
    try (Turnstile t = Turnstile.connect(redis.uri())) {
      assertThrows(NullPointerException.class, () -> t.inspect(null, "x"));
      assertThrows(NullPointerException.class, () -> t.inspect(Kind.LOCK, null));
      assertThrows(IllegalArgumentException.class, () -> t.inspect(Kind.LOCK, " "));
      IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
          () -> t.inspect(Kind.SEMAPHORE, "x".repeat(Turnstile.MAX_NAME_LENGTH + 1)));
      assertTrue(tooLong.getMessage().contains("MAX_NAME_LENGTH"), tooLong.getMessage());
      IllegalArgumentException kind = assertThrows(IllegalArgumentException.class, () -> Kind.of("mutex"));
      assertTrue(kind.getMessage().contains("lock, rwlock or semaphore"), kind.getMessage());
      assertEquals(Kind.READ_WRITE_LOCK, Kind.of("RWLOCK"));
      assertThrows(IllegalArgumentException.class, () -> TurnstileOptions.builder().clientName(" "));
      assertThrows(IllegalArgumentException.class, () -> TurnstileOptions.builder().clientName("n".repeat(257)));
    }
    Turnstile closed = Turnstile.connect(redis.uri());
    closed.close();
    assertThrows(TurnstileException.class, () -> closed.inspect(Kind.LOCK, "x"));
  }

  @Test
  void readWriteLockAndSemaphoreHolders(TestRedis redis) throws Exception {
    String name = unique("inspect-rw");
    TurnstileOptions a = TurnstileOptions.builder().clientName("reader-app").build();
    TurnstileOptions b = TurnstileOptions.builder().clientName("writer-app").build();
    try (Turnstile ta = Turnstile.connect(redis.uri(), a); Turnstile tb = Turnstile.connect(redis.uri(), b)) {
      DistributedReadWriteLock rw = tb.readWriteLock(name);
      CountDownLatch written = new CountDownLatch(1);
      CountDownLatch done = new CountDownLatch(1);
      Thread writer = TestSupport.start("the-writer", () -> {
        rw.writeLock().lock();
        written.countDown();
        done.await();
        rw.writeLock().unlock();
      });
      written.await();
      Inspection w = until(ta.readWriteLock(name).writeLock(), "the writer's thread named",
          i -> i.isHeld() && i.holders().get(0).threadName() != null);
      Holder h = w.holders().get(0);
      assertTrue(h.isWriter());
      assertEquals("writer-app", h.clientName());
      assertEquals("the-writer", h.threadName());
      assertEquals(Kind.READ_WRITE_LOCK, w.kind());
      assertTrue(h.fencingToken() > 0);
      done.countDown();
      writer.join(10_000);

      // two readers in two clients
      DistributedLock r1 = ta.readWriteLock(name).readLock();
      DistributedLock r2 = tb.readWriteLock(name).readLock();
      r1.lock();
      Thread other = TestSupport.start("reader-2", () -> {
        r2.lock();
      });
      other.join(10_000);
      // each client writes its identity record within a watchdog scan of its first hold
      Inspection r = until(r1, "both readers' clients named",
          i -> i.holders().stream().filter(x -> x.clientName() != null).count() == 2);
      assertEquals(2, r.holderCount(), r.toString());
      assertEquals(2, r.holders().size(), r.toString());
      assertTrue(r.holders().stream().noneMatch(Holder::isWriter));
      assertTrue(r.holders().stream().anyMatch(x -> "reader-app".equals(x.clientName())), r.toString());
      r1.unlock();

      // a leased semaphore: permits per client
      String sname = unique("inspect-sem");
      DistributedSemaphore sa = ta.semaphore(sname, 5);
      DistributedSemaphore sb = tb.semaphore(sname, 5);
      sa.acquire(2);
      sb.acquire(1);
      Inspection s = ta.inspect(Kind.SEMAPHORE, sname);
      System.out.println("semaphore: " + s);
      assertEquals(2, s.holderCount(), s.toString());
      assertEquals(2, s.availablePermits());
      assertEquals(2, s.holders().stream().filter(x -> "reader-app".equals(x.clientName())).findFirst()
          .orElseThrow().permits());
      assertEquals(1, s.holders().stream().filter(x -> "writer-app".equals(x.clientName())).findFirst()
          .orElseThrow().permits());
      for (Holder x : s.holders()) {
        assertNull(x.owner());
        assertTrue(x.leaseRemaining().toMillis() > 0);
        assertNotNull(x.acquiredAt());
      }
      sa.release(2);
      sb.release(1);
    }
  }

  @Test
  void activityListsHoldsAndWaitsWithoutRedis(TestRedis redis) throws Exception {
    String name = unique("activity");
    try (Turnstile t = Turnstile.connect(redis.uri()); Turnstile other = Turnstile.connect(redis.uri())) {
      DistributedLock lock = t.lock(name);
      lock.lock();
      long token = lock.fencingToken();
      Thread waiter = TestSupport.start("activity-waiter", () -> {
        DistributedLock l = other.lock(name);
        l.lock();
        l.unlock();
      });
      TestSupport.await("the other client waiting", Duration.ofSeconds(30),
          () -> other.activity().stream().anyMatch(x -> !x.isHeld()));
      Activity held = t.activity().stream().filter(Activity::isHeld).findFirst().orElseThrow();
      assertEquals(name, held.name());
      assertEquals(Kind.LOCK, held.kind());
      assertEquals(Thread.currentThread().getName(), held.thread());
      assertEquals(token, held.fencingToken());
      assertNotNull(held.leaseRemaining());
      Activity waits = other.activity().stream().filter(x -> !x.isHeld()).findFirst().orElseThrow();
      assertEquals(name, waits.name());
      assertEquals("activity-waiter", waits.thread());
      assertEquals(Kind.LOCK, waits.kind());
      lock.unlock();
      waiter.join(10_000);
      assertTrue(t.activity().isEmpty(), t.activity().toString());
      TestSupport.await("the other client's activity to end", Duration.ofSeconds(10), () -> other.activity().isEmpty());
    }
  }

  /**
   * The holder is named (application, host, process) to another client from the moment its first
   * hold is returned: the client's identity record is written when it connects, not by the
   * watchdog after the grant. Before that, the first inspection showed only the client's id and
   * thread id. Then the same after the client was idle for over three leases (the record's time to
   * live: the watchdog keeps it while the client is open), and after Redis lost the record (it is
   * written again within a lease).
   */
  @Test
  void theHolderIsNamedAsSoonAsLockReturns(TestRedis redis) throws Exception {
    long leaseMs = 1500;
    TurnstileOptions options = TurnstileOptions.builder().clientName("h").leaseTime(Duration.ofMillis(leaseMs)).build();
    try (Turnstile holder = Turnstile.connect(redis.uri(), options); Turnstile other = Turnstile.connect(redis.uri())) {
      String name = unique("named-at-once");
      DistributedLock lock = holder.lock(name);
      lock.lock();
      try {
        Inspection seen = other.inspect(Kind.LOCK, name); // right after lock() returned: no wait, no retry
        assertTrue(seen.isHeld(), seen.toString());
        Holder h = seen.holders().get(0);
        assertEquals("h", h.clientName(), "named at the first inspection: " + seen);
        assertEquals(Identity.hostName(), h.host(), seen.toString());
        assertEquals(ProcessHandle.current().pid(), h.pid(), seen.toString());
        assertEquals(holder.clientId(), h.clientId());
      } finally {
        lock.unlock();
      }

      // idle for more than the record's time to live (3 leases), then a new hold: still named at once
      Thread.sleep(leaseMs * 10 / 3); // over 3 leases (4.5 s) after the record was first written
      String later = unique("named-after-idle");
      DistributedLock again = holder.lock(later);
      again.lock();
      try (Turnstile fresh = Turnstile.connect(redis.uri())) { // no cached identity
        Inspection seen = fresh.inspect(Kind.LOCK, later);
        assertEquals("h", seen.holders().get(0).clientName(), "named after an idle spell: " + seen);
      } finally {
        again.unlock();
      }

      // Redis loses the record (deleted here): the watchdog writes it again within a lease
      String record = Identity.key(holder.options().keyPrefix(), holder.clientId());
      assertEquals("1", onKeysMaster(redis, "DEL", record));
      TestSupport.await("the identity record written again", Duration.ofSeconds(30),
          () -> "1".equals(onKeysMaster(redis, "EXISTS", record)));
    }
  }
}
