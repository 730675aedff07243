package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * {@link DistributedSemaphore} on the shared {@link Engine} and {@code semaphore.lua}.
 *
 * <p><b>Calls keyed by a request.</b> Every call that changes who holds what (acquire, release,
 * cancel, drain, add, reduce) carries a {@link Req}: a memo slot of this client and a sequence
 * number. The script stores the call's outcome in the slot, and a re-sent copy of the call is
 * answered from it; a cancel of an acquire undoes exactly what that acquire granted, or records
 * that it is cancelled so that a late copy is refused. A slot is used again only once every copy
 * of its call has been answered. So every count this client keeps is exact: nothing reconciles.
 *
 * <p><b>Leased mode.</b> The permits of this client are held by a registration in Redis (an epoch,
 * renewed by the watchdog through {@code renew.lua}); the client counts the permits granted under
 * its live registration ({@code held}). A registration that runs out is reclaimed by the next call
 * that needs permits, and the client learns of the loss from its watchdog: what it held becomes
 * {@code lost}, and releasing it throws {@link LockLostException}. A grant under a registration
 * the client no longer renews is not counted (Redis takes those permits back with it).
 *
 * <p><b>Waiting.</b> Every acquisition, a thread's or a future's, is an {@link AsyncAcquisition}
 * at the semaphore's one {@link AsyncGate}: FIFO in this JVM, only the head contends in Redis. A
 * thread parks in the superclass's queue (so its queue methods count it) until its acquisition
 * ends, and its permits then become the client's. A release while acquisitions of this JVM wait
 * hands the permits to them directly ({@link #handOn}).
 */
final class RedisSemaphore extends DistributedSemaphore {
  private static final long serialVersionUID = 1L;
  /** Releases and cancels kept to be sent again after a recovery (a failover may lose recent writes). */
  private static final int REPLAY_MAX = 64;

  final transient Engine engine;
  private final String name;
  private final boolean leased;
  private final int initialPermits;
  final String describe;
  private final String stateKey;
  private final String waitersKey;
  private final String liveKey;
  /** The prefix of this client's memo keys: one per slot, {@code <prefix><slot>}. */
  private final String memoPrefix;
  private final String wakeKey;
  final String channel;
  private final String leaseMs;
  final transient Metrics.Primitive metrics;
  final transient CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** Guards the books below (no {@code synchronized} in Turnstile: it would pin virtual threads). */
  private final transient java.util.concurrent.locks.ReentrantLock books = new java.util.concurrent.locks.ReentrantLock();
  /** The superclass's queue, where this JVM's waiting threads park. */
  private final transient Waits.Tickets tickets;

  // ---- guarded by books
  /** The live registration's epoch (0: none) and its lease. */
  private long epoch;
  private transient Lease lease;
  /** The last epoch this client knows to be dead: the next grant replaces it in Redis. */
  private long deadEpoch;
  /** The newest epoch this client has seen: an older one is never adopted again. */
  private long newestEpoch;
  /** Permits held under the live registration (by threads, holds, or on their way to a waiter). */
  private int held;
  /** Permits the application still holds that were lost with an earlier registration. */
  private int lost;
  /** Acquisitions in flight (an idle registration is ended only without any). */
  private int inFlight;
  /** Changes with every grant and release: an idle check scheduled before one does nothing. */
  private long activity;
  private boolean idleCheck;
  /**
   * Whether the last reply that said found the free permits negative (a debt after
   * reducePermits): releases then pay it in Redis rather than hand permits over locally.
   */
  private boolean debt;
  // ----

  /** Free memo slots, and the next never used. */
  private final transient ConcurrentLinkedDeque<Integer> freeSlots = new ConcurrentLinkedDeque<>();
  private final AtomicInteger nextSlot = new AtomicInteger();
  /** Recent releases and cancels, sent again after a recovery. */
  private final transient ArrayDeque<Replay> replays = new ArrayDeque<>();
  /** Guards {@link #replays} (no {@code synchronized} in Turnstile: it would pin virtual threads). */
  private final transient java.util.concurrent.locks.ReentrantLock replaysLock = new java.util.concurrent.locks.ReentrantLock();
  private final transient AtomicBoolean replayHook = new AtomicBoolean();
  private final transient Runnable onRecovery = () -> {
    replayRecent();
    checkBooksAfterRecovery();
  };
  /** This JVM's asynchronous acquisitions (created on first use; see {@link AsyncGate}). */
  private final transient AtomicReference<AsyncGate<PermitHold>> async = new AtomicReference<>();
  /** Async holds not yet released: told when the registration they count under is lost. */
  private final transient Set<AsyncHold.Permits> liveHolds = ConcurrentHashMap.newKeySet();

  @Override
  public Inspection inspect() {
    return engine.inspector.inspect(Inspection.Kind.SEMAPHORE, name);
  }

  Inspection.Kind inspectionKind() {
    return Inspection.Kind.SEMAPHORE;
  }

  RedisSemaphore(Engine engine, String name, int permits, boolean leased) {
    this.engine = engine;
    this.name = name;
    this.leased = leased;
    this.initialPermits = permits;
    this.describe = (leased ? "semaphore '" : "counting semaphore '") + name + "'";
    String tag = "{" + engine.options.keyPrefix() + ":" + name + "}";
    String base = tag + ":s";
    this.liveKey = base + ":l";
    this.wakeKey = base + ":wake";
    this.memoPrefix = base + ":q:" + engine.clientId + ":";
    this.channel = base + ":ch";
    this.stateKey = base;
    this.waitersKey = base + ":w";
    this.leaseMs = Long.toString(engine.leaseMillis);
    this.metrics = engine.metrics.primitive("semaphore", name);
    this.tickets = tickets();
  }

  /**
   * Creates the semaphore in Redis on first use, or checks it against the mode and (leased) the
   * capacity asked for.
   */
  void initialize(int requested) {
    checkOpen();
    engine.checkConnected(describe);
    List<Object> r = engine.awaitQuietly(eval("init", null, 0, "", 't', 0, 0), describe);
    boolean storedLeased = (Long) r.get(0) == 1L;
    if (storedLeased != leased) {
      throw new IllegalArgumentException(describe + " exists as a " + (storedLeased ? "leased" : "counting")
          + " semaphore: obtain it with " + (storedLeased ? "Turnstile.semaphore" : "Turnstile.countingSemaphore"));
    }
    long stored = (Long) r.get(1);
    if (leased && stored != requested) {
      throw new IllegalArgumentException(describe + " exists with a capacity of " + permits(stored)
          + ", not the " + requested + " requested; change the capacity explicitly"
          + " with addPermits/reducePermits");
    }
    initialized = true;
  }

  /** Set once Redis confirmed this instance's mode and capacity. */
  private volatile boolean initialized;

  /**
   * Returns whether Redis has confirmed this instance's mode and capacity once.
   *
   * @return whether Redis has confirmed this instance's mode and capacity once
   */
  boolean initialized() {
    return initialized;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public boolean isLeased() {
    return leased;
  }

  private long now() {
    return engine.ticker.read();
  }

  // ---------------------------------------------------------------- requests

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
          unref();
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

    /** Gives up a reference taken by {@link #retain()}. */
    void unretain() {
      unref();
    }

    /** Whether a copy was sent whose answer has not come: it may still run. */
    boolean unanswered() {
      return unanswered.get() > 0;
    }

    /** The owner is done with the call (later copies and cancels keep the slot until answered). */
    void end() {
      if (ended.compareAndSet(false, true)) {
        unref();
      }
    }

    private void unref() {
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
  private final transient AtomicInteger fastPause = new AtomicInteger();

  /**
   * Runs an op of semaphore.lua. A leased acquire or release of the plain kind (no flags: it does
   * not wait, mark, or yield; a live registration; a slot below {@link #FAST_SLOTS}; no replica
   * acknowledgements, which renew the memo key) goes to semaphore_fast.lua first, and to
   * semaphore.lua, the same call, only if that answers -3 (it could not decide: waiters, too few
   * permits, a copy of a call that ran, ...). Each is one script keyed by the call's slot and
   * sequence number, so every copy of the call is answered from its outcome.
   */
  CompletableFuture<List<Object>> eval(String op, Req r, int n, String flags, char lane, long liveEpoch,
      long dead) {
    boolean acquire = "acquire".equals(op);
    if ((acquire || "release".equals(op)) && fastCase(r, flags, liveEpoch)) {
      CompletableFuture<List<Object>> fast = engine.eval(Script.SEMAPHORE_FAST, ScriptOutputType.MULTI,
          new String[] {stateKey}, acquire ? "a" : "r", engine.clientId, Integer.toString(r.slot),
          Long.toString(r.seq), Integer.toString(n), Long.toString(liveEpoch));
      return fast.thenCompose(reply -> {
        if (at(reply, 0) != -3L) {
          return CompletableFuture.completedFuture(reply);
        }
        fastPause.set(FAST_PAUSE);
        return general(op, r, n, flags, lane, liveEpoch, dead);
      });
    }
    return general(op, r, n, flags, lane, liveEpoch, dead);
  }

  private boolean fastCase(Req r, String flags, long liveEpoch) {
    if (!leased || r == null || r.slot >= FAST_SLOTS || liveEpoch == 0 || !flags.isEmpty()
        || engine.options.replicaAcks() != 0) {
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
    String[] keys = {stateKey, liveKey, waitersKey, wakeKey, memoPrefix + (r == null ? "-" : Integer.toString(r.slot))};
    return engine.eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, op, engine.clientId, leaseMs,
        r == null ? "" : Integer.toString(r.slot), r == null ? "0" : Long.toString(r.seq), Integer.toString(n),
        flags, String.valueOf(lane), Long.toString(liveEpoch), channel, engine.publishCommand(),
        leased ? "L" : "C", Integer.toString(initialPermits), Long.toString(dead));
  }

  private static long at(List<Object> reply, int i) {
    return (Long) reply.get(i);
  }

  /** Sends {@code r}'s acquire (a copy of it, if sent before). */
  private CompletableFuture<Attempt> sendAcquire(Req r, boolean subscribed) {
    String flags = (r.marks ? "w" : "") + (subscribed ? "s" : "");
    long live;
    long dead;
    books.lock();
    try {
      live = epoch;
      dead = deadEpoch;
    } finally {
      books.unlock();
    }
    return r.track(eval("acquire", r, r.permits, flags, r.lane, live, dead))
        .thenApply(reply -> {
          long status = at(reply, 0);
          if (status < 0) {
            throw new IllegalStateException(describe + ": a stale reply for request " + r.id);
          }
          Metrics.reclaimed(metrics, describe, at(reply, 4));
          if (status == 1L) {
            r.granted = true;
            return new Attempt(true, at(reply, 1), 0, at(reply, 2));
          }
          return new Attempt(false, 0, at(reply, 3), 0);
        });
  }

  /**
   * Ends a request. {@code undo}: a cancel gives back what it was granted (the caller does not
   * take it). Otherwise, unless it was granted, a cancel follows if a copy of it may still run (it
   * is then refused) or it may have marked itself waiting (the mark is withdrawn: a refusal whose
   * reply was lost marked it all the same).
   */
  private void endRequest(Req r, boolean undo) {
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

  // ---------------------------------------------------------------- the books (under books)

  /**
   * Counts {@code n} permits granted under {@code grantEpoch} by a call sent at {@code sentAt}.
   *
   * @return false if they do not count: granted under a registration this client no longer renews,
   *     which Redis takes back with it (nothing is to be released)
   */
  private boolean count(int n, long grantEpoch, long sentAt) {
    activity++;
    debt = false; // a grant found at least n >= 0 free
    if (!leased) {
      return true;
    }
    if (grantEpoch > newestEpoch) {
      // a registration newer than any this client knew: Redis made it because the one it had was gone
      newestEpoch = grantEpoch;
      if (lease != null) {
        lease.lose("Redis no longer had this client's registration on " + describe + " (replaced by a new one)");
      }
      epoch = grantEpoch;
      lease = new Lease(liveKey, "#" + engine.clientId + ":" + grantEpoch, engine.leaseMillis, 0,
          "client " + engine.clientId, sentAt, this::leaseLost, metrics).on(Inspection.Kind.SEMAPHORE, name, -1);
      lease.semaphore = this;
      lease.registration = registration;
      engine.watchdog.register(lease);
      held = n;
      if (replayHook.compareAndSet(false, true)) {
        engine.onRecovery(onRecovery, true); // the books are checked after every recovery
      }
      return true;
    }
    if (grantEpoch == epoch && lease != null && lease.alive(now())) {
      held += n;
      return true;
    }
    return false;
  }

  /** Permits released in Redis so far (first copies sent): the renewal's check allows for those sent meanwhile. */
  private final java.util.concurrent.atomic.AtomicLong releasedSent = new java.util.concurrent.atomic.AtomicLong();

  /**
   * The renewal's check (see renew.lua): Redis must attribute to the registration at least what
   * this client counts. Permits counted were granted (and so applied) before they were counted;
   * permits released leave the count before their release is sent; so, in correct operation, what
   * Redis attributes is never less than the count at the time the renewal was sent, minus the
   * permits whose release was sent since (which may have run first). Less means Redis lost a grant
   * (a failover to a replica that lacked it): the lease is lost, loudly, as a lock's would be.
   */
  private final transient Lease.Registration registration = new Lease.Registration() {
    @Override
    public String stateKey() {
      return stateKey;
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
        ? new LeaseLostEvent(name, 0, l.holder, reason + " (" + permits(n) + ")", l.lostAtMillis) : null;
    if (event != null) {
      engine.logLost(event);
    }
    retire(dead);
    for (AsyncHold.Permits h : liveHolds) {
      if (h.lease() == l) {
        h.livenessLost(new LeaseLostEvent(name, 0, l.holder, reason, l.lostAtMillis));
      }
    }
    if (event != null) {
      metrics.leaseLost();
      engine.tellLost(event, lossListeners());
    }
  }

  private List<LeaseLossListener> lossListeners() {
    List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    return all;
  }

  /** After the last permit went: stop renewing the registration once it has been idle a renew interval. */
  private void maybeIdle() {
    if (!leased || lease == null || held > 0 || inFlight > 0 || idleCheck) {
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
      if (activity != seen || AsyncSides.waiting(async) > 0) {
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
    engine.releases.retrying(() -> eval("retire", null, 0, "", 't', dead, 0),
        System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis));
  }

  // ---------------------------------------------------------------- acquire

  @Override
  public void acquire() throws InterruptedException {
    acquire(1);
  }

  @Override
  public void acquire(int permits) throws InterruptedException {
    checkPermits(permits);
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    acquire(permits, Call.untimed(true));
  }

  @Override
  public void acquireUninterruptibly() {
    acquireUninterruptibly(1);
  }

  @Override
  public void acquireUninterruptibly(int permits) {
    checkPermits(permits);
    try {
      acquire(permits, Call.untimed(false));
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquire was interrupted", e);
    }
  }

  @Override
  public boolean tryAcquire() {
    return tryAcquire(1);
  }

  /** One attempt in Redis, beside this JVM's waiters (it barges, as {@code Semaphore.tryAcquire()} does). */
  @Override
  public boolean tryAcquire(int permits) {
    checkPermits(permits);
    checkOpen();
    engine.checkConnected(describe); // fails fast, naming the outage, rather than "not acquired"
    try {
      return acquire(permits, Call.once());
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible attempt was interrupted", e);
    }
  }

  @Override
  public boolean tryAcquire(long timeout, TimeUnit unit) throws InterruptedException {
    return tryAcquire(1, timeout, unit);
  }

  @Override
  public boolean tryAcquire(int permits, long timeout, TimeUnit unit) throws InterruptedException {
    long deadline = Waits.deadline(timeout, unit);
    checkPermits(permits);
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    return acquire(permits, Call.until(deadline));
  }

  private static void checkPermits(int permits) {
    if (permits < 0) {
      throw new IllegalArgumentException("permits must not be negative, was " + permits);
    }
  }

  private void checkOpen() {
    if (engine.isClosed()) {
      throw new TurnstileException(describe + ": Turnstile is closed");
    }
  }

  /** A test's seam: runs when a thread's grant reaches it, before its permits become the client's. */
  transient volatile Runnable beforeAbsorb;

  /** Returns this semaphore's gate, creating it on first use. */
  AsyncGate<PermitHold> gate() {
    return AsyncSides.gate(async, engine, PermitSide::new);
  }

  /**
   * A thread's acquisition: it queues at the gate, as a future's does, and parks in the
   * superclass's queue ({@link Waits#park(AsyncAcquisition, Call, Waits.Tickets)}) until it
   * ends. Granted, the permits become this client's ({@link #absorb}); permits lost with the
   * registration before they reached the thread are not its: it asks again.
   */
  private boolean acquire(int permits, Call call) throws InterruptedException {
    checkOpen();
    AsyncGate<PermitHold> g = gate();
    while (true) {
      AsyncAcquisition<PermitHold> a = g.enqueue(call, permits, Thread.currentThread());
      PermitHold h;
      try {
        h = Waits.park(a, call, tickets);
      } catch (InterruptedException e) {
        metrics.interrupted();
        throw e;
      }
      if (h == null) {
        return false;
      }
      if (absorb((AsyncHold.Permits) h)) {
        return true;
      }
      if (call.once || call.expired()) {
        metrics.timedOut();
        return false;
      }
    }
  }

  /**
   * A thread's grant: its permits are the client's from now on, released by any thread, not a
   * hold's. False if the registration they were counted under was lost before this: the loss
   * counted them among the lost permits, but they never reached the caller, so they are revoked
   * (the caller would otherwise hold permits that Redis gave to others, and its release would
   * throw {@link LockLostException}).
   */
  private boolean absorb(AsyncHold.Permits h) {
    if (!leased) {
      return true;
    }
    Runnable hook = beforeAbsorb;
    if (hook != null) {
      hook.run();
    }
    books.lock();
    try {
      if (h.lease() != null && h.lease() == lease && lease.alive(now())) {
        return true;
      }
      lost -= Math.min(lost, h.permits());
      return false;
    } finally {
      books.unlock();
    }
  }

  // ---------------------------------------------------------------- release

  @Override
  public void release() {
    release(1);
  }

  @Override
  public void release(int permits) {
    checkPermits(permits);
    if (permits == 0) {
      return;
    }
    int fromLost = 0;
    int live;
    long from;
    books.lock();
    try {
      if (leased) {
        if (lease != null) {
          lease.alive(now()); // a lease past its confirmed time is lost now, before its permits are counted
        }
        if ((long) permits > (long) held + lost) {
          throw new IllegalStateException("cannot release " + permits(permits)
              + " of " + describe + ": this client holds " + (held + lost));
        }
        fromLost = Math.min(lost, permits);
        lost -= fromLost;
        live = permits - fromLost;
        held -= live;
      } else {
        live = permits;
      }
      from = epoch;
      activity++;
      if (live == 0) {
        maybeIdle();
      }
    } finally {
      books.unlock();
    }
    try {
      if (live > 0) {
        int send = handOn(live, from);
        if (send > 0) {
          AsyncGate<PermitHold> g = async.get();
          sendRelease(send, from, true, g != null && g.yieldPending());
        }
      }
    } finally {
      if (fromLost > 0) {
        throw new LockLostException(name, 0, System.currentTimeMillis(), fromLost + " permit"
            + (fromLost == 1 ? " was" : "s were") + " lost with this client's lease on " + describe
            + " and given to others");
      }
    }
  }

  /**
   * Hands {@code permits} that this client releases (counted out of its books already, under the
   * registration {@code from}) to this JVM's waiters, threads or futures, by local hand-off: in
   * FIFO order, each taking all it asked for, at most {@code localHandoffLimit} in a row (then the
   * release goes through Redis, where other clients' waiters get their turn: {@link AsyncGate#servedBy}).
   * A waiter counts what it is handed as a grant from Redis under {@code from} would be, with no
   * round trip. No hand-off while the free permits are in debt (after reducePermits: releases pay
   * it in Redis) or while Redis is unreachable.
   *
   * @return what is left to release in Redis
   */
  private int handOn(int permits, long from) {
    AsyncGate<PermitHold> g = async.get();
    if (g == null || !engine.connected()) {
      return permits;
    }
    books.lock();
    try {
      if (debt) {
        return permits;
      }
    } finally {
      books.unlock();
    }
    int left = permits;
    for (AsyncAcquisition<PermitHold> a : g.servedBy(permits, engine.options.localHandoffLimit())) {
      if (a.handedPermits(new Attempt(true, a.permits, 0, from))) {
        left -= a.permits;
      }
    }
    return left;
  }

  /**
   * Releases {@code permits} in Redis (from the registration {@code from}), re-sent until answered
   * (the same request: given back once) and after a recovery.
   *
   * @param wait whether to wait for the answer (briefly, see {@link Releases#release}) and throw a loss
   */
  private void sendRelease(int permits, long from, boolean wait) {
    sendRelease(permits, from, wait, false);
  }

  private void sendRelease(int permits, long from, boolean wait, boolean yields) {
    CompletableFuture<List<Object>> done = releaseInRedis(permits, from, 't', yields);
    if (!wait) {
      done.thenAccept(reply -> {
        if (released(reply, permits, from) != null) {
          lateLoss(permits);
        }
      });
      return;
    }
    List<Object> reply = engine.releases.release(done, describe + " release");
    if (reply == null) {
      // Redis unreachable or slow: it completes in the background; a loss found then is reported
      done.thenAccept(late -> {
        if (released(late, permits, from) != null) {
          lateLoss(permits);
        }
      });
      return;
    }
    String loss = released(reply, permits, from);
    if (loss != null) {
      throw new LockLostException(name, 0, System.currentTimeMillis(), loss);
    }
  }

  /**
   * Sends the release of {@code permits} from the registration {@code from}: one request, re-sent
   * until answered (given back once) and kept to be sent again after a recovery.
   *
   * @return completes with the reply
   */
  private CompletableFuture<List<Object>> releaseInRedis(int permits, long from, char lane) {
    return releaseInRedis(permits, from, lane, false);
  }

  private CompletableFuture<List<Object>> releaseInRedis(int permits, long from, char lane, boolean yields) {
    Req r = new Req(permits, lane, false);
    String flags = yields ? "y" : "";
    Supplier<CompletableFuture<List<Object>>> send =
        () -> r.track(eval("release", r, permits, flags, lane, from, 0));
    releasedSent.addAndGet(permits); // before the first copy is sent (the renewal's check)
    long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis);
    CompletableFuture<List<Object>> done = engine.releases.retrying(send, until);
    remember(send, until);
    done.whenComplete((reply, e) -> {
      r.end();
      afterRelease(reply);
    });
    return done;
  }

  /**
   * Returns null if a release's reply says the permits were released, or why not.
   *
   * @throws Error (counting) if the free permits would exceed Integer.MAX_VALUE
   */
  private String released(List<Object> reply, int permits, long from) {
    long status = at(reply, 0);
    if (status == -2L) {
      throw new Error("Maximum permit count exceeded");
    }
    if (status == 1L && at(reply, 1) >= permits) {
      return null;
    }
    String loss = "Redis no longer had " + permits(permits) + " of this client on " + describe
        + ": its lease ran out and they were reclaimed";
    if (leased) {
      booksShort(from, loss);
    }
    return loss;
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
  private void booksShort(long from, String why) {
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

  private void afterRelease(List<Object> reply) {
    books.lock();
    try {
      noteFree(reply, 2);
      maybeIdle();
    } finally {
      books.unlock();
    }
  }

  /** Under the lock: a reply that carries the free permits at {@code index} says whether there is a debt. */
  private void noteFree(List<Object> reply, int index) {
    if (reply != null && reply.size() > index) {
      debt = at(reply, index) < 0;
    }
  }

  private void lateLoss(int permits) {
    metrics.leaseLost();
    engine.notifyLost(new LeaseLostEvent(name, 0, "client " + engine.clientId, "Redis no longer had "
        + permits(permits) + " of this client when its release arrived: they had been reclaimed",
        System.currentTimeMillis()), lossListeners());
  }

  // ---------------------------------------------------------------- replays after a recovery

  private static final class Replay {
    final long untilNanos;
    final Runnable resend;

    Replay(long untilNanos, Runnable resend) {
      this.untilNanos = untilNanos;
      this.resend = resend;
    }
  }

  /** Keeps a release or cancel to send again after a recovery (a failover may have lost it). */
  private void remember(Supplier<CompletableFuture<List<Object>>> send, long untilNanos) {
    replaysLock.lock();
    try {
      if (replays.size() == REPLAY_MAX) {
        replays.pollFirst();
      }
      replays.addLast(new Replay(untilNanos, send::get));
    } finally {
      replaysLock.unlock();
    }
    if (replayHook.compareAndSet(false, true)) {
      engine.onRecovery(onRecovery, true);
    }
  }

  private void replayRecent() {
    List<Runnable> again = new ArrayList<>();
    long now = System.nanoTime();
    replaysLock.lock();
    try {
      replays.removeIf(r -> now - r.untilNanos >= 0);
      for (Replay r : replays) {
        again.add(r.resend);
      }
      if (replays.isEmpty() && !hasLease() && replayHook.compareAndSet(true, false)) {
        engine.onRecovery(onRecovery, false);
      }
    } finally {
      replaysLock.unlock();
    }
    again.forEach(Runnable::run);
  }

  /** Whether the client has a live registration (racy read: a hint for unhooking only). */
  private boolean hasLease() {
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
  private void checkBooksAfterRecovery() {
    if (!leased) {
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
      reply = engine.evalInOrder(Script.RENEW, ScriptOutputType.MULTI, new String[] {liveKey, stateKey},
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

  // ---------------------------------------------------------------- capacity and queries

  @Override
  public int availablePermits() {
    checkOpen();
    engine.checkConnected(describe);
    return (int) state()[4];
  }

  /**
   * Returns {capacity, debt, free, held by all clients, available} as stored in Redis, after
   * reclaiming registrations that ran out (counting: the capacity is the free permits, none held).
   *
   * @return the state as stored in Redis
   */
  long[] state() {
    List<Object> r = engine.awaitQuietly(eval("state", null, 0, "", 't', 0, 0), describe);
    long free = at(r, 0);
    long cap = leased ? at(r, 1) : free;
    return new long[] {cap, Math.max(0, -free), Math.max(0, free), cap - free, free};
  }

  /**
   * Returns {memo slots ever used, slots free now} (for tests: a slot freed twice shows as more
   * free than used).
   *
   * @return the slot counts
   */
  int[] slots() {
    return new int[] {nextSlot.get(), freeSlots.size()};
  }

  /**
   * Returns this client's books, for diagnostics.
   *
   * @return this client's books
   */
  String books() {
    books.lock();
    try {
      return "epoch " + epoch + (lease == null ? " (no lease)" : "") + ", dead " + deadEpoch + ", held " + held
          + ", lost " + lost + ", in flight " + inFlight + ", waiting " + getQueueLength()
          + ", in the gate " + AsyncSides.waiting(async) + ", slots " + nextSlot.get() + " (" + freeSlots.size()
          + " free)";
    } finally {
      books.unlock();
    }
  }

  @Override
  public int drainPermits() {
    checkOpen();
    engine.checkConnected(describe);
    Req r = new Req(0, 't', false);
    long live;
    long dead;
    books.lock();
    try {
      inFlight++;
      live = epoch;
      dead = deadEpoch;
    } finally {
      books.unlock();
    }
    long sentAt = now();
    boolean answered = false;
    try {
      List<Object> reply = engine.awaitQuietly(r.track(eval("drain", r, 0, "", 't', live, dead)), describe);
      answered = true;
      int moved = (int) at(reply, 1);
      if (moved <= 0) {
        return moved;
      }
      books.lock();
      try {
        return count(moved, at(reply, 2), sentAt) ? moved : 0;
      } finally {
        books.unlock();
      }
    } finally {
      books.lock();
      try {
        inFlight--;
        maybeIdle();
      } finally {
        books.unlock();
      }
      endRequest(r, !answered);
    }
  }

  @Override
  public void reducePermits(int reduction) {
    if (reduction < 0) {
      throw new IllegalArgumentException("reduction must not be negative, was " + reduction);
    }
    if (!capacityOp("reduce", reduction)) {
      throw new Error("Permit count underflow");
    }
  }

  @Override
  public void addPermits(int permits) {
    checkPermits(permits);
    if (!capacityOp("add", permits)) {
      throw new IllegalArgumentException("cannot add " + permits(permits) + " to " + describe
          + ": its " + (leased ? "capacity" : "free permits") + " would exceed Integer.MAX_VALUE");
    }
  }

  /**
   * add or reduce, sent again (same request) after a transient failure within the command timeout.
   *
   * @return false if refused: the capacity or the free permits would leave the int range
   */
  private boolean capacityOp(String op, int n) {
    checkOpen();
    engine.checkConnected(describe);
    Req r = new Req(n, 't', false);
    Supplier<CompletableFuture<List<Object>>> send = () -> r.track(eval(op, r, n, "", 't', 0, 0));
    CompletableFuture<List<Object>> done = engine.releases.retrying(send,
        System.nanoTime() + engine.options.commandTimeout().toNanos());
    done.whenComplete((v, e) -> r.end()); // the slot is kept while copies may still be sent
    List<Object> reply = engine.awaitQuietly(done, describe);
    books.lock();
    try {
      noteFree(reply, 2);
    } finally {
      books.unlock();
    }
    return at(reply, 0) == 1L;
  }

  @Override
  public int heldPermits() {
    if (!leased) {
      return 0;
    }
    books.lock();
    try {
      if (lease != null) {
        lease.alive(now());
      }
      return held;
    } finally {
      books.unlock();
    }
  }

  @Override
  public boolean isFair() {
    return false;
  }

  @Override
  public int waitingThreads() {
    return getQueueLength();
  }

  @Override
  public void addLeaseLossListener(LeaseLossListener listener) {
    listeners.add(Objects.requireNonNull(listener, "listener"));
  }

  /** "1 permit", "n permits": for messages. */
  static String permits(long n) {
    return n + (n == 1 ? " permit" : " permits");
  }

  @Override
  public String toString() {
    return "DistributedSemaphore[" + name + (leased ? ", leased, permits held by this client = " + heldPermits()
        : ", counting") + ", waiting threads = " + getQueueLength() + "]";
  }

  // ---------------------------------------------------------------- asynchronous acquisition

  @Override
  public CompletableFuture<PermitHold> acquireAsync(int permits) {
    checkPermits(permits);
    return acquireAsync(permits, Call.untimed(false));
  }

  @Override
  public CompletableFuture<PermitHold> tryAcquireAsync(int permits, long timeout, TimeUnit unit) {
    long deadline = Waits.deadline(timeout, unit);
    checkPermits(permits);
    return acquireAsync(permits, Call.until(deadline, false));
  }

  private CompletableFuture<PermitHold> acquireAsync(int permits, Call call) {
    AsyncGate<PermitHold> gate = AsyncSides.gate(async, engine, PermitSide::new);
    if (permits == 0) {
      return CompletableFuture.completedFuture(((PermitSide) gate.side()).none());
    }
    return gate.acquire(call, permits);
  }

  /**
   * Returns the async gate's side, creating the gate if needed (for tests).
   *
   * @return the async gate's side
   */
  PermitSide asyncSide() {
    return (PermitSide) AsyncSides.gate(async, engine, PermitSide::new).side();
  }

  /**
   * The async acquisitions' side: the acquire of {@code n} permits, all or nothing, keyed by one
   * request for the whole acquisition (a new one after a grant that could not be counted); the
   * permits belong to the hold, which releases them under the registration they were granted in.
   */
  final class PermitSide extends AcquisitionSide<PermitHold> implements AsyncHold.Io {
    private Req req(AsyncAcquisition<PermitHold> w) {
      Req r = (Req) w.sideState;
      if (r == null) {
        r = new Req(w.permits, 'a', w.permits == 1 && !w.call.once); // one permit: the wake list
        w.sideState = r;
        books.lock();
        try {
          inFlight++;
        } finally {
          books.unlock();
        }
      }
      return r;
    }

    /** The acquisition is done with its request. */
    private void end(AsyncAcquisition<PermitHold> w, boolean undo) {
      Req r = (Req) w.sideState;
      if (r == null) {
        return;
      }
      w.sideState = null;
      books.lock();
      try {
        inFlight--;
        maybeIdle();
      } finally {
        books.unlock();
      }
      endRequest(r, undo);
    }

    @Override
    String describe() {
      return describe;
    }

    @Override
    Inspection.Kind kind() {
      return Inspection.Kind.SEMAPHORE;
    }

    @Override
    String primitiveName() {
      return name;
    }

    @Override
    String channel() {
      return channel;
    }

    @Override
    Metrics.Primitive metrics() {
      return metrics;
    }

    /**
     * A wake token goes to whoever has waited longest and must be of use to it: only a
     * single-permit acquisition waits on the wake list; one for more waits by pub/sub.
     */
    @Override
    String wakeKey(AsyncAcquisition<PermitHold> w) {
      return w.permits == 1 ? wakeKey : null;
    }

    @Override
    void passWakeup() {
      eval("pass", null, 0, "", 't', 0, 0);
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
     * ({@link #absorb}); a future's are its hold's.
     */
    @Override
    PermitHold grant(AsyncAcquisition<PermitHold> w, Attempt a, long sentAtTicks) {
      int n = (int) a.token;
      boolean local = w.handedLocally;
      Lease under;
      boolean counted;
      books.lock();
      try {
        counted = count(n, a.epoch, sentAtTicks);
        under = lease;
      } finally {
        books.unlock();
      }
      // a local hand-off withdraws the request the acquisition may have sent (a copy that grants
      // later is given back, and its waiting mark goes)
      end(w, local);
      if (!local) {
        AsyncGate<PermitHold> g = async.get();
        if (g != null) {
          g.grantedInRedis();
        }
      }
      if (!counted) {
        return null; // granted under a registration that is gone: ask again, with a new request
      }
      AsyncHold.Permits hold = new AsyncHold.Permits(name, this, engine.ticker, n, leased ? under : null);
      if (w.thread == null) {
        liveHolds.add(hold);
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
      Req r = (Req) w.sideState;
      return memoPrefix + (r == null ? "-" : Integer.toString(r.slot));
    }

    @Override
    String leaseRequest(AsyncAcquisition<PermitHold> w) {
      return null; // the memo is a string
    }

    @Override
    public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
      AsyncHold.Permits h = (AsyncHold.Permits) hold;
      liveHolds.remove(h);
      int n = h.permits();
      if (n == 0) {
        return CompletableFuture.completedFuture(Boolean.TRUE);
      }
      long from;
      boolean wasLost = false;
      books.lock();
      try {
        if (leased) {
          if (lease != null) {
            lease.alive(now());
          }
          boolean live = h.lease() != null && h.lease() == lease;
          if (live ? held < n : lost < n) {
            throw new IllegalStateException("the " + permits(n) + " of this hold on " + describe
                + " were already released through release(int)");
          }
          if (live) {
            held -= n;
          } else {
            lost -= n;
            wasLost = true;
          }
        }
        from = epoch;
        activity++;
      } finally {
        books.unlock();
      }
      if (wasLost) {
        return CompletableFuture.failedFuture(new LockLostException(name, 0, System.currentTimeMillis(),
            "this client's lease on " + describe + " was lost and its permits were given to others"));
      }
      int send = handOn(n, from);
      if (send == 0) {
        return CompletableFuture.completedFuture(Boolean.TRUE);
      }
      AsyncGate<PermitHold> g = async.get();
      boolean yields = g != null && g.yieldPending();
      return releaseInRedis(send, from, 'a', yields).thenApply(reply -> released(reply, send, from) == null);
    }

    @Override
    public boolean connected() {
      return engine.connected();
    }

    @Override
    public void stopRenewal(Lease l) {
      // the registration is the client's, not the hold's
    }

    @Override
    public void lost(LeaseLostEvent event) {
      metrics.leaseLost();
      engine.notifyLost(event, lossListeners());
    }

    /**
     * Returns a hold of no permits (acquire(0) succeeds at once, as {@code Semaphore}'s does).
     *
     * @return a hold of no permits
     */
    PermitHold none() {
      return new AsyncHold.Permits(name, this, engine.ticker, 0, null);
    }
  }
}
