package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The in-JVM half of a {@link RedisSemaphore}, with no Redis in it: how many permits this client
 * counts, under which liveness lease, what its commands in flight may still change in Redis, and
 * when a reconciliation ({@code trim}) is due. Kept apart so that its races can be stress-tested
 * on their own (src/jcstress).
 *
 * <p>The rule it keeps: the count never exceeds what Redis attributes to this client while the
 * lease is valid. A permit is counted only under the lease it was taken under; a lease loss zeroes
 * the count and voids collections begun before it; whatever leaves the count uncertain asks for a
 * trim with the range {@code [low, high]} Redis may rightly hold: {@code low} = what is counted,
 * {@code high} = that plus what commands in flight may still add or have not yet given back. A
 * {@code BLMOVE} (which runs on another connection than the trim) does not start while a trim is
 * in flight. Everything here happens under one lock.
 */
final class PermitLedger {
  /** What the ledger needs from the outside world. */
  interface Io {
    /**
     * Sends {@code trim low high seq}; completes with {returned, missing, heldAfter}. Redis
     * ignores a trim whose {@code seq} is not above the last one it ran for this client (one
     * given up on, and delivered late).
     */
    CompletableFuture<long[]> trim(long low, long high, long seq);

    /** Whether a trim can be sent now (the connection is up). */
    boolean connected();

    /** Starts (and registers with the watchdog) a liveness lease confirmed from {@code sentAtNanos}. */
    Lease newLease(long sentAtNanos);

    /** Stops renewing a lease that is no longer needed, or that was lost. */
    void stopLease(Lease lease);

    /**
     * While this client holds, waits for or reconciles permits ({@code on}), a recovery (a
     * failover may have lost releases the old primary had not replicated) asks for a
     * reconciliation: {@link #reconcile()}.
     */
    void watchRecoveries(boolean on);
  }

  private final Io io;
  private final Ticker ticker;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition trimDone = lock.newCondition();
  // ---- guarded by lock
  /** Permits this client holds and may release. */
  private int held;
  /** Permits multi-permit acquisitions have collected so far (not releasable yet). */
  private int partial;
  /** Permits lost with a lease and not yet released by their holders' threads. */
  private int lost;
  /** Incremented at every lease loss: a collection begun before it lost what it collected. */
  private int generation;
  private Lease lease;
  /** Permits that commands in flight may still add to what Redis attributes to this client. */
  private long mayAdd;
  /** Drains in flight: they may add any number, so no trim runs meanwhile. */
  private int draining;
  private boolean needsTrim;
  private boolean trimming;
  /** The sequence number of the last trim sent. */
  private long trimSeq;
  /**
   * One future per BLMOVE in flight ({@link #beginMove}), completed when a trim comes back
   * ambiguous while it blocks: the waiter then abandons it (CLIENT UNBLOCK), so that the next
   * trim's range no longer counts it.
   */
  private final java.util.Set<CompletableFuture<Void>> moves = new java.util.HashSet<>();
  /**
   * How long after an ambiguous trim a BLMOVE that was in its range is abandoned if it is still
   * in flight: long enough for the reply of a token it took just before the trim to arrive.
   */
  static final long MOVE_GRACE_MILLIS = 100;

  PermitLedger(Io io, Ticker ticker) {
    this.io = io;
    this.ticker = ticker;
  }

  // ---------------------------------------------------------------- commands in flight

  /** A command that may add up to {@code n} permits to Redis's count for this client is sent. */
  void track(long n) {
    lock.lock();
    try {
      mayAdd += n;
    } finally {
      lock.unlock();
    }
  }

  /** Its outcome is known (its permits are counted, or none were taken), or given up on ({@code uncertain}). */
  void untrack(long n, boolean uncertain) {
    lock.lock();
    try {
      mayAdd -= n;
      needsTrim |= uncertain;
      maybeTrim();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Before a BLMOVE: a due reconciliation runs first (counted in {@code high}, the BLMOVE would
   * mask the very excess the trim is for, while its waiter waits for that permit), and a BLMOVE
   * must not overtake a trim in flight (it runs on another connection).
   *
   * <p>While the BLMOVE blocks it counts in every trim's {@code high}, so a permit Redis
   * attributes to this client but the client does not count (a token whose reply was lost) would
   * look as if the BLMOVE might explain it, and stay stranded until the BLMOVE ends at its hint.
   * So a trim that comes back ambiguous while the BLMOVE blocks completes the returned future
   * {@link #MOVE_GRACE_MILLIS} later if the BLMOVE is still in flight then: the waiter abandons
   * the BLMOVE (CLIENT UNBLOCK), and the next trim, without it in the range, gives the stranded
   * permit back.
   *
   * @param maxNanos how long to wait for a trim in flight (a trim itself is bounded by the
   *     command timeout)
   * @param interruptible whether an interrupt ends the wait
   * @return the future that asks the waiter to abandon the BLMOVE (pass it to
   *     {@link #endMove}), or null if a trim is still in flight after {@code maxNanos} (the
   *     BLMOVE must not be sent)
   * @throws InterruptedException if interruptible and interrupted while waiting
   */
  CompletableFuture<Void> beginMove(long maxNanos, boolean interruptible) throws InterruptedException {
    lock.lock();
    try {
      maybeTrim();
      if (!awaitTrim(maxNanos, interruptible)) {
        return null;
      }
      mayAdd++;
      CompletableFuture<Void> stale = new CompletableFuture<>();
      moves.add(stale);
      return stale;
    } finally {
      lock.unlock();
    }
  }

  /**
   * The BLMOVE begun with {@code stale} has ended: its token is counted or given back, or its
   * outcome is unknown ({@code uncertain}).
   */
  void endMove(CompletableFuture<Void> stale, boolean uncertain) {
    lock.lock();
    try {
      moves.remove(stale);
      untrack(1, uncertain);
    } finally {
      lock.unlock();
    }
    stale.complete(null); // nothing waits on it any more: unlinks what waited on it with the fault signal
  }

  /**
   * With the lock held: waits while a trim is in flight, at most {@code nanos}. An uninterruptible
   * wait keeps an interrupt for its caller.
   */
  private boolean awaitTrim(long nanos, boolean interruptible) throws InterruptedException {
    long end = System.nanoTime() + nanos;
    boolean interrupted = false;
    try {
      while (trimming) {
        long left = nanos == Long.MAX_VALUE ? Long.MAX_VALUE : end - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        try {
          trimDone.awaitNanos(left);
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
        }
      }
      return true;
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A drain is sent: it may add any number of permits, so trims wait for it. */
  void beginDrain() {
    lock.lock();
    try {
      draining++;
    } finally {
      lock.unlock();
    }
  }

  void endDrain(boolean uncertain) {
    lock.lock();
    try {
      draining--;
      needsTrim |= uncertain;
      maybeTrim();
    } finally {
      lock.unlock();
    }
  }

  /** Asks for a reconciliation. */
  void reconcile() {
    lock.lock();
    try {
      needsTrim = true;
      maybeTrim();
    } finally {
      lock.unlock();
    }
  }

  /**
   * After a recovery event (a failover may have lost releases the old primary had not
   * replicated): reconcile. A trim in flight may be queued for a connection that will not answer
   * (a dead Cluster master's): it is given up on, so that acquisitions do not wait for it, and a
   * new one (with a higher sequence number, which makes Redis ignore the old one should it ever
   * arrive) runs before the next acquire or BLMOVE.
   */
  void recovered() {
    lock.lock();
    try {
      if (trimming) {
        trimming = false;
        trimDone.signalAll();
      }
      needsTrim = true;
      maybeTrim();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Before an acquire script: a reconciliation that is due runs first. Otherwise the acquire would
   * fold a permit Redis attributes to this client but the client does not count (a late token)
   * into its holdings, be refused for want of it, and leave it stranded.
   *
   * @param maxNanos how long to wait for a trim in flight (one round trip; a trim itself is
   *     bounded by the command timeout, and a failed one is retried later)
   * @param interruptible whether an interrupt ends the wait
   * @return true if the acquire may be sent; false if a trim is still in flight after
   *     {@code maxNanos}
   * @throws InterruptedException if interruptible and interrupted while waiting
   */
  boolean settleFirst(long maxNanos, boolean interruptible) throws InterruptedException {
    lock.lock();
    try {
      maybeTrim();
      return awaitTrim(maxNanos, interruptible);
    } finally {
      lock.unlock();
    }
  }

  /** With the lock held: if a reconciliation is due, sends it (one at a time). */
  private void maybeTrim() {
    maybeTrim(false);
  }

  /**
   * With the lock held: if a reconciliation is due, sends it.
   *
   * @param again this trim repeats at once an ambiguous one: it is not repeated at once itself
   */
  private void maybeTrim(boolean again) {
    if (!needsTrim || trimming || draining > 0 || !io.connected()) {
      return;
    }
    needsTrim = false;
    trimming = true;
    long low = (long) held + partial;
    long high = low + mayAdd;
    long seq = ++trimSeq;
    io.trim(low, high, seq).whenComplete((r, e) -> {
      long missing = 0;
      Lease l;
      java.util.List<CompletableFuture<Void>> unblock = java.util.List.of();
      boolean ambiguous = false;
      lock.lock();
      try {
        if (seq != trimSeq || !trimming) {
          return; // given up on at a recovery (see recovered()); a later trim supersedes it
        }
        trimming = false;
        if (e != null) {
          needsTrim = true; // again, when the next command of this client ends
        } else {
          missing = r[1];
          if (r[2] > low) {
            // Redis still attributes more than is counted: commands in flight may account for
            // it, or mask an excess; look again once they have ended. A blocked BLMOVE may not
            // end before its hint, so it is abandoned (below); with nothing left in flight, at once.
            ambiguous = true;
            needsTrim = true;
            if (!moves.isEmpty()) {
              unblock = new java.util.ArrayList<>(moves);
            }
          }
        }
        l = lease;
        trimDone.signalAll();
        if (ambiguous && mayAdd == 0 && !again) {
          // the commands its range allowed for ended while it ran: their slack is gone (once: a
          // trim with high == low cannot come back ambiguous; a failed one waits for the next
          // command to end, never spins)
          maybeTrim(true);
        }
      } finally {
        lock.unlock();
      }
      if (!unblock.isEmpty()) {
        // Not at once: the excess may be the very token a BLMOVE has just taken, whose reply is
        // on its way on the other connection (abandoning it then would give a hand-off back).
        // A BLMOVE still in flight one grace later is abandoned; one that ended is a no-op here
        // (endMove completed its future).
        java.util.List<CompletableFuture<Void>> kick = unblock;
        CompletableFuture.delayedExecutor(MOVE_GRACE_MILLIS, TimeUnit.MILLISECONDS)
            .execute(() -> kick.forEach(stale -> stale.complete(null)));
      }
      if (missing > 0 && l != null) {
        l.lose("Redis attributed " + missing + " permit(s) fewer to this client than it held:"
            + " they were reclaimed after its liveness lapsed");
      }
    });
  }

  // ---------------------------------------------------------------- counting

  /** With the lock held: the live lease, renewed or started after a script refreshed the liveness. */
  private void refresh(long sentAtNanos) {
    if (lease == null || !lease.alive(ticker.read())) {
      lease = io.newLease(sentAtNanos);
      io.watchRecoveries(true);
    } else {
      lease.confirmed(sentAtNanos);
    }
  }

  /** A script sent at {@code sentAtNanos} refreshed this client's liveness (whatever it took). */
  void refreshed(long sentAtNanos) {
    lock.lock();
    try {
      refresh(sentAtNanos);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Counts {@code n} permits a script sent at {@code sentAtNanos} moved to this client as held
   * (the script refreshed the liveness, so the lease is renewed or started).
   *
   * @return false if they cannot be counted (the caller asks for a reconciliation)
   */
  boolean countScript(int n, long sentAtNanos) {
    return countScriptUnder(n, sentAtNanos) != null;
  }

  /**
   * As {@link #countScript}, and returns the lease they were counted under, read under the same
   * lock: a hold must record that lease, not whatever lease is current a moment later (a loss
   * and a new lease in between would make a hold whose permits were lost look valid).
   *
   * @return the lease the permits are counted under, or null if they cannot be counted
   */
  Lease countScriptUnder(int n, long sentAtNanos) {
    lock.lock();
    try {
      refresh(sentAtNanos);
      if (!lease.alive(ticker.read())) {
        return null;
      }
      held += n;
      return lease;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns the lease a BLMOVE is sent under (null if none).
   *
   * @return the lease a BLMOVE is sent under (null if none)
   */
  Lease lease() {
    lock.lock();
    try {
      return lease;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns ms the current lease still runs by this client's clock (0 if none).
   *
   * @return ms the current lease still runs by this client's clock (0 if none)
   */
  long leaseRemainingMillis() {
    lock.lock();
    try {
      return lease == null ? 0 : Math.max(0, lease.remainingMillis(ticker.read()));
    } finally {
      lock.unlock();
    }
  }

  /** One acquisition's permits collected so far; they count as {@link #partial} until complete. */
  final class Collection {
    private final int generationAtStart;
    private int taken;

    private Collection(int generationAtStart) {
      this.generationAtStart = generationAtStart;
    }

    /**
     * Returns permits collected so far (valid only while not {@link #lost()}).
     *
     * @return permits collected so far (valid only while not {@link #lost()})
     */
    int taken() {
      lock.lock();
      try {
        return taken;
      } finally {
        lock.unlock();
      }
    }

    /**
     * Counts {@code n} permits a script sent at {@code sentAtNanos} moved to this client.
     *
     * @return false if a lease loss voided this collection (then they are not counted)
     */
    boolean addScript(int n, long sentAtNanos) {
      lock.lock();
      try {
        refresh(sentAtNanos);
        return add(n, null);
      } finally {
        lock.unlock();
      }
    }

    /**
     * Counts the token a BLMOVE sent under lease {@code under} moved to this client: only if that
     * lease is still this client's live lease, and no loss voided the collection.
     *
     * @return false if it cannot be counted (the caller asks for a reconciliation)
     */
    boolean addMove(Lease under) {
      lock.lock();
      try {
        return add(1, under);
      } finally {
        lock.unlock();
      }
    }

    private boolean add(int n, Lease under) {
      Lease l = lease;
      if (generationAtStart != generation || l == null || (under != null && l != under) || !l.alive(ticker.read())) {
        return false;
      }
      taken += n;
      partial += n;
      return true;
    }

    /**
     * All collected: they become releasable, unless a lease loss voided them since the caller last
     * looked (then the caller collects again: returning success would hand out permits that the
     * loss's reconciliation gives back to Redis, with no loss ever reported to the holder).
     *
     * @return true if they now count as held; false if a loss voided them
     */
    boolean complete() {
      lock.lock();
      try {
        if (generationAtStart != generation) {
          return false;
        }
        partial -= taken;
        held += taken;
        return true;
      } finally {
        lock.unlock();
      }
    }

    /**
     * Given up: returns how many collected permits must be given back (0 if a loss voided them).
     *
     * @return how many collected permits must be given back (0 if a loss voided them)
     */
    int abandon() {
      lock.lock();
      try {
        if (generationAtStart != generation) {
          return 0;
        }
        partial -= taken;
        int back = taken;
        taken = 0;
        return back;
      } finally {
        lock.unlock();
      }
    }

    /**
     * Returns whether a lease loss voided this collection.
     *
     * @return whether a lease loss voided this collection
     */
    boolean lost() {
      lock.lock();
      try {
        return generationAtStart != generation;
      } finally {
        lock.unlock();
      }
    }
  }

  /**
   * Starts a collection.
   *
   * @return a new collection
   */
  Collection collection() {
    lock.lock();
    try {
      return new Collection(generation);
    } finally {
      lock.unlock();
    }
  }

  // ---------------------------------------------------------------- release and loss

  /**
   * Takes {@code permits} off the count before a release is sent (and tracks those Redis may
   * count until the release runs). Permits lost with a lease are charged first: permits are not
   * tied to threads, so this may be the release of a lost permit while another thread holds one
   * taken since under a new lease. No release may go to Redis for a lost permit (it would free that
   * thread's permit); a reconciliation gives back whatever Redis still attributes to this client
   * beyond what it counts instead.
   *
   * @return how many to release in Redis: fewer than {@code permits} if some were lost with a
   *     lease (the caller throws {@link LockLostException})
   * @throws IllegalStateException if this client holds fewer, and none were lost
   */
  int release(int permits, String describe) {
    lock.lock();
    try {
      int fromLost = Math.min(permits, lost);
      int fromHeld = Math.min(permits - fromLost, held);
      if (fromLost == 0 && fromHeld < permits) {
        throw new IllegalStateException("cannot release " + permits + " permits of " + describe
            + ": this client holds " + held);
      }
      lost -= fromLost;
      held -= fromHeld;
      mayAdd += fromHeld; // Redis may count them until this release runs
      if (fromLost > 0) {
        needsTrim = true;
        maybeTrim();
      }
      return fromHeld;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns the permits that commands in flight may still add (for tests: never below zero).
   *
   * @return the permits that commands in flight may still add
   */
  long mayAdd() {
    lock.lock();
    try {
      return mayAdd;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns the permits this client holds and may release.
   *
   * @return the permits this client holds and may release
   */
  int held() {
    lock.lock();
    try {
      return held;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns permits lost with a lease that their holders have not released yet (for tests).
   *
   * @return permits lost with a lease that their holders have not released yet
   */
  int lostPermits() {
    lock.lock();
    try {
      return lost;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns permits collected by acquisitions in progress (for tests).
   *
   * @return permits collected by acquisitions in progress (for tests)
   */
  int partial() {
    lock.lock();
    try {
      return partial;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Returns whether a reconciliation is due (for tests).
   *
   * @return whether a reconciliation is due (for tests)
   */
  boolean trimDue() {
    lock.lock();
    try {
      return needsTrim;
    } finally {
      lock.unlock();
    }
  }

  /** With nothing held, collected, waited for or in flight, stop renewing; the liveness key then expires. */
  void stopIfIdle(boolean nobodyWaits) {
    lock.lock();
    try {
      if (lease != null && held == 0 && partial == 0 && nobodyWaits && mayAdd == 0) {
        io.stopLease(lease);
        lease.end();
        lease = null;
        if (!needsTrim && !trimming) {
          io.watchRecoveries(false);
        }
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * The lease {@code l} was lost: the count and every collection in progress are void (Redis may
   * give them to others), and a reconciliation gives back whatever Redis still attributes.
   *
   * @return how many counted or collected permits were lost
   */
  int lose(Lease l) {
    io.stopLease(l);
    lock.lock();
    try {
      if (lease == l) {
        lease = null;
      }
      int gone = held + partial;
      lost += held;
      held = 0;
      partial = 0;
      generation++;
      needsTrim = true;
      maybeTrim();
      return gone;
    } finally {
      lock.unlock();
    }
  }

  @Override
  public String toString() {
    lock.lock();
    try {
      return "PermitLedger{held=" + held + ", partial=" + partial + ", lost=" + lost + ", mayAdd=" + mayAdd
          + ", draining=" + draining + ", needsTrim=" + needsTrim + ", trimming=" + trimming
          + ", lease=" + (lease != null) + '}';
    } finally {
      lock.unlock();
    }
  }

  /** When ({@code System.nanoTime}) this client's lease runs out as far as it knows, at most a lease from now. */
  long leaseEnd(long leaseMillis) {
    lock.lock();
    try {
      return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(lease == null ? leaseMillis
          : Math.max(0, lease.remainingMillis(ticker.read())));
    } finally {
      lock.unlock();
    }
  }
}
