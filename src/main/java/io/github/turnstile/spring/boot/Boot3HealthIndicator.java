package io.github.turnstile.spring.boot;

import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/** The health indicator on Spring Boot 3 ({@code org.springframework.boot.actuate.health}). */
final class Boot3HealthIndicator implements HealthIndicator {
  private final TurnstileHealth health;

  Boot3HealthIndicator(TurnstileHealth health) {
    this.health = health;
  }

  @Override
  public Health health() {
    Map<String, Object> details = new LinkedHashMap<>();
    boolean up = health.check(details);
    return (up ? Health.up() : Health.down()).withDetails(details).build();
  }
}
