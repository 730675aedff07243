package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * This client's books of one {@link RedisSemaphore}, guarded by {@link #lock()}: its registration
 * (leased mode: an epoch, and its {@link Lease}, renewed by the watchdog), the permits held under it
 * and those lost with an earlier one, the acquisitions in flight; and their upkeep: counting a grant
 * ({@link #count}), the renewal's check ({@link #registration}), a lost registration
 * ({@link #leaseLost}), an idle one ended ({@link #maybeIdle}), and the check after a recovery
 * ({@link #checkBooksAfterRecovery}).
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

  /** Permits released in Redis so far (first copies sent): the renewal's check allows for those sent meanwhile. */
  final java.util.concurrent.atomic.AtomicLong releasedSent = new java.util.concurrent.atomic.AtomicLong();

  /**
   * The renewal's check (see renew.lua): Redis must attribute to the registration at least what
   * this client counts. Permits counted were granted (and so applied) before they were counted;
   * permits released leave the count before their release is sent; so, in correct operation, what
   * Redis attributes is never less than the count at the time the renewal was sent, minus the
   * permits whose release was sent since (which may have run first). Less means Redis lost a grant
   * (a failover to a replica that lacked it): the lease is lost, loudly, as a lock's would be.
   */
  private final Lease.Registration registration = new Lease.Registration() {
    @Override
    public String stateKey() {
      return sem.stateKey;
    }

    @Override
    public Object snapshot() {
      books.lock();
      try {
        return new long[] {held, releasedSent.get()};
      } finally {
        books.unlock();
      }
    }

    @Override
    public boolean intact(long permits, Object snapshot) {
      long[] s = (long[]) snapshot;
      return permits >= 0 && permits >= s[0] - (releasedSent.get() - s[1]);
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
   * lost with it, and its holders are told. Before, only the releasing thread was told, and the
   * client went on using (and handing on locally) permits that Redis had granted to others until
   * a renewal found the count short (LostWritesTest).
   */
  void booksShort(long from, String why) {
    Lease l;
    books.lock();
    try {
      l = from != 0 && from == epoch ? lease : null;
    } finally {
      books.unlock();
    }
    if (l != null) {
      l.lose(why + " (a release found fewer of the registration's permits than it gave back: every permit"
          + " the client counted under it is lost)");
    }
  }

  void afterRelease(List<Object> reply) {
    books.lock();
    try {
      noteFree(reply, 2);
      maybeIdle();
    } finally {
      books.unlock();
    }
  }

  /** Under the lock: a reply that carries the free permits at {@code index} says whether there is a debt. */
  void noteFree(List<Object> reply, int index) {
    if (reply != null && reply.size() > index) {
      debt = RedisSemaphore.at(reply, index) < 0;
    }
  }

  /** Whether the client has a live registration (racy read: a hint for unhooking only). */
  boolean hasLease() {
    books.lock();
    try {
      return lease != null;
    } finally {
      books.unlock();
    }
  }

  /**
   * After a recovery (a reconnect: maybe to a promoted replica that lacks recent writes), checks at
   * once and exactly that Redis still attributes to the registration every permit this client
   * counts. A failover without replica acknowledgement can lose a grant; the client must learn of
   * it before it goes on using, and handing on locally, permits that Redis now counts as free
   * (docs/FAILURE-MODEL.md §3). The watchdog's renewals check too, but they must allow for the
   * releases sent while a renewal is on its way, and under load those hid a lost grant until a
   * release found the client's count short (LostWritesTest).
   *
   * <p>Exact because ordered: the count is read and the check sent under the books' lock, by
   * {@code EVAL} on the main connection. A release leaves the count under that lock before it is
   * sent, so every release not counted ran before the check, and every later one runs after it; a
   * grant is counted only after it ran. So Redis attributes at least the count unless it lost a
   * grant.
   */
  void checkBooksAfterRecovery() {
    if (!sem.leased) {
      return;
    }
    Lease l;
    long counted;
    CompletableFuture<List<Object>> reply;
    books.lock();
    try {
      l = lease;
      if (l == null || held == 0) {
        return;
      }
      counted = held;
      reply = engine.evalInOrder(Script.RENEW, ScriptOutputType.MULTI, new String[] {sem.liveKey, sem.stateKey},
          l.requestId, Long.toString(l.leaseMillis));
    } finally {
      books.unlock();
    }
    reply.whenComplete((r, e) -> {
      if (e != null || r == null || r.isEmpty()) {
        return; // Redis gone again: the next recovery checks again, and the watchdog's renewals meanwhile
      }
      long permits = (Long) r.get(0);
      if (permits < counted) {
        l.lose(permits < 0
            ? "Redis no longer had this client's registration after a recovery (a failover to a replica that lacked it)"
            : "Redis has fewer permits of this client's registration (" + permits + ") than it holds (" + counted
                + ") after a recovery: a grant was lost (a failover to a replica that lacked it)");
      }
    });
  }
}
