package io.github.turnstile;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Threshold;

/**
 * What waits, holds, lease losses and outages look like to the tools Java teams open: JDK Flight
 * Recorder events (defined here; {@code jdk.jfr} is in every JDK 11+ runtime, so no dependency),
 * recorded when a recording enables them, and Micrometer Observations ({@link Observations}, when
 * an {@code ObservationRegistry} is set), which a tracer turns into spans under the request.
 *
 * <p><b>Cost.</b> With no recording and no registry, a wait costs one check of whether the wait
 * event is enabled ({@link Event#isEnabled()} on an event that does not escape, which the JIT
 * removes) and nothing else: no allocation, no clock read beyond the engine's own. An event is
 * created only when JFR records it.
 *
 * <p><b>Threads.</b> A thread's wait and hold are committed on that thread (JFR records the
 * committing thread as the event's thread): the wait when the thread returns from its park, the
 * hold at its final unlock.
 */
final class Telemetry {
  /**
   * Whether the runtime has JDK Flight Recorder ({@code jdk.jfr}): every JDK does, but a runtime
   * image made with {@code jlink} may leave the module out, and then no event class is loaded.
   */
  private static final boolean JFR_PRESENT = ModuleLayer.boot().findModule("jdk.jfr").isPresent();

  /** JFR only: no Observation registry. */
  static final Telemetry JFR = new Telemetry(null);

  /** The Observation side, or null. */
  private final Observations observations;

  private Telemetry(Observations observations) {
    this.observations = observations;
  }

  /**
   * Returns the telemetry of a Turnstile: JFR events, and Observations in {@code registry} (an
   * {@code io.micrometer.observation.ObservationRegistry}) if it is not null.
   */
  static Telemetry create(Object registry) {
    return registry == null ? JFR : new Telemetry(Observations.of(registry));
  }

  // ---------------------------------------------------------------- waits

  /** One acquisition's wait, begun at its start: what JFR and the Observation record of it. */
  static final class Wait {
    final WaitEvent event;
    final Object observation;
    final String primitive;
    final String name;
    final int permits;
    /** The farthest tier the wait went to ("list", "pub/sub", "local hand-off"): see {@link WaitEvent#tier}. */
    volatile String tier = "none";
    /** The holder in the way, as last seen (an owner id; "" if not known). */
    volatile String holder = "";

    Wait(WaitEvent event, Object observation, String primitive, String name, int permits) {
      this.event = event;
      this.observation = observation;
      this.primitive = primitive;
      this.name = name;
      this.permits = permits;
    }
  }

  /**
   * Starts recording an acquisition's wait, or returns null if nothing records it (JFR does not
   * record the wait event, and no Observation registry is set).
   *
   * @param kind the primitive's kind, or null (recorded as "other")
   */
  Wait waitStarted(Inspection.Kind kind, String describe, String name, int permits) {
    if (!JFR_PRESENT && observations == null) {
      return null;
    }
    WaitEvent probe = JFR_PRESENT ? new WaitEvent() : null;
    boolean jfr = probe != null && probe.isEnabled();
    Object observation = observations == null ? null : observations.acquireStarted(primitive(kind, describe), name);
    if (!jfr && observation == null) {
      return null;
    }
    if (jfr) {
      probe.begin();
    }
    return new Wait(jfr ? probe : null, observation, primitive(kind, describe), name, permits);
  }

  /**
   * Ends the wait {@code w} (null: nothing to do) with {@code outcome}: "acquired", "timed out",
   * "interrupted", "cancelled" or "failed". Commits the JFR event on the calling thread.
   */
  void waitEnded(Wait w, String outcome, Throwable error) {
    if (w == null) {
      return;
    }
    WaitEvent e = w.event;
    if (e != null) {
      e.end();
      if (e.shouldCommit()) {
        e.primitive = w.primitive;
        e.name = w.name;
        e.permits = w.permits;
        e.outcome = outcome;
        e.tier = w.tier;
        e.holder = w.holder;
        e.commit();
      }
    }
    if (w.observation != null) {
      observations.acquireEnded(w.observation, outcome, w.tier, error);
    }
  }

  // ---------------------------------------------------------------- holds

  /** One hold, begun at its grant. */
  record Held(HoldEvent event, Object observation, String primitive, String name, long token, int permits) {}

  /**
   * Starts recording a hold, or returns null if nothing records it.
   *
   * @param token the fencing token (0: none, permits)
   * @param acquired the wait that acquired it (its observation's parent is the hold's), or null
   * @return the hold's record, or null
   */
  Held holdStarted(Inspection.Kind kind, String describe, String name, long token, int permits, Wait acquired) {
    if (!JFR_PRESENT && observations == null) {
      return null;
    }
    HoldEvent probe = JFR_PRESENT ? new HoldEvent() : null;
    boolean jfr = probe != null && probe.isEnabled();
    Object observation = observations == null ? null
        : observations.holdStarted(primitive(kind, describe), name, acquired == null ? null : acquired.observation);
    if (!jfr && observation == null) {
      return null;
    }
    if (jfr) {
      probe.begin();
    }
    return new Held(jfr ? probe : null, observation, primitive(kind, describe), name, token, permits);
  }

  /** Ends the hold {@code h} (null: nothing to do); {@code lost} if it ended by a lease loss. */
  void holdEnded(Held h, boolean lost) {
    if (h == null) {
      return;
    }
    HoldEvent e = h.event();
    if (e != null) {
      e.end();
      if (e.shouldCommit()) {
        e.primitive = h.primitive();
        e.name = h.name();
        e.fencingToken = h.token();
        e.permits = h.permits();
        e.lost = lost;
        e.commit();
      }
    }
    if (h.observation() != null) {
      observations.holdEnded(h.observation(), lost);
    }
  }

  // ---------------------------------------------------------------- losses and outages

  /** Records a lease loss (a JFR instant event). */
  void leaseLost(Inspection.Kind kind, String describe, String name, String holder, String reason, long token) {
    if (!JFR_PRESENT) {
      return;
    }
    LeaseLost e = new LeaseLost();
    if (e.shouldCommit()) {
      e.primitive = primitive(kind, describe);
      e.name = name;
      e.holder = holder;
      e.reason = reason;
      e.fencingToken = token;
      e.commit();
    }
  }

  /**
   * Starts recording an outage as the client sees it: Redis unreachable from the first call that
   * found it so until one answers again. Returns the event, begun, or null if JFR does not record
   * outages.
   */
  static OutageEvent outageStarted() {
    if (!JFR_PRESENT) {
      return null;
    }
    OutageEvent e = new OutageEvent();
    if (!e.isEnabled()) {
      return null;
    }
    e.begin();
    return e;
  }

  /**
   * Ends an outage (null: not recorded): what rode through it, as the engine counts at its end.
   *
   * @param waits acquisitions waiting in Redis at its end (they rode through it)
   * @param holds leases renewed by the watchdog at its end (holds that rode through it)
   */
  static void outageEnded(OutageEvent e, String what, int waits, int holds) {
    if (e == null) {
      return;
    }
    e.end();
    if (e.shouldCommit()) {
      e.cause = what;
      e.waits = waits;
      e.holds = holds;
      e.commit();
    }
  }

  /** "lock", "read lock", "write lock", "semaphore": the low-cardinality name of a primitive's kind. */
  static String primitive(Inspection.Kind kind, String describe) {
    if (describe != null) {
      if (describe.startsWith("read lock")) {
        return "read lock";
      }
      if (describe.startsWith("write lock")) {
        return "write lock";
      }
    }
    if (kind == null) {
      return "other";
    }
    return switch (kind) {
      case LOCK -> "lock";
      case SEMAPHORE -> "semaphore";
      default -> "read/write lock";
    };
  }

  // ---------------------------------------------------------------- the JFR events

  /** A wait for a Turnstile primitive. */
  @Name("io.github.turnstile.Wait")
  @Label("Turnstile Wait")
  @Category({"Turnstile"})
  @Description("An acquisition of a Turnstile lock, read or write lock, or semaphore permits that waited"
      + " (from its call to its outcome)")
  @StackTrace(false)
  @Threshold("20 ms")
  static final class WaitEvent extends Event {
    @Label("Primitive")
    @Description("lock, read lock, write lock or semaphore")
    String primitive;

    @Label("Name")
    String name;

    @Label("Permits")
    int permits;

    @Label("Outcome")
    @Description("acquired, timed out, interrupted, cancelled or failed")
    String outcome;

    @Label("Tier")
    @Description("where it waited at the farthest: none (the first attempt decided), local hand-off"
        + " (a hold of this JVM handed it over), list (blocked on the token list) or pub/sub")
    String tier;

    @Label("Holder")
    @Description("the holder in the way when last refused (client:thread owner id), if known")
    String holder;
  }

  /** A hold of a Turnstile primitive. */
  @Name("io.github.turnstile.Hold")
  @Label("Turnstile Hold")
  @Category({"Turnstile"})
  @Description("A hold of a Turnstile lock, read or write lock, or permits (from its grant to its release"
      + " or loss)")
  @StackTrace(false)
  @Threshold("100 ms")
  static final class HoldEvent extends Event {
    @Label("Primitive")
    String primitive;

    @Label("Name")
    String name;

    @Label("Fencing Token")
    long fencingToken;

    @Label("Permits")
    int permits;

    @Label("Lost")
    @Description("the hold ended by the loss of its lease, not by a release")
    boolean lost;
  }

  /** A lease lost. */
  @Name("io.github.turnstile.LeaseLost")
  @Label("Turnstile Lease Lost")
  @Category({"Turnstile"})
  @Description("A hold's lease was lost: Redis may have given the primitive to another client")
  @StackTrace(false)
  static final class LeaseLost extends Event {
    @Label("Primitive")
    String primitive;

    @Label("Name")
    String name;

    @Label("Holder")
    String holder;

    @Label("Reason")
    String reason;

    @Label("Fencing Token")
    long fencingToken;
  }

  /** An outage: Redis unreachable as this client saw it. */
  @Name("io.github.turnstile.Outage")
  @Label("Turnstile Outage")
  @Category({"Turnstile"})
  @Description("Redis unreachable for this client: from the first call that found it so to the first answer"
      + " after")
  @StackTrace(false)
  static final class OutageEvent extends Event {
    @Label("Cause")
    String cause;

    @Label("Waits")
    @Description("acquisitions waiting in Redis at its end: they rode through it")
    int waits;

    @Label("Holds")
    @Description("leases renewed by the watchdog at its end: holds that rode through it")
    int holds;
  }
}
