package io.github.turnstile;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * {@link DistributedSemaphore} on the shared {@link Engine} and {@code semaphore.lua}.
 *
 * <p><b>Calls keyed by a request.</b> Every call that changes who holds what (acquire, release,
 * cancel, drain, add, reduce) carries a {@link SemaphoreRequests.Req}: a memo slot of this client
 * and a sequence number. The script stores the call's outcome in the slot, and a re-sent copy of
 * the call is answered from it; a cancel of an acquire undoes exactly what that acquire granted,
 * or records that it is cancelled so that a late copy is refused. A slot is used again only once
 * every copy of its call has been answered. So every count this client keeps is exact: nothing
 * reconciles.
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

  final transient Engine engine;
  final String name;
  final boolean leased;
  final int initialPermits;
  final String describe;
  final String stateKey;
  final String waitersKey;
  final String liveKey;
  /** The prefix of this client's memo keys: one per slot, {@code <prefix><slot>}. */
  final String memoPrefix;
  final String wakeKey;
  final String channel;
  final String leaseMs;
  final transient Metrics.Primitive metrics;
  final transient CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** The superclass's queue, where this JVM's waiting threads park. */
  private final transient Waits.Tickets tickets;
  /** This client's books: its registration, and the permits it holds and lost. */
  final transient SemaphoreBooks books;
  /** The calls that change who holds what, keyed by a request, and their replays after a recovery. */
  final transient SemaphoreRequests requests;

  /** Whether {@link #onRecovery} is hooked to the engine's recovery events (while there is a registration or a replay). */
  final transient AtomicBoolean replayHook = new AtomicBoolean();
  /** Run after every recovery while hooked ({@link #replayHook}): replays, then the books' check. */
  final transient Runnable onRecovery;
  /** This JVM's asynchronous acquisitions (created on first use; see {@link AsyncGate}). */
  final transient AtomicReference<AsyncGate<PermitHold>> async = new AtomicReference<>();
  /** Async holds not yet released: told when the registration they count under is lost. */
  final transient Set<AsyncHold.Permits> liveHolds = ConcurrentHashMap.newKeySet();

  @Override
  public Inspection inspect() {
    return engine.inspector.inspect(Inspection.Kind.SEMAPHORE, name);
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
    this.books = new SemaphoreBooks(this);
    this.requests = new SemaphoreRequests(this);
    this.onRecovery = () -> {
      requests.replayRecent();
      books.confirm();
    };
  }

  /**
   * Creates the semaphore in Redis on first use, or checks it against the mode and (leased) the
   * capacity asked for.
   */
  void initialize(int requested) {
    engine.checkConnected(describe);
    List<Object> r = engine.awaitQuietly(requests.eval("init", null, 0, "", 't', 0, 0), describe);
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

  long now() {
    return engine.ticker.read();
  }

  static long at(List<Object> reply, int i) {
    return (Long) reply.get(i);
  }

  List<LeaseLossListener> lossListeners() {
    List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    return all;
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
    Waits.uninterruptible(() -> acquire(permits, Call.untimed(false)));
  }

  @Override
  public boolean tryAcquire() {
    return tryAcquire(1);
  }

  /** One attempt in Redis, beside this JVM's waiters (it barges, as {@code Semaphore.tryAcquire()} does). */
  @Override
  public boolean tryAcquire(int permits) {
    checkPermits(permits);
    engine.checkConnected(describe); // fails fast, naming the outage, rather than "not acquired"
    return Waits.uninterruptible(() -> acquire(permits, Call.once()));
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

  /** A test's seam: runs when a thread's grant reaches it, before its permits become the client's. */
  transient volatile Runnable beforeAbsorb;
  /**
   * A test's seam: runs when a local hand-off's head has handed its wait in Redis to the next
   * acquisition ({@link AsyncAcquisition#passWaitTo}), before that one becomes head and resumes it.
   */
  transient volatile Runnable afterPassWait;
  /**
   * A test's seam: runs in {@link #release(int)} once the permits left the books, before they are
   * handed on or their release is sent.
   */
  transient volatile Runnable beforeReleaseSent;

  /** Returns this semaphore's gate, creating it on first use. */
  AsyncGate<PermitHold> gate() {
    return AsyncSides.gate(async, engine, () -> new PermitSide(this));
  }

  /**
   * A thread's acquisition: it queues at the gate, as a future's does, and parks in the
   * superclass's queue ({@link Waits#park(AsyncAcquisition, Call, Waits.Tickets)}) until it
   * ends. Granted, the permits become this client's ({@link #absorb}); permits lost with the
   * registration before they reached the thread are not its: it asks again.
   */
  private boolean acquire(int permits, Call call) throws InterruptedException {
    engine.checkOpen(describe);
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
    return books.locked(() -> {
      if (h.lease() != null && h.lease() == books.lease && books.lease.alive(now())) {
        return true;
      }
      books.lost -= Math.min(books.lost, h.permits());
      return false;
    });
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
        if (books.lease != null) {
          books.lease.alive(now()); // a lease past its confirmed time is lost now, before its permits are counted
        }
        if ((long) permits > (long) books.held + books.lost) {
          throw new IllegalStateException("cannot release " + permits(permits)
              + " of " + describe + ": this client holds " + (books.held + books.lost));
        }
        fromLost = Math.min(books.lost, permits);
        books.lost -= fromLost;
        live = permits - fromLost;
        books.held -= live;
      } else {
        live = permits;
      }
      from = books.epoch;
      books.activity++;
      if (live == 0) {
        books.maybeIdle();
      }
    } finally {
      books.unlock();
    }
    try {
      Runnable seam = beforeReleaseSent;
      if (seam != null) {
        seam.run();
      }
      if (live > 0) {
        int send = handOn(live, from);
        if (send > 0) {
          sendRelease(send, from);
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
   * it in Redis), while Redis is unreachable, or after a connection dropped until Redis has
   * confirmed every grant the registration was answered ({@link SemaphoreBooks#confirm}): a
   * failover may have lost one, and a permit Redis no longer attributes must not be handed on.
   *
   * @return what is left to release in Redis
   */
  int handOn(int permits, long from) {
    AsyncGate<PermitHold> g = async.get();
    if (g == null || !engine.connected()) {
      return permits;
    }
    boolean unconfirmed;
    books.lock();
    try {
      if (books.debt) {
        return permits;
      }
      unconfirmed = !books.confirmed();
    } finally {
      books.unlock();
    }
    if (unconfirmed) {
      books.confirm(); // hand-offs resume once Redis has confirmed the registration's grants
      return permits;
    }
    int left = permits;
    List<AsyncAcquisition<PermitHold>> served = g.servedBy(permits, engine.options.localHandoffLimit());
    AsyncAcquisition<PermitHold> heir = served.isEmpty() ? null : g.heirOf(served);
    // the head last: those behind it are served before it leaves, so that the acquisition after
    // them becomes head next, taking over the head's wait in Redis rather than attempting afresh
    for (int i = served.size() - 1; i >= 0; i--) {
      AsyncAcquisition<PermitHold> a = served.get(i);
      if (i == 0 && heir != null && a.passWaitTo(heir)) {
        Runnable seam = afterPassWait;
        if (seam != null) {
          seam.run();
        }
      }
      if (a.handedPermits(new Attempt(true, a.permits, 0, from))) {
        left -= a.permits;
      }
    }
    return left;
  }

  /**
   * Releases {@code permits} in Redis (from the registration {@code from}), re-sent until answered
   * (the same request: given back once) and after a recovery; waits for the answer briefly (see
   * {@link Releases#release}) and throws a loss it reports.
   */
  private void sendRelease(int permits, long from) {
    CompletableFuture<List<Object>> done = releaseInRedis(permits, from, 't');
    List<Object> reply = engine.releases.release(done, describe + " release");
    if (reply == null) {
      // Redis unreachable or slow: it completes in the background; a loss found then is reported,
      // and a refusal (counting: the free permits would exceed Integer.MAX_VALUE) is logged
      done.thenAccept(late -> {
        if (at(late, 0) == OVERFLOW) {
          AcquisitionState.LOG.log(System.Logger.Level.WARNING, describe + ": the release of " + permits(permits)
              + ", answered after release() had returned, was refused: Maximum permit count exceeded; nothing changed");
        } else if (released(late, permits, from) != null) {
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
  CompletableFuture<List<Object>> releaseInRedis(int permits, long from, char lane) {
    SemaphoreRequests.Req r = requests.new Req(permits, lane, false);
    // flag y: the release ends a run of local hand-offs (a wake token even if nobody is marked)
    AsyncGate<PermitHold> g = async.get();
    String flags = g != null && g.yieldPending() ? "y" : "";
    Supplier<CompletableFuture<List<Object>>> send =
        () -> r.track(requests.eval("release", r, permits, flags, lane, from, 0));
    long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis);
    CompletableFuture<List<Object>> done = engine.releases.retrying(send, until);
    requests.remember(send, until);
    done.whenComplete((reply, e) -> {
      r.end();
      books.afterRelease(reply);
    });
    return done;
  }

  /** A release's status when the free permits would exceed Integer.MAX_VALUE (counting; nothing changed). */
  private static final long OVERFLOW = -2L;

  /**
   * Returns null if a release's reply says the permits were released, or why not.
   *
   * @throws Error (counting) if the free permits would exceed Integer.MAX_VALUE
   */
  String released(List<Object> reply, int permits, long from) {
    long status = at(reply, 0);
    if (status == OVERFLOW) {
      throw new Error("Maximum permit count exceeded");
    }
    if (status == 1L && at(reply, 1) >= permits) {
      return null;
    }
    String loss = "Redis no longer had " + permits(permits) + " of this client on " + describe
        + ": its lease ran out and they were reclaimed";
    if (leased) {
      books.booksShort(from, loss);
    }
    return loss;
  }

  private void lateLoss(int permits) {
    metrics.leaseLost();
    engine.notifyLost(new LeaseLostEvent(name, 0, "client " + engine.clientId, "Redis no longer had "
        + permits(permits) + " of this client when its release arrived: they had been reclaimed",
        System.currentTimeMillis()), lossListeners(), Inspection.Kind.SEMAPHORE, describe);
  }

  // ---------------------------------------------------------------- capacity and queries

  @Override
  public int availablePermits() {
    engine.checkConnected(describe);
    return (int) state()[4];
  }

  /**
   * Returns {capacity, debt, free, held by all clients, available} as stored in Redis, after
   * reclaiming registrations that ran out (counting: the capacity is the free permits, none held).
   */
  long[] state() {
    List<Object> r = engine.awaitQuietly(requests.eval("state", null, 0, "", 't', 0, 0), describe);
    long free = at(r, 0);
    long cap = leased ? at(r, 1) : free;
    return new long[] {cap, Math.max(0, -free), Math.max(0, free), cap - free, free};
  }

  /**
   * Returns {memo slots ever used, slots free now} (for tests: a slot freed twice shows as more
   * free than used).
   */
  int[] slots() {
    return new int[] {requests.nextSlot.get(), requests.freeSlots.size()};
  }

  /** Returns this client's books, for diagnostics. */
  String books() {
    return books.locked(() -> "epoch " + books.epoch + (books.lease == null ? " (no lease)" : "")
        + ", dead " + books.deadEpoch + ", held " + books.held + ", lost " + books.lost
        + ", in flight " + books.inFlight + ", waiting " + getQueueLength()
        + ", in the gate " + AsyncSides.waiting(async) + ", slots " + requests.nextSlot.get()
        + " (" + requests.freeSlots.size() + " free)"
        + (async.get() == null || async.get().describe() == null ? "" : ", gate " + async.get().describe()));
  }

  @Override
  public int drainPermits() {
    engine.checkConnected(describe);
    SemaphoreRequests.Req r = requests.new Req(0, 't', false);
    long live;
    long dead;
    books.lock();
    try {
      books.inFlight++;
      live = books.epoch;
      dead = books.deadEpoch;
    } finally {
      books.unlock();
    }
    long sentAt = now();
    boolean answered = false;
    try {
      List<Object> reply = engine.awaitQuietly(r.track(requests.eval("drain", r, 0, "", 't', live, dead))
          .thenApply(x -> {
            if (at(x, 0) == 1L && !r.granted) {
              r.granted = true;
              books.answered((int) Math.max(0, at(x, 1)), at(x, 2)); // as the reply is read (see answered)
            }
            return x;
          }), describe);
      answered = true;
      int moved = (int) at(reply, 1);
      if (moved <= 0) {
        return moved;
      }
      return books.locked(() -> books.count(moved, at(reply, 2), sentAt)) ? moved : 0;
    } finally {
      books.requestEnded();
      requests.endRequest(r, !answered);
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
    engine.checkConnected(describe);
    SemaphoreRequests.Req r = requests.new Req(n, 't', false);
    Supplier<CompletableFuture<List<Object>>> send = () -> r.track(requests.eval(op, r, n, "", 't', 0, 0));
    CompletableFuture<List<Object>> done = engine.releases.retrying(send,
        System.nanoTime() + engine.options.commandTimeout().toNanos());
    done.whenComplete((v, e) -> r.end()); // the slot is kept while copies may still be sent
    List<Object> reply = engine.awaitQuietly(done, describe);
    books.withLock(() -> books.noteFree(reply, 2));
    return at(reply, 0) == 1L;
  }

  @Override
  public int heldPermits() {
    if (!leased) {
      return 0;
    }
    return books.locked(() -> {
      if (books.lease != null) {
        books.lease.alive(now()); // a lease past its confirmed time is lost now
      }
      return books.held;
    });
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
    AsyncGate<PermitHold> gate = gate();
    if (permits == 0) {
      return CompletableFuture.completedFuture(((PermitSide) gate.side()).none());
    }
    return gate.acquire(call, permits);
  }
}
