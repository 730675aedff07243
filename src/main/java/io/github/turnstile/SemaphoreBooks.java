package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * This client's books of one {@link RedisSemaphore}, guarded by {@link #lock()}: its registration
 * (leased mode: an epoch, and its {@link Lease}, renewed by the watchdog), the permits held under it
 * and those lost with an earlier one, the acquisitions in flight; and their upkeep: counting a grant
 * ({@link #count}), the renewal's check ({@link #registration}), a lost registration
 * ({@link #leaseLost}), an idle one ended ({@link #maybeIdle}), and the check after a recovery
 * ({@link #confirm}).
 */
final class SemaphoreBooks {
  private final RedisSemaphore sem;
  private final Engine engine;
  /** Guards the books below (no {@code synchronized} in Turnstile: it would pin virtual threads). */
  private final java.util.concurrent.locks.ReentrantLock books = new java.util.concurrent.locks.ReentrantLock();

  // ---- guarded by books
  /** The live registration's epoch (0: none) and its lease. */
  long epoch;
  Lease lease;
  /** The last epoch this client knows to be dead: the next grant replaces it in Redis. */
  long deadEpoch;
  /** The newest epoch this client has seen: an older one is never adopted again. */
  private long newestEpoch;
  /** Permits held under the live registration (by threads, holds, or on their way to a waiter). */
  int held;
  /** Permits the application still holds that were lost with an earlier registration. */
  int lost;
  /** Acquisitions in flight (an idle registration is ended only without any). */
  int inFlight;
  /** Changes with every grant and release: an idle check scheduled before one does nothing. */
  long activity;
  private boolean idleCheck;
  /**
   * Whether the last reply that said found the free permits negative (a debt after
   * reducePermits): releases then pay it in Redis rather than hand permits over locally.
   */
  boolean debt;
  // ----

  SemaphoreBooks(RedisSemaphore sem) {
    this.sem = sem;
    this.engine = sem.engine;
  }

  /** Takes the lock that guards the books. */
  void lock() {
    books.lock();
  }

  /** Gives the lock that guards the books back. */
  void unlock() {
    books.unlock();
  }

  /** Returns {@code read}'s value, read holding the books' lock. */
  <T> T locked(java.util.function.Supplier<T> read) {
    return Locks.locked(books, read);
  }

  /** Runs {@code action} holding the books' lock. */
  void withLock(Runnable action) {
    Locks.withLock(books, action);
  }

  /** An acquisition or a drain in flight ended (see {@link #maybeIdle}). */
  void requestEnded() {
    withLock(() -> {
      inFlight--;
      maybeIdle();
    });
  }

  /**
   * Counts {@code n} permits granted under {@code grantEpoch} by a call sent at {@code sentAt}.
   *
   * @return false if they do not count: granted under a registration this client no longer renews,
   *     which Redis takes back with it (nothing is to be released)
   */
  boolean count(int n, long grantEpoch, long sentAt) {
    activity++;
    debt = false; // a grant found at least n >= 0 free
    if (!sem.leased) {
      return true;
    }
    if (grantEpoch > newestEpoch) {
      // a registration newer than any this client knew: Redis made it because the one it had was gone
      newestEpoch = grantEpoch;
      if (lease != null) {
        lease.lose("Redis no longer had this client's registration on " + sem.describe + " (replaced by a new one)");
      }
      epoch = grantEpoch;
      lease = new Lease(sem.liveKey, "#" + engine.clientId + ":" + grantEpoch, engine.leaseMillis, 0,
          "client " + engine.clientId, sentAt, this::leaseLost, sem.metrics).on(Inspection.Kind.SEMAPHORE, sem.name, -1);
      lease.semaphore = sem;
      lease.registration = registration;
      engine.watchdog.register(lease);
      held = n;
      if (sem.replayHook.compareAndSet(false, true)) {
        engine.onRecovery(sem.onRecovery, true); // the books are checked after every recovery
      }
      return true;
    }
    if (grantEpoch == epoch && lease != null && lease.alive(sem.now())) {
      held += n;
      return true;
    }
    return false;
  }

  /**
   * The registration named by the newest grant reply read, and the permits Redis was answered to
   * have granted under it (guarded by the books' lock; see {@link #answered}).
   */
  private long answeredEpoch;
  private long answered;

  /**
   * A grant's reply was read: {@code n} permits under the registration {@code grantEpoch}. Called
   * as the reply is read, on the connection's event loop, before anything else is done with it, and
   * once per request (a copy answered from the memo is not counted again).
   *
   * <p>Redis keeps the same total, {@code g:<client>}, the permits ever granted under the
   * registration; renew.lua reports it. Replies on one connection are read in the order the
   * commands ran, so when a renewal's reply is read every grant that ran before the renewal has
   * been counted here and none that ran after it: without a lost write, Redis's total is at least
   * this one (more only while a grant's reply was lost with its connection and its re-sent copy
   * is not yet answered). Releases, local hand-offs and cancels change neither total, so, unlike a
   * check of the permits held, no release on its way can hide a lost grant.
   */
  void answered(int n, long grantEpoch) {
    if (!sem.leased) {
      return;
    }
    withLock(() -> {
      if (grantEpoch > answeredEpoch) {
        answeredEpoch = grantEpoch;
        answered = n;
      } else if (grantEpoch == answeredEpoch) {
        answered += n;
      }
    });
  }

  /** Why a registration's lease is lost when Redis granted it fewer permits than the client was answered. */
  static String grantLost(long granted, String when) {
    return "Redis has granted this client's registration fewer permits (" + granted + " in all) than this"
        + " client was answered " + when + ": a grant was lost (a failover to a replica that lacked it)";
  }

  /**
   * The renewal's check (see renew.lua and {@link #answered}): Redis must have granted the
   * registration at least the permits this client was answered under it. Fewer means Redis lost
   * a grant (a failover to a replica that lacked it): the lease is lost, loudly, as a lock's would
   * be.
   */
  private final Lease.Registration registration = new Lease.Registration() {
    @Override
    public String stateKey() {
      return sem.stateKey;
    }

    @Override
    public boolean intact(long granted, Lease l) {
      if (granted < 0) {
        return false;
      }
      long e = Long.parseLong(l.requestId.substring(l.requestId.lastIndexOf(':') + 1));
      return locked(() -> e != answeredEpoch || granted >= answered); // an older registration is being replaced
    }
  };

  /**
   * The registration's lease was lost: what the client held is lost with it. The registration is
   * retired in Redis at once (if Redis still has it, its permits are free now rather than when its
   * time runs out there).
   */
  private void leaseLost(Lease l, String reason) {
    int n;
    long dead;
    books.lock();
    try {
      if (l != lease) {
        return;
      }
      engine.watchdog.unregister(l);
      n = held;
      lost += held;
      held = 0;
      dead = epoch;
      deadEpoch = epoch;
      epoch = 0;
      lease = null;
    } finally {
      books.unlock();
    }
    // The loss is logged before the registration is retired: once retired, its permits are free
    // in Redis for other clients, and the log line is the instant the loss was declared (the
    // semaphore fault run's checker ends holds there)
    LeaseLostEvent event = n > 0
        ? new LeaseLostEvent(sem.name, 0, l.holder, reason + " (" + RedisSemaphore.permits(n) + ")", l.lostAtMillis) : null;
    if (event != null) {
      engine.logLost(event, Inspection.Kind.SEMAPHORE, sem.describe);
    }
    retire(dead);
    for (AsyncHold.Permits h : sem.liveHolds) {
      if (h.lease() == l) {
        h.livenessLost(new LeaseLostEvent(sem.name, 0, l.holder, reason, l.lostAtMillis));
      }
    }
    if (event != null) {
      sem.metrics.leaseLost();
      engine.tellLost(event, sem.lossListeners());
    }
  }

  /** After the last permit went: stop renewing the registration once it has been idle a renew interval. */
  void maybeIdle() {
    if (!sem.leased || lease == null || held > 0 || inFlight > 0 || idleCheck) {
      return;
    }
    idleCheck = true;
    long seen = activity;
    engine.schedule(() -> endIfIdle(seen), engine.options.renewInterval().toNanos());
  }

  private void endIfIdle(long seen) {
    long dead;
    books.lock();
    try {
      idleCheck = false;
      if (lease == null || held > 0 || inFlight > 0) {
        return;
      }
      if (activity != seen || AsyncSides.waiting(sem.async) > 0) {
        maybeIdle();
        return;
      }
      Lease l = lease;
      l.end();
      engine.watchdog.unregister(l);
      dead = epoch;
      deadEpoch = epoch; // the next grant registers afresh (this one is no longer renewed)
      epoch = 0;
      lease = null;
    } finally {
      books.unlock();
    }
    retire(dead);
  }

  /** Gives up the registration {@code dead} in Redis (idempotent: sent again until answered). */
  private void retire(long dead) {
    if (dead == 0) {
      return;
    }
    engine.releases.retrying(() -> sem.requests.eval("retire", null, 0, "", 't', dead, 0),
        System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis));
  }

  /**
   * A release under the registration {@code from} found fewer of the client's permits in Redis
   * than it gave back: Redis lost a grant (a failover to a replica that lacked it) or reclaimed the
   * registration. The client's books no longer match Redis, and which of its permits Redis still
   * counts is unknowable, so the registration's lease is lost: every permit counted under it is
   * lost with it, and its holders are told: telling only the releasing thread, the client would go
   * on using (and handing on locally) permits that Redis granted to others until a renewal found
   * the count short (LostWritesTest).
   */
  void booksShort(long from, String why) {
    Lease l = locked(() -> from != 0 && from == epoch ? lease : null);
    if (l != null) {
      l.lose(why + " (a release found fewer of the registration's permits than it gave back: every permit"
          + " the client counted under it is lost)");
    }
  }

  void afterRelease(List<Object> reply) {
    withLock(() -> {
      noteFree(reply, 2);
      maybeIdle();
    });
  }

  /** Under the lock: a reply that carries the free permits at {@code index} says whether there is a debt. */
  void noteFree(List<Object> reply, int index) {
    if (reply != null && reply.size() > index) {
      debt = RedisSemaphore.at(reply, index) < 0;
    }
  }

  /** Whether the client has a live registration (racy read: a hint for unhooking only). */
  boolean hasLease() {
    return locked(() -> lease != null);
  }

  /** The connection generation ({@link Engine#generation}) whose grants Redis confirmed. */
  private long confirmedGeneration;
  /** The generation a confirmation is on its way for (-1: none). */
  private long confirmingGeneration = -1;
  /** A test's seam: given the confirmation's send, instead of running it at once. */
  transient volatile java.util.function.Consumer<Runnable> confirmSeam;

  /**
   * Under the lock: whether Redis confirmed the registration's grants since the last dropped
   * connection or recovery (local hand-offs wait for it: {@link RedisSemaphore#handOn}).
   */
  boolean confirmed() {
    return !sem.leased || confirmedGeneration == engine.generation();
  }

  /**
   * Asks Redis to confirm every grant the registration was answered, after a connection dropped
   * or a recovery (a reconnect: maybe to a promoted replica that lacks recent writes). Sent at
   * once after every recovery, and by a hand-off that finds the grants unconfirmed; one at a time
   * per generation. A failover without replica acknowledgement can lose a grant; the client must
   * learn of it before it goes on using, and handing on locally, permits that Redis now counts as
   * free (docs/FAILURE-MODEL.md §3). The check is {@link #answered}'s, exact whatever is on its
   * way: a comparison of the permits held would miss a lost grant the size of a release that left
   * the count but ran in Redis after the check (a NOSCRIPT fallback, or a thread between its count
   * and its send), and the client would hand it on until a renewal found it (LostWritesTest).
   */
  void confirm() {
    if (!sem.leased) {
      return;
    }
    long gen = engine.generation();
    Lease l;
    books.lock();
    try {
      if (confirmedGeneration == gen || confirmingGeneration == gen) {
        return;
      }
      l = lease;
      if (l == null) {
        confirmedGeneration = gen; // no registration: nothing granted that Redis could have lost
        return;
      }
      confirmingGeneration = gen;
    } finally {
      books.unlock();
    }
    Runnable send = () -> engine.<List<Object>>evalInOrder(Script.RENEW, ScriptOutputType.MULTI,
        new String[] {sem.liveKey, sem.stateKey}, l.requestId, Long.toString(l.leaseMillis))
        .whenComplete((r, e) -> {
          Object reply = e == null && r != null && !r.isEmpty() ? r.get(0) : null;
          if (reply instanceof Long granted && !registration.intact(granted, l)) {
            l.lose(granted < 0
                ? "Redis no longer had this client's registration after a recovery (a failover to a replica that lacked it)"
                : grantLost(granted, "after a recovery"));
          }
          withLock(() -> {
            if (confirmingGeneration == gen) {
              confirmingGeneration = -1;
            }
            // answered, or a refusal that asking again would not change (the ACL): hand-offs resume;
            // Redis unreachable again: the next recovery or hand-off asks again
            if ((reply != null || (e != null && !Engine.isTransient(Engine.unwrap(e)))) && confirmedGeneration < gen) {
              confirmedGeneration = gen;
            }
          });
        });
    java.util.function.Consumer<Runnable> seam = confirmSeam;
    if (seam != null) {
      seam.accept(send);
    } else {
      send.run();
    }
  }
}
