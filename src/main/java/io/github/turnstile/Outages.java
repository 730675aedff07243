package io.github.turnstile;

import java.util.concurrent.TimeUnit;

/**
 * The outage clock of one client ({@link Engine}): since when its calls have found Redis
 * unreachable, and what an outage costs a call. A timed call waits through an outage until its
 * deadline; an untimed one gives up after {@link TurnstileOptions#outageTolerance()} of it,
 * counted from when this client lost Redis (see {@link #unreachable}), and any answer from Redis
 * ({@link #reached}) ends the outage.
 */
final class Outages {
  /** An untimed call gave up: Redis was unreachable for longer than the outage tolerance. */
  static final class OutOfTolerance extends TurnstileException {
    private static final long serialVersionUID = 1L;

    OutOfTolerance(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private final long outageToleranceNanos;
  /** Guards {@link #lostSinceNanos}: since when the calls have found Redis unreachable, while {@link #redisLost}. */
  private final java.util.concurrent.locks.ReentrantLock lostLock = new java.util.concurrent.locks.ReentrantLock();
  private long lostSinceNanos;
  private volatile boolean redisLost;

  /** Acquisitions waiting in Redis, and leases renewed: what rode through an outage, at its end (JFR). */
  private final java.util.function.IntSupplier waits;
  private final java.util.function.IntSupplier holds;
  /** The outage's JFR event while it lasts (null: none, or JFR does not record it); guarded by lostLock. */
  private Telemetry.OutageEvent event;
  private String cause;

  Outages(TurnstileOptions options, java.util.function.IntSupplier waits, java.util.function.IntSupplier holds) {
    this.waits = waits;
    this.holds = holds;
    this.outageToleranceNanos = options.outageTolerance().toNanos();
  }

  /**
   * Returns when {@code call}'s outage clock starts, first finding Redis unreachable since
   * {@code sinceNanos}: when this client lost Redis (the earliest such finding of any call since
   * Redis last answered), or the call's start if later, never after {@code sinceNanos}. So a call
   * that only now looks (an async acquisition that just became its gate's head, a thread that just
   * got its turn) counts the outage it has already waited through, and a queue of untimed calls
   * fails after one tolerance, not one tolerance per call ahead of it.
   */
  private long outageStart(Call call, long sinceNanos, String what) {
    return Locks.locked(lostLock, () -> {
      if (!redisLost) {
        redisLost = true;
        lostSinceNanos = sinceNanos;
        event = Telemetry.outageStarted();
        cause = what;
        return sinceNanos;
      }
      if (sinceNanos - lostSinceNanos < 0) {
        lostSinceNanos = sinceNanos;
      }
      long start = lostSinceNanos - call.startNanos >= 0 ? lostSinceNanos : call.startNanos;
      return start - sinceNanos <= 0 ? start : sinceNanos;
    });
  }

  /** Redis answered: a later outage starts its own clock. */
  void reached() {
    if (redisLost) {
      Telemetry.OutageEvent e;
      String what;
      lostLock.lock();
      try {
        redisLost = false;
        e = event;
        what = cause;
        event = null;
      } finally {
        lostLock.unlock();
      }
      if (e != null) {
        Telemetry.outageEnded(e, what, waits.getAsInt(), holds.getAsInt());
      }
    }
  }

  /**
   * Records that Redis is unreachable for {@code call} since {@code sinceNanos} (the start of the
   * stretch, if it began earlier); an untimed call that has waited through more than
   * {@link TurnstileOptions#outageTolerance()} of it gives up.
   *
   * @throws TurnstileException when an untimed call's outage tolerance is used up
   */
  void unreachable(Call call, long sinceNanos, String what, Throwable cause) {
    if (!call.unreachable) {
      call.unreachable = true;
      call.unreachableSince = outageStart(call, sinceNanos, what);
    }
    long down = System.nanoTime() - call.unreachableSince;
    if (!call.timed && down >= outageToleranceNanos) {
      throw new OutOfTolerance(what + ": Redis has been unreachable for "
          + TimeUnit.NANOSECONDS.toMillis(down) + " ms, longer than the outage tolerance ("
          + TimeUnit.NANOSECONDS.toMillis(outageToleranceNanos) + " ms)" + (cause == null ? "" : ": " + cause), cause);
    }
  }
}
