package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@link DistributedReadWriteLock} on the shared {@link Engine} and {@code rwlock.lua}. The write
 * side is a {@link RedisLock} whose Redis operations are the script's write ops; the read side
 * keeps one hold (count + lease) per reading thread.
 */
final class RedisReadWriteLock implements DistributedReadWriteLock {
  private final Engine engine;
  private final String name;
  private final String prefix;
  private final String writeKey;
  private final String fenceKey;
  private final String[] sharedKeys;
  private final WriteSide writeLock;
  private final ReadSide readLock;

  RedisReadWriteLock(Engine engine, String name) {
    this.engine = engine;
    this.name = name;
    this.prefix = "{" + engine.options.keyPrefix() + ":" + name + "}:rw:";
    this.writeKey = prefix + "w";
    this.fenceKey = prefix + "fence";
    this.sharedKeys = new String[] {writeKey, fenceKey, prefix + "readers", prefix + "wwait",
        prefix + "rwait", prefix + "wq", prefix + "state"};
    this.writeLock = new WriteSide();
    this.readLock = new ReadSide();
  }

  /**
   * Runs an op of rwlock.lua; {@code request} also names the read lease key. {@code number} is
   * the read op's "waiting since" server time, or the wunlock op's fencing token (0: none).
   */
  <T> CompletableFuture<T> op(ScriptOutputType type, String op, String owner, String request, long number) {
    return op(type, op, owner, request, number, false);
  }

  /** @param subscribed a write attempt whose writer waits by pub/sub (a refusal asks for a publish) */
  <T> CompletableFuture<T> op(ScriptOutputType type, String op, String owner, String request, long number,
      boolean subscribed) {
    return op(type, op, owner, request, number, subscribed ? "s" : "");
  }

  /** The read op; {@code since} is when this JVM's readers started waiting (0: not waiting). */
  CompletableFuture<List<Object>> read(String owner, String request, long since) {
    return op(ScriptOutputType.MULTI, "read", owner, request, since, "");
  }

  private <T> CompletableFuture<T> op(ScriptOutputType type, String op, String owner, String request, long number,
      String flags) {
    // every key is sent (DESIGN §3, slot migrations); number, flags and the publish command only
    // up to the last that differs from its default
    String[] keys = java.util.Arrays.copyOf(sharedKeys, 8);
    keys[7] = readLeaseKey(request);
    return engine.eval(Script.RWLOCK, type, keys, Engine.withoutDefaults(new String[] {op, owner, request,
        engine.leaseArg, Long.toString(number), flags, engine.publishCommand()}, "0", "", "PUBLISH"));
  }

  /** A read request's lease key (rwlock.lua KEYS[8]): hash tag shared with the other keys. */
  private String readLeaseKey(String request) {
    return prefix + "rd:" + request;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public DistributedLock readLock() {
    return readLock;
  }

  @Override
  public DistributedLock writeLock() {
    return writeLock;
  }

  @Override
  public int getReadLockCount() {
    engine.checkConnected(readLock.describe);
    List<Object> r = engine.awaitQuietly(count(), readLock.describe);
    return (int) (long) (Long) r.get(0);
  }

  /** The count op: {readers, writer held 0/1}; reports the dead readers it dropped. */
  private CompletableFuture<List<Object>> count() {
    return this.<List<Object>>op(ScriptOutputType.MULTI, "count", "", "-", 0).thenApply(this::reclaims);
  }

  /** Reports the dead readers an op dropped: the last element of a read, write or count reply. */
  List<Object> reclaims(List<Object> reply) {
    int at = reply.size() - 1;
    Metrics.reclaimed(readLock.metrics, readLock.describe, (Long) reply.get(at));
    return reply;
  }

  @Override
  public int getReadHoldCount() {
    return readLock.getHoldCount();
  }

  @Override
  public boolean isWriteLocked() {
    return writeLock.isLocked();
  }

  @Override
  public boolean isWriteLockedByCurrentThread() {
    return writeLock.isHeldByCurrentThread();
  }

  @Override
  public int getWriteHoldCount() {
    return writeLock.getHoldCount();
  }

  @Override
  public String toString() {
    return "DistributedReadWriteLock[" + name + ", " + writeLock + ", " + readLock + "]";
  }

  // ================================================================ write side

  /** The write lock: a RedisLock whose Redis operations are rwlock.lua's write ops. */
  final class WriteSide extends RedisLock {
    @Override
    public Inspection inspect() {
      return RedisReadWriteLock.this.inspect();
    }

    @Override
    public Inspection.Kind inspectionKind() {
      return Inspection.Kind.READ_WRITE_LOCK;
    }
    WriteSide() {
      super(RedisReadWriteLock.this.engine, RedisReadWriteLock.this.name, RedisReadWriteLock.this.writeKey,
          RedisReadWriteLock.this.fenceKey, RedisReadWriteLock.this.prefix + "wq",
          RedisReadWriteLock.this.prefix + "wch", "write lock of '" + RedisReadWriteLock.this.name + "'",
          RedisReadWriteLock.this.engine.metrics.primitive("write", RedisReadWriteLock.this.name));
    }

    /** No local hand-off: rwlock.lua has no hand-over op, and readers must get their turn. */
    @Override
    int handoffLimit() {
      return 0;
    }

    @Override
    void beforeAcquire() {
      if (readLock.getHoldCount() > 0) {
        throw new IllegalMonitorStateException("cannot upgrade the read lock of '" + name
            + "' to the write lock: release the read lock first (an upgrade would deadlock"
            + " against any other reader doing the same)");
      }
    }

    @Override
    CompletableFuture<Long> release(String request, long token) {
      return op(ScriptOutputType.INTEGER, "wunlock", "", request, token);
    }

    @Override
    void passWakeup() {
      op(ScriptOutputType.INTEGER, "wpass", "", "-", 0);
    }

    @Override
    CompletableFuture<Boolean> isLockedInRedis() {
      return count().thenApply(r -> (Long) r.get(1) == 1L);
    }

    @Override
    AsyncAcquisition.Side<LockHold> asyncSide() {
      return new AsyncSides.WriteSide(RedisReadWriteLock.this, this);
    }

    @Override
    public String toString() {
      return "write " + super.toString();
    }
  }

  // ================================================================ read side

  /** One reading thread's hold: its count (touched only by that thread) and its lease. */
  private static final class Hold {
    int count = 1;
    final Lease lease;
    final long sinceNanos = System.nanoTime();

    Hold(Lease lease) {
      this.lease = lease;
    }
  }

  /**
   * The read lock: shared; one hold and one lease per reading thread. A reader that must wait
   * always waits by pub/sub: a write release admits every waiting reader with one message on the
   * readers' channel, whatever their number.
   */
  @Override
  public Inspection inspect() {
    return engine.inspector.inspect(Inspection.Kind.READ_WRITE_LOCK, name);
  }

  final class ReadSide implements DistributedLock, Engine.Acquirer {
    @Override
    public Inspection inspect() {
      return RedisReadWriteLock.this.inspect();
    }

    @Override
    public Inspection.Kind inspectionKind() {
      return Inspection.Kind.READ_WRITE_LOCK;
    }
    final String describe = "read lock of '" + name + "'";
    final Metrics.Primitive metrics = engine.metrics.primitive("read", name);
    private final ReentrantLock gate = new ReentrantLock(true);
    private final ConcurrentHashMap<Thread, Hold> holds = new ConcurrentHashMap<>();
    private final CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
    /**
     * Phase fairness across this JVM's waiting readers (rwlock.lua, op read: a reader waiting since
     * before the last write release that had readers waiting passes waiting writers). The server
     * time (ms) since which the readers now queued at the gate wait, 0 when not known: set by a
     * refusal, ended by the first grant made with it (the readers it stood for were admitted) and
     * when the gate empties. Each reader takes its own copy when it arrives ({@link #since}) and
     * sends that: a reader that arrives after the admission starts without one. With one time for
     * the whole JVM, reset only when the gate emptied, a steady stream of readers kept sending the
     * first refusal's time and passed waiting writers for as long as the gate stayed occupied
     * (CHANGELOG.md); the async gate had the same
     * defect, fixed before ({@link AsyncGate}).
     */
    private final java.util.concurrent.atomic.AtomicLong waitingSince = new java.util.concurrent.atomic.AtomicLong();
    /**
     * The last time {@link #waitingSince} was set, and how many readers had arrived by then
     * ({@link #arrivals}): a reader that arrived before it and has no time of its own (it arrived
     * while none was known) waits since then, even after the time has ended. {time, arrivals},
     * replaced whole under {@link #sinceLock} (no {@code synchronized}: virtual threads), read
     * without it (every attempt of a reader that has not waited reads it).
     */
    private volatile long[] lastSince = {0, 0};
    private final ReentrantLock sinceLock = new ReentrantLock();
    /** Readers that entered {@link #acquireNew}: each reader's place in arrival order. */
    private final java.util.concurrent.atomic.AtomicLong arrivals = new java.util.concurrent.atomic.AtomicLong();
    /** The calling reader's {arrival, its waiting-since time (0: none)}; set on arrival. */
    private final ThreadLocal<long[]> since = ThreadLocal.withInitial(() -> new long[2]);
    private volatile long releases; // happens-before edge for local release -> acquire (see RedisLock)
    /**
     * A hint: the last answer to a waiting call's read attempt was a refusal, or a grant past a
     * waiting writer (an admitted reader). New readers then go to the gate rather than attempt
     * first (that attempt would be refused); a grant with no writer waiting clears it.
     */
    private volatile boolean writerAhead;
    /** This JVM's asynchronous read acquisitions (created on first use; see {@link AsyncGate}). */
    private final java.util.concurrent.atomic.AtomicReference<AsyncGate<LockHold>> async =
        new java.util.concurrent.atomic.AtomicReference<>();

    @Override
    public String name() {
      return name;
    }

    @Override
    public void lock() {
      try {
        acquire(Engine.Call.untimed(false));
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
      if (Thread.interrupted()) {
        throw metrics.interruption();
      }
      acquire(Engine.Call.untimed(true));
    }

    /**
     * Barges, as {@code ReentrantReadWriteLock.ReadLock.tryLock()} does even in fair mode: takes the
     * read lock if no other thread (of any client) holds the write lock, whether or not writers or
     * readers wait, without queueing at the local gate. One attempt in Redis that asks the script
     * to pass waiting writers ({@link #bargingAttempt}); the waiting calls keep the phase-fair
     * policy. (The first version took the local gate with {@code tryLock()} and asked with the
     * policy of a waiting reader: false whenever a thread of this JVM waited, or a writer did.)
     */
    @Override
    public boolean tryLock() {
      if (reenter()) {
        return true;
      }
      long start = System.nanoTime();
      String request = engine.newRequestId();
      long[] sentAt = new long[1];
      Engine.Attempt a = engine.attemptOnce(barging, request, sentAt);
      if (a.acquired) {
        granted(request, a.token, sentAt[0]);
        return metrics.outcome(true, start);
      }
      gaveUp(request); // not waiting after all
      return metrics.outcome(false, start);
    }

    /**
     * The read op as {@link #tryLock()} sends it: {@code since} = -1 reads as "waiting since
     * before the last admission", so rwlock.lua grants unless another owner holds the write lock,
     * past waiting writers; a refusal does not mark this JVM's readers as waiting.
     */
    CompletableFuture<Engine.Attempt> bargingAttempt(String requestId) {
      return read(engine.ownerId(Thread.currentThread()), requestId, -1)
          .thenApply(RedisReadWriteLock.this::reclaims)
          .thenApply(RedisLock::parseAttempt);
    }

    /** This side with the barging attempt, for {@link Engine#attemptOnce}. */
    private final Engine.Contender barging = new Engine.Contender() {
      @Override
      public CompletableFuture<Engine.Attempt> attempt(String requestId, boolean subscribed) {
        return bargingAttempt(requestId);
      }

      @Override
      public void cancel(String requestId) {
        ReadSide.this.cancel(requestId);
      }

      @Override
      public void passWakeup() {}

      @Override
      public String leaseKey(String requestId) {
        return ReadSide.this.leaseKey(requestId);
      }

      @Override
      public String wakeKey() {
        return null;
      }

      @Override
      public String channel() {
        return ReadSide.this.channel();
      }

      @Override
      public String describe() {
        return describe;
      }
    };

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
      long deadline = Waits.deadline(time, unit);
      if (Thread.interrupted()) {
        throw metrics.interruption();
      }
      return acquire(Engine.Call.until(deadline));
    }

    private boolean reenter() {
      Hold h = holds.get(Thread.currentThread());
      if (h == null) {
        return false;
      }
      if (!h.lease.alive(engine.ticker.read())) {
        throw lost(h.lease);
      }
      if (h.count == Integer.MAX_VALUE) {
        throw new Error("Maximum lock count exceeded");
      }
      h.count++;
      return true;
    }

    private boolean acquire(Engine.Call call) throws InterruptedException {
      if (reenter()) {
        return true;
      }
      return metrics.record(() -> acquireNew(call));
    }

    private boolean acquireNew(Engine.Call call) throws InterruptedException {
      String request = engine.newRequestId();
      long[] mine = since.get();
      mine[0] = arrivals.incrementAndGet();
      mine[1] = waitingSince.get(); // waits with the readers that wait now, if any
      if (writeLock.isHeldByCurrentThread()
          || (!gate.isLocked() && !gate.hasQueuedThreads() && !writerAhead
              && !writeLock.busyElsewhere(Thread.currentThread()))) {
        // Readers share: while no thread of this JVM has to wait, readers acquire side by side
        // without queueing behind one another. Only a reader that must wait takes the gate; so
        // does one while another thread of this JVM holds the write lock or contends for it, or
        // while the last answer to a waiting read of this JVM said a writer waits or holds: the
        // attempt here would be refused, and a refused reader attempts again at the gate once
        // subscribed (the attempt before the subscription cannot be the one it waits on), so
        // going there at once saves Redis a refused attempt.
        // The writer itself never queues (a downgrade): Redis grants it the read lock at once,
        // while the readers of this JVM at the gate wait for its write lock (the first version
        // queued it behind them, a deadlock; TCK testReadHoldingWriteLock2).
        long[] sentAt = new long[1];
        Engine.Attempt a;
        try {
          a = engine.attempt(this, request, call, false, sentAt);
        } catch (InterruptedException | RuntimeException e) {
          gaveUp(request);
          throw e;
        }
        if (a == null) {
          gaveUp(request);
          return false;
        }
        if (a.acquired) {
          granted(request, a.token, sentAt[0]);
          return true;
        }
      }
      return engine.acquire(this, gate, call, request);
    }

    @Override
    public void granted(String request, long token, long sentAtNanos) {
      long seen = releases; // volatile read: happens-after earlier local releases
      Thread me = Thread.currentThread();
      Lease l = new Lease(readLeaseKey(request), request, engine.leaseMillis, token, me.getName(),
          sentAtNanos, this::leaseLost, metrics).on(Inspection.Kind.READ_WRITE_LOCK, name, me.getId());
      holds.put(me, new Hold(l));
      engine.watchdog.register(l);
    }

    /** Withdraws the waiting entry (and undoes a grant the caller will not use). */
    @Override
    public void gaveUp(String request) {
      op(ScriptOutputType.INTEGER, "rcancel", "", request, 0);
    }

    @Override
    public void leavingGate() {
      if (!gate.hasQueuedThreads()) {
        waitingSince.set(0); // nobody of this JVM waits to read any more
      }
    }

    /** For tests: whether a reader of this JVM is queued at the gate behind its holder. */
    boolean gateQueued() {
      return gate.hasQueuedThreads();
    }

    /**
     * The waiting-since time the calling reader sends: its own; else, if it arrived before the
     * last time was set, that time; else 0 (it has not waited).
     */
    private long sinceOf(long[] mine) {
      if (mine[1] != 0) {
        return mine[1];
      }
      long[] last = lastSince;
      return mine[0] <= last[1] ? last[0] : 0;
    }

    /** A refusal at server time {@code nowMs} of a reader that sent {@code sent}: it waits. */
    private void readRefused(long[] mine, long sent, long nowMs) {
      if (mine[1] == 0) {
        mine[1] = sent != 0 ? sent : nowMs;
      }
      sinceLock.lock();
      try {
        if (waitingSince.compareAndSet(0, mine[1])) {
          lastSince = new long[] {mine[1], arrivals.get()};
        }
      } finally {
        sinceLock.unlock();
      }
    }

    private void leaseLost(Lease l, String reason) {
      engine.watchdog.unregister(l);
      metrics.leaseLost();
      List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
      all.addAll(listeners);
      engine.notifyLost(new LeaseLostEvent(name, l.token, l.holder, reason, l.lostAtMillis), all);
    }

    private LockLostException lost(Lease l) {
      return new LockLostException(name, l.token, l.lostAtMillis, l.lostReason());
    }

    @Override
    public void unlock() {
      Thread me = Thread.currentThread();
      Hold h = holds.get(me);
      if (h == null) {
        throw new IllegalMonitorStateException("current thread does not hold the " + describe);
      }
      boolean alive = h.lease.alive(engine.ticker.read());
      if (--h.count > 0) {
        if (!alive) {
          throw lost(h.lease);
        }
        return;
      }
      holds.remove(me);
      metrics.released(System.nanoTime() - h.sinceNanos);
      releases++;
      engine.watchdog.unregister(h.lease);
      long leaseEnd = System.nanoTime()
          + TimeUnit.MILLISECONDS.toNanos(Math.max(0, h.lease.remainingMillis(engine.ticker.read())));
      String request = h.lease.requestId;
      CompletableFuture<Long> released = op(ScriptOutputType.INTEGER, "runlock", "", request, 0);
      if (!h.lease.end()) {
        throw lost(h.lease);
      }
      engine.replayOnRecovery(readLeaseKey(request), leaseEnd,
          () -> op(ScriptOutputType.INTEGER, "runlock", "", request, 0));
      Long result = engine.release(released, describe + " unlock");
      if (result == null) {
        // no answer in time, or a transient failure: sent again until answered or the lease has
        // run out (set up only now, as RedisLock.unlock); if the release, when it arrives, finds
        // the hold already gone, say so
        CompletableFuture<Long> done = engine.retrying(new RedisLock.First<>(released,
            () -> op(ScriptOutputType.INTEGER, "runlock", "", request, 0)), leaseEnd);
        done.thenAccept(r -> {
          if (r == 0L) {
            metrics.leaseLost();
            List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
            all.addAll(listeners);
            engine.notifyLost(new LeaseLostEvent(name, h.lease.token, h.lease.holder, "Redis no longer had this"
                + " read hold when its release arrived (sent while Redis was unreachable): the lease had expired",
                System.currentTimeMillis()), all);
          }
        });
        return;
      }
      if (result == 0L) {
        // the lease has ended locally (released), so lose() would do nothing: report it here
        String reason = "Redis no longer had this read hold at unlock: the lease expired";
        leaseLost(h.lease, reason);
        throw new LockLostException(name, h.lease.token, System.currentTimeMillis(), reason);
      }
    }

    // ------------------------------------------------------------ Engine.Contender

    @Override
    public CompletableFuture<Engine.Attempt> attempt(String requestId, boolean subscribed) {
      long[] mine = since.get();
      long sent = sinceOf(mine);
      return read(engine.ownerId(Thread.currentThread()), requestId, sent)
          .thenApply(RedisReadWriteLock.this::reclaims)
          .thenApply(r -> {
            writerAhead = (Long) r.get(0) == 0L || (Long) r.get(2) == 1L;
            if ((Long) r.get(0) == 0L) {
              readRefused(mine, sent, (Long) r.get(2));
            } else if (sent != 0) {
              // the first grant made with the JVM's time ends it: readers arriving from now on
              // start without one (those that arrived before keep theirs)
              waitingSince.compareAndSet(sent, 0);
            }
            return RedisLock.parseAttempt(r);
          });
    }

    @Override
    public void cancel(String requestId) {
      op(ScriptOutputType.INTEGER, "rcancel", "", requestId, 0);
    }

    @Override
    public String leaseKey(String requestId) {
      return readLeaseKey(requestId);
    }

    /** Readers consume no wake tokens: they wait by pub/sub (see {@link #wakeKey()}). */
    @Override
    public void passWakeup() {}

    /** None: readers always wait by pub/sub, so one message admits all of them. */
    @Override
    public String wakeKey() {
      return null;
    }

    @Override
    public String channel() {
      return prefix + "rch";
    }

    @Override
    public String describe() {
      return describe;
    }

    // ------------------------------------------------------------ asynchronous acquisition

    @Override
    public CompletableFuture<LockHold> lockAsync() {
      return AsyncSides.gate(async, engine, this::asyncSide).acquire(Engine.Call.untimed(false), 1);
    }

    @Override
    public CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit) {
      long deadline = Waits.deadline(time, unit);
      return AsyncSides.gate(async, engine, this::asyncSide).acquire(Engine.Call.until(deadline, false), 1);
    }

    private AsyncAcquisition.Side<LockHold> asyncSide() {
      return new AsyncSides.ReadSide(RedisReadWriteLock.this, this, engine, async);
    }

    /**
     * Returns the listeners told of a lost lease: the options' and this side's.
     *
     * @return the listeners told of a lost lease: the options' and this side's
     */
    List<LeaseLossListener> lossListeners() {
      List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
      all.addAll(listeners);
      return all;
    }

    // ------------------------------------------------------------ queries

    @Override
    public Condition newCondition() {
      throw new UnsupportedOperationException("read locks have no conditions");
    }

    @Override
    public int getHoldCount() {
      Hold h = holds.get(Thread.currentThread());
      return h != null && h.lease.alive(engine.ticker.read()) ? h.count : 0;
    }

    @Override
    public boolean isHeldByCurrentThread() {
      return getHoldCount() > 0;
    }

    @Override
    public boolean isLocked() {
      for (Hold h : holds.values()) {
        if (h.lease.alive(engine.ticker.read())) {
          return true;
        }
      }
      return getReadLockCount() > 0;
    }

    @Override
    public long fencingToken() {
      Hold h = holds.get(Thread.currentThread());
      if (h == null) {
        throw new IllegalMonitorStateException("current thread does not hold the " + describe);
      }
      if (!h.lease.alive(engine.ticker.read())) {
        throw lost(h.lease);
      }
      return h.lease.token;
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
      return "read lock[" + name + ", " + holds.size() + " reading threads in this JVM]";
    }
  }
}
