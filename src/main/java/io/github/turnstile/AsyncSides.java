package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntSupplier;
import java.util.function.Supplier;

/**
 * The Redis operations of asynchronous acquisitions ({@link AcquisitionSide}) and their holds
 * ({@link AsyncHold.Io}), one kind per primitive: the lock, the write and read sides of a
 * read/write lock, and the semaphore. Each reuses its primitive's scripts; an async hold has an
 * owner id of its own in Redis ({@code <client>:h<n>}), so Redis keeps it apart from every thread
 * of the client and from every other hold.
 */
final class AsyncSides {
  private AsyncSides() {}

  /** Returns the gate in {@code ref}, creating it with {@code side} on first use. */
  static <H extends Hold> AsyncGate<H> gate(AtomicReference<AsyncGate<H>> ref, Engine engine,
      Supplier<AcquisitionSide<H>> side) {
    AsyncGate<H> g = ref.get();
    if (g == null) {
      ref.compareAndSet(null, new AsyncGate<>(new EngineEnv(engine), side.get()));
      g = ref.get();
    }
    return g;
  }

  /** Returns how many async acquisitions of the primitive wait or contend in this JVM. */
  static int waiting(AtomicReference<? extends AsyncGate<?>> ref) {
    AsyncGate<?> g = ref.get();
    return g == null ? 0 : g.size();
  }

  /** The engine as the state machine sees it. */
  static final class EngineEnv implements AcquisitionEnv {
    private final Engine engine;

    EngineEnv(Engine engine) {
      this.engine = engine;
    }

    @Override
    public boolean closed() {
      return engine.isClosed();
    }

    @Override
    public boolean connected() {
      return engine.connected();
    }

    @Override
    public CompletableFuture<Void> faults() {
      return engine.faults();
    }

    @Override
    public WakeChannel subscribe(String channel) {
      return new SubChannel(engine.subscribe(channel), false);
    }

    @Override
    public boolean stale(WakeChannel c) {
      return engine.stale(((SubChannel) c).sub);
    }

    @Override
    public void reset(WakeChannel c) {
      Subscriptions.Sub sub = ((SubChannel) c).sub;
      if (!sub.ready.isDone()) {
        engine.subscriptions.reset(sub.node);
      }
    }

    @Override
    public void unreachable(Call call, long sinceNanos, String what, Throwable cause) {
      engine.outages.unreachable(call, sinceNanos, what, cause);
    }

    @Override
    public void suspect() {
      engine.suspectTopology();
    }

    @Override
    public long commandTimeoutNanos() {
      return engine.options.commandTimeout().toNanos();
    }

    @Override
    public long leaseMillis() {
      return engine.leaseMillis;
    }

    @Override
    public long ticker() {
      return engine.ticker.read();
    }

    @Override
    public String newRequestId() {
      return engine.newRequestId();
    }

    @Override
    public int replicaAcks() {
      return engine.options.replicaAcks();
    }

    @Override
    public void awaitReplicas(String leaseKey, String request) {
      engine.replicas.awaitReplicas(leaseKey, request);
    }

    @Override
    public CompletableFuture<Void> losses() {
      return engine.losses();
    }

    @Override
    public Object waitStarted(AsyncAcquisition<?> a, AcquisitionSide<?> side, IntSupplier queued) {
      String waiter = a.thread != null ? a.thread.getName() : "async acquisition " + a.owner;
      Engine.Waiting w = new Engine.Waiting(side.kind, side.primitiveName, waiter, engine.ticker.read(), queued);
      engine.waiting.add(w);
      return w;
    }

    @Override
    public void waitEnded(Object mark) {
      engine.waiting.remove(mark);
    }

    @Override
    public Telemetry telemetry() {
      return engine.telemetry;
    }

    @Override
    public void queuedFirst(CompletableFuture<Boolean> woken) {
      engine.queueFirstWaits.increment();
      woken.thenAccept(token -> {
        if (!token) {
          engine.queueFirstLapsed.increment();
        }
      });
    }

    @Override
    public Wake waitOnList(String key, long sliceNanos, Runnable passWakeup) {
      Wake w = ListWait.start(engine, key, sliceNanos, passWakeup);
      Runnable seam = engine.listWaitStarted;
      if (w != null && seam != null) {
        seam.run();
      }
      return w;
    }
  }

  /** A {@link Subscriptions.Sub} as a channel of the state machine, or of a lock cache's revocations. */
  static final class SubChannel implements WakeChannel {
    final Subscriptions.Sub sub;
    private final boolean revocations;

    SubChannel(Subscriptions.Sub sub, boolean revocations) {
      this.sub = sub;
      this.revocations = revocations;
    }

    @Override
    public CompletableFuture<Void> ready() {
      return sub.ready;
    }

    @Override
    public CompletableFuture<Void> next() {
      return revocations ? sub.nextRevocation() : sub.next();
    }

    @Override
    public void close() {
      sub.close();
    }
  }

  // ================================================================ locks

  /**
   * What the three lock kinds share: a hold with its own lease, released by one idempotent script
   * (re-sent after transient failures, and again after a recovery), reported to the primitive's
   * listeners when lost.
   */
  abstract static class LockKind extends AcquisitionSide<LockHold> implements AsyncHold.Io {
    final Engine engine;

    LockKind(Engine engine, String describe, Inspection.Kind kind, String name, String channel,
        Metrics.Primitive metrics) {
      super(describe, kind, name, channel, metrics);
      this.engine = engine;
    }

    /**
     * The release script of {@code request}, granted fencing token {@code token}: 1 released, 2
     * already released, 0 not held.
     */
    abstract CompletableFuture<Long> sendRelease(String request, long token);

    /** The listeners of the primitive, and those of the options. */
    abstract List<LeaseLossListener> listeners();

    /**
     * Sends the undo of what {@code w} may hold (a grant that arrived after the cancel, or an
     * attempt whose outcome is unknown) as a hold's release is sent: re-sent after transient
     * failures until answered or a lease has passed (the longest the orphan can live), and sent
     * again after a recovery. Sent once, a lost undo left the orphan blocking everyone for up to
     * a lease. {@code send} is idempotent (it names {@code w}'s request).
     */
    void undo(String key, String request, Supplier<CompletableFuture<Long>> send) {
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis);
      engine.releases.retrying(send, until);
      engine.replayOnRecovery(key + " undo " + request, until, send::get);
    }

    @Override
    LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      // a thread's hold is named after the thread, as Redis's owner id is (see AsyncAcquisition#thread)
      String holder = w.thread != null ? w.thread.getName() : "async hold " + w.owner;
      // a take from this JVM's cached grant holds by the cache's request (LockCache)
      String request = a.request != null ? a.request : w.request;
      AsyncHold.Lock hold = new AsyncHold.Lock(primitiveName, this, engine.ticker, leaseKey(w), request,
          engine.leaseMillis, a.token, holder, sentAtTicks, metrics);
      hold.lease().on(kind, primitiveName, w.thread != null ? w.thread.getId() : -1);
      if (a.cache != null) {
        hold.lease().cache = a.cache;
        a.cache.took(hold);
      }
      engine.watchdog.register(hold.lease());
      hold.recordWith(engine.telemetry, kind, describe, a.token, 1, w.telemetry);
      return hold;
    }

    @Override
    public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
      return release(hold, leaseEndNanos, this::sendRelease);
    }

    /** Releases {@code hold} in Redis, sending {@code first} the first time and {@link #sendRelease} after that. */
    CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos,
        java.util.function.BiFunction<String, Long, CompletableFuture<Long>> first) {
      Lease l = hold.lease();
      engine.watchdog.unregister(l);
      metrics.released(hold.heldNanos());
      String request = l.requestId;
      long token = l.token;
      CompletableFuture<Long> all = engine.releases.retrying(new RedisLock.First<>(first.apply(request, token),
          () -> sendRelease(request, token)), leaseEndNanos);
      engine.replayOnRecovery(l.key, leaseEndNanos, () -> sendRelease(request, token));
      return all.thenApply(r -> r != 0L);
    }

    @Override
    public boolean connected() {
      return engine.connected();
    }

    @Override
    public void stopRenewal(Lease lease) {
      engine.watchdog.unregister(lease);
    }

    @Override
    public void lost(LeaseLostEvent event) {
      metrics.leaseLost();
      engine.notifyLost(event, listeners(), kind, describe);
    }
  }

  /**
   * A lock kind over a {@link RedisLock} (the plain lock, or the write side of a read/write lock):
   * its name, channel, wake list, metrics and listeners are the lock's.
   */
  abstract static class OnRedisLock extends LockKind {
    final RedisLock lock;

    OnRedisLock(RedisLock lock) {
      super(lock.engine, lock.describe(), lock.inspectionKind(), lock.name(), lock.channel, lock.metrics);
      this.lock = lock;
    }

    @Override
    String wakeKey() {
      return lock.wakeKey;
    }

    @Override
    void passWakeup() {
      lock.passWakeup();
    }

    @Override
    String leaseKey(AsyncAcquisition<LockHold> w) {
      return lock.lockKey;
    }

    @Override
    CompletableFuture<Long> sendRelease(String request, long token) {
      return lock.release(request, token);
    }

    @Override
    List<LeaseLossListener> listeners() {
      return lock.lossListeners();
    }
  }

  /** A plain lock: lock_acquire.lua / lock_release.lua with the hold's own owner id. */
  static final class LockSide extends OnRedisLock {
    LockSide(RedisLock lock) {
      super(lock);
    }

    @Override
    CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      // past its deadline (tryLock(), or a late first attempt) it will not wait: no waiting mark
      boolean noWait = w.call.once || (w.call.timed && w.call.expired());
      w.marked |= !noWait;
      // lock_acquire.lua's flags: h the request's previous attempt was refused, n it will not
      // wait, s it waits by pub/sub
      String flags = (w.refused ? "h" : "") + (noWait ? "n" : "") + (subscribed ? "s" : "");
      return lock.acquireCall(w.owner, w.request, flags)
          .thenApply(reply -> {
            Attempt a = RedisLock.parseAttempt(reply);
            if (a.acquired && reply.size() > 2 && (Long) reply.get(2) == 1L) {
              Metrics.reclaimed(metrics, describe, 1); // the holder it waited for never released
            }
            if (!a.acquired) {
              // the latest refusal decides whether a call waits on for a cache's answer (Call)
              w.call.refusedByCache = a.cachedHolder;
              w.call.refusedHeld = !a.cachedHolder && a.retryMillis != -2; // -2: the holder just vanished
            }
            if (a.cachedHolder || a.cachedInUse) {
              // another client's cache, asked to give it up (or in use there, it answered):
              // contended, so not cached here for a while
              if (engine.lockCaches != null) {
                engine.lockCaches.contention(lock.lockKey);
              }
            }
            return a;
          });
    }

    @Override
    void refused(AsyncAcquisition<LockHold> w, Attempt a) {
      w.refused = true;
    }

    @Override
    void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) {
      if (a.cache != null) {
        return; // a take from this JVM's cache, not delivered: the cache keeps it (LockCache#take)
      }
      String request = w.request;
      long token = a.token;
      undo(lock.lockKey, request, () -> lock.release(request, token)); // frees it and wakes the next waiter, as a release does
    }

    @Override
    void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) {
      if (uncertain) {
        String request = w.request;
        undo(lock.lockKey, request, () -> lock.release(request, 0)); // a copy of the attempt may have granted it unseen
      }
      if (w.marked) {
        // the mark is the client's; the gate's next head, if any, attempts after this and marks again
        engine.async().hdel(lock.lockKey, "w:" + engine.clientId);
      }
    }

    /**
     * Hands the lock to the head of this JVM's async acquisitions when one waits (local hand-off,
     * up to the local hand-off limit while another client waits): one script moves the hold in
     * Redis to the head's request, with a new fencing token, and no wake-up travels through
     * Redis. Otherwise, or while threads of this JVM wait for the lock (they wait in Redis), the
     * hold is released in Redis. A hand-off that gets no answer is followed by the release (on
     * the same connection, so whichever ran first decides; both name their request), and the
     * head goes on: its next attempt, with the same request, replays the hand-off if it ran.
     */
    @Override
    public CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos) {
      AsyncGate<LockHold> g = lock.asyncGate();
      LockCache cache = lock.cache;
      if (cache != null && cache.isTake(hold)) {
        return cache.endTake((AsyncHold.Lock) hold, g);
      }
      if (cache != null && g != null && g.size() == 0 && !g.yieldPending()) {
        CompletableFuture<Boolean> kept = cache.keep((AsyncHold.Lock) hold, g);
        if (kept != null) {
          return kept; // the grant stays with this JVM
        }
      }
      AsyncGate.Successor<LockHold> next = g == null || !engine.connected() ? null : g.successor(lock.handoffLimit());
      if (next == null) {
        // at the hand-off limit (a yield pending): released in Redis for other clients' waiters,
        // this client marked as waiting, so that the release after theirs wakes this JVM's head in
        // turn (it queues on the wake list behind them: AsyncAcquisition.waitLocally)
        CompletableFuture<Boolean> released = g != null && g.yieldPending()
            ? release(hold, leaseEndNanos, lock::releaseAsWaiting) : super.release(hold, leaseEndNanos);
        if (g != null) {
          g.endedLocally(hold); // after the release was sent: a head's attempt queues behind it
        }
        return released;
      }
      Lease l = hold.lease();
      engine.watchdog.unregister(l);
      metrics.released(hold.heldNanos());
      // The hand-off moves the hold, not its expiry, while the handing lease is young; once it has
      // run a third of its time (a renewal interval, by default) the hand-off renews it: the
      // watchdog's renewals name requests already handed on and are refused, so a chain of
      // hand-offs would otherwise carry its first grant's lease to its end (HandOffChainTest).
      long sentAt = engine.ticker.read();
      boolean renew = l.remainingMillis(sentAt) < engine.leaseMillis * 2 / 3;
      long since = renew ? sentAt : l.sinceNanos();
      String request = l.requestId;
      long token = l.token;
      // after a failover that lost the hand-off, the handing hold would stay until its lease ran out
      engine.replayOnRecovery(l.key, leaseEndNanos, () -> sendRelease(request, token));
      return lock.handOffCall(next.owner(), next.request(), request, renew).handle((reply, error) -> {
        if (error != null) {
          g.endedLocally(hold);
          return engine.releases.retrying(() -> sendRelease(request, token), leaseEndNanos).thenApply(r -> r != 0L);
        }
        Attempt a = RedisLock.parseAttempt(reply);
        if (!a.acquired) {
          g.endedLocally(hold);
          return CompletableFuture.completedFuture(false); // the handing hold no longer held the lock
        }
        g.handedOff(reply.size() > 3 && (Long) reply.get(3) == 1L);
        if (!next.acquisition().handedOver(a, since)) {
          g.endedLocally(hold); // handed to nobody: the undo released it in Redis
        }
        return CompletableFuture.completedFuture(true);
      }).thenCompose(f -> f);
    }

    @Override
    LockHold grant(AsyncAcquisition<LockHold> w, Attempt a, long sentAtTicks) {
      LockHold hold = super.grant(w, a, sentAtTicks);
      AsyncGate<LockHold> g = lock.asyncGate();
      if (g != null) {
        g.heldLocally(hold);
        hold.lost().thenRun(() -> g.endedLocally(hold));
      }
      return hold;
    }

    /**
     * A head behind a hold of this JVM waits for that hold's hand-off, sending nothing; without
     * local hand-off (limit 0) it waits in Redis, in line with other clients' waiters.
     */
    @Override
    CompletableFuture<Void> localEnd(AsyncAcquisition<LockHold> w) {
      AsyncGate<LockHold> g = lock.asyncGate();
      LockCache cache = lock.cache;
      if (cache != null) {
        CompletableFuture<Void> starting = cache.starting();
        if (starting != null) {
          return starting; // the grant is being cached: take it then, rather than be refused in Redis
        }
        return g == null ? null : g.localEnd(); // a take of the cache hands on locally, whatever the limit
      }
      return g == null || lock.handoffLimit() <= 0 ? null : g.localEnd();
    }

    @Override
    boolean fromCache(AsyncAcquisition<LockHold> w) {
      LockCache cache = lock.cache;
      return cache != null && cache.take(w);
    }
  }

  /** The write side of a read/write lock: rwlock.lua's write, wunlock and wcancel. */
  static final class WriteSide extends OnRedisLock {
    private final RedisReadWriteLock rw;

    WriteSide(RedisReadWriteLock rw, RedisLock side) {
      super(side);
      this.rw = rw;
    }

    @Override
    CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      return rw.<List<Object>>op(ScriptOutputType.MULTI, "write", w.owner, w.request, 0, subscribed ? "s" : "")
          .thenApply(rw::reclaims)
          .thenApply(RedisLock::parseAttempt);
    }

    @Override
    void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) {
      wcancel(w.request); // releases the grant, wakes readers or a writer
    }

    @Override
    void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) {
      wcancel(w.request); // its waiting entry stops holding readers back (and a grant is undone)
    }

    private void wcancel(String request) {
      undo(lock.lockKey, request, () -> rw.op(ScriptOutputType.INTEGER, "wcancel", "", request, 0));
    }
  }

  /**
   * The read side of a read/write lock: rwlock.lua's read, runlock and rcancel. Each async reader
   * sends the "waiting since" time of the readers queued with it (phase fairness: a write release
   * admits the readers that were waiting), which it takes from its gate when it enqueues; the
   * gate ends that time at the first grant made with it (see {@link AsyncGate#readRefused}).
   */
  static final class ReadSide extends LockKind {
    private final RedisReadWriteLock rw;
    private final RedisReadWriteLock.ReadSide side;

    ReadSide(RedisReadWriteLock rw, RedisReadWriteLock.ReadSide side) {
      super(side.engine, side.describe, Inspection.Kind.READ_WRITE_LOCK, rw.name(), side.channel(), side.metrics);
      this.rw = rw;
      this.side = side;
    }

    /**
     * Readers share: a new reader attempts at once beside the others while nobody of this JVM
     * waits for the read lock and no writer is known to be ahead; a downgrade (its thread holds the
     * write lock) and a {@code tryLock()} (which barges) always do.
     */
    @Override
    int runMode(AsyncAcquisition<LockHold> w) {
      if (w.call.once || side.downgrade(w.thread)) {
        return AsyncGate.RUN_ALWAYS;
      }
      boolean writerFirst = side.writerAhead || rw.writeLock.busyElsewhere(w.thread);
      return writerFirst ? AsyncGate.RUN_NEVER : AsyncGate.RUN_WHEN_IDLE;
    }

    @Override
    CompletableFuture<Attempt> attempt(AsyncAcquisition<LockHold> w, boolean subscribed) {
      AsyncGate<LockHold> g = side.asyncGate();
      // tryLock() barges: -1 reads as "waiting since before the last admission", so rwlock.lua
      // grants unless another owner holds the write lock, past waiting writers
      long since = w.call.once ? -1 : w.readSince;
      return rw.read(w.owner, w.request, since)
          .thenApply(rw::reclaims)
          .thenApply(r -> {
            boolean refused = (Long) r.get(0) == 0L;
            side.writerAhead = refused || (Long) r.get(2) == 1L;
            if (refused && !w.call.once) { // a tryLock() that will not wait sets no waiting time
              g.readRefused(w, (Long) r.get(2));
            } else {
              g.readGranted(since);
            }
            return RedisLock.parseAttempt(r);
          });
    }

    @Override
    void cancelGrant(AsyncAcquisition<LockHold> w, Attempt a) {
      rcancel(w.request); // drops the read hold; the last reader out wakes a writer
    }

    @Override
    void withdraw(AsyncAcquisition<LockHold> w, boolean uncertain) {
      rcancel(w.request); // its waiting entry goes (and a grant is undone)
    }

    private void rcancel(String request) {
      undo(rw.readLeaseKey(request), request, () -> rw.op(ScriptOutputType.INTEGER, "rcancel", "", request, 0));
    }

    @Override
    String leaseKey(AsyncAcquisition<LockHold> w) {
      return rw.readLeaseKey(w.request);
    }

    @Override
    CompletableFuture<Long> sendRelease(String request, long token) {
      return rw.op(ScriptOutputType.INTEGER, "runlock", "", request, 0);
    }

    @Override
    List<LeaseLossListener> listeners() {
      return side.lossListeners();
    }
  }
}
