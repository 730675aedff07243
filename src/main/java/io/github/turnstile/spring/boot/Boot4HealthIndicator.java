package io.github.turnstile.spring.boot;

import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/** The health indicator on Spring Boot 4 ({@code org.springframework.boot.health.contributor}). */
final class Boot4HealthIndicator implements HealthIndicator {
  private final TurnstileHealth health;

  Boot4HealthIndicator(TurnstileHealth health) {
    this.health = health;
  }

  @Override
  public Health health() {
    Map<String, Object> details = new LinkedHashMap<>();
    boolean up = health.check(details);
    return (up ? Health.up() : Health.down()).withDetails(details).build();
  }
}
