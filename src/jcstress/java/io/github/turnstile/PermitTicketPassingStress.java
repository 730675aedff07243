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
 * The ticket of a hand-off reaching another waiter first. Waiters B then A are queued; A parks
 * (its deadline 200 us away) while a release hands one permit to B, the head
 * ({@link LocalPermits#assign}), whose thread then collects it. The ticket that release frees may
 * wake A, which is not granted and must pass it on. B returns with the permit; A returns without;
 * every ticket is consumed. A ticket kept by the wrong thread would hand A the permit that was B's
 * (over capacity) and strand B.
 */
@JCStressTest
@Description("LocalPermits: the ticket of a hand-off reaching another parked waiter first")
@Outcome(id = "1, 0, 0, 0", expect = Expect.ACCEPTABLE, desc = "B got it, A timed out, no ticket left, nothing kept")
@Outcome(expect = Expect.FORBIDDEN, desc = "anything else")
@State
public class PermitTicketPassingStress {
  final Semaphore parking = new Semaphore(0, true);
  final LocalPermits local = new LocalPermits(PermitFakes.tickets(parking), () -> { });
  final LocalPermits.Waiter b;
  volatile int bGot;
  volatile int aGot;
  volatile int kept;

  public PermitTicketPassingStress() {
    local.lock().lock();
    try {
      b = local.enqueue(1, Engine.Call.until(System.nanoTime() + 60_000_000_000L));
    } finally {
      local.lock().unlock();
    }
  }

  @Actor
  public void waiterA() {
    LocalPermits.Waiter a;
    local.lock().lock();
    try {
      a = local.enqueue(1, Engine.Call.until(System.nanoTime() + 200_000L)); // behind B; gives up after 200 us
    } finally {
      local.lock().unlock();
    }
    try {
      aGot = local.await(a, n -> { }) ? 1 : 0;
    } catch (InterruptedException e) {
      aGot = -1;
    }
  }

  @Actor
  public void releaseThenB() {
    local.lock().lock();
    try {
      kept = local.assign(1);
    } finally {
      local.lock().unlock();
    }
    try {
      bGot = local.await(b, n -> { }) ? 1 : 0;
    } catch (InterruptedException e) {
      bGot = -1;
    }
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    r.r1 = bGot;
    r.r2 = aGot;
    r.r3 = parking.availablePermits();
    r.r4 = kept;
  }
}
