package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.LeastPrivilege.Deployment;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * A recovery event ({@link Engine#recovered()}) makes every waiter attempt again at once, also
 * one that is between two commands when it fires, which has no blocked command to stop. Each test
 * fires the event at a seam, on the waiter's own continuation, where no command of the waiter is
 * watched, and then lets it go on:
 * <ul>
 *   <li>after a refused attempt, once the wait on the wake list it starts is sent (or its
 *       connection is still opening) and before the waiter watches that wait
 *       ({@link Engine#listWaitStarted}): the event is not lost, because the waiter took the
 *       event's future before its attempt ({@link Signal}) and watches that one;</li>
 *   <li>after a semaphore's local hand-off passed the head's wait in Redis to the next
 *       acquisition, before that one resumes it ({@code RedisSemaphore.afterPassWait}): the
 *       event was lost there (the next head watched a future taken after it), and the wait ran
 *       to its slice, a lease with {@code CLIENT UNBLOCK}; now the wait carries the future its
 *       attempt took.</li>
 * </ul>
 * The bounds are far below what a lost event costs (the holder's 60 s lease), far above a round
 * trip at load 10; where a lost event would cost only the 2 s slice of a user without
 * {@code CLIENT UNBLOCK}, what is checked is how the wait ended (closed, not timed out).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RecoveryEventGapTest {
  private static final String PASSWORD = "recovery-gap-test";
  private static final TurnstileOptions LONG_LEASE = TurnstileOptions.builder().leaseTime(Duration.ofSeconds(60)).build();
  /** Far below the 60 s lease a lost event costs a user with CLIENT UNBLOCK; far above an attempt's round trip. */
  private static final Duration PROMPT = Duration.ofSeconds(20);

  private RedisServerProcess server;
  /** Holds what the clients under test wait for, with a 60 s lease. */
  private Turnstile holder;

  @BeforeAll
  void start() {
    server = RedisServerProcess.start();
    LeastPrivilege.createUser(server, "restricted", LeastPrivilege.restrictedUser(Deployment.STANDALONE,
        "restricted", PASSWORD));
    LeastPrivilege.createFullUser(server, Deployment.STANDALONE, "full", PASSWORD);
    holder = Turnstile.connect(uri("full"), LONG_LEASE);
  }

  @AfterAll
  void stop() {
    if (holder != null) {
      holder.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private String uri(String user) {
    return "redis://" + user + ":" + PASSWORD + "@" + server.host() + ":" + server.port();
  }

  private long blockedClients() {
    for (String line : server.command("INFO", "clients").split("\r?\n")) {
      if (line.startsWith("blocked_clients:")) {
        return Long.parseLong(line.substring("blocked_clients:".length()).trim());
      }
    }
    throw new AssertionError("no blocked_clients");
  }

  /** One start of a wait on the wake list, seen at {@link Engine#listWaitStarted}. */
  record Arrival(long nanos, long closed) {}

  /** Records the waits a client starts, and fires a recovery event at the {@code eventAt}-th (0: none). */
  static final class Arrivals implements Runnable {
    final Turnstile client;
    final int eventAt;
    final List<Arrival> seen = new CopyOnWriteArrayList<>();
    volatile long closedBeforeEvent = -1;
    volatile long eventNanos;

    Arrivals(Turnstile client, int eventAt) {
      this.client = client;
      this.eventAt = eventAt;
    }

    @Override
    public void run() {
      seen.add(new Arrival(System.nanoTime(), client.engine().abandonedByClose.sum()));
      if (seen.size() == eventAt) {
        closedBeforeEvent = client.engine().abandonedByClose.sum();
        eventNanos = System.nanoTime();
        client.engine().recovered();
      }
    }

    Arrival await(int n, Duration timeout) {
      return TestSupport.awaitOrFalse(timeout, () -> seen.size() >= n) ? seen.get(n - 1) : null;
    }
  }

  /**
   * A user without {@code CLIENT UNBLOCK}: the event fires after the waiter's second refusal, once
   * its wait is sent (the first wait's connection is idle again after its 2 s slice, so the BLPOP
   * goes out at once) and before the waiter watches it. The waiter closes that wait at once and
   * attempts again; had the event been lost, the wait would have ended at its 2 s slice, with
   * nothing closed. First a give-up (an interrupt) lets the client find {@code CLIENT UNBLOCK}
   * refused: until then a wait's slice is the holder's lease (the connection id comes with the
   * handshake), and a close follows the refusal's reply rather than the give-up.
   */
  @Test
  void anEventAfterARefusalEndsTheWaitItStartsWithoutClientUnblock() throws Exception {
    String name = unique("gap-refusal");
    DistributedLock held = holder.lock(name);
    held.lock();
    boolean holding = true;
    try (Turnstile t = Turnstile.connect(uri("restricted"))) {
      DistributedLock lock = t.lock(name);
      Thread gaveUp = TestSupport.start("gives up", () -> {
        try {
          lock.lockInterruptibly();
        } catch (InterruptedException expected) {
          // the give-up
        }
      });
      TestSupport.await("the first waiter blocked", Duration.ofSeconds(60), () -> blockedClients() == 1);
      gaveUp.interrupt();
      gaveUp.join(PROMPT.toMillis());
      TestSupport.await("CLIENT UNBLOCK found refused, the connection closed", Duration.ofSeconds(60),
          () -> t.engine().topology().optional.unblockRefused() && t.engine().abandonedByClose.sum() == 1
              && blockedClients() == 0);
      Arrivals arrivals = new Arrivals(t, 2);
      t.engine().listWaitStarted = arrivals;
      AtomicReference<Throwable> failed = new AtomicReference<>();
      Thread w = TestSupport.start("waiter", () -> {
        try {
          lock.lock();
          lock.unlock();
        } catch (Throwable e) {
          failed.set(e);
        }
      });
      assertNotNull(arrivals.await(2, Duration.ofSeconds(60)), "the waiter waited twice on the wake list");
      Arrival next = arrivals.await(3, PROMPT);
      assertNotNull(next, "the waiter attempted again after the event");
      System.out.println("[recovery-gap] restricted: attempted again and waited "
          + TimeUnit.NANOSECONDS.toMillis(next.nanos() - arrivals.eventNanos) + " ms after the event");
      assertEquals(arrivals.closedBeforeEvent + 1, next.closed(),
          "the wait started beside the event was closed at once, not left to its 2 s slice");
      t.engine().listWaitStarted = null;
      held.unlock();
      holding = false;
      w.join(PROMPT.toMillis());
      assertNull(failed.get());
      assertTrue(!w.isAlive(), "the waiter acquired after the release");
    } finally {
      if (holding) {
        held.unlock();
      }
    }
  }

  /**
   * A user with {@code CLIENT UNBLOCK} (a wait's slice is the holder's remaining lease, 40 to 60
   * s) and a future's acquisition: the event fires right after its first refusal, when the wait's
   * pooled connection is (as a rule) still opening. The waiter drops that wait and attempts again
   * at once.
   */
  @Test
  void anEventAfterARefusalEndsTheWaitItStartsForAFuture() throws Exception {
    String name = unique("gap-refusal-async");
    DistributedLock held = holder.lock(name);
    held.lock();
    boolean holding = true;
    try (Turnstile t = Turnstile.connect(uri("full"), LONG_LEASE)) {
      Arrivals arrivals = new Arrivals(t, 1);
      t.engine().listWaitStarted = arrivals;
      CompletableFuture<LockHold> acquired = t.lock(name).lockAsync();
      assertNotNull(arrivals.await(1, Duration.ofSeconds(60)), "the future waited on the wake list");
      Arrival next = arrivals.await(2, PROMPT);
      assertNotNull(next, "the future attempted again after the event, not after its slice (the holder's lease)");
      System.out.println("[recovery-gap] full, future: attempted again and waited "
          + TimeUnit.NANOSECONDS.toMillis(next.nanos() - arrivals.eventNanos) + " ms after the event");
      t.engine().listWaitStarted = null;
      held.unlock();
      holding = false;
      acquired.get(PROMPT.toMillis(), TimeUnit.MILLISECONDS).close();
    } finally {
      if (holding) {
        held.unlock();
      }
    }
  }

  /**
   * A semaphore's local hand-off: the head, waiting on the wake list, is handed the permit by a
   * release of its client and passes its wait in Redis to the next acquisition; the event fires
   * between the two. The next head must drop the adopted wait and attempt again at once. Before
   * the fix it watched a future taken after the event and slept in the adopted wait until its
   * slice (the client's 60 s lease): no attempt in 20 s.
   */
  @org.junit.jupiter.params.ParameterizedTest(name = "the next head a future: {0}")
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void anEventDuringALocalHandOffEndsTheAdoptedWait(boolean futureHeir) throws Exception {
    String name = unique("gap-hand-off");
    try (Turnstile t = Turnstile.connect(uri("full"), LONG_LEASE)) {
      RedisSemaphore s = (RedisSemaphore) t.countingSemaphore(name, 0);
      Arrivals arrivals = new Arrivals(t, 0);
      t.engine().listWaitStarted = arrivals;
      AtomicInteger passed = new AtomicInteger();
      AtomicReference<Long> eventNanos = new AtomicReference<>();
      s.afterPassWait = () -> {
        if (passed.incrementAndGet() == 1) {
          eventNanos.set(System.nanoTime());
          t.engine().recovered();
        }
      };
      AtomicReference<Throwable> failed = new AtomicReference<>();
      Thread first = TestSupport.start("first", () -> {
        try {
          s.acquire();
        } catch (Throwable e) {
          failed.set(e);
        }
      });
      TestSupport.await("the first waits on the wake list", Duration.ofSeconds(60),
          () -> arrivals.seen.size() == 1 && blockedClients() == 1 && String.valueOf(s.gate().describe()).contains("listWait=set"));
      // the heir is a thread or a future: the same acquisition at the same gate
      java.util.concurrent.CompletableFuture<PermitHold> secondHold = futureHeir ? s.acquireAsync(1) : null;
      Thread second = futureHeir ? null : TestSupport.start("second", () -> {
        try {
          s.acquire();
        } catch (Throwable e) {
          failed.set(e);
        }
      });
      TestSupport.await("the second in line", Duration.ofSeconds(60),
          () -> String.valueOf(s.gate().describe()).contains("queued=1"));
      s.release(); // handed to the first, whose wait passes to the second
      first.join(PROMPT.toMillis());
      assertTrue(!first.isAlive(), "the first was handed the permit");
      assertEquals(1, passed.get(), "the first passed its wait to the second");
      Arrival next = arrivals.await(2, PROMPT);
      assertNotNull(next, "the second attempted again after the event, not after the adopted wait's slice (the 60 s lease): "
          + s.gate().describe());
      System.out.println("[recovery-gap] hand-off: the next head attempted again and waited "
          + TimeUnit.NANOSECONDS.toMillis(next.nanos() - eventNanos.get()) + " ms after the event");
      t.engine().listWaitStarted = null;
      s.release();
      if (futureHeir) {
        secondHold.get(PROMPT.toMillis(), TimeUnit.MILLISECONDS).release().toCompletableFuture()
            .get(PROMPT.toMillis(), TimeUnit.MILLISECONDS);
      } else {
        second.join(PROMPT.toMillis());
        assertTrue(!second.isAlive(), "the second acquired after the release");
      }
      assertNull(failed.get());
    }
  }
}
