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

/**
 * {@link DistributedSemaphore} on the shared {@link Engine} and {@code semaphore.lua}: free permits
 * are a counter plus a few hand-off tokens that waiters {@code BLMOVE} into this client's inflight
 * list; held permits are a counter per client. No script's work grows with the permits involved.
 *
 * <p><b>Accounting</b> ({@link PermitLedger}). The local count ({@link #heldPermits()}) must never
 * exceed what Redis attributes to this client while its liveness lease is valid: that would admit more holders than
 * the capacity. So a permit is counted only when a reply says Redis moved it to this client under
 * the lease the client holds now (a late {@code BLMOVE} after a lease loss is not counted).
 * Whatever leaves the count uncertain (a lost reply, a discarded blocking connection, a late
 * token, a lease loss, a release that could not be completed) asks for a reconciliation,
 * {@code trim}, which carries the range Redis may rightly attribute to this client: at least
 * what it counts ({@code low}), at most that plus what its commands in flight may still add or
 * have not yet given back ({@code high}). Redis gives back the excess above {@code high}, and
 * reports a shortfall below {@code low} (those permits were reclaimed: the lease is lost). Counts
 * and in-flight sums change under the ledger's lock; scripts run in the order they are sent (one
 * main connection), and a {@code BLMOVE} does not start while a trim is in flight, so no command
 * the range leaves out can run before the trim.
 */
final class RedisSemaphore extends DistributedSemaphore {
  private static final long serialVersionUID = 1L;

  final transient Engine engine;
  private final String name;
  private final int initialPermits;
  final String describe;
  private final String prefix;
  private final String[] keys;
  private final String inflightKey;
  private final String handoffKey;
  final String channel;
  /** Serializes the one client at a time that may collect permits one by one. */
  private final transient RedisLock collector;
  final transient Metrics.Primitive metrics;
  final AtomicInteger waiting = new AtomicInteger();
  final transient CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** The count, the liveness lease and the reconciliation state (no Redis in it). */
  private final transient PermitLedger ledger;
  /** After a recovery (a failover may have lost releases): reconcile with what Redis records. */
  private final transient Runnable reconcileOnRecovery = () -> ledger().recovered();
  /**
   * Until when (this JVM's ticker) a waiter may block before it runs a script again: the send
   * time of the latest reply plus its wait hint (see semaphore.lua's hint()). A waiter blocks in
   * BLMOVE only after a script found no free permit, so every permit freed later is a token on
   * the hand-off list, which a blocked BLMOVE takes at once.
   */
  private volatile long hintDeadline;
  /** This JVM's asynchronous acquisitions of permits (created on first use; see {@link AsyncGate}). */
  private final transient java.util.concurrent.atomic.AtomicReference<AsyncGate<PermitHold>> async =
      new java.util.concurrent.atomic.AtomicReference<>();

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
    this.ledger = new PermitLedger(new PermitLedger.Io() {
      @Override
      public CompletableFuture<long[]> trim(long low, long high, long seq) {
        // bounded: a trim queued for a dead Cluster master's connection must not hold up the
        // acquires and BLMOVEs that wait for it (a due trim is sent again, with a higher seq)
        return RedisSemaphore.this.trim(low, high, seq)
            .thenApply(r -> new long[] {(Long) r.get(0), (Long) r.get(1), (Long) r.get(2)})
            .orTimeout(engine.options.commandTimeout().toMillis(), TimeUnit.MILLISECONDS);
      }

      @Override
      public boolean connected() {
        return engine.connected();
      }

      @Override
      public Lease newLease(long sentAtNanos) {
        Lease l = new Lease(keys[4], engine.clientId, engine.leaseMillis, 0, "client " + engine.clientId,
            sentAtNanos, RedisSemaphore.this::leaseLost, metrics);
        engine.watchdog.register(l);
        return l;
      }

      @Override
      public void stopLease(Lease l) {
        engine.watchdog.unregister(l);
      }

      @Override
      public void watchRecoveries(boolean on) {
        engine.onRecovery(reconcileOnRecovery, on);
      }
    }, () -> engine.ticker.read());
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
  CompletableFuture<List<Object>> op(String op, int n, String mode, boolean subscribed, String request) {
    return engine.<List<Object>>eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, op, engine.clientId,
        Long.toString(engine.leaseMillis), prefix, Integer.toString(initialPermits),
        Integer.toString(n), mode, request, subscribed ? "1" : "0", channel, engine.publishCommand())
        .thenApply(this::reclaims);
  }

  private List<Object> reclaims(List<Object> reply) {
    Metrics.reclaimed(metrics, describe, (Long) reply.get(reply.size() - 1));
    return reply.subList(0, reply.size() - 1);
  }

  PermitLedger ledger() {
    return ledger;
  }

  @Override
  public String name() {
    return name;
  }

  // ---------------------------------------------------------------- accounting (see PermitLedger)

  private CompletableFuture<List<Object>> trim(long low, long high, long seq) {
    return engine.<List<Object>>eval(Script.SEMAPHORE, ScriptOutputType.MULTI, keys, "trim", engine.clientId,
        Long.toString(engine.leaseMillis), prefix, Integer.toString(initialPermits),
        Long.toString(low), Long.toString(high), "", Long.toString(seq), channel, engine.publishCommand())
        .thenApply(this::reclaims);
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
      if (!settleFirstQuietly()) {
        metrics.timedOut();
        return false;
      }
      long sentAt = now();
      ledger.track(permits);
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
        if (!ledger.countScript(taken, sentAt)) {
          giveBack(taken); // not countable (no live lease): they go back
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
        ledger.untrack(permits, uncertain);
      }
    } finally {
      waiting.decrementAndGet();
      gateExit();
      ledger.stopIfIdle(waiting.get() == 0);
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

  /**
   * {@code tryAcquire()}'s settling: waits for a trim in flight (one round trip, bounded by the
   * command timeout as any command of {@code tryAcquire()} is), keeping an interrupt.
   */
  private boolean settleFirstQuietly() {
    try {
      return ledger.settleFirst(engine.options.commandTimeout().toNanos(), false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible wait was interrupted", e);
    }
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
      ledger.stopIfIdle(waiting.get() == 0);
    }
  }

  private boolean collect(int permits, Engine.Call call) throws InterruptedException {
    PermitLedger.Collection got = ledger.collection();
    boolean collecting = false;
    boolean success = false;
    boolean pubsub = false;
    Subscriptions.Sub sub = null;
    try {
      while (true) {
        if (got.lost()) {
          got = ledger.collection(); // a lease loss voided what was collected: start again
        }
        if (got.taken() == permits) {
          if (!acknowledged(permits, call, got)) {
            got = ledger.collection();
            if (call.expired()) {
              return false;
            }
            continue;
          }
          if (got.complete()) {
            success = true;
            return true;
          }
          continue; // a lease loss voided them meanwhile: collect again
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
        if (!ledger.settleFirst(call.remaining(), call.interruptible)) {
          continue; // past the deadline while a trim was in flight: the loop ends the call
        }
        long sentAt = now();
        int asked = permits - got.taken();
        ledger.track(asked);
        boolean uncertain = false;
        List<Object> r;
        try {
          String mode = collecting ? "some" : "all";
          String request = engine.newRequestId();
          CompletableFuture<List<Object>> f = op("acquire", asked, mode, sub != null, request);
          try {
            r = engine.awaitReply(f, call, describe);
          } catch (Engine.DeadlinePassed e) {
            giveBackWhenDone(f, asked, mode, request);
            asked = 0; // tracked until its reply, by giveBackWhenDone
            return false;
          } catch (Engine.Retry e) {
            // it may have taken permits (or still run, if unanswered): what it took goes back,
            // and if its outcome stays unknown a reconciliation settles it
            giveBackWhenDone(f, asked, mode, request);
            asked = 0;
            if (!engine.pauseUnlessExpired(call)) {
              return false;
            }
            continue;
          } catch (InterruptedException | RuntimeException e) {
            giveBackWhenDone(f, asked, mode, request);
            asked = 0;
            throw e;
          }
          int t = taken(r, permits);
          if (t > 0 ? !got.addScript(t, sentAt) : refreshed(sentAt)) {
            giveBack(t); // taken while a lease loss voided this collection: they go back
          }
          hint(sentAt, (Long) r.get(1));
        } finally {
          ledger.untrack(asked, uncertain);
        }
        if (got.taken() == permits) {
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
        int back = got.abandon();
        if (back > 0) {
          giveBack(back);
        }
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
      throw notReplicated(permits, e);
    }
  }

  private TurnstileException notReplicated(int permits, RuntimeException e) {
    return new TurnstileException(permits + " permit(s) of " + describe + " were acquired, but "
        + e.getMessage() + "; they were given back", e);
  }

  /**
   * As {@link #confirmReplicated} for a waiting call. A fault that cuts the acknowledgement itself
   * (a failover resets the connection to the primary, no reply comes) leaves the permits' fate
   * unknown: the primary serving now may have them or not (lost with the old one). They stop
   * counting ({@code got} is abandoned) and a reconciliation gives back whatever Redis attributes
   * to this client beyond what it counts; not a give-back of n, which, where they were lost, would
   * free permits that other threads of this client hold. The fault counts against the call like
   * an outage (its deadline, or its outage tolerance) and the caller collects again. Only an
   * answer (too few replicas, a refusal) fails the call with the permits given back.
   *
   * @return true if acknowledged; false if the acknowledgement was cut by a fault
   * @throws TurnstileException if the replicas did not acknowledge or the acknowledgement was
   *     refused (the caller gives the permits back), or an untimed call's outage tolerance ran out
   */
  private boolean acknowledged(int permits, Engine.Call call, PermitLedger.Collection got) {
    try {
      engine.awaitReplicas(keys[4]);
      return true;
    } catch (RuntimeException e) {
      if (!Engine.cutsAcknowledgement(e)) {
        throw notReplicated(permits, e);
      }
      got.abandon();
      ledger.reconcile();
      engine.unreachable(call, System.nanoTime(), describe + " (replica acknowledgement)", e);
      return false;
    }
  }

  /**
   * Blocks in BLMOVE (hand-off list to this client's inflight list) on {@code conn} for one
   * permit, for at most {@code sliceNanos} (and the caller's deadline). A token counts for
   * {@code got} only if the lease under which the BLMOVE was sent is still this client's live
   * lease; otherwise, or if the outcome is unknown, a reconciliation gives it back.
   */
  private void takeOne(BlockingPool.Conn conn, long sliceNanos, Engine.Call call, CompletableFuture<Void> fault,
      PermitLedger.Collection got) throws InterruptedException {
    long slice = call.timed ? Math.min(sliceNanos, call.remaining()) : sliceNanos;
    if (slice <= 0) {
      engine.pool.release(conn);
      return;
    }
    Lease under = ledger.lease();
    double seconds = Engine.seconds(slice);
    CompletableFuture<Void> stale = ledger.beginMove(slice, call.interruptible);
    if (stale == null) {
      engine.pool.release(conn); // a trim still in flight: the caller's loop looks again
      return;
    }
    // abandoned on a recovery event, and when a trim comes back ambiguous while it blocks (see
    // PermitLedger.beginMove): the caller's loop then acquires by script, after the next trim
    String token = engine.block(conn,
        c -> c.async().blmove(handoffKey, inflightKey, LMoveArgs.Builder.leftRight(), seconds),
        slice, call, CompletableFuture.anyOf(fault, stale), (late, known) -> {
          // the wait was abandoned: a token it took after all is not counted, and goes back
          if (known && late != null) {
            giveBack(1);
          }
          ledger.endMove(stale, !known);
        });
    if (token != null) {
      try {
        if (!got.addMove(under)) {
          giveBack(1); // taken under a lease that is gone: not counted, so it goes back
        }
      } finally {
        ledger.endMove(stale, false); // whatever happens: a move left registered would hold every trim's range open
      }
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
  void giveBack(int n) {
    ledger.track(n);
    // Sent again (same request id: Redis gives them back once) when unanswered for the command
    // timeout or on a recovery event, as a release is. A single copy can wait for good: on a
    // Cluster, one queued for a dead master's connection gets no reply, and while it is tracked
    // every trim stays ambiguous, so the permit stayed stranded with its client alive (the fault
    // loop with replicaAcks found every permit stranded that way, FailoverTest reproduces it).
    String request = engine.newRequestId();
    engine.retrying(() -> op("release", n, "", false, request), ledger.leaseEnd(engine.leaseMillis))
        .whenComplete((r, e) -> ledger.untrack(n, e != null));
  }

  /**
   * An acquire still in flight ({@code asked} tracked) that the caller gave up on: returns what it
   * took. Unanswered for the command timeout (or on a recovery event), the same request is sent
   * again: a copy that finds the first one ran gets its stored reply, otherwise it runs now; either
   * way its reply says what to give back, so nothing stays tracked for good (see {@link #giveBack}).
   */
  private void giveBackWhenDone(CompletableFuture<List<Object>> attempt, int asked, String mode, String request) {
    engine.retrying(new RedisLock.First<>(attempt, () -> op("acquire", asked, mode, false, request)),
        ledger.leaseEnd(engine.leaseMillis)).whenComplete((r, e) -> {
          if (e == null && (Long) r.get(0) > 0) {
            giveBack((int) (long) (Long) r.get(0));
          }
          ledger.untrack(asked, e != null);
        });
  }

  // ---------------------------------------------------------------- asynchronous acquisition

  @Override
  public CompletableFuture<PermitHold> acquireAsync(int permits) {
    checkPermits(permits);
    return acquireAsync(permits, Engine.Call.untimed(false));
  }

  @Override
  public CompletableFuture<PermitHold> tryAcquireAsync(int permits, long timeout, TimeUnit unit) {
    long deadline = Waits.deadline(timeout, unit);
    checkPermits(permits);
    return acquireAsync(permits, Engine.Call.until(deadline, false));
  }

  private CompletableFuture<PermitHold> acquireAsync(int permits, Engine.Call call) {
    AsyncGate<PermitHold> gate = AsyncSides.gate(async, engine, () -> new AsyncSides.PermitSide(this));
    if (permits == 0) {
      return CompletableFuture.completedFuture(((AsyncSides.PermitSide) gate.side()).none());
    }
    return gate.acquire(call, permits);
  }

  /**
   * Returns the async gate's side, creating the gate if needed (for tests).
   *
   * @return the async gate's side
   */
  AsyncSides.PermitSide asyncSide() {
    return (AsyncSides.PermitSide) AsyncSides.gate(async, engine, () -> new AsyncSides.PermitSide(this)).side();
  }

  /**
   * Returns this client's liveness key on the semaphore.
   *
   * @return this client's liveness key on the semaphore
   */
  String aliveKey() {
    return keys[4];
  }

  // ---------------------------------------------------------------- release

  @Override
  public void release() {
    release(1);
  }

  /**
   * Returns {@code permits} permits. The count drops at once. If this client's lease was lost,
   * the permits lost with it are released first and the caller hears of the loss: for them a
   * reconciliation gives back whatever Redis still attributes to this client beyond what it counts,
   * never a permit another thread acquired since. If Redis is unreachable, the release completes in
   * the background (same request id, so a re-send gives back once).
   */
  @Override
  public void release(int permits) {
    checkPermits(permits);
    if (permits == 0) {
      return;
    }
    int send = ledger.release(permits, describe);
    LockLostException lost = send == permits ? null : new LockLostException(name, 0, System.currentTimeMillis(),
        "this client's lease on the semaphore was lost and its permits were given to others");
    if (send == 0) {
      ledger.stopIfIdle(waiting.get() == 0);
      throw lost;
    }
    long sentAt = now();
    String request = engine.newRequestId(); // the same id for a re-send: it gives back only once
    CompletableFuture<List<Object>> done = engine.retrying(() -> op("release", send, "", false, request),
        ledger.leaseEnd(engine.leaseMillis));
    done.whenComplete((r, e) -> ledger.untrack(send, e != null));
    try {
      List<Object> r = engine.release(done, describe + " release");
      if (r == null) {
        // Redis unreachable or slow: it completes in the background; if it then finds fewer
        // permits than released, they had been reclaimed: say so
        done.thenAccept(late -> {
          if ((Long) late.get(0) < send) {
            metrics.leaseLost();
            List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
            all.addAll(listeners);
            engine.notifyLost(new LeaseLostEvent(name, 0, "client " + engine.clientId, "Redis no longer had "
                + send + " permit(s) of this client when its release arrived: they had been reclaimed",
                System.currentTimeMillis()), all);
          }
        });
      } else {
        hint(sentAt, (Long) r.get(2));
        if ((Long) r.get(0) < send && lost == null) {
          lost = new LockLostException(name, 0, System.currentTimeMillis(),
              "Redis no longer had this client's permits: its lease ran out and they were reclaimed");
        }
      }
      if (lost != null) {
        throw lost;
      }
    } finally {
      ledger.stopIfIdle(waiting.get() == 0);
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
    ledger.beginDrain();
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
      if (moved > 0 ? !ledger.countScript(moved, sentAt) : refreshed(sentAt)) {
        giveBack(moved);
        return 0;
      }
      return moved;
    } finally {
      ledger.endDrain(uncertain);
      ledger.stopIfIdle(waiting.get() == 0);
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
    return ledger.held();
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

  /** A script refreshed this client's liveness (it took nothing): keep the lease going. Always false. */
  private boolean refreshed(long sentAtNanos) {
    ledger.refreshed(sentAtNanos);
    return false;
  }

  private void leaseLost(Lease l, String reason) {
    int lost = ledger.lose(l);
    if (lost > 0) {
      metrics.leaseLost();
      List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
      all.addAll(listeners);
      engine.notifyLost(new LeaseLostEvent(name, 0, l.holder, reason + " (" + lost + " permits)",
          l.lostAtMillis), all);
    }
  }
}
