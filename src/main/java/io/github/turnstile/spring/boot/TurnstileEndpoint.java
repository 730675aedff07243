package io.github.turnstile.spring.boot;

import io.github.turnstile.Activity;
import io.github.turnstile.Inspection;
import io.github.turnstile.Turnstile;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;

/**
 * The Actuator endpoint {@code turnstile}: read-only, exposed only as Actuator's exposure rules say
 * ({@code management.endpoints.web.exposure.include=turnstile}, or the JMX equivalent).
 *
 * <ul>
 *   <li>{@code GET /actuator/turnstile}: this application's client (id, name) and what it holds
 *       and waits for ({@link Turnstile#activity()}: no round trip);</li>
 *   <li>{@code GET /actuator/turnstile/{name}}: who holds the lock {@code name}, from any client
 *       ({@link Turnstile#inspect}: one round trip, read-only, creates no key);</li>
 *   <li>{@code GET /actuator/turnstile/{kind}/{name}}: the same for a kind: {@code lock},
 *       {@code rwlock} or {@code semaphore}. An unknown kind or a bad name answers 400.</li>
 * </ul>
 *
 * <p>Times are ISO-8601 instants, durations milliseconds.
 */
@Endpoint(id = "turnstile")
public class TurnstileEndpoint {
  private final Turnstile turnstile;

  /**
   * Creates the endpoint over this Turnstile.
   *
   * @param turnstile the application's Turnstile
   */
  public TurnstileEndpoint(Turnstile turnstile) {
    this.turnstile = turnstile;
  }

  /** {@return this client and what it holds and waits for} */
  @ReadOperation
  public Map<String, Object> activity() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("client", turnstile.clientId());
    out.put("clientName", turnstile.options().clientName());
    List<Map<String, Object>> holds = new ArrayList<>();
    List<Map<String, Object>> waits = new ArrayList<>();
    for (Activity a : turnstile.activity()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("kind", a.kind() == null ? null : a.kind().label());
      m.put("name", a.name());
      m.put("thread", a.thread());
      if (a.isHeld()) {
        m.put("fencingToken", a.fencingToken());
        m.put("permits", a.permits());
        m.put("heldMs", a.since().toMillis());
        m.put("leaseRemainingMs", a.leaseRemaining() == null ? null : a.leaseRemaining().toMillis());
        holds.add(m);
      } else {
        m.put("waitingMs", a.since().toMillis());
        m.put("queuedBehind", a.queued());
        waits.add(m);
      }
    }
    out.put("holds", holds);
    out.put("waits", waits);
    return out;
  }

  /**
   * Returns who holds the lock of this name.
   *
   * @param name the lock's name
   * @return the inspection
   */
  @ReadOperation
  public Map<String, Object> lock(@Selector String name) {
    return inspect("lock", name);
  }

  /**
   * Returns who holds the primitive of this kind and name.
   *
   * @param kind {@code lock}, {@code rwlock} or {@code semaphore}
   * @param name its name
   * @return the inspection
   */
  @ReadOperation
  public Map<String, Object> primitive(@Selector String kind, @Selector String name) {
    return inspect(kind, name);
  }

  private Map<String, Object> inspect(String kind, String name) {
    Inspection i;
    try {
      i = turnstile.inspect(Inspection.Kind.of(kind), name);
    } catch (IllegalArgumentException e) {
      throw new InvalidEndpointRequestException(e.getMessage(), e.getMessage());
    }
    return describe(i);
  }

  static Map<String, Object> describe(Inspection i) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("kind", i.kind().label());
    out.put("name", i.name());
    out.put("held", i.isHeld());
    out.put("holderCount", i.holderCount());
    out.put("waiting", i.waiting());
    if (i.kind() == Inspection.Kind.SEMAPHORE) {
      out.put("availablePermits", i.availablePermits());
    }
    out.put("inspectedAt", i.inspectedAt().toString());
    List<Map<String, Object>> holders = new ArrayList<>();
    for (Inspection.Holder h : i.holders()) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("client", h.clientId());
      m.put("clientName", h.clientName());
      m.put("host", h.host());
      m.put("pid", h.pid() < 0 ? null : h.pid());
      m.put("owner", h.owner());
      m.put("thread", h.threadName());
      m.put("writer", h.isWriter());
      m.put("cached", h.cached());
      m.put("permits", h.permits());
      m.put("fencingToken", h.fencingToken() == 0 ? null : h.fencingToken());
      m.put("acquiredAt", h.acquiredAt() == null ? null : h.acquiredAt().toString());
      m.put("leaseRemainingMs", h.leaseRemaining() == null ? null : h.leaseRemaining().toMillis());
      holders.add(m);
    }
    out.put("holders", holders);
    return out;
  }
}
