package io.github.turnstile;

import java.util.concurrent.CompletableFuture;

/**
 * The async acquisitions' side: the acquire of {@code n} permits, all or nothing, keyed by one
 * request for the whole acquisition (a new one after a grant that could not be counted); the
 * permits belong to the hold, which releases them under the registration they were granted in.
 */
final class PermitSide extends AcquisitionSide<PermitHold> implements AsyncHold.Io {
  private final RedisSemaphore sem;

  PermitSide(RedisSemaphore sem) {
    super(sem.describe, Inspection.Kind.SEMAPHORE, sem.name, sem.channel, sem.metrics);
    this.sem = sem;
  }

  /** Sends {@code r}'s acquire (a copy of it, if sent before). */
  private CompletableFuture<Attempt> sendAcquire(SemaphoreRequests.Req r, boolean subscribed) {
    String flags = (r.marks ? "w" : "") + (subscribed ? "s" : "");
    long live;
    long dead;
    sem.books.lock();
    try {
      live = sem.books.epoch;
      dead = sem.books.deadEpoch;
    } finally {
      sem.books.unlock();
    }
    return r.track(sem.requests.eval("acquire", r, r.permits, flags, r.lane, live, dead))
        .thenApply(reply -> {
          long status = RedisSemaphore.at(reply, 0);
          if (status < 0) {
            throw new IllegalStateException(sem.describe + ": a stale reply for request " + r.id);
          }
          Metrics.reclaimed(sem.metrics, sem.describe, RedisSemaphore.at(reply, 4));
          if (status == 1L) {
            if (!r.granted) {
              r.granted = true;
              if (sem.engine.options.replicaAcks() == 0) {
                // counted as the reply is read, in the connection's reply order (see SemaphoreBooks#answered)
                sem.books.answered((int) RedisSemaphore.at(reply, 1), RedisSemaphore.at(reply, 2));
              }
            }
            return new Attempt(true, RedisSemaphore.at(reply, 1), 0, RedisSemaphore.at(reply, 2));
          }
          return new Attempt(false, 0, RedisSemaphore.at(reply, 3), 0);
        });
  }

  private SemaphoreRequests.Req req(AsyncAcquisition<PermitHold> w) {
    SemaphoreRequests.Req r = (SemaphoreRequests.Req) w.sideState;
    if (r == null) {
      r = sem.requests.new Req(w.permits, 'a', w.permits == 1 && !w.call.once); // one permit: the wake list
      w.sideState = r;
      sem.books.withLock(() -> sem.books.inFlight++);
    }
    return r;
  }

  /** The acquisition is done with its request. */
  private void end(AsyncAcquisition<PermitHold> w, boolean undo) {
    SemaphoreRequests.Req r = (SemaphoreRequests.Req) w.sideState;
    if (r == null) {
      return;
    }
    w.sideState = null;
    sem.books.requestEnded();
    sem.requests.endRequest(r, undo);
  }

  /**
   * A wake token goes to whoever has waited longest and must be of use to it: only a
   * single-permit acquisition waits on the wake list; one for more waits by pub/sub.
   */
  @Override
  String wakeKey(AsyncAcquisition<PermitHold> w) {
    return w.permits == 1 ? sem.wakeKey : null;
  }

  @Override
  void passWakeup() {
    sem.requests.eval("pass", null, 0, "", 't', 0, 0);
  }

  /** A {@code tryAcquire()} barges: it attempts at once beside this JVM's waiters. */
  @Override
  int runMode(AsyncAcquisition<PermitHold> w) {
    return w.call.once ? AsyncGate.RUN_ALWAYS : AsyncGate.RUN_NEVER;
  }

  @Override
  CompletableFuture<Attempt> attempt(AsyncAcquisition<PermitHold> w, boolean subscribed) {
    return sendAcquire(req(w), subscribed);
  }

  /**
   * Counts the permits granted (from Redis, or handed on by a release of this JVM: then they
   * were counted out of the books by that release, and come back in now, under the same
   * registration). A thread's permits become the client's when the thread takes them
   * ({@link RedisSemaphore#absorb}); a future's are its hold's.
   */
  @Override
  PermitHold grant(AsyncAcquisition<PermitHold> w, Attempt a, long sentAtTicks) {
    int n = (int) a.token;
    boolean local = w.handedLocally;
    Lease under;
    boolean counted;
    if (!local && sem.engine.options.replicaAcks() != 0) {
      // acknowledged by the replicas: only now is the grant the caller's (a grant whose
      // acknowledgement was cut, lost with the primary, is not one this client relies on)
      sem.books.answered(n, a.epoch);
    }
    sem.books.lock();
    try {
      counted = sem.books.count(n, a.epoch, sentAtTicks);
      under = sem.books.lease;
    } finally {
      sem.books.unlock();
    }
    // a local hand-off withdraws the request the acquisition may have sent (a copy that grants
    // later is given back, and its waiting mark goes)
    end(w, local);
    if (!local) {
      AsyncGate<PermitHold> g = sem.async.get();
      if (g != null) {
        g.grantedInRedis();
      }
    }
    if (!counted) {
      return null; // granted under a registration that is gone: ask again, with a new request
    }
    AsyncHold.Permits hold = new AsyncHold.Permits(sem.name, this, sem.engine.ticker, n, sem.leased ? under : null);
    if (w.thread == null) {
      sem.liveHolds.add(hold);
      // a thread's permits become the client's, not a hold's: no hold to record
      hold.recordWith(sem.engine.telemetry, Inspection.Kind.SEMAPHORE, sem.describe, 0, n, w.telemetry);
    }
    return hold;
  }

  @Override
  void cancelGrant(AsyncAcquisition<PermitHold> w, Attempt a) {
    end(w, true); // the cancel gives back exactly what the grant took, and wakes the next waiter
  }

  @Override
  void withdraw(AsyncAcquisition<PermitHold> w, boolean uncertain) {
    end(w, uncertain);
  }

  @Override
  String leaseKey(AsyncAcquisition<PermitHold> w) {
    SemaphoreRequests.Req r = (SemaphoreRequests.Req) w.sideState;
    return sem.memoPrefix + (r == null ? "-" : Integer.toString(r.slot));
  }

  @Override
  String leaseRequest(AsyncAcquisition<PermitHold> w) {
    return null; // the memo is a string
  }

  @Override
  public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
    AsyncHold.Permits h = (AsyncHold.Permits) hold;
    sem.liveHolds.remove(h);
    int n = h.permits();
    if (n == 0) {
      return CompletableFuture.completedFuture(Boolean.TRUE);
    }
    long from;
    boolean wasLost = false;
    sem.books.lock();
    try {
      if (sem.leased) {
        if (sem.books.lease != null) {
          sem.books.lease.alive(sem.now());
        }
        boolean live = h.lease() != null && h.lease() == sem.books.lease;
        if (live ? sem.books.held < n : sem.books.lost < n) {
          throw new IllegalStateException("the " + RedisSemaphore.permits(n) + " of this hold on " + sem.describe
              + " were already released through release(int)");
        }
        if (live) {
          sem.books.held -= n;
        } else {
          sem.books.lost -= n;
          wasLost = true;
        }
      }
      from = sem.books.epoch;
      sem.books.activity++;
    } finally {
      sem.books.unlock();
    }
    if (wasLost) {
      return CompletableFuture.failedFuture(new LockLostException(sem.name, 0, System.currentTimeMillis(),
          "this client's lease on " + sem.describe + " was lost and its permits were given to others"));
    }
    int send = sem.handOn(n, from);
    if (send == 0) {
      return CompletableFuture.completedFuture(Boolean.TRUE);
    }
    return sem.releaseInRedis(send, from, 'a').thenApply(reply -> sem.released(reply, send, from) == null);
  }

  @Override
  public boolean connected() {
    return sem.engine.connected();
  }

  @Override
  public void stopRenewal(Lease l) {
    // the registration is the client's, not the hold's
  }

  @Override
  public void lost(LeaseLostEvent event) {
    sem.metrics.leaseLost();
    sem.engine.notifyLost(event, sem.lossListeners(), Inspection.Kind.SEMAPHORE, sem.describe);
  }

  /** Returns a hold of no permits (acquire(0) succeeds at once, as {@code Semaphore}'s does). */
  PermitHold none() {
    return new AsyncHold.Permits(sem.name, this, sem.engine.ticker, 0, null);
  }
}
