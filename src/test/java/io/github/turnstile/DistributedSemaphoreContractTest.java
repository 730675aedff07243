package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static java.util.concurrent.TimeUnit.SECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The {@link Semaphore} contract for {@link DistributedSemaphore}, against a real Redis: the shared
 * part ({@link DistributedSemaphoreContract}) runs for each mode ({@link Leased}, {@link Counting}),
 * each mode adds its own rules (the leased deviations: releasing more than the client holds throws
 * and changes nothing, a crashed holder's permits come back; the counting mode: release() creates
 * a permit), and this class checks what holds for both at once (obtaining a semaphore, the
 * overridden methods). Two {@link Turnstile} clients on one Redis stand in for two JVMs.
 */
@ExtendWith(RedisExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class DistributedSemaphoreContractTest {
  private final TestRedis redis;
  private Turnstile t1;
  private Turnstile t2;

  DistributedSemaphoreContractTest(TestRedis redis) {
    this.redis = redis;
  }

  /**
   * The clients' lease, longer than any wait of a test ({@link DistributedSemaphoreContract#EVENT_WAIT}):
   * a waiter re-checks Redis at least once a lease whether or not it is woken, so with the default
   * lease (30 s) a wake-up that never comes would be hidden by the re-check; with this one it fails
   * the test.
   */
  static final Duration LEASE = Duration.ofMinutes(5);

  @BeforeAll
  void connect() {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(LEASE).build();
    t1 = Turnstile.connect(redis.uri(), options);
    t2 = Turnstile.connect(redis.uri(), options);
  }

  @AfterAll
  void close() {
    t1.close();
    t2.close();
  }

  // ================================================================== leased mode

  /** Turnstile.semaphore: the shared contract, and the rules of permits held by live clients. */
  @Nested
  class Leased extends DistributedSemaphoreContract {
    @Override
    Turnstile t1() {
      return t1;
    }

    @Override
    TestRedis redis() {
      return redis;
    }

    @Override
    Turnstile t2() {
      return t2;
    }

    @Override
    boolean leased() {
      return true;
    }

    /**
     * Releasing more permits than this client holds throws IllegalStateException and changes
     * nothing: not with none held, not another client's permits, not more than held.
     */
    @Test
    void releaseBeyondHeldThrowsAndChangesNothing() throws Exception {
      String name = unique("over-release");
      DistributedSemaphore s = t1.semaphore(name, 4);
      DistributedSemaphore other = t2.semaphore(name, 4);
      assertThrows(IllegalStateException.class, s::release, "holds nothing");
      assertThrows(IllegalStateException.class, () -> s.release(4), "holds nothing");
      assertEquals(4, s.availablePermits(), "no permit was made");
      other.acquire(2);
      assertThrows(IllegalStateException.class, s::release, "another client's permits are not this client's");
      s.acquire();
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.release(2), "holds 1, releases 2");
      assertTrue(e.getMessage().contains(name), "the message names the semaphore: " + e.getMessage());
      assertThrows(IllegalStateException.class, () -> s.release(3), "holds 1, releases 3 (what all clients hold)");
      assertThrows(IllegalStateException.class, () -> s.release(Integer.MAX_VALUE));
      assertEquals(1, s.heldPermits(), "nothing was released");
      assertEquals(2, other.heldPermits());
      assertEquals(1, s.availablePermits(), "nothing was released");
      s.release();
      assertThrows(IllegalStateException.class, s::release, "released its only permit already");
      other.release(2);
      assertEquals(4, s.availablePermits());
    }

    /** A release beyond held while threads of the client wait hands them nothing: they keep waiting. */
    @Test
    void releaseBeyondHeldServesNoWaiter() throws Exception {
      String name = unique("over-release-waiter");
      DistributedSemaphore s = t1.semaphore(name, 1);
      DistributedSemaphore other = t2.semaphore(name, 1);
      other.acquire();
      Worker w = spawn("waiter", s::acquire);
      awaitParked(s, 1, Thread.State.WAITING, w);
      assertThrows(IllegalStateException.class, s::release, "holds nothing");
      assertStillWaiting("no permit was made for it", w);
      assertEquals(0, s.heldPermits());
      assertEquals(0, s.availablePermits());
      other.release();
      finish(w);
      assertEquals(1, s.heldPermits());
    }

    /** Permits belong to the client: any of its threads may release a permit another of its threads acquired. */
    @Test
    void anyThreadOfTheClientMayReleaseItsPermits() throws Exception {
      String name = unique("other-thread");
      DistributedSemaphore s = t1.semaphore(name, 3);
      Worker acquirer = spawn("acquirer", () -> s.acquire(3));
      finish(acquirer);
      assertEquals(3, s.heldPermits());
      Worker releaser = spawn("releaser", () -> s.release(2));
      finish(releaser);
      assertEquals(1, s.heldPermits());
      assertEquals(2, t2.semaphore(name, 3).availablePermits());
      s.release();
      assertEquals(0, s.heldPermits());
      assertEquals(3, s.availablePermits());
    }

    /** heldPermits() counts exactly this client's permits, from every way of acquiring them; failed attempts and other clients do not count. */
    @Test
    void heldPermitsCountsThisClientsPermits() throws Exception {
      String name = unique("held");
      DistributedSemaphore s = t1.semaphore(name, 8);
      DistributedSemaphore other = t2.semaphore(name, 8);
      assertEquals(0, s.heldPermits());
      s.acquire();
      s.acquireUninterruptibly(2);
      assertTrue(s.tryAcquire());
      assertTrue(s.tryAcquire(1, 1, SECONDS));
      assertEquals(5, s.heldPermits());
      other.acquire(2);
      assertEquals(5, s.heldPermits(), "another client's acquisitions do not count");
      assertFalse(s.tryAcquire(2), "1 free");
      assertFalse(s.tryAcquire(2, 50, TimeUnit.MILLISECONDS), "1 free");
      assertEquals(5, s.heldPermits(), "failed attempts do not count");
      assertEquals(1, s.drainPermits());
      assertEquals(6, s.heldPermits(), "drained permits count");
      s.release(4);
      assertEquals(2, s.heldPermits());
      other.release(2);
      assertEquals(2, s.heldPermits());
      s.release(2);
      assertEquals(0, s.heldPermits());
      assertEquals(8, other.availablePermits());
    }

    /**
     * The capacity is stored: obtaining the semaphore with another number fails with an error naming
     * both and changes nothing; addPermits, reducePermits and a negative drainPermits change it.
     */
    @Test
    void capacityIsStoredAndChecked() {
      String name = unique("capacity");
      DistributedSemaphore s = t1.semaphore(name, 7);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t2.semaphore(name, 11));
      assertTrue(e.getMessage().contains("7") && e.getMessage().contains("11"), "names both: " + e.getMessage());
      e = assertThrows(IllegalArgumentException.class, () -> t1.semaphore(name, 13));
      assertTrue(e.getMessage().contains("7") && e.getMessage().contains("13"), "names both: " + e.getMessage());
      assertEquals(7, s.availablePermits(), "the failed calls changed nothing");
      s.addPermits(3);
      assertEquals(10, t2.semaphore(name, 10).availablePermits(), "addPermits(3): capacity 10");
      s.reducePermits(4);
      assertEquals(6, t2.semaphore(name, 6).availablePermits(), "reducePermits(4): capacity 6");
      assertThrows(IllegalArgumentException.class, () -> t2.semaphore(name, 10));
      assertTrue(s.tryAcquire(6));
      s.reducePermits(2);
      assertEquals(-2, s.availablePermits());
      assertEquals(-2, s.drainPermits());
      assertSame(s, t1.semaphore(name, 6), "a negative drain grows the capacity by the debt it cancels: 4 + 2");
      s.release(6);
      assertEquals(6, t2.semaphore(name, 6).availablePermits());
    }

    /** A negative capacity is allowed: acquisitions wait until permits are added. */
    @Test
    void negativeCapacityWaitsUntilPermitsAreAdded() throws Exception {
      String name = unique("negative-capacity");
      DistributedSemaphore s = t1.semaphore(name, -2);
      assertEquals(-2, s.availablePermits());
      assertFalse(s.tryAcquire());
      Worker w = spawn("waiter", s::acquire);
      awaitParked(s, 1, Thread.State.WAITING, w);
      t2.semaphore(name, -2).addPermits(2);
      assertStillWaiting("0 free", w);
      t2.semaphore(name, 0).addPermits(1);
      finish(w);
      assertEquals(1, s.heldPermits());
      assertEquals(0, s.availablePermits());
    }

    /**
     * A holder JVM killed with kill -9 keeps its permits while alive (its watchdog renews them) and
     * loses them once its lease runs out: a waiter for all the permits then gets them.
     */
    @Test
    void crashedHoldersPermitsComeBack() throws Exception {
      long leaseMs = 2000;
      String name = unique("crash");
      try (JvmProcess holder = JvmProcess.start(SemaphoreHolderMain.class, redis.uri(), name, "3", "2",
          Long.toString(leaseMs))) {
        holder.awaitLine("HELD ", EVENT_WAIT);
        DistributedSemaphore s = t1.semaphore(name, 3);
        assertEquals(1, s.availablePermits());
        AtomicLong acquiredAt = new AtomicLong();
        Worker w = spawn("waiter for 3", () -> {
          s.acquire(3);
          acquiredAt.set(System.nanoTime());
        });
        awaitParked(s, 1, Thread.State.WAITING, w);
        Thread.sleep(leaseMs + 1000);
        assertTrue(w.thread.isAlive(), "a live holder keeps its permits beyond one lease");
        assertEquals(1, s.availablePermits());
        long killedAt = System.nanoTime();
        holder.kill9();
        finish(w);
        System.out.println("leased contract: permits of a holder killed with kill -9 back after "
            + TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - killedAt) + " ms (lease " + leaseMs + " ms)");
        assertEquals(3, s.heldPermits());
        s.release(3);
        assertEquals(3, s.availablePermits(), "none lost");
      }
    }

    /**
     * availablePermits() counts the permits of a client whose lease ran out as free, with nobody
     * waiting for them: a holder JVM killed with kill -9 holds them until its lease runs out, no
     * longer.
     */
    @Test
    void crashedHoldersPermitsCountAsFreeOnceItsLeaseRunsOut() throws Exception {
      long leaseMs = 2000;
      String name = unique("crash-available");
      try (JvmProcess holder = JvmProcess.start(SemaphoreHolderMain.class, redis.uri(), name, "4", "3",
          Long.toString(leaseMs))) {
        holder.awaitLine("HELD ", EVENT_WAIT);
        DistributedSemaphore s = t2.semaphore(name, 4);
        assertEquals(1, s.availablePermits());
        Thread.sleep(leaseMs + 1000);
        assertEquals(1, s.availablePermits(), "a live holder keeps its permits beyond one lease");
        holder.kill9();
        await("the killed holder's 3 permits free again", () -> s.availablePermits() == 4);
        assertTrue(s.tryAcquire(4), "all 4 can be acquired");
        s.release(4);
      }
    }
  }

  // ================================================================== counting mode

  /** Turnstile.countingSemaphore: the shared contract, and Semaphore's counting (release creates permits). */
  @Nested
  class Counting extends DistributedSemaphoreContract {
    @Override
    Turnstile t1() {
      return t1;
    }

    @Override
    TestRedis redis() {
      return redis;
    }

    @Override
    Turnstile t2() {
      return t2;
    }

    @Override
    boolean leased() {
      return false;
    }

    /** release() adds a permit whether or not the caller acquired one: a signal from one client to another's waiting thread. */
    @Test
    void releaseCreatesPermitsNobodyAcquired() throws Exception {
      String name = unique("signal");
      DistributedSemaphore waiterSide = t1.countingSemaphore(name, 0);
      DistributedSemaphore signaller = t2.countingSemaphore(name, 0);
      Worker w = spawn("waiter", () -> waiterSide.acquire(2));
      awaitParked(waiterSide, 1, Thread.State.WAITING, w);
      signaller.release();
      assertStillWaiting("1 of 2 signals", w);
      signaller.release();
      finish(w);
      assertEquals(0, waiterSide.availablePermits());
      signaller.release(5);
      waiterSide.release(5);
      assertEquals(10, signaller.availablePermits(), "either client creates permits");
      assertEquals(0, waiterSide.heldPermits(), "permits are not owned");
      assertEquals(0, signaller.heldPermits(), "permits are not owned");
      assertTrue(waiterSide.tryAcquire(10));
      assertEquals(0, waiterSide.heldPermits(), "permits are not owned");
    }

    /** The number given when obtaining an existing counting semaphore is not used: no capacity check, the free permits stay. */
    @Test
    void permitsArgumentIsUsedOnlyToCreate() {
      String name = unique("counting-exists");
      DistributedSemaphore s = t1.countingSemaphore(name, 5);
      assertTrue(s.tryAcquire(2));
      assertEquals(3, t2.countingSemaphore(name, 9).availablePermits());
      assertSame(s, t1.countingSemaphore(name, -4));
      assertEquals(3, s.availablePermits());
    }

    /** release past Integer.MAX_VALUE free permits throws Error("Maximum permit count exceeded"), as Semaphore does, and changes nothing. */
    @Test
    void releaseOverflowThrowsError() {
      DistributedSemaphore s = t1.countingSemaphore(unique("overflow"), Integer.MAX_VALUE - 1);
      Error e = assertThrows(Error.class, () -> s.release(2));
      assertEquals("Maximum permit count exceeded", e.getMessage());
      assertEquals(Integer.MAX_VALUE - 1, s.availablePermits(), "nothing changed");
      s.release();
      assertEquals(Integer.MAX_VALUE, s.availablePermits());
      e = assertThrows(Error.class, s::release);
      assertEquals("Maximum permit count exceeded", e.getMessage());
      assertEquals(Integer.MAX_VALUE, s.availablePermits(), "nothing changed");
    }

    /** Nothing is leased: a permit taken by a client that goes away is gone for good, long after the client's lease. */
    @Test
    void permitsOfAClosedClientAreNotReclaimed() throws Exception {
      String name = unique("counting-gone");
      Duration lease = Duration.ofMillis(300);
      try (Turnstile shortLived = Turnstile.connect(redis.uri(), TurnstileOptions.builder().leaseTime(lease).build())) {
        DistributedSemaphore s = shortLived.countingSemaphore(name, 2);
        s.acquire();
      }
      Thread.sleep(lease.toMillis() * 6);
      assertEquals(1, t1.countingSemaphore(name, 2).availablePermits(), "the permit was not given back");
    }
  }

  // ================================================================== both modes

  /** A name is one mode: obtaining it in the other mode fails (from the same or another client) and changes nothing. */
  @Test
  void modeMismatchIsRefused() {
    String leasedName = unique("is-leased");
    DistributedSemaphore leased = t1.semaphore(leasedName, 3);
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t2.countingSemaphore(leasedName, 3));
    assertTrue(e.getMessage().contains("leased"), "says what it is: " + e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> t1.countingSemaphore(leasedName, 3));
    assertTrue(e.getMessage().contains("leased"), "says what it is: " + e.getMessage());
    assertTrue(leased.isLeased());
    assertEquals(3, t2.semaphore(leasedName, 3).availablePermits(), "unchanged");

    String countingName = unique("is-counting");
    DistributedSemaphore counting = t1.countingSemaphore(countingName, 2);
    e = assertThrows(IllegalArgumentException.class, () -> t2.semaphore(countingName, 2));
    assertTrue(e.getMessage().contains("counting"), "says what it is: " + e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> t1.semaphore(countingName, 2));
    assertTrue(e.getMessage().contains("counting"), "says what it is: " + e.getMessage());
    assertFalse(counting.isLeased());
    assertEquals(2, t2.countingSemaphore(countingName, 0).availablePermits(), "unchanged");
  }

  /** One client gets the same instance for a name; another client gets its own, acting on the same state. */
  @Test
  void oneInstancePerClientAndName() throws Exception {
    for (boolean leased : new boolean[] {true, false}) {
      String name = unique("instance");
      DistributedSemaphore a = leased ? t1.semaphore(name, 2) : t1.countingSemaphore(name, 2);
      assertSame(a, leased ? t1.semaphore(name, 2) : t1.countingSemaphore(name, 2));
      DistributedSemaphore b = leased ? t2.semaphore(name, 2) : t2.countingSemaphore(name, 2);
      assertNotSame(a, b);
      assertEquals(name, a.name());
      assertEquals(leased, a.isLeased());
      a.acquire();
      assertEquals(1, b.availablePermits(), "one shared state");
    }
  }

  /** A null name gives NullPointerException, a blank or too long one IllegalArgumentException, in both modes. */
  @Test
  void badNamesAreRefused() {
    String tooLong = "x".repeat(Turnstile.MAX_NAME_LENGTH + 1);
    for (boolean leased : new boolean[] {true, false}) {
      assertThrows(NullPointerException.class, () -> obtain(leased, null));
      for (String bad : List.of("", "   ", "\t\n", tooLong)) {
        assertThrows(IllegalArgumentException.class, () -> obtain(leased, bad), "name '" + bad + "'");
      }
    }
  }

  private DistributedSemaphore obtain(boolean leased, String name) {
    return leased ? t1.semaphore(name, 1) : t1.countingSemaphore(name, 1);
  }

  /**
   * Every overridable (public or protected, non-final) method of Semaphore is overridden, in both
   * modes, except getQueuedThreads(), which is inherited on purpose: the threads of this JVM wait in
   * the superclass's queue. Semaphore's final methods are only hasQueuedThreads and getQueueLength
   * (which count the same queue), and reducePermits is made public.
   */
  @Test
  void everyOverridableSemaphoreMethodIsOverridden() throws Exception {
    Set<String> inheritedOnPurpose = new TreeSet<>(List.of("getQueuedThreads[]"));
    for (DistributedSemaphore s : List.of(t1.semaphore(unique("reflect"), 1), t1.countingSemaphore(unique("reflect"), 1))) {
      Class<?> runtime = s.getClass();
      Set<String> notOverridden = new TreeSet<>();
      Set<String> finals = new TreeSet<>();
      for (Method m : Semaphore.class.getDeclaredMethods()) {
        int mod = m.getModifiers();
        if (Modifier.isStatic(mod) || Modifier.isPrivate(mod) || m.isSynthetic()
            || !(Modifier.isPublic(mod) || Modifier.isProtected(mod))) {
          continue;
        }
        String sig = m.getName() + Arrays.toString(m.getParameterTypes());
        if (Modifier.isFinal(mod)) {
          finals.add(sig);
          continue;
        }
        if (implementor(runtime, m) == Semaphore.class) {
          notOverridden.add(sig);
        }
      }
      assertEquals(inheritedOnPurpose, notOverridden, "non-final Semaphore methods not overridden (" + runtime + ")");
      assertEquals(new TreeSet<>(List.of("getQueueLength[]", "hasQueuedThreads[]")), finals,
          "Semaphore's final methods (did a new JDK change them?)");
    }
    assertTrue(Modifier.isPublic(DistributedSemaphore.class.getMethod("reducePermits", int.class).getModifiers()),
        "reducePermits is public");
  }

  private static Class<?> implementor(Class<?> runtime, Method m) {
    for (Class<?> c = runtime; c != null; c = c.getSuperclass()) {
      try {
        Method found = c.getDeclaredMethod(m.getName(), m.getParameterTypes());
        if (!Modifier.isAbstract(found.getModifiers())) {
          return c;
        }
      } catch (NoSuchMethodException e) {
        // look further up
      }
    }
    throw new AssertionError("no implementation of " + m);
  }
}
