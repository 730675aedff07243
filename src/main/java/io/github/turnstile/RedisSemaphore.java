package io.github.turnstile;

import io.lettuce.core.LMoveArgs;
import io.lettuce.core.ScriptOutputType;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@link DistributedSemaphore} on the shared {@link Engine} and {@code semaphore.lua}: free permits
 * are a counter plus a few hand-off tokens that waiters {@code BLMOVE} into this client's inflight
 * list; held permits are a counter per client. No script's work grows with the permits involved.
 *
 * <p><b>Accounting.</b> The local count ({@link #heldPermits()}) must never exceed what Redis
 * attributes to this client while its liveness lease is valid: that would admit more holders than
 * the capacity. So a permit is counted only when a reply says Redis moved it to this client under
 * the lease the client holds now (a late {@code BLMOVE} after a lease loss is not counted).
 * Whatever leaves the count uncertain (a lost reply, a discarded blocking connection, a late
 * token, a lease loss, a release that could not be completed) asks for a reconciliation,
 * {@code trim}, which carries the range Redis may rightly attribute to this client: at least
 * what it counts ({@code low}), at most that plus what its commands in flight may still add or
 * have not yet given back ({@code high}). Redis gives back the excess above {@code high}, and
 * reports a shortfall below {@code low} (those permits were reclaimed: the lease is lost). Counts
 * and in-flight sums change under {@link #sync}; scripts run in the order they are sent (one
 * main connection), and a {@code BLMOVE} does not start while a trim is in flight, so no command
 * the range leaves out can run before the trim.
 */
final class RedisSemaphore extends DistributedSemaphore {
  private static final long serialVersionUID = 1L;

  private final transient Engine engine;
  private final String name;
  private final int initialPermits;
  private final String describe;
  private final String prefix;
  private final String[] keys;
  private final String inflightKey;
  private final String handoffKey;
  private final String channel;
  /** Serializes the one client at a time that may collect permits one by one. */
  private final transient RedisLock collector;
  private final transient Metrics.Primitive metrics;
  private final AtomicInteger waiting = new AtomicInteger();
  private final transient CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** Guards the counts, the liveness lease, and the reconciliation state below. */
  private final transient ReentrantLock sync = new ReentrantLock();
  private final transient Condition trimDone = sync.newCondition();
  // ---- guarded by sync
  /** Permits this client holds and may release. */
  private int held;
  /** Permits a multi-permit acquisition has collected so far (not releasable yet). */
  private int partial;
  /** Permits lost with a lease and not yet released by their holders' threads. */
  private int lostPermits;
  /** Incremented at every lease loss: a collection that began before it lost what it collected. */
  private int lossGeneration;
  private transient Lease lease;
  /** Permits that commands in flight may still add to what Redis attributes to this client. */
  private long mayAdd;
  /** Drains in flight: they may add any number, so no trim runs meanwhile. */
  private int draining;
  private boolean needsTrim;
  private boolean trimming;
  // ----
  /**
   * Until when (this JVM's ticker) a waiter may block before it runs a script again: the send
   * time of the latest reply plus its wait hint (see semaphore.lua's hint()). A waiter blocks in
   * BLMOVE only after a script found no free permit, so every permit freed later is a token on
   * the hand-off list, which a blocked BLMOVE takes at once.
   */
  private volatile long hintDeadline;

  RedisSemaphore(Engine engine, String name, int permits) {
    this.engine = engine;
    this.name = name;
    this.initialPermits = permits;
    this.describe = "semaphore '" + name + "'";
    String tag = "{" + engine.options.keyPrefix() + ":" + name + "}";
    this.prefix = tag + ":s:";
    this.handoffKey = prefix + "handoff";
    this.inflightKey = prefix + "inflight:" + engine.clientId;
    this.channel = prefix + "ch";
    this.keys = new String[] {prefix + "meta", handoffKey, prefix + "clients", inflightKey,
        prefix + "alive:" + engine.clientId, prefix + "holders", prefix + "gone"};
    this.collector = new RedisLock(engine, name, prefix + "collector", describe + " collector",
        Metrics.Primitive.NOOP);
    this.metrics = engine.metrics.primitive("semaphore", name);
  }

  /** Creates the semaphore in Redis on first use, or checks the stored capacity against {@code requested}. */
  void initialize(int requested) {
    engine.checkConnected(describe);
    List<Object> r = engine.awaitQuietly(op("init", 0, ""), describe);
    long stored = (Long) r.get(0);
    if (stored != requested) {
      throw new IllegalArgumentException(describe + " exists with a capacity of " + stored
          + " permits, not the " + requested + " requested; change the capacity explicitly"
          + " with addPermits/reducePermits");
    }
  }

  private long now() {
    return engine.ticker.read();
  }

  /**
   * Runs an op of semaphore.lua, with a fresh request id that makes a re-sent copy harmless; the
   * reply's last element (crashed clients reclaimed) is taken off.
   */
  private CompletableFuture<List<Object>> op(String op, int n, String mode) {
    return op(op, n, mode, false, engine.newRequestId());
  }

  /**
   * @param subscribed an acquire whose caller waits by pub/sub (a refusal asks for a publish)
   * @param request the call's request id; the same id makes a re-sent copy harmless
   */
  private CompletableFuture<List<Object>> op(String op, int n, String mode, boolean subscribed, String request) {
    return engine.<List<Object>>eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, op, engine.clientId,
        Long.toString(engine.leaseMillis), prefix, Integer.toString(initialPermits),
        Integer.toString(n), mode, request, subscribed ? "1" : "0", channel, engine.publishCommand())
        .thenApply(this::reclaims);
  }

  private List<Object> reclaims(List<Object> reply) {
    Metrics.reclaimed(metrics, describe, (Long) reply.get(reply.size() - 1));
    return reply.subList(0, reply.size() - 1);
  }

  @Override
  public String name() {
    return name;
  }

  // ---------------------------------------------------------------- accounting

  /** A command that may add up to {@code n} permits to Redis's count for this client is sent. */
  private void track(long n) {
    sync.lock();
    try {
      mayAdd += n;
    } finally {
      sync.unlock();
    }
  }

  /** Its outcome is known (its permits are counted, or not taken), or given up on ({@code uncertain}). */
  private void untrack(long n, boolean uncertain) {
    sync.lock();
    try {
      mayAdd -= n;
      needsTrim |= uncertain;
      maybeTrim();
    } finally {
      sync.unlock();
    }
  }

  /** Before a BLMOVE: it must not overtake a trim in flight (it runs on another connection). */
  private void beginMove() {
    sync.lock();
    try {
      while (trimming) {
        trimDone.awaitUninterruptibly();
      }
      mayAdd++;
    } finally {
      sync.unlock();
    }
  }

  /**
   * Before an acquire script: a reconciliation that is due runs first. Otherwise the acquire would
   * fold a permit Redis attributes to this client but the client does not count (say a late
   * token) into its holdings, be refused for want of it, and leave it stranded.
   */
  private void settleFirst() {
    sync.lock();
    try {
      maybeTrim();
      while (trimming) {
        trimDone.awaitUninterruptibly(); // one round trip; a failed trim is retried later
      }
    } finally {
      sync.unlock();
    }
  }

  /** Asks for a reconciliation. */
  private void reconcile() {
    sync.lock();
    try {
      needsTrim = true;
      maybeTrim();
    } finally {
      sync.unlock();
    }
  }

  /**
   * With sync held: if a reconciliation is due, sends {@code trim} with the range Redis may
   * rightly attribute to this client (see the class documentation). One at a time; while
   * Redis is unreachable it waits for the next command of this client to end.
   */
  private void maybeTrim() {
    if (!needsTrim || trimming || draining > 0 || !engine.connected()) {
      return;
    }
    needsTrim = false;
    trimming = true;
    long low = (long) held + partial;
    long high = low + mayAdd;
    trim(low, high).whenComplete((r, e) -> {
      long missing = 0;
      Lease l;
      sync.lock();
      try {
        trimming = false;
        if (e != null) {
          needsTrim = true; // again, when the next command of this client ends
        } else {
          missing = (Long) r.get(1);
          if ((Long) r.get(2) > low) {
            // Redis still attributes more than this client counted, within the slack its commands
            // in flight allowed: once they have ended, trim again (each ends with untrack), or now
            // if none is left; otherwise a permit that none of them explains stays stranded
            needsTrim = true;
            if (mayAdd == 0) {
              maybeTrim();
            }
          }
        }
        l = lease;
        trimDone.signalAll();
      } finally {
        sync.unlock();
      }
      if (missing > 0 && l != null) {
        l.lose("Redis attributed " + missing + " permit(s) fewer to this client than it held:"
            + " they were reclaimed after its liveness lapsed");
      }
    });
  }

  private CompletableFuture<List<Object>> trim(long low, long high) {
    return engine.<List<Object>>eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, "trim", engine.clientId,
        Long.toString(engine.leaseMillis), prefix, Integer.toString(initialPermits),
        Long.toString(low), Long.toString(high), "", "0", channel, engine.publishCommand())
        .thenApply(this::reclaims);
  }

  /**
   * With sync held: whether permits that a reply says moved to this client may be counted:
   * the client's liveness lease is alive, and it is {@code expected} (the lease under which a
   * BLMOVE was sent; {@code null}: any live lease, for a script that refreshed the liveness).
   */
  private boolean countable(Lease expected) {
    Lease l = lease;
    return l != null && (expected == null || l == expected) && l.alive(now());
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
    acquire(permits, Engine.Call.untimed(true));
  }

  @Override
  public void acquireUninterruptibly() {
    acquireUninterruptibly(1);
  }

  @Override
  public void acquireUninterruptibly(int permits) {
    checkPermits(permits);
    try {
      acquire(permits, Engine.Call.untimed(false));
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquire was interrupted", e);
    }
  }

  @Override
  public boolean tryAcquire() {
    return tryAcquire(1);
  }

  @Override
  public boolean tryAcquire(int permits) {
    checkPermits(permits);
    if (permits == 0) {
      return true;
    }
    long start = System.nanoTime();
    engine.checkConnected(describe);
    if (!gateTryEnter()) {
      metrics.timedOut();
      return false;
    }
    waiting.incrementAndGet();
    try {
      settleFirst();
      long sentAt = now();
      track(permits);
      boolean uncertain = false;
      try {
        CompletableFuture<List<Object>> f = op("acquire", permits, "all", false, engine.newRequestId());
        List<Object> r;
        try {
          r = engine.awaitQuietly(f, describe);
        } catch (RuntimeException e) {
          uncertain = true; // it may still run and take permits: the reconciliation gives them back
          throw e;
        }
        int taken = taken(r, permits);
        if (taken == 0) {
          return metrics.outcome(false, start);
        }
        if (!counted(taken, sentAt)) {
          uncertain = true;
          return metrics.outcome(false, start);
        }
        try {
          confirmReplicated(permits);
        } catch (RuntimeException e) {
          release(permits);
          throw e;
        }
        return metrics.outcome(true, start);
      } finally {
        untrack(permits, uncertain);
      }
    } finally {
      waiting.decrementAndGet();
      gateExit();
      maybeStopLease();
    }
  }

  /**
   * Counts {@code taken} permits an acquire script moved to this client (it refreshed the
   * liveness, so the lease is renewed or started from {@code sentAt}). False if they cannot be
   * counted (the lease could not be kept): the caller asks for a reconciliation.
   */
  private boolean counted(int taken, long sentAt) {
    sync.lock();
    try {
      ensureLease(sentAt);
      if (!countable(null)) {
        return false;
      }
      held += taken;
      return true;
    } finally {
      sync.unlock();
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
    return acquire(permits, Engine.Call.until(deadline));
  }

  private static void checkPermits(int permits) {
    if (permits < 0) {
      throw new IllegalArgumentException("permits must not be negative, was " + permits);
    }
  }

  private int taken(List<Object> reply, int wanted) {
    long taken = (Long) reply.get(0);
    if (taken < 0) {
      throw new IllegalArgumentException("cannot acquire " + wanted + " permits from " + describe
          + ": its capacity is " + reply.get(2));
    }
    return (int) taken;
  }

  /**
   * The acquisition: the thread first queues behind this JVM's other waiters (the fair gate), then
   * attempts in Redis; if the permits are not all free it waits for one permit at a time, in
   * BLMOVE on a pooled blocking connection while one is free (a release's token moves straight
   * into this client's inflight list), by pub/sub otherwise. A multi-permit request that cannot
   * be met at once takes the collector mutex before it starts collecting, so no two clients each
   * hoard part of what they need. Outages are ridden through as for locks.
   */
  private boolean acquire(int permits, Engine.Call call) throws InterruptedException {
    if (permits == 0) {
      return true;
    }
    long start = System.nanoTime();
    waiting.incrementAndGet();
    try {
      if (!gateEnter(call.remaining(), call.interruptible)) {
        return metrics.outcome(false, start);
      }
      try {
        return metrics.outcome(collect(permits, call), start);
      } finally {
        gateExit();
      }
    } catch (InterruptedException e) {
      metrics.interrupted();
      throw e;
    } finally {
      waiting.decrementAndGet();
      maybeStopLease();
    }
  }

  /** One gate holder's collection of {@code permits}; {@link #partial} mirrors {@code taken}. */
  private final class Collection {
    final int permits;
    final int generation;
    int taken;

    Collection(int permits) {
      this.permits = permits;
      sync.lock();
      try {
        this.generation = lossGeneration;
      } finally {
        sync.unlock();
      }
    }

    /** Counts permits moved to this client; false if a lease loss voided the collection. */
    boolean add(int n) {
      sync.lock();
      try {
        if (generation != lossGeneration) {
          return false;
        }
        taken += n;
        partial += n;
        return true;
      } finally {
        sync.unlock();
      }
    }

    /** All collected: they become releasable. */
    void complete() {
      sync.lock();
      try {
        partial -= taken;
        held += taken;
      } finally {
        sync.unlock();
      }
    }

    /** Given up: whatever was collected goes back. */
    void abandon() {
      int back;
      sync.lock();
      try {
        back = generation == lossGeneration ? taken : 0;
        partial -= back;
      } finally {
        sync.unlock();
      }
      if (back > 0) {
        giveBack(back);
      }
    }

    boolean lost() {
      sync.lock();
      try {
        return generation != lossGeneration;
      } finally {
        sync.unlock();
      }
    }
  }

  private boolean collect(int permits, Engine.Call call) throws InterruptedException {
    Collection got = new Collection(permits);
    boolean collecting = false;
    boolean success = false;
    boolean pubsub = false;
    Subscriptions.Sub sub = null;
    try {
      while (true) {
        if (got.lost()) {
          got = new Collection(permits); // a lease loss voided what was collected: start again
        }
        if (got.taken == permits) {
          confirmReplicated(permits);
          got.complete();
          success = true;
          return true;
        }
        call.checkInterrupt();
        if (pubsub) {
          sub = engine.subscribed(sub, channel, call, describe);
          if (sub == null) {
            return false;
          }
        }
        if (!engine.awaitUp(call, describe)) {
          return false;
        }
        CompletableFuture<Void> fault = engine.faults();
        CompletableFuture<Void> event = sub != null ? sub.next() : null;
        settleFirst();
        long sentAt = now();
        int asked = permits - got.taken;
        track(asked);
        boolean uncertain = false;
        List<Object> r;
        try {
          CompletableFuture<List<Object>> f = op("acquire", asked, collecting ? "some" : "all",
              sub != null, engine.newRequestId());
          try {
            r = engine.awaitReply(f, call, describe);
          } catch (Engine.DeadlinePassed e) {
            giveBackWhenDone(f, asked);
            asked = 0; // tracked until its reply, by giveBackWhenDone
            return false;
          } catch (Engine.Retry e) {
            uncertain = true; // it may have taken permits before its connection failed
            if (!engine.pauseUnlessExpired(call)) {
              return false;
            }
            continue;
          } catch (InterruptedException | RuntimeException e) {
            giveBackWhenDone(f, asked);
            asked = 0;
            throw e;
          }
          int t = taken(r, permits);
          sync.lock();
          try {
            ensureLease(sentAt);
          } finally {
            sync.unlock();
          }
          if (t > 0 && !got.add(t)) {
            uncertain = true; // taken while a lease loss voided this collection
          }
          hint(sentAt, (Long) r.get(1));
        } finally {
          untrack(asked, uncertain);
        }
        if (got.taken == permits) {
          continue;
        }
        if (!collecting && permits > 1) {
          if (call.timed ? !collector.tryLock(Math.max(0, call.remaining()), TimeUnit.NANOSECONDS)
              : !lockCollector(call.interruptible)) {
            return false;
          }
          collecting = true;
          pubsub = true; // a collector waits by pub/sub: it runs a script for every permit anyway
          continue;
        }
        long slice = hintDeadline - now();
        if (call.timed) {
          long remaining = call.remaining();
          if (remaining <= 0) {
            return false;
          }
          slice = Math.min(slice, remaining);
        }
        if (slice <= 0) {
          slice = TimeUnit.MILLISECONDS.toNanos(1);
        }
        if (!pubsub) {
          BlockingPool.Conn conn = engine.tryBorrow(handoffKey, call);
          if (conn == null) {
            pubsub = true; // every blocking connection is busy: wait by pub/sub from now on
          } else {
            takeOne(conn, slice, call, fault, got);
          }
          continue;
        }
        Engine.pause(CompletableFuture.anyOf(event, fault), slice, call);
      }
    } finally {
      if (sub != null) {
        sub.close();
      }
      if (!success) {
        got.abandon();
      }
      if (collecting) {
        try {
          collector.unlock();
        } catch (IllegalMonitorStateException | TurnstileException e) {
          // its lease ran out or Redis is gone; it frees itself within the lease
        }
      }
    }
  }

  /**
   * With {@code replicaAcks} set: waits until the replicas have this client's permits (the
   * acknowledged write renews its liveness key); if they do not, the caller gives the permits
   * back.
   */
  private void confirmReplicated(int permits) {
    try {
      engine.awaitReplicas(keys[4]);
    } catch (RuntimeException e) {
      throw new TurnstileException(permits + " permit(s) of " + describe + " were acquired, but "
          + e.getMessage() + "; they were given back", e);
    }
  }

  /**
   * Blocks in BLMOVE (hand-off list to this client's inflight list) on {@code conn} for one
   * permit, for at most {@code sliceNanos} (and the caller's deadline). A token counts for
   * {@code got} only if the lease under which the BLMOVE was sent is still this client's live
   * lease; otherwise, or if the outcome is unknown, a reconciliation gives it back.
   */
  private void takeOne(BlockingPool.Conn conn, long sliceNanos, Engine.Call call, CompletableFuture<Void> fault,
      Collection got) throws InterruptedException {
    long slice = call.timed ? Math.min(sliceNanos, call.remaining()) : sliceNanos;
    if (slice <= 0) {
      engine.pool.release(conn);
      return;
    }
    Lease under;
    sync.lock();
    try {
      under = lease;
    } finally {
      sync.unlock();
    }
    double seconds = Engine.seconds(slice);
    beginMove();
    String token = engine.block(conn,
        c -> c.async().blmove(handoffKey, inflightKey, LMoveArgs.Builder.leftRight(), seconds),
        slice, call, fault, (late, known) -> untrack(1, !known || late != null)); // a late token is not counted
    if (token != null) {
      boolean counted;
      sync.lock();
      try {
        counted = countable(under) && got.add(1);
      } finally {
        sync.unlock();
      }
      untrack(1, !counted);
    }
  }

  /**
   * Records the wait hint of a reply sent at {@code sentAtNanos}: a waiter blocks no longer than
   * that before it runs a script again (which reclaims the permits of dead clients).
   */
  private void hint(long sentAtNanos, long hintMillis) {
    hintDeadline = sentAtNanos + TimeUnit.MILLISECONDS.toNanos(Math.max(0, hintMillis));
  }

  private boolean lockCollector(boolean interruptible) throws InterruptedException {
    if (interruptible) {
      collector.lockInterruptibly();
    } else {
      collector.lock();
    }
    return true;
  }

  /**
   * Returns {@code n} permits this client took but does not count (a collection given up, an
   * acknowledgement that failed): Redis gives back what it attributes, up to n.
   */
  private void giveBack(int n) {
    track(n);
    op("release", n, "").whenComplete((r, e) -> untrack(n, e != null));
  }

  /** An acquire still in flight ({@code asked} tracked) that the caller gave up on: returns what it took. */
  private void giveBackWhenDone(CompletableFuture<List<Object>> attempt, int asked) {
    attempt.whenComplete((r, e) -> {
      if (e == null && (Long) r.get(0) > 0) {
        giveBack((int) (long) (Long) r.get(0));
      }
      untrack(asked, e != null);
    });
  }

  // ---------------------------------------------------------------- release

  @Override
  public void release() {
    release(1);
  }

  /**
   * Returns {@code permits} permits. The count drops at once. If this client's lease was lost,
   * permits lost with it are released first (the caller hears of the loss): for them a
   * reconciliation gives back whatever Redis still attributes to this client beyond what it counts,
   * never a permit that another thread acquired since. If Redis is unreachable, the release
   * completes in the background (same request id, so a re-send gives back once).
   */
  @Override
  public void release(int permits) {
    checkPermits(permits);
    if (permits == 0) {
      return;
    }
    // Permits lost with a lease are released first: permits are not tied to threads, and this
    // may be the release of a lost permit while another thread holds one taken since under a new
    // lease. No "release" goes to Redis for a lost permit (it would free that thread's permit): a
    // reconciliation gives back whatever Redis still attributes to this client beyond what it
    // counts (a loss only this client saw), never a permit it counts.
    int fromLost;
    int fromHeld;
    sync.lock();
    try {
      fromLost = Math.min(permits, lostPermits);
      fromHeld = Math.min(permits - fromLost, held);
      if (fromLost == 0 && fromHeld < permits) {
        throw new IllegalStateException("cannot release " + permits + " permits of " + describe
            + ": this client holds " + held);
      }
      lostPermits -= fromLost;
      held -= fromHeld;
      mayAdd += fromHeld; // Redis may still count them until this release runs
      if (fromLost > 0) {
        needsTrim = true;
        maybeTrim();
      }
    } finally {
      sync.unlock();
    }
    LockLostException lost = fromLost == 0 ? null : new LockLostException(name, 0, System.currentTimeMillis(),
        "this client's lease on the semaphore was lost and its permits were given to others");
    if (fromHeld == 0) {
      maybeStopLease();
      throw lost;
    }
    long sentAt = now();
    String request = engine.newRequestId(); // the same id for a re-send: it gives back only once
    CompletableFuture<List<Object>> done = engine.retrying(() -> op("release", fromHeld, "", false, request),
        leaseEnd());
    done.whenComplete((r, e) -> untrack(fromHeld, e != null));
    try {
      List<Object> r = engine.release(done, describe + " release");
      if (r != null) {
        hint(sentAt, (Long) r.get(2));
        if ((Long) r.get(0) < fromHeld && lost == null) {
          lost = new LockLostException(name, 0, System.currentTimeMillis(),
              "Redis no longer had this client's permits: its lease ran out and they were reclaimed");
        }
      } // else Redis unreachable: it completes in the background, or the reconciliation settles it
      if (lost != null) {
        throw lost;
      }
    } finally {
      maybeStopLease();
    }
  }

  /** When ({@code System.nanoTime}) this client's liveness lease runs out as far as it knows. */
  private long leaseEnd() {
    sync.lock();
    try {
      return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(lease == null ? engine.leaseMillis
          : Math.max(0, lease.remainingMillis(now())));
    } finally {
      sync.unlock();
    }
  }

  // ---------------------------------------------------------------- capacity and queries

  @Override
  public int availablePermits() {
    engine.checkConnected(describe);
    return (int) (long) (Long) engine.awaitQuietly(op("state", 0, ""), describe).get(4);
  }

  /**
   * Returns {cap, debt, free, held by all clients, available} as stored in Redis.
   *
   * @return {cap, debt, free, held by all clients, available} as stored in Redis
   */
  long[] state() {
    List<Object> r = engine.awaitQuietly(op("state", 0, ""), describe);
    long[] out = new long[r.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = (Long) r.get(i);
    }
    return out;
  }

  @Override
  public int drainPermits() {
    engine.checkConnected(describe);
    sync.lock();
    try {
      draining++;
    } finally {
      sync.unlock();
    }
    boolean uncertain = false;
    try {
      long sentAt = now();
      List<Object> r;
      try {
        r = engine.awaitQuietly(op("drain", 0, ""), describe);
      } catch (RuntimeException e) {
        uncertain = true;
        throw e;
      }
      int moved = (int) (long) (Long) r.get(0);
      if (moved > 0 && !counted(moved, sentAt)) {
        uncertain = true;
        return 0;
      }
      return moved;
    } finally {
      sync.lock();
      try {
        draining--;
        needsTrim |= uncertain;
        maybeTrim();
      } finally {
        sync.unlock();
      }
      maybeStopLease();
    }
  }

  @Override
  public void reducePermits(int reduction) {
    if (reduction < 0) {
      throw new IllegalArgumentException("reduction must not be negative, was " + reduction);
    }
    engine.checkConnected(describe);
    long cap = (Long) engine.awaitQuietly(op("reduce", reduction, ""), describe).get(0);
    if (cap < 0) {
      throw new IllegalArgumentException("cannot remove " + reduction + " permits from " + describe
          + ": that is more than its capacity");
    }
  }

  @Override
  public void addPermits(int permits) {
    if (permits < 0) {
      throw new IllegalArgumentException("permits must not be negative, was " + permits);
    }
    engine.checkConnected(describe);
    long cap = (Long) engine.awaitQuietly(op("add", permits, ""), describe).get(0);
    if (cap < 0) {
      throw new IllegalArgumentException("cannot add " + permits + " permits to " + describe
          + ": its capacity would exceed Integer.MAX_VALUE");
    }
  }

  @Override
  public int heldPermits() {
    sync.lock();
    try {
      return held;
    } finally {
      sync.unlock();
    }
  }

  @Override
  public boolean isFair() {
    return false;
  }

  @Override
  public int waitingThreads() {
    return waiting.get();
  }

  @Override
  public void addLeaseLossListener(LeaseLossListener listener) {
    listeners.add(Objects.requireNonNull(listener, "listener"));
  }

  @Override
  public String toString() {
    return "DistributedSemaphore[" + name + ", permits held by this client = " + heldPermits() + "]";
  }

  // ---------------------------------------------------------------- liveness lease

  /**
   * With sync held, after a script refreshed this client's liveness key (sent at
   * {@code sentAtNanos}): make sure the watchdog renews it.
   */
  private void ensureLease(long sentAtNanos) {
    if (lease == null || !lease.alive(now())) {
      lease = new Lease(keys[4], engine.clientId, engine.leaseMillis, 0, "client " + engine.clientId,
          sentAtNanos, this::leaseLost, metrics);
      engine.watchdog.register(lease);
    } else {
      lease.confirmed(sentAtNanos);
    }
  }

  /** With no permit held and nobody waiting, stop renewing; the liveness key then expires. */
  private void maybeStopLease() {
    sync.lock();
    try {
      if (lease != null && held == 0 && partial == 0 && waiting.get() == 0 && mayAdd == 0) {
        engine.watchdog.unregister(lease);
        lease.end();
        lease = null;
      }
    } finally {
      sync.unlock();
    }
  }

  private void leaseLost(Lease l, String reason) {
    engine.watchdog.unregister(l);
    int lost;
    sync.lock();
    try {
      if (lease == l) {
        lease = null;
      }
      lost = held + partial;
      lostPermits += held;
      held = 0;
      partial = 0;
      lossGeneration++;
      needsTrim = true; // give back whatever Redis still attributes to this client
      maybeTrim();
    } finally {
      sync.unlock();
    }
    if (lost > 0) {
      metrics.leaseLost();
      List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
      all.addAll(listeners);
      engine.notifyLost(new LeaseLostEvent(name, 0, l.holder, reason + " (" + lost + " permits)",
          l.lostAtMillis), all);
    }
  }
}
