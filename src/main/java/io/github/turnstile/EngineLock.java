package io.github.turnstile;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What the locks whose every acquisition is an {@link AsyncAcquisition} at their gate share: a
 * {@link RedisLock} (and the write side of a read/write lock) and the read side of a read/write lock.
 */
abstract class EngineLock implements DistributedLock {
  final Engine engine;
  final Metrics.Primitive metrics;
  private final CopyOnWriteArrayList<LeaseLossListener> listeners = new CopyOnWriteArrayList<>();

  EngineLock(Engine engine, Metrics.Primitive metrics) {
    this.engine = engine;
    this.metrics = metrics;
  }

  /** Returns this lock's gate, creating it on first use. */
  abstract AsyncGate<LockHold> gate();

  /**
   * A thread's acquisition (re-entry, or a new one that parks on the gate); granted, the thread
   * owns the hold.
   *
   * @return false if the call timed out
   */
  abstract boolean acquire(Call call) throws InterruptedException;

  @Override
  public void lock() {
    try {
      acquire(Call.untimed(false));
    } catch (InterruptedException e) {
      throw new AssertionError("uninterruptible acquire was interrupted", e);
    }
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    if (Thread.interrupted()) {
      throw metrics.interruption();
    }
    acquire(Call.untimed(true));
  }

  @Override
  public CompletableFuture<LockHold> lockAsync() {
    return gate().acquire(Call.untimed(false), 1);
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
