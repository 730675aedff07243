package io.github.turnstile.spring.boot;

import io.github.turnstile.LeaseLossListener;
import io.github.turnstile.LeaseLostEvent;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileException;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * What the Actuator health indicators (Spring Boot 3's and 4's, which have different types) report,
 * written once: whether Redis answers, how many leases the client holds, and how many it lost.
 */
final class TurnstileHealth {
  /** The name whose lock state the probe reads: one HEXISTS, never held by anyone. */
  static final String PROBE_NAME = "turnstile-health-probe";

  private final Turnstile turnstile;
  private final LeaseLosses losses;
  private final Supplier<Long> leasesHeld;

  /**
   * @param leasesHeld the leases held, or a supplier of null when unknown (no Micrometer registry)
   */
  TurnstileHealth(Turnstile turnstile, LeaseLosses losses, Supplier<Long> leasesHeld) {
    this.turnstile = turnstile;
    this.losses = losses;
    this.leasesHeld = leasesHeld;
  }

  /** Probes Redis; fills {@code details} and returns whether Redis answered. */
  boolean check(Map<String, Object> details) {
    boolean up;
    try {
      turnstile.lock(PROBE_NAME).isLocked();
      details.put("redis", "reachable");
      up = true;
    } catch (TurnstileException e) {
      details.put("redis", "unreachable: " + e.getMessage());
      up = false;
    }
    Long held = leasesHeld.get();
    if (held != null) {
      details.put("leasesHeld", held);
    }
    details.put("leasesLost", losses.count());
    LeaseLostEvent last = losses.last();
    if (last != null) {
      Map<String, Object> l = new LinkedHashMap<>();
      l.put("name", last.name());
      l.put("fencingToken", last.fencingToken());
      l.put("holder", last.holder());
      l.put("reason", last.reason());
      l.put("at", Instant.ofEpochMilli(last.lostAtMillis()).toString());
      details.put("lastLeaseLost", l);
    }
    details.put("leaseTime", turnstile.options().leaseTime().toString());
    return up;
  }

  /** Counts the leases the auto-configured Turnstile loses (registered as a listener bean). */
  static final class LeaseLosses implements LeaseLossListener {
    private final AtomicLong count = new AtomicLong();
    private final AtomicReference<LeaseLostEvent> last = new AtomicReference<>();

    @Override
    public void leaseLost(LeaseLostEvent event) {
      last.set(event);
      count.incrementAndGet();
    }

    long count() {
      return count.get();
    }

    LeaseLostEvent last() {
      return last.get();
    }
  }
}
