package io.github.turnstile;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What the locks whose every acquisition is an {@link AsyncAcquisition} at their gate share: a
 * {@link RedisLock} (and the write side of a read/write lock) and the read side of a read/write lock.
 */
abstract class EngineLock implements DistributedLock {
  final Engine engine;
  final Metrics.Primitive metrics;
  private final CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();
  /** This JVM's acquisitions of the lock, threads' and futures' (created on first use; see {@link AsyncGate}). */
  private final AtomicReference<AsyncGate<LockHold>> gate = new AtomicReference<>();

  EngineLock(Engine engine, Metrics.Primitive metrics) {
    this.engine = engine;
    this.metrics = metrics;
  }

  /** The Redis operations of this lock's acquisitions. */
  abstract AcquisitionSide<LockHold> asyncSide();

  /** Returns this lock's gate, creating it on first use. */
  final AsyncGate<LockHold> gate() {
    return AsyncSides.gate(gate, engine, this::asyncSide);
  }

  /** Returns this lock's gate, or null if no acquisition was made yet. */
  final AsyncGate<LockHold> asyncGate() {
    return gate.get();
  }

  /** Describes this lock's gate when it is not idle (for diagnostics in tests), else null. */
  final String gateState() {
    AsyncGate<LockHold> g = gate.get();
    return g == null ? null : g.describe();
  }

  /**
   * A thread's acquisition (re-entry, or a new one that parks on the gate); granted, the thread
   * owns the hold.
   *
   * @return false if the call timed out
   */
  abstract boolean acquire(Call call) throws InterruptedException;

  @Override
  public void lock() {
    Waits.uninterruptible(() -> acquire(Call.untimed(false)));
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    acquire(Call.untimed(true));
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    long deadline = Waits.deadline(time, unit);
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    return acquireOrStretch(Call.until(deadline));
  }

  /**
   * {@link #acquire}, and again if {@code call} was refused by another client's cached lock grant
   * ({@link Call#afterCacheRefusal}: a plain lock's only).
   */
  final boolean acquireOrStretch(Call call) throws InterruptedException {
    if (acquire(call)) {
      return true;
    }
    Call more = call.afterCacheRefusal();
    return more != null && acquire(more);
  }

  @Override
  public CompletableFuture<LockHold> lockAsync() {
    return gate().acquire(Call.untimed(false), 1);
  }

  @Override
  public CompletableFuture<LockHold> tryLockAsync(long time, TimeUnit unit) {
    return gate().acquire(Call.until(Waits.deadline(time, unit), false), 1);
  }

  /** Returns the listeners told of a lost lease: the options' and this lock's. */
  List<LeaseLossListener> lossListeners() {
    List<LeaseLossListener> all = new ArrayList<>(engine.options.leaseLossListeners());
    all.addAll(listeners);
    return all;
  }

  @Override
  public void addLeaseLossListener(LeaseLossListener listener) {
    listeners.add(Objects.requireNonNull(listener, "listener"));
  }

  @Override
  public void removeLeaseLossListener(LeaseLossListener listener) {
    listeners.remove(listener);
  }
}
