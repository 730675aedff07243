package io.github.turnstile;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

/**
 * Scenario 1, hold count: the owner takes the lock (grant), re-enters twice and unlocks three
 * times, while a second thread on the same instance tries to re-enter, unlock, read the hold count
 * and ask whether it holds. The second thread must never succeed at any of these, the owner's hold
 * count must be exact, and the owner's final unlock must hand back its lease exactly once.
 * Runs RedisLock's local state ({@link LocalOwnership}) without Redis.
 */
@JCStressTest
@Description("LocalOwnership: owner lock/re-enter/unlock racing another thread's lock/unlock on the same instance")
@Outcome(id = "2, 0, 1", expect = Expect.ACCEPTABLE, desc = "exact hold count, intruder refused, released once")
@Outcome(id = "2, 0, 0", expect = Expect.FORBIDDEN, desc = "final unlock did not end the ownership")
@Outcome(id = ".*, [1-9], .*", expect = Expect.FORBIDDEN, desc = "the intruder re-entered, unlocked or saw itself holding")
@Outcome(id = "[013-9].*, .*, .*", expect = Expect.FORBIDDEN, desc = "owner's hold count wrong")
@State
public class HoldCountStress {
  private final LocalOwnership local = new LocalOwnership("n", "lock 'n'");
  private final AsyncHold.Lock hold = AsyncFakes.lockHold(new AsyncFakes.Io(), 1);
  private int ownerCount;
  private int intruderWins;
  private int released;

  @Actor
  public void owner() {
    Thread me = Thread.currentThread();
    long now = System.nanoTime();
    local.grant(me, hold);
    local.reenter(me, now);
    local.reenter(me, now);
    local.unlock(me, now); // 3 -> 2
    ownerCount = local.holdCount(me, now);
    local.unlock(me, now); // 2 -> 1
    AsyncHold.Lock ended = local.unlock(me, now); // 1 -> 0: final
    released = ended == hold && local.owner() == null && local.lease() == null ? 1 : 0;
  }

  @Actor
  public void intruder() {
    Thread me = Thread.currentThread();
    long now = System.nanoTime();
    int wins = 0;
    if (local.reenter(me, now)) {
      wins++;
    }
    try {
      local.unlock(me, now);
      wins++;
    } catch (IllegalMonitorStateException expected) {
      // not the owner
    }
    if (local.holdCount(me, now) != 0) {
      wins++;
    }
    if (local.isHeldBy(me, now)) {
      wins++;
    }
    intruderWins = wins;
  }

  @Arbiter
  public void arbiter(III_Result r) {
    r.r1 = ownerCount;
    r.r2 = intruderWins;
    r.r3 = released;
  }
}
