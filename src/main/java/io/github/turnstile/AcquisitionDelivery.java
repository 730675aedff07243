package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * How a grant reaches the caller of an {@link AsyncAcquisition}: acknowledged by the replicas first
 * if asked ({@code replicaAcks}), then counted by the side as a hold and completed into the future;
 * or handed over by a releasing hold of this JVM, without an attempt of its own (a lock's
 * hand-off, a semaphore's permits). {@link AsyncAcquisition}, the only subclass, is the loop.
 */
abstract sealed class AcquisitionDelivery<H extends Hold> extends AcquisitionState<H> permits AsyncAcquisition {
  /** Runs the blocking WAIT of replicaAcks off the reply threads; its threads live only while a WAIT does. */
  private static final ExecutorService ACKS = Executors.newCachedThreadPool(Engine.daemon("turnstile-async-acks"));

  AcquisitionDelivery(AcquisitionEnv env, AcquisitionSide<H> side, AsyncGate<H> gate, int permits, Call call, Thread thread) {
    super(env, side, gate, permits, call, thread);
  }

  /**
   * Returns this acquisition's owner and request ids if a releasing hold of this JVM may hand the
   * primitive to it now (it is the head, has its ids, and has not ended), or null.
   *
   * @return {owner, request}, or null
   */
  String[] handOffIds() {
    mu.lock();
    try {
      return head && request != null && !finished && !abandoned ? new String[] {owner, request} : null;
    } finally {
      mu.unlock();
    }
  }

  /**
   * A releasing hold of this JVM handed the primitive to this acquisition: Redis granted its
   * request, with fencing token {@code a.token}, and the lease runs from {@code sinceTicks} (the
   * handing hold's). Delivered unless the acquisition ended meanwhile; then the grant is undone,
   * as a grant that arrives after a cancel is. An attempt still in flight is left to run: it
   * carries the same request, so Redis answers it as a replay of this grant, and its reply is
   * ignored.
   *
   * @return whether the grant is delivered to this acquisition (false: it was undone)
   */
  boolean handedOver(Attempt a, long sinceTicks) {
    boolean deliver = false;
    boolean undo;
    mu.lock();
    try {
      undo = abandoned || finished && delivered == null;
      if (!finished && !abandoned) {
        finished = true;
        inFlight = null;
        deliver = true;
      }
    } finally {
      mu.unlock();
    }
    if (deliver) {
      cancelTimers();
      call.reachable();
      tier("local hand-off");
      granted(a, sinceTicks);
    } else if (undo) {
      quietly(() -> side.cancelGrant(self(), a));
    }
    return deliver;
  }

  /**
   * Permits that a release of this JVM handed to this acquisition without Redis (a local hand-off:
   * they stay counted under the registration {@code a.epoch}): delivered unless the acquisition
   * ended meanwhile. Its own request, if it sent one, is withdrawn by the side's grant (a copy
   * that grants later is given back). Unlike {@link #handedOver}, nothing is undone if it ended:
   * the caller keeps the permits (it releases them in Redis).
   *
   * @return whether the permits are delivered to this acquisition (false: the caller keeps them)
   */
  boolean handedPermits(Attempt a) {
    mu.lock();
    try {
      if (finished || abandoned) {
        return false;
      }
      finished = true;
      inFlight = null;
      handedLocally = true;
    } finally {
      mu.unlock();
    }
    cancelTimers();
    tier("local hand-off");
    deliver(a, env.ticker());
    return true;
  }

  /**
   * This head, about to be handed permits by a local release, hands its wait in Redis to
   * {@code next}, the acquisition that becomes head after it: its request (the side's state,
   * which Redis counts as waiting) and its wait on the wake list, still blocked. {@code next}
   * resumes that wait when it becomes head instead of attempting at once; so a local hand-off
   * costs Redis nothing, where withdrawing this head's request and attempting afresh for the next
   * one cost two scripts. Only between attempts (none in flight), on the wake list, and when both
   * ask for as many permits (the request names its permits).
   *
   * @return whether the wait was handed over
   */
  boolean passWaitTo(AsyncAcquisition<H> next) {
    mu.lock();
    try {
      if (finished || abandoned || inFlight != null || listWait == null || sideState == null
          || next.permits != permits) {
        return false;
      }
      if (!next.adopt(sideState, listWait, listFault)) {
        return false;
      }
      givenAway = listWait;
      listWait = null; // not abandoned when this acquisition's timers are cancelled
      listFault = null;
      sideState = null;
      return true;
    } finally {
      mu.unlock();
    }
  }

  /**
   * Takes over a waiting head's request and list wait (see {@link #passWaitTo}), and the recovery
   * events' future the wait was watched with: an event since the attempt that the wait follows
   * (before this acquisition resumes the wait, too) ends it at once, and this one attempts again.
   * With a future taken only when it resumes, an event in between was lost, and the wait ran to
   * its slice (a lease with {@code CLIENT UNBLOCK}; RecoveryEventGapTest).
   *
   * @return false if it cannot
   */
  boolean adopt(Object request, Wake wait, CompletableFuture<Void> fault) {
    mu.lock();
    try {
      if (finished || abandoned || head || sideState != null) {
        return false;
      }
      sideState = request;
      attempted = true; // its request was sent: an end withdraws it
      listWait = wait; // abandoned with this acquisition's timers if it ends before it resumes it
      listFault = fault;
      adoptedWait = true;
      return true;
    } finally {
      mu.unlock();
    }
  }

  /** A grant to deliver ({@link #finished} is set): acknowledged by the replicas first if asked. */
  void granted(Attempt a, long sentAt) {
    if (env.replicaAcks() == 0) {
      deliver(a, sentAt);
      return;
    }
    CompletableFuture.runAsync(() -> env.awaitReplicas(side.leaseKey(self()), side.leaseRequest(self())), ACKS).whenComplete((v, e) -> guarded(() -> {
      if (e == null) {
        deliver(a, sentAt);
        return;
      }
      Throwable cause = Engine.unwrap(e);
      if (cause instanceof RuntimeException && Replicas.cutsAcknowledgement((RuntimeException) cause)) {
        goOnAfterCut(a, cause);
        return;
      }
      endAfterGrant(a, true, new TurnstileException(side.describe + " was acquired, but "
          + cause.getMessage() + "; it was released again", cause));
    }));
  }

  /**
   * Ends this acquisition after grant {@code a}, which the caller will not get: the grant is undone
   * if {@code undo}, the next acquisition becomes head, and the future fails with {@code error}
   * (null: the caller completed it already).
   */
  private void endAfterGrant(Attempt a, boolean undo, Throwable error) {
    if (undo) {
      quietly(() -> side.cancelGrant(self(), a));
    }
    cancelTimers();
    gate.leave(self());
    if (error != null) {
      result.completeExceptionally(error);
    }
  }

  /**
   * A fault cut the replicas' acknowledgement of a grant (a failover reset the connection, no reply
   * came): its fate on the current primary is unknown. As {@link Engine} does for a waiting
   * thread, the fault counts against the call like an outage, and the acquisition goes on: the
   * side gives the grant up if it cannot be replayed ({@link AcquisitionSide#acknowledgementCut}), and the
   * next attempt (for locks, the same request id) replays it where the primary has it, or asks
   * afresh. An untimed call whose outage tolerance runs out fails, its grant undone.
   */
  private void goOnAfterCut(Attempt a, Throwable cause) {
    if (!call.expired()) {
      try {
        env.unreachable(call, System.nanoTime(), side.describe + " (replica acknowledgement)", cause);
      } catch (TurnstileException outOfTolerance) {
        endAfterGrant(a, side.acknowledgementCut(self(), a), outOfTolerance);
        return;
      }
    }
    boolean mayHold = side.acknowledgementCut(self(), a);
    boolean gone = locked(() -> {
      boolean done = result.isDone();
      if (!done) {
        finished = false;
        uncertain |= mayHold;
      }
      return done;
    });
    if (gone) {
      endAfterGrant(a, mayHold, null); // the caller cancelled while the acknowledgement was awaited
      return;
    }
    if (call.expired()) {
      timeout(); // its deadline passed while the acknowledgement was awaited: abandon() withdraws it
      return;
    }
    step();
  }

  private void deliver(Attempt a, long sentAt) {
    H hold;
    try {
      hold = side.grant(self(), a, sentAt);
    } catch (RuntimeException e) {
      endAfterGrant(a, true, e);
      return;
    }
    if (hold == null) {
      // not countable (given back): unless the caller has gone meanwhile, attempt again; one still
      // in line (permits handed to it locally under a registration lost meanwhile) waits on in line
      boolean gone;
      boolean inLine;
      mu.lock();
      try {
        gone = result.isDone();
        finished = gone;
        handedLocally = false;
        inLine = !head && !runner;
      } finally {
        mu.unlock();
      }
      if (gone) {
        quietly(() -> side.withdraw(self(), false));
        cancelTimers();
        gate.leave(self());
      } else if (!inLine) {
        step();
      } else if (call.timed && !call.once) {
        armDeadline(call.deadline - System.nanoTime()); // the hand-off cancelled it
      }
      return;
    }
    cancelTimers();
    delivered = hold;
    gate.leave(self());
    if (result.complete(hold)) {
      side.metrics.acquired(System.nanoTime() - startNanos);
    } else {
      // the caller cancelled (or the deadline passed) just before: no hold is left behind
      try {
        hold.close();
      } catch (RuntimeException e) {
        LOG.log(System.Logger.Level.DEBUG, "releasing an abandoned grant: {0}", e.toString());
      }
    }
  }
}
