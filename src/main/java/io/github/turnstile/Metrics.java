package io.github.turnstile;

import java.lang.System.Logger.Level;

/**
 * What Turnstile measures, as seen by the engine and the primitives. The default is {@link #NOOP};
 * {@link MicrometerMetrics} is the implementation used when the application configured a
 * Micrometer registry ({@link TurnstileOptions.Builder#meterRegistry}). That class, and therefore
 * Micrometer, is loaded only then: without a registry nothing here touches a Micrometer type, so
 * Micrometer may be absent from the classpath.
 *
 * <p>Every hook in a hot path is a single call on a {@link Primitive} that the primitive looked up
 * once, when it was created; the no-op versions do nothing.
 */
interface Metrics extends AutoCloseable {
  /** The logger of crashed-holder reclaims (one INFO line each) and lease losses. */
  System.Logger LOG = System.getLogger("io.github.turnstile");

  /** Records nothing. */
  Metrics NOOP = new Metrics() {
    @Override
    public Primitive primitive(String kind, String name) {
      return Primitive.NOOP;
    }

    @Override
    public void close() {}
  };

  /** The recorder of one primitive (kind and name). Every method is cheap and never throws. */
  interface Primitive {
    /** Records nothing. */
    Primitive NOOP = new Primitive() {};

    /** A new hold (not a re-entry) was granted after waiting {@code waitNanos} in all. */
    default void acquired(long waitNanos) {}

    /** A timed or immediate acquisition gave up: its time ran out, or nothing was free. */
    default void timedOut() {}

    /** An acquisition ended with {@link InterruptedException}. */
    default void interrupted() {}

    /** A hold ended (final unlock) after {@code holdNanos}. */
    default void released(long holdNanos) {}

    /** The watchdog renewed one lease of this primitive. */
    default void renewed() {}

    /** A renewal of one lease of this primitive failed (refused, or the command failed). */
    default void renewalFailed() {}

    /** A lease of this primitive was lost while held (the WARNING line of Engine.notifyLost). */
    default void leaseLost() {}

    /** A script reclaimed what {@code holders} crashed holders of this primitive held. */
    default void reclaimed(long holders) {}

    /** Counts an interrupted acquisition; returns the exception for the caller to throw. */
    default InterruptedException interruption() {
      interrupted();
      return new InterruptedException();
    }
  }

  /**
   * @param kind {@code lock}, {@code read}, {@code write} or {@code semaphore}
   * @param name the primitive's name; mapped to a bounded set of tag values
   * @return the recorder for that primitive
   */
  Primitive primitive(String kind, String name);

  @Override
  void close();

  /** The recorder the options ask for: {@link #NOOP} unless a registry is configured. */
  static Metrics create(TurnstileOptions options, String clientId, BlockingPool pool, Watchdog watchdog) {
    Object registry = options.meterRegistry();
    if (registry == null) {
      return NOOP;
    }
    return MicrometerMetrics.create(registry, options.metricsNameLimit(), clientId, pool, watchdog);
  }

  /**
   * Reports a reclaim that a script did: one INFO line, and the reclaim counter. Called rarely
   * (only when a reply says a crashed holder was reclaimed).
   */
  static void reclaimed(Primitive metrics, String describe, long holders) {
    if (holders <= 0) {
      return;
    }
    metrics.reclaimed(holders);
    LOG.log(Level.INFO, "Turnstile reclaimed {0} crashed holder(s) of {1}: their lease ran out"
        + " without a release", Long.toString(holders), describe);
  }
}
