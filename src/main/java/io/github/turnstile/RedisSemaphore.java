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
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@link DistributedSemaphore} on the shared {@link Engine}: permits are tokens moved between a
 * free list and per-client held lists by {@code semaphore.lua} and by BLMOVE. Local state: the
 * number of permits this client holds (mirroring its held list), the threads waiting, and the
 * client's liveness {@link Lease}, registered with the watchdog while permits are held or awaited.
 */
final class RedisSemaphore extends DistributedSemaphore {
  private static final long serialVersionUID = 1L;

  private final transient Engine engine;
  private final String name;
  private final int initialPermits;
  private final String describe;
  private final String prefix;
  private final String[] keys;
  private final String heldKey;
  private final String freeKey;
  private final String channel;
  /** Serializes the one client at a time that may collect permits one by one. */
  private final transient RedisLock collector;
  private final transient Metrics.Primitive metrics;
  private final transient ReentrantLock leaseLock = new ReentrantLock();
  private final AtomicInteger held = new AtomicInteger();
  private final AtomicInteger lostPermits = new AtomicInteger();
  private final AtomicInteger waiting = new AtomicInteger();
  private final transient CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  private transient Lease lease; // guarded by leaseLock
  /**
   * Until when (this JVM's nanoTime) a waiter may block without running a script first: the send
   * time of the latest script reply plus its wait hint (see semaphore.lua's hint()).
   */
  private volatile long hintDeadline;

  RedisSemaphore(Engine engine, String name, int permits) {
    this.engine = engine;
    this.name = name;
    this.initialPermits = permits;
    this.describe = "semaphore '" + name + "'";
    String tag = "{" + engine.options.keyPrefix() + ":" + name + "}";
    this.prefix = tag + ":s:";
    this.freeKey = prefix + "free";
    this.channel = prefix + "ch";
    this.heldKey = prefix + "held:" + engine.clientId;
    this.keys = new String[] {prefix + "meta", freeKey, prefix + "clients", heldKey,
        prefix + "alive:" + engine.clientId};
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
      long sentAt = System.nanoTime();
      CompletableFuture<List<Object>> f = op("acquire", permits, "all");
      List<Object> r;
      try {
        r = engine.awaitQuietly(f, describe);
      } catch (RuntimeException e) {
        giveBackWhenDone(f);
        throw e;
      }
      int taken = taken(r, permits);
      ensureLease(sentAt);
      if (taken == permits) {
        try {
          confirmReplicated(permits);
        } catch (RuntimeException e) {
          giveBack(permits);
          throw e;
        }
        held.addAndGet(permits);
      }
      return metrics.outcome(taken == permits, start);
    } finally {
      waiting.decrementAndGet();
      gateExit();
      maybeStopLease();
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
   * into this client's held list), by pub/sub otherwise. A multi-permit request that cannot be
   * met at once takes the collector mutex before it starts collecting, so no two clients each
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

  private boolean collect(int permits, Engine.Call call) throws InterruptedException {
    int taken = 0;
    boolean collecting = false;
    boolean success = false;
    boolean pubsub = false;
    Subscriptions.Sub sub = null;
    try {
      while (true) {
        if (taken == permits) {
          confirmReplicated(permits);
          held.addAndGet(permits);
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
        if (!pubsub && (permits == 1 || collecting) && blockDirectly(call)) {
          // Fresh hint and live lease: BLMOVE takes a free permit at once or queues for one,
          // without a script round trip first.
          BlockingPool.Conn conn = engine.tryBorrow(freeKey, call);
          if (conn == null) {
            pubsub = true;
          } else if (takeOne(conn, hintDeadline - System.nanoTime(), call, fault, taken)) {
            taken++;
          }
          continue;
        }
        long sentAt = System.nanoTime();
        CompletableFuture<List<Object>> f = op("acquire", permits - taken, collecting ? "some" : "all", sub != null,
            engine.newRequestId());
        List<Object> r;
        try {
          r = engine.awaitReply(f, call, describe);
        } catch (Engine.DeadlinePassed e) {
          giveBackWhenDone(f);
          return false;
        } catch (Engine.Retry e) {
          trimTo(held.get() + taken); // it may have taken permits before the connection failed
          if (!engine.pauseUnlessExpired(call)) {
            return false;
          }
          continue;
        } catch (InterruptedException | RuntimeException e) {
          giveBackWhenDone(f);
          throw e;
        }
        taken += taken(r, permits);
        ensureLease(sentAt);
        hint(sentAt, (Long) r.get(1));
        if (taken == permits) {
          continue;
        }
        if (!collecting && permits > 1) {
          if (call.timed ? !collector.tryLock(Math.max(0, call.remaining()), TimeUnit.NANOSECONDS)
              : !lockCollector(call.interruptible)) {
            return false;
          }
          collecting = true;
          continue;
        }
        long slice = hintDeadline - System.nanoTime();
        if (call.timed) {
          long remaining = call.remaining();
          if (remaining <= 0) {
            return false;
          }
          slice = Math.min(slice, remaining);
        }
        if (slice <= 0) {
          continue;
        }
        if (!pubsub) {
          BlockingPool.Conn conn = engine.tryBorrow(freeKey, call);
          if (conn == null) {
            pubsub = true; // every blocking connection is busy: wait by pub/sub from now on
          } else if (takeOne(conn, slice, call, fault, taken)) {
            taken++;
          }
          continue;
        }
        Engine.pause(CompletableFuture.anyOf(event, fault), slice, call);
      }
    } finally {
      if (sub != null) {
        sub.close();
      }
      if (!success && taken > 0) {
        giveBack(taken);
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
   * acknowledged write renews its liveness key); if they do not, the caller's finally gives the
   * permits back.
   */
  private void confirmReplicated(int permits) {
    try {
      engine.awaitReplicas(keys[4]);
    } catch (RuntimeException e) {
      throw new TurnstileException(permits + " permit(s) of " + describe + " were acquired, but "
          + e.getMessage() + "; they were given back", e);
    }
  }

  /** Whether the next wait may skip the attempt script: live lease, fresh hint, time left. */
  private boolean blockDirectly(Engine.Call call) {
    long now = System.nanoTime();
    if (hintDeadline - now < TimeUnit.MILLISECONDS.toNanos(2) || call.expired()) {
      return false;
    }
    leaseLock.lock();
    try {
      return lease != null && lease.alive(now);
    } finally {
      leaseLock.unlock();
    }
  }

  /**
   * Blocks in BLMOVE (free list to this client's held list) on {@code conn} for one permit, for
   * at most {@code sliceNanos} (and the caller's deadline).
   *
   * @return true if a permit moved into this client's held list
   */
  private boolean takeOne(BlockingPool.Conn conn, long sliceNanos, Engine.Call call, CompletableFuture<Void> fault,
      int taken) throws InterruptedException {
    long slice = call.timed ? Math.min(sliceNanos, call.remaining()) : sliceNanos;
    if (slice <= 0) {
      engine.pool.release(conn);
      return false;
    }
    int expected = held.get() + taken;
    double seconds = Engine.seconds(slice);
    String token = engine.block(conn,
        c -> c.async().blmove(freeKey, heldKey, LMoveArgs.Builder.leftRight(), seconds),
        slice, call, fault, (late, known) -> {
          if (!known) {
            trimTo(expected);
          } else if (late != null) {
            giveBack(1);
          }
        });
    return token != null;
  }

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

  /** Returns permits this client took but will not keep (they were never counted as held). */
  private void giveBack(int n) {
    op("release", n, "");
  }

  /** If an abandoned attempt turns out to have taken permits, returns them. */
  private void giveBackWhenDone(CompletableFuture<List<Object>> attempt) {
    attempt.whenComplete((r, e) -> {
      if (r != null && (Long) r.get(0) > 0) {
        giveBack((int) (long) (Long) r.get(0));
      }
    });
  }

  /** After a BLMOVE of unknown outcome: return whatever this client holds beyond what it should. */
  private void trimTo(int expected) {
    op("trim", expected, "");
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
    int current;
    do {
      current = held.get();
      if (current < permits) {
        int lost = lostPermits.get();
        if (lost > 0 && lostPermits.compareAndSet(lost, Math.max(0, lost - permits))) {
          throw new LockLostException(name, 0, System.currentTimeMillis(),
              "this client's lease on the semaphore was lost and its permits were given to others");
        }
        throw new IllegalStateException("cannot release " + permits + " permits of " + describe
            + ": this client holds " + current);
      }
    } while (!held.compareAndSet(current, current - permits));
    long sentAt = System.nanoTime();
    String request = engine.newRequestId(); // the same id for a re-send: it gives back only once
    try {
      List<Object> r = engine.release(op("release", permits, "", false, request),
          () -> op("release", permits, "", false, request), leaseEnd(), describe + " release");
      if (r == null) {
        return; // Redis unreachable: it completes when Redis answers, or the lease gives them back
      }
      hint(sentAt, (Long) r.get(2));
      if ((Long) r.get(0) == 0) {
        throw new LockLostException(name, 0, System.currentTimeMillis(),
            "Redis no longer had this client's permits: its lease ran out and they were reclaimed");
      }
    } finally {
      maybeStopLease();
    }
  }

  /** When (nanoTime) this client's liveness lease runs out as far as it knows. */
  private long leaseEnd() {
    leaseLock.lock();
    try {
      long now = System.nanoTime();
      return now + TimeUnit.MILLISECONDS.toNanos(lease == null ? engine.leaseMillis
          : Math.max(0, lease.remainingMillis(now)));
    } finally {
      leaseLock.unlock();
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
    long sentAt = System.nanoTime();
    int moved = (int) (long) (Long) engine.awaitQuietly(op("drain", 0, ""), describe).get(0);
    held.addAndGet(moved);
    ensureLease(sentAt);
    maybeStopLease();
    return moved;
  }

  @Override
  public void reducePermits(int reduction) {
    if (reduction < 0) {
      throw new IllegalArgumentException("reduction must not be negative, was " + reduction);
    }
    engine.checkConnected(describe);
    engine.awaitQuietly(op("reduce", reduction, ""), describe);
  }

  @Override
  public void addPermits(int permits) {
    if (permits < 0) {
      throw new IllegalArgumentException("permits must not be negative, was " + permits);
    }
    engine.checkConnected(describe);
    engine.awaitQuietly(op("add", permits, ""), describe);
  }

  @Override
  public int heldPermits() {
    return held.get();
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
    return "DistributedSemaphore[" + name + ", permits held by this client = " + held.get() + "]";
  }

  // ---------------------------------------------------------------- liveness lease

  /** After a script refreshed this client's liveness key: make sure the watchdog renews it. */
  private void ensureLease(long sentAtNanos) {
    leaseLock.lock();
    try {
      if (lease == null || !lease.alive(System.nanoTime())) {
        lease = new Lease(keys[4], engine.clientId, engine.leaseMillis, 0, "client " + engine.clientId,
            sentAtNanos, this::leaseLost, metrics);
        engine.watchdog.register(lease);
      } else {
        lease.confirmed(sentAtNanos);
      }
    } finally {
      leaseLock.unlock();
    }
  }

  /** With no permit held and nobody waiting, stop renewing; the liveness key then expires. */
  private void maybeStopLease() {
    leaseLock.lock();
    try {
      if (lease != null && held.get() == 0 && waiting.get() == 0) {
        engine.watchdog.unregister(lease);
        lease.end();
        lease = null;
      }
    } finally {
      leaseLock.unlock();
    }
  }

  private void leaseLost(Lease l, String reason) {
    engine.watchdog.unregister(l);
    leaseLock.lock();
    int lost;
    try {
      if (lease == l) {
        lease = null;
      }
      lost = held.getAndSet(0);
      lostPermits.addAndGet(lost);
    } finally {
      leaseLock.unlock();
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
