package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@link DistributedLock} on the shared {@link Engine}. Local state: the owning thread, its hold
 * count and its current {@link Lease}; the hold count is touched only by the owner. A fair local
 * {@code gate} queues this JVM's waiters in FIFO order: only the gate's holder contends in Redis,
 * so at most one thread per lock and JVM waits remotely.
 */
class RedisLock implements DistributedLock, Engine.Acquirer {
  /** How long an unlock waits for a thread queued at the gate to register for a local hand-off. */
  private static final long SUCCESSOR_WAIT_NANOS = TimeUnit.MICROSECONDS.toNanos(200);

  final Engine engine;
  private final String name;
  final String lockKey;
  final String fenceKey;
  final String wakeKey;
  final String channel;
  private final String describe;
  private final CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** Gate, owner, hold count, lease: everything local (see {@link LocalOwnership}). */
  final LocalOwnership local;
  final Metrics.Primitive metrics;
  private long heldSinceNanos; // accessed only by the owner thread
  /**
   * The request whose last attempt found another holder, or null: its next attempt asks
   * lock_acquire.lua to report whether that holder's lease ran out (a crashed holder reclaimed).
   */
  private volatile String refusedRequest;
  /** The request of the current tryLock() without waiting, which must not mark this client as waiting. */
  private volatile String noWaitRequest;
  /**
   * The gate holder's request, if an unanswered hand-off may have granted it: if that waiter
   * gives up, it releases the request in case it holds the lock.
   */
  private volatile String uncertainRequest;
  /** The streak of the last successful attempt (see {@link #streakAfter}). */
  private volatile int lastGrantStreak;
  /**
   * When (nanoTime) a holder of this JVM last released in Redis because its client had reached
   * the local hand-off limit: for a short while after, this JVM's next waiter queues behind
   * other JVMs' waiters before attempting (see {@link Engine#QUEUE_FIRST_NANOS}).
   */
  private volatile long yieldedAtNanos = System.nanoTime() - Engine.QUEUE_FIRST_NANOS;
  /** This JVM's asynchronous acquisitions of the lock (created on first use; see {@link AsyncGate}). */
  private final java.util.concurrent.atomic.AtomicReference<AsyncGate<LockHold>> async =
      new java.util.concurrent.atomic.AtomicReference<>();

  RedisLock(Engine engine, String name) {
    this(engine, name, "{" + engine.options.keyPrefix() + ":" + name + "}", "lock '" + name + "'",
        engine.metrics.primitive("lock", name));
  }

  /** A lock whose keys start with {@code keyBase} (which carries the hash tag). */
  RedisLock(Engine engine, String name, String keyBase, String describe, Metrics.Primitive metrics) {
    this(engine, name, keyBase + ":lock", keyBase + ":fence", keyBase + ":wake", keyBase + ":ch", describe,
        metrics);
  }

  /**
   * A lock on the given keys. Subclasses (the write side of a read/write lock) replace what is
   * done in Redis: {@link #attempt}, {@link #release}, {@link #cancel}, {@link #passWakeup},
   * {@link #isLockedInRedis}; {@code lockKey} is the key that holds the lease, {@code channel}
   * the pub/sub channel its releases publish to when a waiter subscribed.
   */
  RedisLock(Engine engine, String name, String lockKey, String fenceKey, String wakeKey, String channel,
      String describe, Metrics.Primitive metrics) {
    this.engine = engine;
    this.metrics = metrics;
    this.name = name;
    this.lockKey = lockKey;
    this.fenceKey = fenceKey;
    this.wakeKey = wakeKey;
    this.channel = channel;
    this.describe = describe;
    this.local = new LocalOwnership(name, describe);
  }

  private long now() {
    return engine.ticker.read();
  }

  @Override
  public Inspection inspect() {
    return engine.inspector.inspect(inspectionKind(), name);
  }

  @Override
  public Inspection.Kind inspectionKind() {
    return Inspection.Kind.LOCK;
  }

  /** Called before a thread that does not hold this lock starts to acquire it. */
  void beforeAcquire() {}

  /**
   * Called when an acquisition gives up (timeout, interrupt, error) after contending in Redis.
   * The plain lock withdraws this client's "waiting" mark (field w:<client>, which makes the
   * holder's client stop passing the lock among its own threads after localHandoffLimit grants);
   * the write side of a read/write lock withdraws its waiting-writer entry, which would otherwise
   * hold readers back. The mark is the client's, not the thread's: it stays while async
   * acquisitions of this lock wait in this JVM (they withdraw it when the last gives up).
   */
  @Override
  public void gaveUp(String request) {
    if (request.equals(uncertainRequest)) {
      cancel(request);
    }
    // The mark stays while another thread of this JVM holds the gate: it may be blocked on the
    // wake list, and releases push a wake token only while some waiting mark is left (a thread
    // that timed out queued at the gate used to delete it, and a grant elsewhere then cleared q:
    // the gate holder slept until its slice ended; MutualExclusionTest).
    ReentrantLock gate = local.gate();
    boolean otherGateHolder = gate.isLocked() && !gate.isHeldByCurrentThread();
    if (!request.equals(noWaitRequest) && AsyncSides.waiting(async) == 0 && !otherGateHolder) {
      engine.async().hdel(lockKey, "w:" + engine.clientId);
    }
  }

  /**
   * Returns whether threads of this JVM wait for this lock (at or queued for the gate): an
   * async acquisition giving up then leaves the client's waiting mark to them.
   *
   * @return whether threads of this JVM wait for this lock
   */
  boolean threadsWaiting() {
    return local.gate().isLocked() || local.gate().hasQueuedThreads();
  }

  /**
   * Returns this lock's async gate, or null if no async acquisition was made yet.
   *
   * @return this lock's async gate, or null
   */
  AsyncGate<LockHold> asyncGate() {
    return async.get();
  }

  /**
   * Runs lock_acquire.lua as a local hand-off: the hold of request {@code from}, of this client,
   * moves to {@code owner}'s {@code request} with a new fencing token, its expiry unchanged.
   */
  CompletableFuture<List<Object>> handOffCall(String owner, String request, String from) {
    return engine.eval(Script.LOCK_ACQUIRE, ScriptOutputType.MULTI, new String[] {lockKey, fenceKey}, owner, request,
        engine.leaseArg, "", from);
  }

  /**
   * Describes this lock's async gate when it is not idle (for diagnostics in tests).
   *
   * @return the gate's description, or null if it has no gate or the gate is idle
   */
  String asyncState() {
    AsyncGate<LockHold> g = async.get();
    return g == null ? null : g.describe();
  }

  @Override
  public String name() {
    return name;
  }

  // ---------------------------------------------------------------- acquisition

  @Override
  public void lock() {
    try {
      acquire(Engine.Call.untimed(false));
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquire was interrupted", e);
    }
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    acquire(Engine.Call.untimed(true));
  }

  @Override
  public boolean tryLock() {
    if (reenter()) {
      return true;
    }
    engine.checkOpen(describe);
    beforeAcquire();
    long start = System.nanoTime();
    if (!local.tryEnterGate()) {
      metrics.timedOut();
      return false; // another thread of this JVM is already waiting for it
    }
    try {
      return metrics.outcome(tryOnce(), start);
    } finally {
      local.leaveGate();
    }
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    long deadline = Waits.deadline(time, unit);
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    return acquire(Engine.Call.until(deadline));
  }

  private boolean reenter() {
    return local.reenter(Thread.currentThread(), now());
  }

  private boolean acquire(Engine.Call call) throws InterruptedException {
    if (reenter()) {
      return true;
    }
    beforeAcquire();
    return metrics.record(() -> engine.acquire(this, local.gate(), call, engine.newRequestId()));
  }

  /**
   * As the gate holder: if another thread of this JVM holds the lock, waits for it to hand the
   * lock over at its unlock (a local hand-off); after a run of hand-offs that reached the limit,
   * queues behind other JVMs' waiters first.
   */
  @Override
  public Boolean beforeContend(String request, Engine.Call call, long[] queueFirst) throws InterruptedException {
    boolean atLimit = handoffLimit() > 0 && local.streak() >= handoffLimit();
    boolean queued = false;
    if (handoffLimit() > 0 && local.heldLocally(now())) {
      // Another thread of this JVM holds the lock: it hands the lock over at its unlock.
      // close() unparks the threads registered here (this wait watches no Redis command)
      engine.awaitingLocally(true);
      LocalOwnership.Successor s;
      try {
        s = Waits.managed(() -> local.awaitHandoff(request, call.timed, call.deadline, call.interruptible,
            engine.ticker, engine::isClosed));
      } finally {
        engine.awaitingLocally(false);
      }
      if (s != null && s.outcome() == LocalOwnership.Successor.HANDED) {
        if (call.interruptible && Thread.interrupted()) {
          cancel(request); // handed over just as we were interrupted: give it back
          throw new InterruptedException();
        }
        granted(request, s.token, s.sentAtNanos, s.streak);
        return Boolean.TRUE;
      }
      if (s != null && s.uncertain) {
        uncertainRequest = request;
      }
      engine.checkOpen(describe);
      call.checkInterrupt();
      if (call.expired()) {
        gaveUp(request);
        return Boolean.FALSE;
      }
      queued = s != null && s.outcome() == LocalOwnership.Successor.QUEUE;
      atLimit |= queued;
    }
    long sinceYield = System.nanoTime() - yieldedAtNanos;
    if (atLimit && sinceYield < Engine.QUEUE_FIRST_NANOS) {
      // This JVM just released in Redis to let other JVMs' waiters in: queue behind them briefly
      // instead of racing them. Queueing without an attempt, this client would be invisible to
      // the holder's client: mark it as waiting (see lock_acquire.lua, fields w:<client> and q),
      // unless the release that told it to queue did (lock_release.lua's waiting client).
      queueFirst[0] = Engine.QUEUE_FIRST_NANOS - sinceYield;
      if (!queued) {
        engine.async().hset(lockKey, java.util.Map.of("w:" + engine.clientId, "1", "q", "1"));
      }
    }
    return null;
  }

  private boolean tryOnce() {
    String request = engine.newRequestId();
    noWaitRequest = request; // it will not wait: do not mark this client as waiting
    long[] sentAt = new long[1];
    Engine.Attempt a = engine.attemptOnce(this, request, sentAt);
    if (!a.acquired) {
      gaveUp(request); // it does not wait
      return false;
    }
    granted(request, a.token, sentAt[0]);
    return true;
  }

  /** A grant by an attempt (see {@link #streakAfter}). */
  @Override
  public void granted(String request, long token, long sentAtNanos) {
    granted(request, token, sentAtNanos, lastGrantStreak);
  }

  /**
   * The streak of a grant: grants in a row to this client while another client waits (that one
   * was refused since it last held the lock). 0 when nobody else waits: then there is nobody to
   * pass over, and local hand-off goes on without limit.
   */
  private int streakAfter(List<Object> grantReply) {
    boolean others = grantReply.size() > 3 && (Long) grantReply.get(3) == 1L;
    boolean same = grantReply.size() > 4 && (Long) grantReply.get(4) == 1L;
    return !others ? 0 : same ? local.streak() + 1 : 1;
  }

  private void granted(String request, long token, long sentAtNanos, int streak) {
    Thread me = Thread.currentThread();
    Lease l = new Lease(lockKey, request, engine.leaseMillis, token, me.getName(), sentAtNanos,
        this::leaseLost, metrics).on(inspectionKind(), name, me.getId());
    heldSinceNanos = System.nanoTime();
    local.grant(me, l, streak);
    engine.watchdog.register(l);
  }

  /**
   * How many grants in a row may go to threads of this JVM by local hand-off before a release in
   * Redis gives other JVMs their turn (0: no local hand-off).
   */
  int handoffLimit() {
    return engine.options.localHandoffLimit();
  }

  private void leaseLost(Lease l, String reason) {
    engine.watchdog.unregister(l);
    metrics.leaseLost();
    List<LeaseLossListener> all = new java.util.ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    engine.notifyLost(new LeaseLostEvent(name, l.token, l.holder, reason, l.lostAtMillis), all);
  }

  /**
   * A release that completed after {@code unlock()} returned found the lease already gone: the
   * hold was not exclusive at the end. Reported as a lease loss (listeners, WARNING), since the
   * caller could not be told by an exception.
   */
  void lateLoss(Lease l) {
    metrics.leaseLost();
    List<LeaseLossListener> all = new java.util.ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    engine.notifyLost(new LeaseLostEvent(name, l.token, l.holder, "Redis no longer had this acquisition"
        + " when its release arrived (sent while Redis was unreachable): the lease had expired or was taken over",
        System.currentTimeMillis()), all);
  }

  private LockLostException lostException(Lease l) {
    return local.lost(l);
  }

  /**
   * The final unlock found the acquisition gone in Redis, after it had ended the lease locally:
   * reports the loss (listeners, metrics, WARNING) and returns the exception, with the reason.
   * (It used to call {@code l.lose}, which does nothing once the lease has ended, so nobody was
   * told, and the exception said "was lost: released".)
   */
  private LockLostException lostAtUnlock(Lease l) {
    String reason = "Redis no longer had this acquisition at unlock: the lease expired or was taken over";
    leaseLost(l, reason);
    return new LockLostException(name, l.token, System.currentTimeMillis(), reason);
  }

  // ---------------------------------------------------------------- release

  /**
   * Ends one hold. The final unlock hands the lock straight to this JVM's next waiter (local
   * hand-off), or releases it in Redis. If Redis is unreachable, the unlock finishes locally at
   * once and the release is completed in the background as soon as Redis answers (it is
   * idempotent), or becomes moot when the lease runs out.
   */
  @Override
  public void unlock() {
    int streak = local.streak(); // read by the owner before its unlock ends the hold
    // no hand-off past async acquisitions of this JVM: they wait in Redis, and would wait forever
    boolean handOff = streak < handoffLimit() && AsyncSides.waiting(async) == 0;
    Lease l = local.unlock(Thread.currentThread(), now(), handOff);
    if (l == null) {
      return; // holds remain
    }
    metrics.released(System.nanoTime() - heldSinceNanos);
    LocalOwnership.Successor next = handOff ? local.awaitSuccessor(SUCCESSOR_WAIT_NANOS) : local.takeSuccessor();
    engine.watchdog.unregister(l);
    if (!handOff && handoffLimit() > 0) {
      yieldedAtNanos = System.nanoTime();
    }
    long leaseEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, l.remainingMillis(now())));
    if (!l.end()) {
      // Lost before this release. Release anyway in case the key is still ours (never harmful:
      // the script checks the request id), and tell the caller.
      release(l.requestId, l.token);
      if (next != null) {
        next.complete(LocalOwnership.Successor.ATTEMPT);
      }
      throw lostException(l);
    }
    if (next != null && handOff && engine.connected()) {
      handOff(l, next, leaseEnd);
      return;
    }
    boolean waitsOn = next != null && !handOff;
    CompletableFuture<Long> released = waitsOn ? releaseAndWait(l.requestId, l.token) : release(l.requestId, l.token);
    if (next != null) {
      // released in Redis: to give other JVMs their turn (the successor queues behind them), or
      // because Redis is unreachable (the successor attempts, riding through the outage)
      next.complete(waitsOn ? LocalOwnership.Successor.QUEUE : LocalOwnership.Successor.ATTEMPT);
    }
    engine.replayOnRecovery(lockKey, leaseEnd, () -> release(l.requestId, l.token));
    Long result = engine.release(released, describe + " unlock");
    if (result == null) {
      // No answer in time, or a transient failure: finished locally, and the release (idempotent)
      // is sent again until answered or the lease has run out. The re-send machinery (a timer,
      // a recovery hook) is set up only now: an answered release, the usual case, needs none.
      CompletableFuture<Long> done = engine.retrying(new First<>(released, () -> release(l.requestId, l.token)),
          leaseEnd);
      // if the release, when it arrives, finds the lease already gone, say so
      done.thenAccept(r -> {
        if (r == 0L) {
          lateLoss(l);
        }
      });
      return;
    }
    if (result == 0L) {
      throw lostAtUnlock(l);
    }
  }

  /**
   * Hands the lock from the ending hold {@code l} straight to {@code next}, the waiting gate holder
   * of this JVM: one script moves the hold in Redis to its request, with a new fencing token. The
   * successor is completed whatever happens. If the hand-off gets no answer, the old hold is
   * released in the background (after the hand-off script, on the same connection, so whichever
   * ran first decides) and the successor attempts in Redis; if the successor abandoned the wait
   * meanwhile, the hold handed to it is released.
   */
  private void handOff(Lease l, LocalOwnership.Successor next, long leaseEnd) {
    // the hand-off moves the hold, not its expiry (lock_acquire.lua does no PEXPIRE for it): the
    // successor's lease runs from where this one does, until the watchdog renews it
    long since = l.sinceNanos();
    // after a failover that lost this hand-off, the handing hold would stay until its lease ran
    // out: its release is sent again then (idempotent: "already released" if the hand-off held)
    engine.replayOnRecovery(lockKey, leaseEnd, () -> release(l.requestId, l.token));
    CompletableFuture<List<Object>> f = handOffCall(engine.ownerId(next.thread), next.request, l.requestId);
    List<Object> reply;
    try {
      reply = engine.awaitWhileUp(f, describe + " unlock");
    } catch (TurnstileException e) {
      reply = null;
    }
    if (reply == null) {
      // unanswered: whichever of the hand-off and this release runs first decides; both are idempotent
      engine.retrying(() -> release(l.requestId, l.token), leaseEnd);
      next.uncertain = true; // the hand-off may still run: the successor's attempt (same request) replays it
      next.complete(LocalOwnership.Successor.ATTEMPT);
      return;
    }
    Engine.Attempt a = parseAttempt(reply);
    if (!a.acquired) {
      next.complete(LocalOwnership.Successor.ATTEMPT);
      throw lostAtUnlock(l);
    }
    if (!next.handed(a.token, since, streakAfter(reply))) {
      cancel(next.request); // the successor stopped waiting: give its hand-over back
    }
  }

  /** Sends {@code first} the first time, then {@code again}: a release already sent, re-sent after a failure. */
  static final class First<T> implements java.util.function.Supplier<CompletableFuture<T>> {
    private final java.util.concurrent.atomic.AtomicReference<CompletableFuture<T>> first;
    private final java.util.function.Supplier<CompletableFuture<T>> again;

    First(CompletableFuture<T> first, java.util.function.Supplier<CompletableFuture<T>> again) {
      this.first = new java.util.concurrent.atomic.AtomicReference<>(first);
      this.again = again;
    }

    @Override
    public CompletableFuture<T> get() {
      CompletableFuture<T> f = first.getAndSet(null);
      return f != null ? f : again.get();
    }
  }

  /** A release after which another thread of this client goes on waiting (it registers as waiting). */
  private CompletableFuture<Long> releaseAndWait(String request, long token) {
    return engine.eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, new String[] {lockKey, wakeKey}, request,
        Long.toString(token), engine.leaseArg, engine.publishCommand(), engine.clientId);
  }

  /**
   * Releases the acquisition {@code request} (idempotent: 1 released, 2 already released, 0 not
   * held). {@code token} is the fencing token it was granted, by which a copy sent again
   * recognises its own earlier success after the lock moved on (lock_release.lua); 0 when
   * unknown (the cancel of an attempt whose reply never came, whose answer nobody reads).
   */
  CompletableFuture<Long> release(String request, long token) {
    return engine.eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, new String[] {lockKey, wakeKey},
        Engine.withoutDefaults(new String[] {request, Long.toString(token), engine.leaseArg,
            engine.publishCommand()}, "PUBLISH"));
  }

  // ---------------------------------------------------------------- Engine.Contender

  @Override
  public CompletableFuture<Engine.Attempt> attempt(String requestId, boolean subscribed) {
    String flags = acquireFlags(requestId.equals(refusedRequest), requestId.equals(noWaitRequest), subscribed,
        AsyncSides.waiting(async) > 0);
    return acquireCall(engine.ownerId(Thread.currentThread()), requestId, flags)
        .thenApply(reply -> {
          Engine.Attempt a = parseAttempt(reply);
          refusedRequest = a.acquired ? null : requestId;
          if (a.acquired) {
            lastGrantStreak = streakAfter(reply);
          }
          if (a.acquired && reply.size() > 2 && (Long) reply.get(2) == 1L) {
            Metrics.reclaimed(metrics, describe, 1); // the holder it waited for never released
          }
          return a;
        });
  }

  /**
   * Runs lock_acquire.lua for {@code owner}'s {@code request}; the flags argument is sent only when
   * there are flags (see {@link Engine#withoutDefaults}). Every key the script may touch is sent
   * (DESIGN §3, slot migrations).
   */
  CompletableFuture<List<Object>> acquireCall(String owner, String request, String flags) {
    return engine.eval(Script.LOCK_ACQUIRE, ScriptOutputType.MULTI, new String[] {lockKey, fenceKey},
        Engine.withoutDefaults(new String[] {owner, request, engine.leaseArg, flags}, ""));
  }

  /**
   * Returns lock_acquire.lua's flags: h the request's previous attempt was refused, n it will not
   * wait, s it waits by pub/sub, k another acquisition of this client waits (keep its mark).
   *
   * @return the flags, "" for none
   */
  static String acquireFlags(boolean sawHolder, boolean noWait, boolean subscribed, boolean keepMark) {
    if (!(sawHolder | noWait | subscribed | keepMark)) {
      return "";
    }
    StringBuilder b = new StringBuilder(4);
    if (sawHolder) {
      b.append('h');
    }
    if (noWait) {
      b.append('n');
    }
    if (subscribed) {
      b.append('s');
    }
    if (keepMark) {
      b.append('k');
    }
    return b.toString();
  }

  static Engine.Attempt parseAttempt(List<Object> reply) {
    long status = (Long) reply.get(0);
    Object second = reply.get(1);
    long value = second instanceof Long ? (Long) second : Long.parseLong(second.toString());
    return status == 1 ? new Engine.Attempt(true, value, 0) : new Engine.Attempt(false, 0, value);
  }

  @Override
  public void cancel(String requestId) {
    release(requestId, 0);
  }

  @Override
  public String leaseKey(String requestId) {
    return lockKey;
  }

  @Override
  public void passWakeup() {
    engine.eval(Script.LOCK_PASS, ScriptOutputType.INTEGER, new String[] {lockKey, wakeKey}, engine.leaseArg);
  }

  /**
   * Returns the remaining lease of this JVM's holder in ms, or 0 if no thread of this JVM holds it.
   *
   * @return the remaining lease of this JVM's holder in ms, or 0 if no thread of this JVM holds it
   */
  long heldLocallyMillis() {
    return local.heldLocallyMillis(now());
  }

  @Override
  public String wakeKey() {
    return wakeKey;
  }

  @Override
  public String channel() {
    return channel;
  }

  @Override
  public String describe() {
    return describe;
  }

  // ---------------------------------------------------------------- asynchronous acquisition

  @Override
  public CompletableFuture<LockHold> lockAsync() {
    return AsyncSides.gate(async, engine, this::asyncSide).acquire(Engine.Call.untimed(false), 1);
  }

  @Override
  public CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit) {
    long deadline = Waits.deadline(time, unit);
    return AsyncSides.gate(async, engine, this::asyncSide).acquire(Engine.Call.until(deadline, false), 1);
  }

  /** The Redis operations of this lock's async acquisitions (the write side of a read/write lock replaces them). */
  AsyncAcquisition.Side<LockHold> asyncSide() {
    return new AsyncSides.LockSide(this);
  }

  /**
   * Returns the listeners told of a lost lease: the options' and this lock's.
   *
   * @return the listeners told of a lost lease: the options' and this lock's
   */
  List<LeaseLossListener> lossListeners() {
    List<LeaseLossListener> all = new java.util.ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    return all;
  }

  // ---------------------------------------------------------------- queries

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("DistributedLock does not support conditions");
  }

  @Override
  public int getHoldCount() {
    return local.holdCount(Thread.currentThread(), now());
  }

  @Override
  public boolean isHeldByCurrentThread() {
    return local.isHeldBy(Thread.currentThread(), now());
  }

  @Override
  public boolean isLocked() {
    if (local.heldLocally(now())) {
      return true;
    }
    engine.checkConnected(describe);
    return engine.awaitQuietly(isLockedInRedis(), describe + " isLocked");
  }

  CompletableFuture<Boolean> isLockedInRedis() {
    return engine.async().hexists(lockKey, "o").toCompletableFuture();
  }

  @Override
  public long fencingToken() {
    return local.fencingToken(Thread.currentThread(), now());
  }

  @Override
  public void addLeaseLossListener(LeaseLossListener listener) {
    listeners.add(Objects.requireNonNull(listener, "listener"));
  }

  @Override
  public void removeLeaseLossListener(LeaseLossListener listener) {
    listeners.remove(listener);
  }

  @Override
  public String toString() {
    Thread o = local.owner();
    return "DistributedLock[" + name + (o == null ? ", not held in this JVM]" : ", held by thread " + o.getName() + "]");
  }
}
