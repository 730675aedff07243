package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Condition;

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
  final WriteSide writeLock;
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
    return op(type, op, owner, request, number, "");
  }

  /** The read op; {@code since} is when this JVM's readers started waiting (0: not waiting). */
  CompletableFuture<List<Object>> read(String owner, String request, long since) {
    return op(ScriptOutputType.MULTI, "read", owner, request, since, "");
  }

  /** @param flags s: a write attempt whose writer waits by pub/sub (a refusal asks for a publish) */
  <T> CompletableFuture<T> op(ScriptOutputType type, String op, String owner, String request, long number,
      String flags) {
    // every key is sent (DESIGN §3, slot migrations); number, flags and the publish command only
    // up to the last that differs from its default
    String[] keys = java.util.Arrays.copyOf(sharedKeys, 8);
    keys[7] = readLeaseKey(request);
    return engine.eval(Script.RWLOCK, type, keys, Engine.withoutDefaults(new String[] {op, owner, request,
        engine.leaseArg, Long.toString(number), flags, engine.publishCommand()}, "0", "", "PUBLISH"));
  }

  /** A read request's lease key (rwlock.lua KEYS[8]): hash tag shared with the other keys. */
  String readLeaseKey(String request) {
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
    AcquisitionSide<LockHold> asyncSide() {
      return new AsyncSides.WriteSide(RedisReadWriteLock.this, this);
    }

    @Override
    public String toString() {
      return "write " + super.toString();
    }
  }

  // ================================================================ read side

  /** One reading thread's hold: its count (touched only by that thread) and the engine's hold. */
  private static final class Hold {
    int count = 1;
    final AsyncHold.Lock hold;
    final Lease lease;

    Hold(AsyncHold.Lock hold) {
      this.hold = hold;
      this.lease = hold.lease();
    }
  }

  @Override
  public Inspection inspect() {
    return engine.inspector.inspect(Inspection.Kind.READ_WRITE_LOCK, name);
  }

  /**
   * The read lock: shared; one hold and one lease per reading thread. Every acquisition, a
   * thread's or a future's, is an {@link AsyncAcquisition} at this side's gate; readers share:
   * while nobody of this JVM waits in Redis for the read lock, and no writer is known to be ahead,
   * a new reader attempts at once beside the others ({@link AsyncGate#RUN_WHEN_IDLE}); a refused
   * one waits in line. A reader that must wait waits by pub/sub: a write release admits every
   * waiting reader with one message on the readers' channel, whatever their number.
   */
  final class ReadSide extends EngineLock {
    final String describe = "read lock of '" + name + "'";
    private final ConcurrentHashMap<Thread, Hold> holds = new ConcurrentHashMap<>();
    private volatile long releases; // happens-before edge for local release -> acquire (see LocalOwnership)
    /**
     * A hint: the last answer to a read attempt was a refusal, or a grant past a waiting writer (an
     * admitted reader). New readers then wait in line rather than attempt at once (that attempt
     * would be refused); a grant with no writer waiting clears it.
     */
    volatile boolean writerAhead;

    ReadSide() {
      super(RedisReadWriteLock.this.engine, RedisReadWriteLock.this.engine.metrics.primitive("read", RedisReadWriteLock.this.name));
    }

    @Override
    public Inspection inspect() {
      return RedisReadWriteLock.this.inspect();
    }

    @Override
    public String name() {
      return name;
    }

    @Override
    AcquisitionSide<LockHold> asyncSide() {
      return new AsyncSides.ReadSide(RedisReadWriteLock.this, this);
    }

    /** For tests: whether a read acquisition of this JVM waits in line behind the one in Redis. */
    boolean gateQueued() {
      AsyncGate<LockHold> g = asyncGate();
      return g != null && g.size() > 1;
    }

    /**
     * Returns whether {@code t} (null: none) holds this JVM's write lock: its read acquisition is
     * a downgrade, granted at once in Redis, and must not queue behind readers that wait for it.
     */
    boolean downgrade(Thread t) {
      return t != null && writeLock.local.isHeldBy(t, engine.ticker.read());
    }

    /**
     * Barges, as {@code ReentrantReadWriteLock.ReadLock.tryLock()} does even in fair mode: takes the
     * read lock if no other thread (of any client) holds the write lock, whether or not writers or
     * readers wait. One attempt in Redis ({@link Call#once}) that asks the script to pass
     * waiting writers ({@code since} = -1); the waiting calls keep the phase-fair policy.
     */
    @Override
    public boolean tryLock() {
      if (reenter()) {
        return true;
      }
      engine.checkConnected(describe); // fails fast, naming the outage, rather than "not acquired"
      return Waits.uninterruptible(() -> acquire(Call.once()));
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

    @Override
    boolean acquire(Call call) throws InterruptedException {
      if (reenter()) {
        return true;
      }
      engine.checkOpen(describe);
      LockHold h = gate().await(call, 1, metrics);
      if (h == null) {
        return false;
      }
      long seen = releases; // volatile read: happens-after earlier local releases
      holds.put(Thread.currentThread(), new Hold((AsyncHold.Lock) h));
      return true;
    }

    /** The readers' channel: a write release that admits waiting readers publishes to it. */
    String channel() {
      return prefix + "rch";
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
      releases++;
      Waits.settle(h.hold.release().toCompletableFuture());
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
    public String toString() {
      return "read lock[" + name + ", " + holds.size() + " reading threads in this JVM]";
    }
  }
}
