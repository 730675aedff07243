package io.github.turnstile;

import java.util.concurrent.Semaphore;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

/**
 * Two waiters queued A then B, parking in whichever order they get to, while a release hands one
 * permit over: it goes to A, the head ({@link LocalPermits#assign}), and the ticket that wakes a
 * parked thread may reach B first, which must pass it on. A returns with the permit; B, whose
 * deadline passes, returns without; every ticket is consumed. The ticket reaching the wrong thread
 * and being kept would hand B a permit that was A's (over capacity) and strand A.
 */
@JCStressTest
@Description("LocalPermits: the ticket of a hand-off reaching another parked waiter first")
@Outcome(id = "1, 0, 0, 0", expect = Expect.ACCEPTABLE, desc = "A got it, B timed out, no ticket left, nothing kept")
@Outcome(expect = Expect.FORBIDDEN, desc = "anything else")
@State
public class PermitTicketPassingStress {
  final Semaphore parking = new Semaphore(0, true);
  final LocalPermits local = new LocalPermits(PermitFakes.tickets(parking), () -> { });
  final LocalPermits.Waiter a;
  final LocalPermits.Waiter b;
  volatile int aGot;
  volatile int bGot;
  volatile int kept;

  public PermitTicketPassingStress() {
    local.lock().lock();
    try {
      a = local.enqueue(1, Engine.Call.until(System.nanoTime() + 5_000_000_000L)); // waits until it gets it
      b = local.enqueue(1, Engine.Call.until(System.nanoTime() + 2_000_000L)); // gives up after 2 ms
    } finally {
      local.lock().unlock();
    }
  }

  @Actor
  public void waiterA() {
    try {
      aGot = local.await(a, n -> { }) ? 1 : 0;
    } catch (InterruptedException e) {
      aGot = -1;
    }
  }

  @Actor
  public void waiterB() {
    try {
      bGot = local.await(b, n -> { }) ? 1 : 0;
    } catch (InterruptedException e) {
      bGot = -1;
    }
  }

  @Actor
  public void release() {
    local.lock().lock();
    try {
      kept = local.assign(1);
    } finally {
      local.lock().unlock();
    }
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    r.r1 = aGot;
    r.r2 = bGot;
    r.r3 = parking.availablePermits();
    r.r4 = kept;
  }
}
