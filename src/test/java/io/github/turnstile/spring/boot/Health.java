package io.github.turnstile.spring.boot;

import java.lang.reflect.Method;
import java.util.Map;
import org.springframework.context.ApplicationContext;

/**
 * Reads the Turnstile health indicator on Spring Boot 4 ({@code org.springframework.boot.health})
 * and Spring Boot 3 ({@code org.springframework.boot.actuate.health}) alike, so that the same tests
 * run on both.
 */
final class Health {
  static final String BOOT4 = "org.springframework.boot.health.contributor.HealthIndicator";
  static final String BOOT3 = "org.springframework.boot.actuate.health.HealthIndicator";

  final String status;
  final Map<String, Object> details;

  private Health(String status, Map<String, Object> details) {
    this.status = status;
    this.details = details;
  }

  /** The HealthIndicator interface of the Spring Boot on the classpath. */
  static Class<?> indicatorType() {
    for (String name : new String[] {BOOT4, BOOT3}) {
      try {
        return Class.forName(name);
      } catch (ClassNotFoundException e) {
        // try the other generation
      }
    }
    throw new AssertionError("no Spring Boot health API on the classpath");
  }

  @SuppressWarnings("unchecked")
  static Health of(ApplicationContext context) {
    try {
      Object indicator = context.getBean("turnstileHealthIndicator");
      Class<?> type = indicatorType();
      Object health = type.getMethod("health").invoke(indicator);
      Method getStatus = health.getClass().getMethod("getStatus");
      Method getDetails = health.getClass().getMethod("getDetails");
      return new Health(getStatus.invoke(health).toString(), (Map<String, Object>) getDetails.invoke(health));
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  @Override
  public String toString() {
    return status + " " + details;
  }
}
