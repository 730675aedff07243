package io.github.turnstile.spring.boot;

import io.github.turnstile.LeaseLossListener;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.github.turnstile.shedlock.TurnstileLockProvider;
import io.github.turnstile.spring.TurnstileLockRegistry;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.function.Supplier;
import net.javacrumbs.shedlock.core.LockProvider;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.core.io.ResourceLoader;
import org.springframework.integration.support.locks.LockRegistry;

/**
 * Spring Boot auto-configuration of Turnstile (Spring Boot 3.5 and 4.x). Every bean backs off
 * when the application defines its own ({@code @ConditionalOnMissingBean}):
 *
 * <ul>
 *   <li>a {@link Turnstile}, from the {@code turnstile.*} properties ({@link TurnstileProperties}).
 *       It connects to {@code turnstile.uri}; when that is not set, where the application's Redis
 *       connection details bean points ({@code RedisConnectionDetails} on Spring Boot 3.5,
 *       {@code DataRedisConnectionDetails} on Spring Boot 4: from {@code @ServiceConnection},
 *       Docker Compose support or the application's own bean; standalone, Sentinel or Cluster,
 *       credentials, SSL bundle); without one, where Spring Data Redis's
 *       {@code spring.data.redis.*} properties point: {@code url} or {@code host}/{@code port},
 *       {@code username}, {@code password}, {@code database}, {@code ssl.enabled},
 *       {@code connect-timeout}, {@code sentinel.master}/{@code nodes}/{@code username}/{@code password},
 *       {@code cluster.nodes}. Beans of type {@link LeaseLossListener} are registered with it, and
 *       {@link TurnstileOptionsCustomizer} beans adjust its options. It connects when the context
 *       starts, and the context fails to start if Redis cannot be reached;</li>
 *   <li>the application's Micrometer {@code MeterRegistry}, when there is exactly one, is set as
 *       the Turnstile's {@linkplain TurnstileOptions.Builder#meterRegistry meter registry};</li>
 *   <li>a {@link TurnstileLockRegistry}, when Spring Integration is on the classpath and no other
 *       {@code LockRegistry} bean exists;</li>
 *   <li>a {@link TurnstileLockProvider}, when ShedLock is on the classpath and no other
 *       {@code LockProvider} bean exists (annotate a configuration with ShedLock's
 *       {@code @EnableSchedulerLock} to use it);</li>
 *   <li>the application's Micrometer {@code ObservationRegistry}, when there is exactly one, is set
 *       as the Turnstile's observation registry: each wait and hold is an observation
 *       ({@code turnstile.acquire}, {@code turnstile.hold}), a span under the request with Micrometer
 *       Tracing. Turn it off with {@code turnstile.observations.enabled=false}.</li>
 *   <li>a health indicator named {@code turnstile} (bean {@code turnstileHealthIndicator}) when
 *       Actuator's health support is on the classpath: DOWN when Redis does not answer, with the
 *       leases held (from Micrometer) and the leases lost so far as details. Turn it off with
 *       {@code management.health.turnstile.enabled=false}.</li>
 *   <li>the Actuator endpoint {@code turnstile} ({@link TurnstileEndpoint}: who holds what), when
 *       Actuator is on the classpath and its exposure rules make the endpoint available (for
 *       example {@code management.endpoints.web.exposure.include=turnstile}).</li>
 * </ul>
 *
 * <p>The client's identity ({@link TurnstileOptions.Builder#clientName}) is
 * {@code turnstile.client-name}, or else {@code spring.application.name}.
 *
 * <p>{@code turnstile.enabled=false} turns the whole auto-configuration off.
 */
@AutoConfiguration
@ConditionalOnProperty(prefix = "turnstile", name = "enabled", havingValue = "true", matchIfMissing = true)
@EnableConfigurationProperties(TurnstileProperties.class)
public class TurnstileAutoConfiguration {

  /** Created by Spring Boot. */
  public TurnstileAutoConfiguration() {}

  @Bean
  @ConditionalOnMissingBean(Turnstile.class)
  TurnstileConnector turnstileConnector(TurnstileProperties properties, Environment environment,
      BeanFactory beans, ResourceLoader resources) {
    Object details = properties.getUri() == null || properties.getUri().isBlank()
        ? ConnectionDetails.find(beans, resources.getClassLoader()) : null;
    return new TurnstileConnector(properties, environment, details);
  }

  /**
   * The Turnstile, connected as the properties say; closed with the context.
   *
   * @param connector where to connect
   * @param properties the {@code turnstile.*} properties
   * @param environment where {@code spring.application.name} is read (the default client name)
   * @param listeners lease-loss listener beans, registered with the Turnstile
   * @param customizers option customizer beans, applied after the properties
   * @return the connected Turnstile
   */
  @Bean(destroyMethod = "close")
  @ConditionalOnMissingBean
  public Turnstile turnstile(TurnstileConnector connector, TurnstileProperties properties, Environment environment,
      ObjectProvider<LeaseLossListener> listeners, ObjectProvider<TurnstileOptionsCustomizer> customizers) {
    TurnstileOptions.Builder builder = properties.applyTo(TurnstileOptions.builder());
    if (properties.getClientName() != null) {
      builder.clientName(properties.getClientName()); // a blank or too long one is refused, naming the limit
    } else {
      String app = environment.getProperty("spring.application.name");
      if (app != null && !app.isBlank()) {
        builder.clientName(app.length() > 256 ? app.substring(0, 256) : app); // a default: never refused
      }
    }
    listeners.orderedStream().forEach(builder::leaseLossListener);
    customizers.orderedStream().forEach(c -> c.customize(builder));
    return connector.open(builder.build());
  }

  /** Sets the application's Micrometer registry on the Turnstile. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
  static class MicrometerConfiguration {

    @Bean
    TurnstileOptionsCustomizer turnstileMeterRegistryCustomizer(ObjectProvider<MeterRegistry> registry) {
      return options -> {
        MeterRegistry r = registry.getIfUnique();
        if (r != null) {
          options.meterRegistry(r);
        }
      };
    }

    @Bean
    TurnstileLeasesHeld turnstileLeasesHeld(ObjectProvider<MeterRegistry> registry) {
      return new TurnstileLeasesHeld(() -> {
        MeterRegistry r = registry.getIfUnique();
        return r == null ? null : new MicrometerLeases(r).get();
      });
    }
  }

  /**
   * Sets the application's Micrometer {@code ObservationRegistry} on the Turnstile, so that each
   * lock wait and hold is an observation (a span under the request, with Micrometer Tracing).
   * Turn it off with {@code turnstile.observations.enabled=false}.
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "io.micrometer.observation.ObservationRegistry")
  @ConditionalOnProperty(prefix = "turnstile.observations", name = "enabled", havingValue = "true",
      matchIfMissing = true)
  static class ObservationConfiguration {

    @Bean
    TurnstileOptionsCustomizer turnstileObservationRegistryCustomizer(
        ObjectProvider<io.micrometer.observation.ObservationRegistry> registry) {
      return options -> {
        io.micrometer.observation.ObservationRegistry r = registry.getIfUnique();
        if (r != null) {
          options.observationRegistry(r);
        }
      };
    }
  }

  /** The Spring Integration lock registry. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.integration.support.locks.ExpirableLockRegistry")
  static class IntegrationConfiguration {

    @Bean
    @ConditionalOnMissingBean(LockRegistry.class)
    TurnstileLockRegistry turnstileLockRegistry(Turnstile turnstile) {
      return new TurnstileLockRegistry(turnstile);
    }
  }

  /** The ShedLock lock provider. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "net.javacrumbs.shedlock.core.ExtensibleLockProvider")
  static class ShedLockConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean(LockProvider.class)
    TurnstileLockProvider turnstileLockProvider(Turnstile turnstile) {
      return new TurnstileLockProvider(turnstile);
    }
  }

  /**
   * The Actuator endpoint {@code turnstile}: a bean only when Actuator is on the classpath and its
   * exposure rules make the endpoint available (enabled, and exposed over the web or JMX).
   */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = {"org.springframework.boot.actuate.endpoint.annotation.Endpoint",
      "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint"})
  static class EndpointConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint
    TurnstileEndpoint turnstileEndpoint(Turnstile turnstile) {
      return new TurnstileEndpoint(turnstile);
    }
  }

  /** What both health indicators need: the lease-loss counter, registered as a listener bean. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnProperty(prefix = "management.health.turnstile", name = "enabled", havingValue = "true",
      matchIfMissing = true)
  static class HealthSupportConfiguration {

    @Bean
    @ConditionalOnMissingBean
    TurnstileHealth.LeaseLosses turnstileLeaseLosses() {
      return new TurnstileHealth.LeaseLosses();
    }
  }

  /** The health indicator on Spring Boot 4, whose health API is {@code spring-boot-health}. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
  @ConditionalOnProperty(prefix = "management.health.turnstile", name = "enabled", havingValue = "true",
      matchIfMissing = true)
  static class Boot4HealthConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "turnstileHealthIndicator")
    org.springframework.boot.health.contributor.HealthIndicator turnstileHealthIndicator(Turnstile turnstile,
        TurnstileHealth.LeaseLosses losses, ObjectProvider<TurnstileLeasesHeld> leasesHeld) {
      return new Boot4HealthIndicator(health(turnstile, losses, leasesHeld));
    }
  }

  /** The health indicator on Spring Boot 3, whose health API is in {@code spring-boot-actuator}. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
  @ConditionalOnMissingClass("org.springframework.boot.health.contributor.HealthIndicator")
  @ConditionalOnProperty(prefix = "management.health.turnstile", name = "enabled", havingValue = "true",
      matchIfMissing = true)
  static class Boot3HealthConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "turnstileHealthIndicator")
    org.springframework.boot.actuate.health.HealthIndicator turnstileHealthIndicator(Turnstile turnstile,
        TurnstileHealth.LeaseLosses losses, ObjectProvider<TurnstileLeasesHeld> leasesHeld) {
      return new Boot3HealthIndicator(health(turnstile, losses, leasesHeld));
    }
  }

  static TurnstileHealth health(Turnstile turnstile, TurnstileHealth.LeaseLosses losses,
      ObjectProvider<TurnstileLeasesHeld> leasesHeld) {
    return new TurnstileHealth(turnstile, losses, () -> {
      TurnstileLeasesHeld h = leasesHeld.getIfAvailable();
      return h == null ? null : h.get();
    });
  }

  /** How many leases the Turnstile holds, when Micrometer knows (a bean only with Micrometer). */
  static final class TurnstileLeasesHeld implements Supplier<Long> {
    private final Supplier<Long> source;

    TurnstileLeasesHeld(Supplier<Long> source) {
      this.source = source;
    }

    @Override
    public Long get() {
      return source.get();
    }
  }
}
