package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;

/**
 * {@link DistributedLock} on the one acquisition engine. Every acquisition, a thread's or a
 * future's, queues at the lock's {@link AsyncGate} (FIFO among this JVM's waiters, whatever API
 * they used) and is an {@link AsyncAcquisition}: only the gate's head contends in Redis. A thread
 * parks on its acquisition's future and, once granted, owns the hold it was given
 * ({@link LocalOwnership}: reentrant, with a hold count touched only by the owner). A release, a
 * thread's final unlock or an async hold's, hands the lock straight to the gate's next head, a
 * thread or a future, up to the local hand-off limit ({@link AsyncSides.LockSide#release}).
 */
class RedisLock extends EngineLock {

  private final String name;
  final String lockKey;
  final String fenceKey;
  final String wakeKey;
  final String channel;
  private final String describe;
  /** Gate, owner, hold count, lease: everything local (see {@link LocalOwnership}). */
  final LocalOwnership local;

  RedisLock(Engine engine, String name) {
    this(engine, name, "{" + engine.options.keyPrefix() + ":" + name + "}", "lock '" + name + "'",
        engine.metrics.primitive("lock", name));
    this.cache = engine.lockCaches == null ? null : new LockCache(lockKey, fenceKey, engine.leaseMillis,
        LockCache.onRedis(this), engine.lockCaches);
  }

  /** The grant this JVM keeps between holds, if lock caching is on (plain locks only); else null. */
  LockCache cache;

  /** A lock whose keys start with {@code keyBase} (which carries the hash tag). */
  RedisLock(Engine engine, String name, String keyBase, String describe, Metrics.Primitive metrics) {
    this(engine, name, keyBase + ":lock", keyBase + ":fence", keyBase + ":wake", keyBase + ":ch", describe,
        metrics);
  }

  /**
   * A lock on the given keys. Subclasses (the write side of a read/write lock) replace what is
   * done in Redis: {@link #asyncSide}, {@link #release}, {@link #passWakeup},
   * {@link #isLockedInRedis}; {@code lockKey} is the key that holds the lease, {@code channel}
   * the pub/sub channel its releases publish to when a waiter subscribed.
   */
  RedisLock(Engine engine, String name, String lockKey, String fenceKey, String wakeKey, String channel,
      String describe, Metrics.Primitive metrics) {
    super(engine, metrics);
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

  Inspection.Kind inspectionKind() {
    return Inspection.Kind.LOCK;
  }

  /** Called before a thread that does not hold this lock starts to acquire it. */
  void beforeAcquire() {}

  /**
   * Returns whether another thread of this JVM holds this lock, or any acquisition of this JVM
   * waits for it: a hint, read without locking, for the read side of a read/write lock, whose
   * readers would then be refused (phase-fair).
   */
  boolean busyElsewhere(Thread me) {
    Thread o = local.owner();
    AsyncGate<LockHold> g = asyncGate();
    return (o != null && o != me) || (g != null && g.size() > 0);
  }

  /**
   * Runs lock_acquire.lua as a local hand-off: the hold of request {@code from}, of this client,
   * moves to {@code owner}'s {@code request} with a new fencing token, its expiry unchanged, or,
   * if {@code renew}, renewed to a lease from now (flag r).
   */
  CompletableFuture<List<Object>> handOffCall(String owner, String request, String from, boolean renew) {
    return engine.eval(Script.LOCK_ACQUIRE, ScriptOutputType.MULTI, new String[] {lockKey, fenceKey}, owner, request,
        engine.leaseArg, renew ? "r" : "", from);
  }

  @Override
  public String name() {
    return name;
  }

  String describe() {
    return describe;
  }

  // ---------------------------------------------------------------- acquisition

  /**
   * One attempt in Redis, without waiting: false at once if an acquisition of this JVM already
   * waits for the lock (it is first in line). Not interruptible.
   */
  @Override
  public boolean tryLock() {
    if (reenter()) {
      return true;
    }
    beforeAcquire();
    engine.checkConnected(describe); // fails fast, naming the outage, rather than "not acquired"
    AsyncGate<LockHold> g = gate();
    if (g.size() > 0) {
      metrics.timedOut();
      return false; // another acquisition of this JVM is already waiting for it
    }
    return Waits.uninterruptible(() -> acquireOrStretch(Call.once()));
  }

  private boolean reenter() {
    return local.reenter(Thread.currentThread(), now());
  }

  /**
   * A new acquisition by the calling thread: it queues at the gate and parks on its
   * acquisition's future (see {@link Waits#park}); granted, the thread owns the hold.
   */
  @Override
  boolean acquire(Call call) throws InterruptedException {
    if (reenter()) {
      return true;
    }
    beforeAcquire();
    engine.checkOpen(describe); // a call after close() fails at once instead of queueing
    LockHold h = gate().await(call, 1, metrics);
    if (h == null) {
      return false;
    }
    local.grant(Thread.currentThread(), (AsyncHold.Lock) h);
    return true;
  }

  /**
   * How many grants in a row may go to waiters of this JVM by local hand-off before a release in
   * Redis gives other clients their turn (0: no local hand-off).
   */
  int handoffLimit() {
    return engine.options.localHandoffLimit();
  }

  // ---------------------------------------------------------------- release

  /**
   * Ends one hold. The final unlock releases the thread's hold as an async hold is released: it
   * hands the lock straight to this JVM's next waiter (local hand-off), or releases it in Redis.
   * If Redis is unreachable or slow, the unlock finishes locally after a short patience and the
   * release is completed in the background as soon as Redis answers (it is idempotent), or becomes
   * moot when the lease runs out.
   */
  @Override
  public void unlock() {
    AsyncHold.Lock h = local.unlock(Thread.currentThread(), now());
    if (h == null) {
      return; // holds remain
    }
    Waits.settle(h.release().toCompletableFuture());
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

  /**
   * A release after which an acquisition of this client goes on waiting, at the hand-off limit:
   * lock_release.lua marks this client as waiting (field {@code w:<client>}, {@code q}) and pushes
   * a wake token for the first waiter blocked in Redis, so the release after that one wakes this
   * client's head.
   */
  CompletableFuture<Long> releaseAsWaiting(String request, long token) {
    return engine.eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER, new String[] {lockKey, wakeKey}, request,
        Long.toString(token), engine.leaseArg, engine.publishCommand(), engine.clientId);
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

  /**
   * Runs lock_acquire.lua for {@code owner}'s {@code request}; the flags argument is sent only when
   * there are flags (see {@link Engine#withoutDefaults}). Every key the script may touch is sent
   * (DESIGN §3, slot migrations).
   */
  CompletableFuture<List<Object>> acquireCall(String owner, String request, String flags) {
    // the publish command (SPUBLISH on a Redis 7 Cluster) is for a revocation of another client's cached grant
    return engine.eval(Script.LOCK_ACQUIRE, ScriptOutputType.MULTI, new String[] {lockKey, fenceKey},
        Engine.withoutDefaults(new String[] {owner, request, engine.leaseArg, flags, "", engine.publishCommand()},
            "", "", "PUBLISH"));
  }

  static Attempt parseAttempt(List<Object> reply) {
    long status = (Long) reply.get(0);
    Object second = reply.get(1);
    long value = second instanceof Long ? (Long) second : Long.parseLong(second.toString());
    if (status == 1) {
      return new Attempt(true, value, 0);
    }
    Attempt a = new Attempt(false, 0, value);
    if (reply.size() > 2 && reply.get(2) instanceof String) {
      a.holder = (String) reply.get(2); // the holder in the way (lock_acquire.lua), for the wait's JFR event
    }
    a.cachedHolder = reply.size() > 3 && Long.valueOf(1).equals(reply.get(3));
    a.cachedInUse = reply.size() > 3 && Long.valueOf(2).equals(reply.get(3));
    return a;
  }

  /** Hands on a wake token that was (or may have been) taken and will not be used. */
  void passWakeup() {
    engine.eval(Script.LOCK_PASS, ScriptOutputType.INTEGER, new String[] {lockKey, wakeKey}, engine.leaseArg);
  }

  // ---------------------------------------------------------------- asynchronous acquisition

  /** A test's seam: runs when a short {@link #tryLockAsync}'s first acquisition ended, before its outcome is handled. */
  transient volatile Runnable beforeTryLockAsyncOutcome;

  @Override
  public CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit) {
    Call call = Call.until(Waits.deadline(time, unit), false);
    CompletableFuture<LockHold> first = gate().acquire(call, 1);
    if (unit.toMillis(time) >= LockCache.REVOCATION_WAIT_MILLIS) {
      return first; // never stretched (Call#afterCacheRefusal)
    }
    // cancelling the returned future cancels whichever acquisition runs
    CompletableFuture<LockHold> result = new CompletableFuture<>();
    java.util.concurrent.atomic.AtomicReference<CompletableFuture<LockHold>> current =
        new java.util.concurrent.atomic.AtomicReference<>(first);
    result.whenComplete((v, e) -> {
      if (result.isCancelled()) {
        current.get().cancel(false);
      }
    });
    first.whenComplete((h, e) -> {
      Runnable seam = beforeTryLockAsyncOutcome;
      if (seam != null) {
        seam.run();
      }
      Call more = e != null && Engine.unwrap(e) instanceof java.util.concurrent.TimeoutException && !result.isDone()
          ? call.afterCacheRefusal() : null;
      if (more == null) {
        completeWith(result, h, e);
        return;
      }
      CompletableFuture<LockHold> second = gate().acquire(more, 1);
      current.set(second);
      if (result.isCancelled()) {
        second.cancel(false);
      }
      second.whenComplete((h2, e2) -> completeWith(result, h2, e2));
    });
    return result;
  }

  /** Completes {@code result} with {@code h} or {@code e}; a hold it no longer wants (cancelled) is released. */
  private static void completeWith(CompletableFuture<LockHold> result, LockHold h, Throwable e) {
    if (e != null) {
      result.completeExceptionally(Engine.unwrap(e));
    } else if (!result.complete(h)) {
      h.release();
    }
  }

  /** The Redis operations of this lock's acquisitions (the write side of a read/write lock replaces them). */
  @Override
  AcquisitionSide<LockHold> asyncSide() {
    return new AsyncSides.LockSide(this);
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
    if (cache != null && cache.idleHere()) {
      return false; // this JVM keeps the grant, and no thread of it holds the lock
    }
    engine.checkConnected(describe);
    if (inspectionKind() == Inspection.Kind.LOCK) {
      List<String> f = engine.awaitQuietly(engine.async().hmget(lockKey, "o", "c", "b").toCompletableFuture()
          .thenApply(v -> v.stream().map(kv -> kv.getValueOrElse(null)).toList()), describe + " isLocked");
      if (f.get(0) == null) {
        return false;
      }
      if (f.get(1) != null && !f.get(1).equals(engine.clientId) && f.get(2) == null) {
        // another JVM caches the grant: held by a thread there, or idle (free)? Ask for it: it is
        // given up if idle, else the JVM answers that a thread uses it (field b: held)
        if (tryLock()) {
          unlock();
          return false;
        }
      }
      return true;
    }
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
  public String toString() {
    Thread o = local.owner();
    return "DistributedLock[" + name + (o == null ? ", not held in this JVM]" : ", held by thread " + o.getName() + "]");
  }
}
