package io.github.turnstile.spring.boot;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.function.Supplier;

/**
 * The leases held, read from the {@code turnstile.leases.active} gauge that Turnstile registers
 * in the application's Micrometer registry (summed over every Turnstile recording there). Loaded
 * only when Micrometer is on the classpath.
 */
final class MicrometerLeases implements Supplier<Long> {
  private final MeterRegistry registry;

  MicrometerLeases(MeterRegistry registry) {
    this.registry = registry;
  }

  @Override
  public Long get() {
    double sum = 0;
    boolean found = false;
    for (Gauge g : registry.find("turnstile.leases.active").gauges()) {
      sum += g.value();
      found = true;
    }
    return found ? (long) sum : null;
  }
}
