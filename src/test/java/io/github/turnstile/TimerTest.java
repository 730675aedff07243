package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** The engine's timers ({@link Timer}): never early, cancels leave nothing behind, the wheel's thread sleeps between. */
class TimerTest {
  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

  @Test
  void wheelTimersFireNeverEarly() throws Exception {
    List<CompletableFuture<Boolean>> timers = new ArrayList<>();
    List<long[]> at = new ArrayList<>();
    long start = System.nanoTime();
    for (int i = 0; i < 200; i++) {
      long delay = Timer.WHEEL_NANOS + (i % 20) * MS;
      long before = System.nanoTime(); // the timer's own start is no earlier (a thread may stall after it)
      CompletableFuture<Boolean> t = Timer.after(delay);
      long[] fired = new long[] {0, before + delay};
      t.thenAccept(v -> fired[0] = System.nanoTime());
      timers.add(t);
      at.add(fired);
    }
    for (int i = 0; i < timers.size(); i++) {
      assertTrue(timers.get(i).get(30, TimeUnit.SECONDS), "fired");
    }
    for (long[] f : at) {
      assertTrue(f[0] != 0 && f[0] - f[1] >= 0, "fired " + (f[1] - f[0]) + " ns early");
    }
    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30));
  }

  @Test
  void shortTimersFireToo() throws Exception {
    long start = System.nanoTime();
    assertTrue(Timer.after(0).get(30, TimeUnit.SECONDS));
    assertTrue(Timer.after(-5).get(30, TimeUnit.SECONDS));
    assertTrue(Timer.after(200_000).get(30, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - start >= 200_000);
  }

  @Test
  void aCancelledTimerCompletesFalseAndLeavesTheWheel() throws Exception {
    List<CompletableFuture<Boolean>> timers = new ArrayList<>();
    for (int i = 0; i < 10_000; i++) {
      timers.add(Timer.after(TimeUnit.HOURS.toNanos(1) + (i % 100) * MS));
    }
    for (CompletableFuture<Boolean> t : timers) {
      assertTrue(Timer.inWheel(t));
    }
    for (CompletableFuture<Boolean> t : timers) {
      Timer.cancel(t);
      assertFalse(t.join());
      assertFalse(Timer.inWheel(t));
    }
    Timer.cancel(null); // nothing
  }

  @Test
  void aTimerDueBeforeTheOneTheThreadSleepsUntilWakesIt() throws Exception {
    CompletableFuture<Boolean> far = Timer.after(TimeUnit.MINUTES.toNanos(10));
    Thread.sleep(50); // the thread sleeps until the far one
    long start = System.nanoTime();
    assertTrue(Timer.after(Timer.WHEEL_NANOS).get(30, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - start >= Timer.WHEEL_NANOS);
    assertFalse(far.isDone());
    Timer.cancel(far);
  }

  @Test
  void dependentsOfATimerArePlainFutures() {
    CompletableFuture<Boolean> t = Timer.after(TimeUnit.MINUTES.toNanos(10));
    CompletableFuture<String> d = t.thenApply(String::valueOf);
    assertEquals(CompletableFuture.class, d.getClass());
    Timer.cancel(t);
    assertEquals("false", d.join());
  }

  @Test
  void orTimeoutFailsALateFutureAndCancelsItsTimerOnTime() throws Exception {
    CompletableFuture<String> late = Timer.orTimeout(new CompletableFuture<>(), Timer.WHEEL_NANOS);
    ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
        () -> late.get(30, TimeUnit.SECONDS));
    assertInstanceOf(TimeoutException.class, e.getCause());
    CompletableFuture<String> onTime = Timer.orTimeout(new CompletableFuture<>(), TimeUnit.HOURS.toNanos(1));
    onTime.complete("ok");
    assertEquals("ok", onTime.join());
  }
}
