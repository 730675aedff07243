package io.github.turnstile;

import java.util.concurrent.Delayed;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * Scenario 4, unlock versus renewal: the owner's final unlock (local unlock, leave the watchdog,
 * end the lease: RedisLock.unlock's steps before the release is sent) races a renewal reply that
 * confirms the lease ({@link Lease#confirmed}, what the watchdog does for a renewal Redis answered
 * with 1) followed by the watchdog's scan ({@link Lease#alive}). After both, the lease must be
 * out of the watchdog (nothing left to renew) and dead for good: a late confirmation must not make
 * a released lease immortal, and a release is never reported as a loss. A refused renewal racing
 * unlock is LeaseEndVersusLossStress. The watchdog here is real but never ticks (a scheduler that
 * does not run), so no Redis is needed.
 */
@JCStressTest
@Description("Final unlock racing a confirmed renewal and the watchdog scan: no immortal lease, nothing left to renew")
@Outcome(id = "1, 0, 0", expect = Expect.ACCEPTABLE, desc = "renewal seen while held, then released")
@Outcome(id = "0, 0, 0", expect = Expect.ACCEPTABLE, desc = "released before the scan")
@Outcome(id = ".*, 1, .*", expect = Expect.FORBIDDEN, desc = "immortal: released lease still alive or still registered")
@Outcome(id = ".*, .*, 1", expect = Expect.FORBIDDEN, desc = "a release was reported as a lost lease")
@State
public class UnlockVersusRenewalStress {
  /** A scheduler that accepts the watchdog's periodic task and never runs it. */
  static final ScheduledThreadPoolExecutor NEVER = new ScheduledThreadPoolExecutor(1) {
    @Override
    public ScheduledFuture<?> scheduleWithFixedDelay(Runnable command, long initialDelay, long delay,
        TimeUnit unit) {
      return IDLE;
    }
  };
  static final ScheduledFuture<?> IDLE = new ScheduledFuture<Object>() {
    @Override public long getDelay(TimeUnit unit) { return Long.MAX_VALUE; }
    @Override public int compareTo(Delayed o) { return 0; }
    @Override public boolean cancel(boolean mayInterruptIfRunning) { return true; }
    @Override public boolean isCancelled() { return false; }
    @Override public boolean isDone() { return false; }
    @Override public Object get() { throw new UnsupportedOperationException(); }
    @Override public Object get(long timeout, TimeUnit unit) { throw new UnsupportedOperationException(); }
  };

  private final Watchdog watchdog = new Watchdog(null, NEVER, 3_600_000);
  private final LocalOwnership local = new LocalOwnership("n", "lock 'n'");
  private final AsyncFakes.Io io = new AsyncFakes.Io();
  private final AsyncHold.Lock hold = AsyncFakes.lockHold(io, 1);
  private final Lease lease = hold.lease();
  private int scanSawAlive;

  @Actor
  public void owner() {
    Thread me = Thread.currentThread();
    local.grant(me, hold);
    watchdog.register(lease);
    Lease l = local.unlock(me, System.nanoTime()).lease();
    watchdog.unregister(l);
    l.end();
  }

  @Actor
  public void renewalReply() {
    long now = System.nanoTime();
    lease.confirmed(now);
    scanSawAlive = lease.alive(now) ? 1 : 0;
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = scanSawAlive;
    r.r2 = lease.alive(System.nanoTime()) || watchdog.size() != 0 ? 1 : 0;
    r.r3 = io.lost.get();
  }
}
