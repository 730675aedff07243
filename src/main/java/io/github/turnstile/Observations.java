package io.github.turnstile;

import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;

/**
 * Micrometer Observations of waits and holds ({@link Telemetry}): {@code turnstile.acquire} around
 * each acquisition, from its call to its outcome, and {@code turnstile.hold} around each hold, from
 * its grant to its release or loss. Low-cardinality keys {@code primitive} (lock, read lock,
 * write lock, semaphore), {@code outcome} and, for waits, {@code tier}; the primitive's name is a
 * high-cardinality key ({@code name}), so a tracer puts it on the span while a metrics handler
 * does not make a time series of it. Loaded only when a registry is set, so that Micrometer (an
 * optional dependency) may be absent; this class's methods take and return {@code Object} for
 * the same reason.
 *
 * <p>An acquisition's observation is started on the calling thread, so the application's current
 * observation (the request's) is its parent; a hold's observation has the same parent.
 */
final class Observations {
  static final String ACQUIRE = "turnstile.acquire";
  static final String HOLD = "turnstile.hold";

  private final ObservationRegistry registry;

  private Observations(ObservationRegistry registry) {
    this.registry = registry;
  }

  static Observations of(Object registry) {
    return new Observations((ObservationRegistry) registry);
  }

  /** A started observation of an acquisition, and the parent its hold gets. */
  private record Started(Observation observation, Observation parent) {}

  /** Starts {@code turnstile.acquire} under the current observation; null if the registry records nothing. */
  Object acquireStarted(String primitive, String name) {
    if (registry.isNoop()) {
      return null;
    }
    Observation parent = registry.getCurrentObservation();
    return new Started(start(ACQUIRE, "turnstile acquire ", primitive, name, parent), parent);
  }

  void acquireEnded(Object started, String outcome, String tier, Throwable error) {
    Observation o = ((Started) started).observation();
    o.lowCardinalityKeyValue("outcome", outcome).lowCardinalityKeyValue("tier", tier);
    if (error != null) {
      o.error(error);
    }
    o.stop();
  }

  /** Starts {@code turnstile.hold} under {@code acquired}'s parent (null: the current observation). */
  Object holdStarted(String primitive, String name, Object acquired) {
    if (registry.isNoop()) {
      return null;
    }
    Observation parent = acquired != null ? ((Started) acquired).parent() : registry.getCurrentObservation();
    return start(HOLD, "turnstile hold ", primitive, name, parent);
  }

  private Observation start(String observation, String contextual, String primitive, String name, Observation parent) {
    Observation o = Observation.createNotStarted(observation, registry)
        .contextualName(contextual + primitive)
        .lowCardinalityKeyValue("primitive", primitive)
        .highCardinalityKeyValue("name", name);
    if (parent != null) {
      o.parentObservation(parent);
    }
    return o.start();
  }

  void holdEnded(Object started, boolean lost) {
    ((Observation) started).lowCardinalityKeyValue("outcome", lost ? "lost" : "released").stop();
  }
}
