package io.github.turnstile;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

/**
 * Lock caching: the release of a take from the cache ({@link LockCache#endTake}, which keeps the
 * grant idle again) racing another client's revocation ({@link LockCache#revoke}). Revoked during
 * the take: the take's end releases the grant in Redis. Ended first: the grant is idle again, and
 * the revocation releases it at once. Either way it is released exactly once, carrying the take's
 * token, and is no longer cached. A grant kept idle after the revocation leaves the other client
 * waiting for up to the cache's idle time; one released twice frees a later holder's lock. Runs
 * the real {@link LockCache}, {@link AsyncGate}, {@link AsyncAcquisition} and {@link AsyncHold} on
 * Redis-free stand-ins ({@link CacheFakes}).
 */
@JCStressTest
@Description("LockCache: the end of a take racing a revocation: released once, not kept")
@Outcome(id = "1, 1, 0, 1", expect = Expect.ACCEPTABLE, desc = "revoked during the take: released at its end")
@Outcome(id = "1, 2, 0, 1", expect = Expect.ACCEPTABLE, desc = "the take ended first: idle, then released at once")
@Outcome(id = "0, .*, .*, .*", expect = Expect.FORBIDDEN, desc = "revoked, never released: the other client waits")
@Outcome(id = "[2-9], .*, .*, .*", expect = Expect.FORBIDDEN, desc = "released twice")
@Outcome(id = ".*, .*, 1, .*", expect = Expect.FORBIDDEN, desc = "released, yet still cached idle here")
@Outcome(id = "1, .*, 0, 0", expect = Expect.FORBIDDEN, desc = "the release did not carry the take's token")
@Outcome(expect = Expect.FORBIDDEN, desc = "something else")
@State
public class CacheTakeEndVersusRevocationStress {
  private final CacheFakes.Side side = new CacheFakes.Side().cached();
  private final LockHold hold;
  private final long token;
  private volatile Thread unlocking;
  private volatile Thread revoking;

  public CacheTakeEndVersusRevocationStress() {
    AsyncAcquisition<LockHold> take = new AsyncGate<>(new AsyncFakes.Env(), side).enqueue(Call.untimed(false), 1, null);
    hold = take.result.getNow(null);
    if (hold == null) {
      throw new IllegalStateException("not taken from the cache");
    }
    token = hold.fencingToken();
  }

  @Actor
  public void unlock() {
    unlocking = Thread.currentThread();
    hold.release();
  }

  @Actor
  public void revoke() {
    revoking = Thread.currentThread();
    side.io.revocation();
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    r.r1 = side.io.releases.get() + side.plainReleases.get();
    Thread by = side.io.releasedBy;
    r.r2 = by == null ? 0 : by == unlocking ? 1 : by == revoking ? 2 : 3;
    r.r3 = side.cache.idleHere() ? 1 : 0;
    r.r4 = side.io.releasedWith(token) && token > CacheFakes.GRANT_TOKEN ? 1 : 0;
  }
}
