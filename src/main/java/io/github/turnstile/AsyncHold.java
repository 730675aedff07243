package io.github.turnstile;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A {@link Hold} as a value: its lease, its release and its loss, apart from Redis (the I/O is an
 * {@link Io}), so that release versus loss can be stress-tested on its own (jcstress:
 * {@code HoldReleaseVersusLossStress}).
 *
 * <p>Release and loss race on the lease: a lock hold's release ends its own {@link Lease}
 * ({@link Lease#end()}) while the watchdog may mark it lost ({@link Lease#lose}); exactly one of
 * them wins. A released hold is never reported lost (unless Redis's answer to the release says
 * it was gone already), and a lost one is reported exactly once and makes the release fail with
 * {@link LockLostException}. A permit hold shares the client's liveness lease; what it may still
 * release is decided by the semaphore's books ({@link RedisSemaphore}).
 */
abstract class AsyncHold implements Hold {
  /** The hold's side of Redis and of the client. */
  interface Io {
    /**
     * Ends the hold in the client's books and sends its release, re-sent after transient
     * failures until answered or the lease would have run out ({@link Releases#retrying}).
     *
     * @param hold the hold being released
     * @param leaseEndNanos when ({@link System#nanoTime()}) the hold's lease runs out at the latest
     * @return completes with true (released, or already released by an earlier copy) or false
     *     (Redis no longer had the hold); completes at once with {@link LockLostException} if the
     *     client knows the hold lost (the release is sent all the same)
     * @throws IllegalStateException if nothing is left to release (nothing is sent)
     */
    CompletableFuture<Boolean> release(AsyncHold hold, long leaseEndNanos);

    /** Whether the connection to Redis is up (a release then waits a little for its answer). */
    boolean connected();

    /** Stops renewing {@code lease} (it was lost). */
    void stopRenewal(Lease lease);

    /** Reports a loss: the WARNING log line, the lease-loss metric and the listeners. */
    void lost(LeaseLostEvent event);
  }

  final String name;
  final Io io;
  final Ticker ticker;
  private final long grantedNanos = System.nanoTime();
  private final AtomicBoolean released = new AtomicBoolean();
  private final CompletableFuture<LeaseLostEvent> lost = new CompletableFuture<>();
  private final CompletionStage<LeaseLostEvent> lostStage = lost.minimalCompletionStage();
  private final CompletableFuture<Void> done = new CompletableFuture<>();
  private final CompletionStage<Void> doneStage = done.minimalCompletionStage();

  AsyncHold(String name, Io io, Ticker ticker) {
    this.name = name;
    this.io = io;
    this.ticker = ticker;
  }

  @Override
  public final String name() {
    return name;
  }

  @Override
  public final CompletionStage<LeaseLostEvent> lost() {
    return lostStage;
  }

  /** Returns whether {@link #release()} was called. */
  final boolean released() {
    return released.get();
  }

  /** Returns how long the hold has been held, in nanoseconds. */
  final long heldNanos() {
    return System.nanoTime() - grantedNanos;
  }

  /** Completes {@link #lost()} (once) and reports the loss. */
  final void reportLost(LeaseLostEvent event) {
    if (lost.complete(event)) {
      endTelemetry(true);
      io.lost(event);
    }
  }

  /** This hold as JFR and the Observations record it (null: nothing records it); set at the grant. */
  volatile Telemetry.Held telemetry;
  /** Where the hold's record ends ({@link Telemetry#holdEnded}); set with {@link #telemetry}. */
  volatile Telemetry recorder;

  /** Starts this hold's record, as {@code t} records (at the grant). */
  final void recordWith(Telemetry t, Inspection.Kind kind, String describe, long token, int permits,
      Telemetry.Wait acquired) {
    Telemetry.Held h = t.holdStarted(kind, describe, name, token, permits, acquired);
    if (h != null) {
      recorder = t;
      telemetry = h;
    }
  }

  /** Ends this hold's record, once: released, or lost. */
  private void endTelemetry(boolean byLoss) {
    Telemetry.Held h = telemetry;
    if (h != null) {
      telemetry = null;
      recorder.holdEnded(h, byLoss);
    }
  }

  /** Returns the lease whose end decides between release and loss. */
  abstract Lease lease();

  /**
   * Ends the lease at release: false if it was already lost. A lock hold ends its own lease; a
   * permit hold does not own its lease (the ledger decides, see {@link Io#release}).
   */
  abstract boolean endLease();

  /** Returns the loss as the release reports it. */
  abstract LockLostException lostException(String reason);

  @Override
  public final CompletionStage<Void> release() {
    releaseOnce();
    return doneStage;
  }

  @Override
  public final void close() {
    if (!releaseOnce() || !done.isCompletedExceptionally()) {
      return;
    }
    try {
      done.join();
    } catch (CompletionException | CancellationException e) {
      Throwable cause = Engine.unwrap(e);
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      throw e;
    }
  }

  /**
   * The release, once.
   *
   * @return true if this call released (false: an earlier call did)
   */
  private boolean releaseOnce() {
    if (!released.compareAndSet(false, true)) {
      return false;
    }
    endTelemetry(false); // on the releasing thread (a thread's final unlock: its own)
    Lease l = lease();
    long leaseEnd = System.nanoTime() + (l == null ? 0
        : TimeUnit.MILLISECONDS.toNanos(Math.max(0, l.remainingMillis(ticker.read()))));
    CompletableFuture<Boolean> outcome;
    try {
      outcome = io.release(this, leaseEnd);
    } catch (RuntimeException e) {
      done.completeExceptionally(e); // nothing was sent (e.g. the permits were released elsewhere)
      return true;
    }
    if (!endLease()) {
      // lost before this release: the release was sent anyway (never harmful: it checks the request)
      done.completeExceptionally(lostException(l.lostReason()));
      return true;
    }
    if (outcome.isCompletedExceptionally()) {
      Throwable cause = Engine.unwrap(outcome.handle((v, e) -> e).join());
      if (Engine.isTransient(cause)) {
        done.complete(null); // given up at once (the client is closed): Redis frees the hold when its lease runs out
      } else {
        done.completeExceptionally(cause);
      }
      return true;
    }
    CompletableFuture<Boolean> timer = io.connected() ? Timer.after(Releases.RELEASE_PATIENCE_NANOS) : null;
    if (timer != null) {
      timer.thenAccept(fired -> {
        if (fired) {
          done.complete(null); // Redis is slow or gone: the release completes in the background
        }
      });
    } else {
      done.complete(null); // Redis is unreachable: finish locally; the release follows when it answers
    }
    outcome.whenComplete((ok, e) -> {
      Timer.cancel(timer);
      if (e != null) {
        Throwable cause = Engine.unwrap(e);
        if (cause instanceof LockLostException) {
          done.completeExceptionally(cause);
        } else if (!Engine.isTransient(cause)) {
          done.completeExceptionally(Engine.failure("release of a hold on '" + name + "'", cause));
        } else {
          done.complete(null); // given up after the lease ran out: Redis freed the hold anyway
        }
        return;
      }
      if (ok) {
        done.complete(null);
        return;
      }
      LeaseLostEvent event = new LeaseLostEvent(name, l == null ? 0 : l.token, l == null ? "" : l.holder, "Redis no longer had this hold when"
          + " its release arrived: the lease had expired or was taken over", System.currentTimeMillis());
      reportLost(event);
      done.completeExceptionally(lostException(event.reason()));
    });
    return true;
  }

  // ================================================================ lock holds

  /** A hold on a lock, or on one side of a read/write lock: its own lease and fencing token. */
  static final class Lock extends AsyncHold implements LockHold, Lease.LossHandler {
    private final Lease lease;

    /**
     * @param key the lease key (renewed by the watchdog once registered)
     * @param sentAtNanos {@link Ticker} time read before the acquiring attempt was sent
     */
    Lock(String name, Io io, Ticker ticker, String key, String request, long leaseMillis, long token, String holder,
        long sentAtNanos, Metrics.Primitive metrics) {
      super(name, io, ticker);
      this.lease = new Lease(key, request, leaseMillis, token, holder, sentAtNanos, this, metrics);
    }

    @Override
    Lease lease() {
      return lease;
    }

    @Override
    boolean endLease() {
      return lease.end();
    }

    @Override
    LockLostException lostException(String reason) {
      return new LockLostException(name, lease.token, lease.lostAtMillis == 0 ? System.currentTimeMillis()
          : lease.lostAtMillis, reason);
    }

    /** Called once by the lease when it is lost while held (watchdog, or a liveness check). */
    @Override
    public void leaseLost(Lease l, String reason) {
      io.stopRenewal(l);
      reportLost(new LeaseLostEvent(name, l.token, l.holder, reason, l.lostAtMillis));
    }

    @Override
    public boolean isValid() {
      return !released() && lease.alive(ticker.read());
    }

    @Override
    public long fencingToken() {
      if (released()) {
        throw new IllegalStateException("this hold on '" + name + "' was released");
      }
      if (!lease.alive(ticker.read())) {
        throw lostException(lease.lostReason());
      }
      return lease.token;
    }

    @Override
    public String toString() {
      return "LockHold[" + name + ", token " + lease.token + (released() ? ", released]"
          : lease.lostReason() != null ? ", lost]" : "]");
    }
  }

  // ================================================================ permit holds

  /**
   * Permits of a semaphore, counted among the client's under the liveness lease {@code under}
   * (the lease that was live when they were counted).
   */
  static final class Permits extends AsyncHold implements PermitHold {
    private final int permits;
    private final Lease under;

    Permits(String name, Io io, Ticker ticker, int permits, Lease under) {
      super(name, io, ticker);
      this.permits = permits;
      this.under = under;
    }

    @Override
    Lease lease() {
      return under;
    }

    @Override
    boolean endLease() {
      return true; // the ledger knows whether these permits were lost (Io.release fails at once then)
    }

    @Override
    LockLostException lostException(String reason) {
      return new LockLostException(name, 0, System.currentTimeMillis(), reason);
    }

    @Override
    public int permits() {
      return permits;
    }

    @Override
    public boolean isValid() {
      return !released() && (under == null || under.alive(ticker.read()));
    }

    /** The client's liveness lease was lost: if it is the one these permits count under, they are lost. */
    void livenessLost(LeaseLostEvent event) {
      if (!released() && under != null && !under.alive(ticker.read())) {
        reportLostQuietly(new LeaseLostEvent(name, 0, event.holder(), event.reason(), event.lostAtMillis()));
      }
    }

    @Override
    public String toString() {
      return "PermitHold[" + name + ", " + RedisSemaphore.permits(permits) + (released() ? ", released]" : "]");
    }
  }

  /** Completes {@link #lost()} without reporting (the semaphore reported the loss already). */
  final void reportLostQuietly(LeaseLostEvent event) {
    lost.complete(event);
  }
}
