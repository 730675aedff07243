package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;

/**
 * The releases kept to send again after a recovery ({@link ReplayLog}): what is kept, and that
 * keeping them costs O(1) per release whatever their number. Work is counted (entries looked at),
 * never timed.
 *
 * <p>The defect this guards against (CHANGELOG.md): the first version scanned
 * every kept key on every release once it held more than 4,096 keys. A read hold is a key of its
 * own, so a client with a few thousand read holds per lease scanned thousands of entries on every
 * unlock: four reading threads ran 465-1,720 pairs/s (5,200-9,100 after the fix), and every other
 * primitive of that client slowed with them, until the leases ran out.
 */
class ReplayLogTest {
  private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

  /** A release that records that it was sent. */
  private static Runnable sent(List<String> log, String what) {
    return () -> log.add(what);
  }

  @Test
  void keepsEachReleaseUntilItsLeaseWouldHaveRunOutOldestFirst() {
    ReplayLog log = new ReplayLog();
    List<String> sent = new ArrayList<>();
    long t = 1_000 * SECOND;
    log.add("a", t + 10 * SECOND, sent(sent, "a1"), t);
    log.add("b", t + 5 * SECOND, sent(sent, "b1"), t);
    log.add("a", t + 30 * SECOND, sent(sent, "a2"), t + SECOND);
    log.live(t + 2 * SECOND).forEach(Runnable::run);
    assertEquals(List.of("a1", "b1", "a2"), sent);
    sent.clear();
    log.live(t + 6 * SECOND).forEach(Runnable::run); // b1's lease is over
    assertEquals(List.of("a1", "a2"), sent);
    sent.clear();
    log.live(t + 10 * SECOND).forEach(Runnable::run); // so is a1's (its end is exclusive)
    assertEquals(List.of("a2"), sent);
    // the next release purges what ran out at the head: a1 and b1 go, a2 and c stay
    log.add("c", t + 40 * SECOND, sent(sent, "c1"), t + 11 * SECOND);
    assertEquals(2, log.size());
    assertEquals(2, log.keys());
  }

  @Test
  void keepsTheLatestPerKeyReleasesOfAHotKey() {
    ReplayLog log = new ReplayLog();
    List<String> sent = new ArrayList<>();
    long t = 0;
    int n = ReplayLog.PER_KEY * 3 + 5;
    for (int i = 0; i < n; i++) {
      log.add("hot", t + 60 * SECOND, sent(sent, "h" + i), t);
    }
    log.add("cold", t + 60 * SECOND, sent(sent, "c"), t);
    log.live(t).forEach(Runnable::run);
    List<String> expected = new ArrayList<>();
    for (int i = n - ReplayLog.PER_KEY; i < n; i++) {
      expected.add("h" + i);
    }
    expected.add("c");
    assertEquals(expected, sent, "the latest " + ReplayLog.PER_KEY + " of the hot key, then the cold one");
    assertTrue(log.size() <= 3 * ReplayLog.PER_KEY, "dropped entries are compacted away: " + log.size());
  }

  @Test
  void keepsAtMostMaxReleasesDroppingTheOldest() {
    ReplayLog log = new ReplayLog();
    List<String> sent = new ArrayList<>();
    int n = ReplayLog.MAX + 1_000;
    for (int i = 0; i < n; i++) {
      log.add("k" + i, 60 * SECOND, sent(sent, "k" + i), 0);
    }
    assertEquals(ReplayLog.MAX, log.size());
    assertEquals(ReplayLog.MAX, log.keys());
    List<Runnable> live = log.live(0);
    assertEquals(ReplayLog.MAX, live.size());
    live.get(0).run();
    live.get(live.size() - 1).run();
    assertEquals(List.of("k1000", "k" + (n - 1)), sent, "the oldest thousand were dropped");
  }

  /**
   * The defect: with more than 4,096 keys kept, each release scanned them all. Now each release
   * looks at O(1) entries besides its own, amortized: many distinct keys (read holds), a hot key,
   * and expiries mixed in.
   */
  @Test
  void aReleaseLooksAtAConstantNumberOfEntriesWhateverIsKept() {
    ReplayLog log = new ReplayLog();
    long t = 0;
    int adds = 0;
    for (int i = 0; i < 50_000; i++) { // distinct keys within one lease, as read holds are
      log.add("rd:" + i, t + 30 * SECOND, () -> {}, t);
      adds++;
      t += 100_000; // 10,000 releases per second: 30 s of leases are 300,000 entries, capped
    }
    for (int i = 0; i < 50_000; i++) { // a hot lock, and a read hold now and then
      log.add(i % 10 == 0 ? "rd:x" + i : "hot", t + 30 * SECOND, () -> {}, t);
      adds++;
      t += 100_000;
    }
    t += 60 * SECOND; // everything runs out; the next releases purge it
    for (int i = 0; i < 1_000; i++) {
      log.add("late" + i, t + 30 * SECOND, () -> {}, t);
      adds++;
    }
    assertTrue(log.work() <= 3L * adds, "entries looked at: " + log.work() + " for " + adds + " releases");
    assertEquals(1_000, log.size(), "what ran out is gone");
    assertEquals(1_000, log.keys());
  }

  /**
   * On Redis: a client that takes more read holds within one lease than the first version could
   * scan cheaply keeps all their releases (each is a key of its own), and keeping them stays cheap.
   */
  @Test
  void thousandsOfReadHoldsKeepTheirReleasesCheaply() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start();
        Turnstile client = Turnstile.connect(server.uri(), TurnstileOptions.builder()
            .leaseTime(Duration.ofSeconds(60)).build())) {
      Lock read = client.readWriteLock(TestSupport.unique("replays")).readLock();
      ReplayLog log = client.engine().replayLog();
      long before = log.work();
      int holds = 4_500; // more than the 4,096 keys past which the first version scanned
      for (int i = 0; i < holds; i++) {
        read.lock();
        read.unlock();
      }
      assertEquals(holds, log.keys(), "one kept release per read hold, none run out yet");
      assertTrue(log.work() - before <= holds, "entries looked at: " + (log.work() - before));
    }
  }
}
