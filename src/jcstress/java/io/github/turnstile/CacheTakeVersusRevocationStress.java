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
 * Lock caching: a local acquisition (a {@code tryLock()}) takes the idle cached grant
 * ({@link LockCache#take}, no round trip) while another client's attempt revokes it (the message
 * {@code r} on the lock's channel, {@link LockCache#revoke}). Revoked first: the grant is released
 * in Redis at once and the acquisition finds nothing to take (it attempts in Redis). Taken first: nothing is released while
 * the take holds it; its end releases the grant, carrying the take's fencing token. Either way the
 * grant is released exactly once. A release while a take holds it lets another client in beside
 * it; none leaves the lock held by a cache that was asked for it; two free a later holder's lock
 * (lock_release.lua names the request). Runs the real {@link LockCache} (made idle by its own
 * {@link LockCache#keep}), {@link AsyncGate} and {@link AsyncAcquisition} on Redis-free stand-ins
 * ({@link CacheFakes}); the arbiter ends the take, if any.
 */
@JCStressTest
@Description("LockCache: a local take of the idle grant racing a revocation: released once, never under a take")
@Outcome(id = "0, 1, 1, 1", expect = Expect.ACCEPTABLE, desc = "revoked first: released at once; the tryLock() attempts in Redis")
@Outcome(id = "1, 0, 1, 1", expect = Expect.ACCEPTABLE, desc = "taken first: released at the take's end, with its token")
@Outcome(id = "1, [1-9], .*, .*", expect = Expect.FORBIDDEN, desc = "released in Redis while a take held it")
@Outcome(id = ".*, .*, 0, .*", expect = Expect.FORBIDDEN, desc = "revoked, never released: the other client waits")
@Outcome(id = ".*, .*, [2-9], .*", expect = Expect.FORBIDDEN, desc = "released twice")
@Outcome(id = ".*, .*, 1, 0", expect = Expect.FORBIDDEN, desc = "the release did not carry the last token issued")
@Outcome(expect = Expect.FORBIDDEN, desc = "something else: the acquisition failed, or a take released as a plain hold")
@State
public class CacheTakeVersusRevocationStress {
  private final CacheFakes.Side side = new CacheFakes.Side().cached();
  private final AsyncGate<LockHold> gate = new AsyncGate<>(new AsyncFakes.Env(), side);
  private AsyncAcquisition<LockHold> acquisition;

  @Actor
  public void take() {
    // a tryLock(): the head takes from the cache if it can, else its one attempt in Redis is refused
    acquisition = gate.enqueue(Call.once(), 1, null);
  }

  @Actor
  public void revoke() {
    side.io.revocation();
  }

  private static boolean refused(AsyncAcquisition<LockHold> a) {
    try {
      a.result.getNow(null);
      return false;
    } catch (java.util.concurrent.CompletionException e) {
      return e.getCause() instanceof java.util.concurrent.TimeoutException;
    }
  }

  @Arbiter
  public void arbiter(IIII_Result r) {
    LockHold hold = acquisition.result.exceptionally(e -> null).getNow(null);
    // 1 taken; 0 refused in Redis (the tryLock() times out at once); 2 failed otherwise, or pending
    r.r1 = hold != null ? 1 : refused(acquisition) ? 0 : 2;
    r.r2 = side.io.releases.get();
    long last = CacheFakes.GRANT_TOKEN; // no token issued since the grant's, unless taken
    if (hold != null) {
      last = ((AsyncHold) hold).lease().token; // fencingToken() throws if the hold was lost
      hold.release();
    }
    r.r3 = side.io.releases.get() + side.plainReleases.get();
    r.r4 = side.io.releasedWith(last) && (hold == null || last > CacheFakes.GRANT_TOKEN) ? 1 : 0;
  }
}
