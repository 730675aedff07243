package io.github.turnstile;

import java.util.concurrent.Semaphore;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * A local hand-off of permits versus the waiter's deadline: a thread waits for one permit and
 * its time runs out at the very instant another thread releases one to it
 * ({@link LocalPermits#assign}). Either the waiter got the permit and the release handed it over,
 * or the waiter timed out and the release kept the permit (to release it in Redis). A permit
 * handed to a waiter that left would be lost until the client died; a waiter that returned true
 * for a permit nobody handed over would exceed the capacity. Every ticket released is consumed.
 * Runs {@link LocalPermits} without Redis, on a plain fair semaphore for the tickets.
 */
@JCStressTest
@Description("LocalPermits: a release handing a permit to a waiter whose deadline passes")
@Outcome(id = "1, 0, 0", expect = Expect.ACCEPTABLE, desc = "handed over: the waiter has the permit")
@Outcome(id = "0, 1, 0", expect = Expect.ACCEPTABLE, desc = "the waiter timed out first: the release kept it")
@Outcome(id = "1, 1, 0", expect = Expect.FORBIDDEN, desc = "a permit made: both have it")
@Outcome(id = "0, 0, 0", expect = Expect.FORBIDDEN, desc = "a permit lost: handed to a waiter that left")
@Outcome(expect = Expect.FORBIDDEN, desc = "a ticket left over or missing")
@State
public class PermitHandoffVersusTimeoutStress {
  final Semaphore parking = new Semaphore(0, true);
  final LocalPermits local = new LocalPermits(PermitFakes.tickets(parking), () -> { });
  final LocalPermits.Waiter waiter;
  volatile int waiterGot;
  volatile int releaseKept;

  public PermitHandoffVersusTimeoutStress() {
    local.lock().lock();
    try {
      // its deadline has passed: it leaves at once unless the permit reaches it first
      waiter = local.enqueue(1, Engine.Call.until(System.nanoTime()));
    } finally {
      local.lock().unlock();
    }
  }

  @Actor
  public void waiter() {
    try {
      waiterGot = local.await(waiter, n -> { }) ? 1 : 0;
    } catch (InterruptedException e) {
      waiterGot = -1;
    }
  }

  @Actor
  public void release() {
    local.lock().lock();
    try {
      releaseKept = local.assign(1);
    } finally {
      local.lock().unlock();
    }
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = waiterGot;
    r.r2 = releaseKept;
    r.r3 = parking.availablePermits();
  }
}
