package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

/**
 * Scenario 5, interrupt versus grant: a lockInterruptibly() waits for its attempt's reply
 * ({@link Waits#get}, interruptible) while another thread interrupts it and then the reply arrives
 * saying "granted". Either the acquire returns and the lock is held locally (owner set, no
 * cancel), or it throws InterruptedException and the grant is cancelled in Redis
 * ({@link Engine#cancelIfAcquired} chains the cancel on the reply). Never both, never neither
 * (a grant that nobody holds and nobody cancels stays locked in Redis until its lease runs out,
 * and nobody in this JVM would ever release it). The Redis reply is a CompletableFuture completed
 * by the test; the cancel is counted.
 *
 * <p>The interrupt is delivered only while the acquirer is inside its acquire (a guarded window),
 * so it never leaks into the harness.
 */
@JCStressTest
@Description("lockInterruptibly's wait for a grant racing an interrupt: held xor cancelled")
@Outcome(id = "1, 0", expect = Expect.ACCEPTABLE, desc = "acquired; the lock is held")
@Outcome(id = "0, 1", expect = Expect.ACCEPTABLE, desc = "interrupted; the grant was cancelled")
@Outcome(id = "0, 0", expect = Expect.FORBIDDEN, desc = "leaked: granted in Redis, neither held nor cancelled")
@Outcome(id = "1, 1", expect = Expect.FORBIDDEN, desc = "held, yet its grant was cancelled")
@Outcome(id = "1, 2", expect = Expect.FORBIDDEN, desc = "cancelled twice")
@Outcome(id = "0, 2", expect = Expect.FORBIDDEN, desc = "cancelled twice")
@State
public class InterruptVersusGrantStress {
  private final LocalOwnership local = new LocalOwnership("n", "lock 'n'");
  private final CompletableFuture<Engine.Attempt> reply = new CompletableFuture<>();
  private final AtomicInteger cancels = new AtomicInteger();
  private final AtomicInteger phase = new AtomicInteger(); // 0 not started, 1 waiting, 2 done
  private volatile Thread acquirer;

  private final Engine.Contender contender = new Engine.Contender() {
    @Override public CompletableFuture<Engine.Attempt> attempt(String requestId, boolean subscribed) { return reply; }
    @Override public void cancel(String requestId) { cancels.incrementAndGet(); }
    @Override public void passWakeup() { }
    @Override public String wakeKey() { return "wake"; }
    @Override public String describe() { return "lock 'n'"; }
    @Override public String channel() { return "ch"; }
    @Override public String leaseKey(String requestId) { return "k"; }
  };

  @Actor
  public void acquirer() {
    Thread me = Thread.currentThread();
    acquirer = me;
    phase.set(1);
    try {
      Engine.Attempt a = Waits.get(reply, Long.MAX_VALUE >> 2, true);
      if (a.acquired) {
        local.grant(me, new Lease("k", "r", 30_000, a.token, "t", System.nanoTime(), (l, reason) -> { }));
      }
    } catch (InterruptedException e) {
      Engine.cancelIfAcquired(reply, contender, "r"); // as Engine.contend does
    } catch (ExecutionException | TimeoutException e) {
      throw new AssertionError(e);
    } finally {
      synchronized (this) {
        phase.set(2); // no interrupt can arrive after this
      }
      Thread.interrupted();
    }
  }

  @Actor
  public void interrupterThenGrant() {
    while (phase.get() == 0) {
      Thread.onSpinWait();
    }
    synchronized (this) {
      if (phase.get() == 1) {
        acquirer.interrupt();
      }
    }
    reply.complete(new Engine.Attempt(true, 42, 0));
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = local.owner() != null ? 1 : 0;
    r.r2 = cancels.get();
  }
}
