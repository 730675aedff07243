package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The calls of one {@link RedisSemaphore} that change who holds what, each keyed by a request
 * ({@link Req}: a memo slot of this client and a sequence number, which every copy of the call
 * carries): the memo slots, how an op is run ({@link #eval}: semaphore_fast.lua first where it can
 * decide, else semaphore.lua), ending a request (its cancel), and the recent releases and cancels
 * kept to be sent again after a recovery ({@link #remember}, {@link #replayRecent}).
 */
final class SemaphoreRequests {
  /** Releases and cancels kept to be sent again after a recovery (a failover may lose recent writes). */
  private static final int REPLAY_MAX = 64;

  private final RedisSemaphore sem;
  private final Engine engine;
  /** Free memo slots, and the next never used. */
  final ConcurrentLinkedDeque<Integer> freeSlots = new ConcurrentLinkedDeque<>();
  final AtomicInteger nextSlot = new AtomicInteger();
  /** Recent releases and cancels, sent again after a recovery. */
  private final ArrayDeque<Replay> replays = new ArrayDeque<>();
  /** Guards {@link #replays} (no {@code synchronized} in Turnstile: it would pin virtual threads). */
  private final java.util.concurrent.locks.ReentrantLock replaysLock = new java.util.concurrent.locks.ReentrantLock();

  SemaphoreRequests(RedisSemaphore sem) {
    this.sem = sem;
    this.engine = sem.engine;
  }

  /** One call's memo slot and sequence number, which every copy of the call carries. */
  final class Req {
    final int slot;
    final long seq;
    final String id;
    final int permits;
    /** Lane of the waiting mark: t (this JVM's threads) or a (its async acquisitions). */
    final char lane;
    /**
     * Whether a refusal marks it as a single-permit waiter blocked on the wake list (the waiter
     * thread's requests for one permit): releases push a wake token for it.
     */
    final boolean marks;
    /** The owner's reference plus one per copy without an answer: the slot is free at zero. */
    private final AtomicInteger refs = new AtomicInteger(1);
    private final AtomicInteger unanswered = new AtomicInteger();
    private final AtomicBoolean ended = new AtomicBoolean();
    /** A copy was answered with a grant: the call is never cancelled unless the caller undoes it. */
    volatile boolean granted;

    Req(int permits, char lane, boolean marks) {
      Integer free = freeSlots.pollFirst();
      this.slot = free != null ? free : nextSlot.getAndIncrement();
      this.seq = engine.newRequestSeq();
      this.id = engine.clientId + ":" + seq;
      this.permits = permits;
      this.lane = lane;
      this.marks = marks;
    }

    /**
     * Returns a future completed with {@code f}'s outcome after the callbacks registered on it
     * have run: a cancel that one of them sends is tracked before the slot can be freed. A copy
     * sent after the slot was freed (a replay after a recovery) is not tracked: it is stale, or
     * answered from the memo, and must not free the slot a second time.
     */
    <T> CompletableFuture<T> track(CompletableFuture<T> f) {
      if (!retain()) {
        return f;
      }
      unanswered.incrementAndGet();
      CompletableFuture<T> g = new CompletableFuture<>();
      f.whenComplete((v, e) -> {
        unanswered.decrementAndGet();
        try {
          if (e == null) {
            g.complete(v);
          } else {
            g.completeExceptionally(Engine.unwrap(e));
          }
        } finally {
          unretain();
        }
      });
      return g;
    }

    /**
     * Takes a reference unless the slot is free already.
     *
     * @return false if the slot was freed (nothing taken)
     */
    boolean retain() {
      int n;
      do {
        n = refs.get();
        if (n == 0) {
          return false;
        }
      } while (!refs.compareAndSet(n, n + 1));
      return true;
    }

    /** Whether a copy was sent whose answer has not come: it may still run. */
    boolean unanswered() {
      return unanswered.get() > 0;
    }

    /** The owner is done with the call (later copies and cancels keep the slot until answered). */
    void end() {
      if (ended.compareAndSet(false, true)) {
        unretain();
      }
    }

    /** Gives up a reference: the owner's, or one taken by {@link #retain()}. */
    void unretain() {
      if (refs.decrementAndGet() == 0) {
        freeSlots.addFirst(slot);
      }
    }
  }

  /**
   * Memo slots that semaphore_fast.lua serves: its memo fields {@code q:<client>:<slot>} in the
   * state hash are at most this many per client (the script refuses a higher slot).
   */
  static final int FAST_SLOTS = 32;
  /** Calls sent straight to semaphore.lua after semaphore_fast.lua could not decide one. */
  private static final int FAST_PAUSE = 32;
  /** Calls left to send straight to semaphore.lua (see {@link #FAST_PAUSE}). */
  private final AtomicInteger fastPause = new AtomicInteger();
  /** Calls that semaphore_fast.lua decided (a test's figure). */
  final java.util.concurrent.atomic.LongAdder fastDecided = new java.util.concurrent.atomic.LongAdder();

  /**
   * Runs an op of semaphore.lua. An acquire or release of the plain kind (no flags: it does not
   * wait, mark, or yield; no replica acknowledgements, which renew the memo key; leased: a live
   * registration and a slot below {@link #FAST_SLOTS}) goes to semaphore_fast.lua first, and to
   * semaphore.lua, the same call, only if that answers -3 (it could not decide: waiters, too few
   * permits, a copy of a call that ran, ...). Each is one script keyed by the call's slot and
   * sequence number, so every copy of the call is answered from its outcome.
   */
  CompletableFuture<List<Object>> eval(String op, Req r, int n, String flags, char lane, long liveEpoch,
      long dead) {
    boolean acquire = "acquire".equals(op);
    if ((acquire || "release".equals(op)) && fastCase(r, flags, liveEpoch)) {
      String fastOp = sem.leased ? (acquire ? "a" : "r") : (acquire ? "A" : "R");
      CompletableFuture<List<Object>> fast = engine.eval(Script.SEMAPHORE_FAST, ScriptOutputType.MULTI,
          new String[] {sem.stateKey, sem.memoPrefix + r.slot}, fastOp, engine.clientId, Integer.toString(r.slot),
          Long.toString(r.seq), Integer.toString(n), Long.toString(liveEpoch), sem.leaseMs);
      return fast.thenCompose(reply -> {
        if (RedisSemaphore.at(reply, 0) != -3L) {
          fastDecided.increment();
          return CompletableFuture.completedFuture(reply);
        }
        fastPause.set(FAST_PAUSE);
        return general(op, r, n, flags, lane, liveEpoch, dead);
      });
    }
    return general(op, r, n, flags, lane, liveEpoch, dead);
  }

  private boolean fastCase(Req r, String flags, long liveEpoch) {
    if (r == null || !flags.isEmpty() || engine.options.replicaAcks() != 0
        || (sem.leased && (r.slot >= FAST_SLOTS || liveEpoch == 0))) {
      return false;
    }
    int pause = fastPause.get();
    if (pause > 0) {
      fastPause.compareAndSet(pause, pause - 1);
      return false;
    }
    return true;
  }

  /** Runs an op of semaphore.lua itself. */
  CompletableFuture<List<Object>> general(String op, Req r, int n, String flags, char lane, long liveEpoch,
      long dead) {
    String[] keys = {sem.stateKey, sem.liveKey, sem.waitersKey, sem.wakeKey, sem.memoPrefix + (r == null ? "-" : Integer.toString(r.slot))};
    return engine.eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, op, engine.clientId, sem.leaseMs,
        r == null ? "" : Integer.toString(r.slot), r == null ? "0" : Long.toString(r.seq), Integer.toString(n),
        flags, String.valueOf(lane), Long.toString(liveEpoch), sem.channel, engine.publishCommand(),
        sem.leased ? "L" : "C", Integer.toString(sem.initialPermits), Long.toString(dead));
  }

  /**
   * Ends a request. {@code undo}: a cancel gives back what it was granted (the caller does not
   * take it). Otherwise, unless it was granted, a cancel follows if a copy of it may still run (it
   * is then refused) or it may have marked itself waiting (the mark is withdrawn: a refusal whose
   * reply was lost marked it all the same).
   */
  void endRequest(Req r, boolean undo) {
    if (undo || (!r.granted && (r.unanswered() || r.marks))) {
      sendCancel(r);
    }
    r.end();
  }

  /** The cancel of {@code r}: sent again until answered (it is idempotent), and after a recovery. */
  private void sendCancel(Req r) {
    if (!r.retain()) {
      return; // freed: every copy of its call was answered, and a cancel of it has been answered too
    }
    Supplier<CompletableFuture<List<Object>>> send = () -> r.track(eval("cancel", r, 0, "", r.lane, 0, 0));
    long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis);
    // the slot stays reserved until the cancel is answered or given up, so no copy of it is stale;
    // a grant is counted only when handed to a caller, and a cancelled one never is
    engine.releases.retrying(send, until).whenComplete((v, e) -> r.unretain());
    remember(send, until);
  }

  // ---------------------------------------------------------------- replays after a recovery

  private record Replay(long untilNanos, Runnable resend) {}

  /** Keeps a release or cancel to send again after a recovery (a failover may have lost it). */
  void remember(Supplier<CompletableFuture<List<Object>>> send, long untilNanos) {
    Locks.withLock(replaysLock, () -> {
      if (replays.size() == REPLAY_MAX) {
        replays.pollFirst();
      }
      replays.addLast(new Replay(untilNanos, send::get));
    });
    if (sem.replayHook.compareAndSet(false, true)) {
      engine.onRecovery(sem.onRecovery, true);
    }
  }

  void replayRecent() {
    List<Runnable> again = new ArrayList<>();
    long now = System.nanoTime();
    Locks.withLock(replaysLock, () -> {
      replays.removeIf(r -> now - r.untilNanos() >= 0);
      for (Replay r : replays) {
        again.add(r.resend());
      }
      if (replays.isEmpty() && !sem.books.hasLease() && sem.replayHook.compareAndSet(true, false)) {
        engine.onRecovery(sem.onRecovery, false);
      }
    });
    again.forEach(Runnable::run);
  }
}
