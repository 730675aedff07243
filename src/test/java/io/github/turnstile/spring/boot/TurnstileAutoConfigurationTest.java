package io.github.turnstile.spring.boot;

import static io.github.turnstile.spring.Support.await;
import static io.github.turnstile.spring.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.LeaseLossListener;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.github.turnstile.shedlock.TurnstileLockProvider;
import io.github.turnstile.spring.Support;
import io.github.turnstile.spring.TurnstileLockRegistry;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import io.github.turnstile.testing.TlsTerminator;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistryAssert;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import net.javacrumbs.shedlock.core.LockProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.annotation.ImportCandidates;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.boot.ssl.SslStoreBundle;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.integration.support.locks.DefaultLockRegistry;
import org.springframework.integration.support.locks.LockRegistry;

/**
 * {@link TurnstileAutoConfiguration} in real application contexts ({@link ApplicationContextRunner})
 * against a real Redis: every property mapped, Spring Data Redis's settings used when
 * {@code turnstile.uri} is not set, each bean backing off from the application's own, each
 * optional library's bean absent without the library, Micrometer wired, the health indicator.
 * The same class runs on Spring Boot 3.5 (in a child JVM, SpringCompatibilityTest).
 */
@ExtendWith(RedisExtension.class)
public class TurnstileAutoConfigurationTest {
  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class));

  /** The auto-configuration is registered where Spring Boot looks for it. */
  @Test
  void isRegisteredAsAnAutoConfiguration() {
    List<String> candidates = new ArrayList<>();
    ImportCandidates.load(AutoConfiguration.class, getClass().getClassLoader()).forEach(candidates::add);
    assertTrue(candidates.contains(TurnstileAutoConfiguration.class.getName()), candidates.toString());
  }

  /** IDEs complete every turnstile.* property from the configuration metadata. */
  @Test
  void shipsConfigurationMetadata() throws IOException {
    String json;
    try (InputStream in = getClass().getClassLoader().getResourceAsStream("META-INF/spring-configuration-metadata.json")) {
      assertNotNull(in, "META-INF/spring-configuration-metadata.json");
      json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    for (String p : List.of("uri", "lease-time", "renew-interval", "key-prefix", "blocking-pool-size",
        "command-timeout", "local-handoff-limit", "replica-acks.replicas", "replica-acks.timeout",
        "outage-tolerance", "metrics-name-limit", "client-name", "enabled", "lock-caching.enabled",
        "lock-caching.max-idle", "lock-caching.idle-time")) {
      assertTrue(json.contains("\"name\": \"turnstile." + p + "\""), "turnstile." + p + " in " + json);
    }
    assertTrue(json.contains("\"name\": \"management.health.turnstile.enabled\""), json);
    assertTrue(json.contains("\"name\": \"turnstile.observations.enabled\""), json);
  }

  /** turnstile.lock-caching.* reaches TurnstileOptions (not with replica acknowledgement, which it excludes). */
  @Test
  void mapsLockCaching(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.lock-caching.enabled=true",
        "turnstile.lock-caching.max-idle=16", "turnstile.lock-caching.idle-time=3s")
        .run(context -> {
          assertFalse(context.getStartupFailure() != null, () -> String.valueOf(context.getStartupFailure()));
          TurnstileOptions o = context.getBean(Turnstile.class).options();
          assertTrue(o.lockCaching());
          assertEquals(16, o.lockCacheSize());
          assertEquals(Duration.ofSeconds(3), o.lockCacheIdle());
        });
  }

  /**
   * Unset, turnstile.lock-caching.enabled is the library's default: on, unless replica acknowledgement
   * is configured (which excludes it); false turns it off.
   */
  @Test
  void lockCachingFollowsTheLibraryDefault(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .run(context -> assertTrue(context.getBean(Turnstile.class).options().lockCaching()));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.lock-caching.enabled=false")
        .run(context -> assertFalse(context.getBean(Turnstile.class).options().lockCaching()));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.replica-acks.replicas=1",
            "turnstile.replica-acks.timeout=250ms")
        .run(context -> assertFalse(context.getBean(Turnstile.class).options().lockCaching()));
  }

  /** Every property reaches TurnstileOptions; every bean is there and works. */
  @Test
  void mapsEveryPropertyAndCreatesEveryBean(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.lease-time=10s",
        "turnstile.renew-interval=2s", "turnstile.key-prefix=app", "turnstile.blocking-pool-size=4",
        "turnstile.command-timeout=3s", "turnstile.local-handoff-limit=2", "turnstile.outage-tolerance=20s",
        "turnstile.metrics-name-limit=7", "turnstile.replica-acks.replicas=1", "turnstile.replica-acks.timeout=250ms")
        .run(context -> {
          assertFalse(context.getStartupFailure() != null, () -> String.valueOf(context.getStartupFailure()));
          TurnstileOptions o = context.getBean(Turnstile.class).options();
          assertEquals(Duration.ofSeconds(10), o.leaseTime());
          assertEquals(Duration.ofSeconds(2), o.renewInterval());
          assertEquals("app", o.keyPrefix());
          assertEquals(4, o.blockingPoolSize());
          assertEquals(Duration.ofSeconds(3), o.commandTimeout());
          assertEquals(2, o.localHandoffLimit());
          assertEquals(Duration.ofSeconds(20), o.outageTolerance());
          assertEquals(7, o.metricsNameLimit());
          assertEquals(1, o.replicaAcks());
          assertEquals(Duration.ofMillis(250), o.replicaAckTimeout());
          assertInstanceOf(TurnstileLockRegistry.class, context.getBean(LockRegistry.class));
          assertInstanceOf(TurnstileLockProvider.class, context.getBean(LockProvider.class));
          assertInstanceOf(Health.indicatorType(), context.getBean("turnstileHealthIndicator"));
        });
  }

  /**
   * The application's ObservationRegistry observes each wait and hold: a request that waited for
   * a lock held by another client has a {@code turnstile.acquire} and a {@code turnstile.hold}
   * observation under it, with the lock's name; {@code turnstile.observations.enabled=false} turns
   * them off.
   */
  @Test
  void observesWaitsAndHoldsInTheApplicationsObservationRegistry(TestRedis redis) {
    TestObservationRegistry registry = TestObservationRegistry.create();
    String name = unique("boot-observed");
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .withBean(ObservationRegistry.class, () -> registry)
        .run(context -> {
          Turnstile t = context.getBean(Turnstile.class);
          try (Turnstile other = Turnstile.connect(redis.uri())) {
            DistributedLock held = other.lock(name);
            held.lock();
            Thread request = new Thread(() -> Observation.createNotStarted("http.request", registry).observe(() -> {
              DistributedLock lock = t.lock(name);
              lock.lock();
              lock.unlock();
            }), "request");
            request.start();
            await("the request waits for the lock", Duration.ofSeconds(30), () -> !t.activity().isEmpty());
            held.unlock();
            request.join(60_000);
            assertFalse(request.isAlive());
          }
          TestObservationRegistryAssert.assertThat(registry)
              .hasObservationWithNameEqualTo("turnstile.acquire").that()
              .hasLowCardinalityKeyValue("primitive", "lock")
              .hasLowCardinalityKeyValue("outcome", "acquired")
              .hasHighCardinalityKeyValue("name", name)
              .hasParentObservationContextMatching(c -> "http.request".equals(c.getName()))
              .hasBeenStopped();
          TestObservationRegistryAssert.assertThat(registry)
              .hasObservationWithNameEqualTo("turnstile.hold").that()
              .hasLowCardinalityKeyValue("outcome", "released")
              .hasParentObservationContextMatching(c -> "http.request".equals(c.getName()))
              .hasBeenStopped();
        });
    TestObservationRegistry off = TestObservationRegistry.create();
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.observations.enabled=false")
        .withBean(ObservationRegistry.class, () -> off)
        .run(context -> {
          DistributedLock lock = context.getBean(Turnstile.class).lock(unique("boot-unobserved"));
          lock.lock();
          lock.unlock();
          TestObservationRegistryAssert.assertThat(off).doesNotHaveAnyObservation();
        });
  }

  /** Without properties, the options are TurnstileOptions' defaults (the metadata's defaults are true). */
  @Test
  void defaultsAreTheOptionsDefaults(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri()).run(context -> {
      TurnstileOptions o = context.getBean(Turnstile.class).options();
      TurnstileOptions d = TurnstileOptions.defaults();
      assertEquals(d.leaseTime(), o.leaseTime());
      assertEquals(d.renewInterval(), o.renewInterval());
      assertEquals(d.keyPrefix(), o.keyPrefix());
      assertEquals(d.blockingPoolSize(), o.blockingPoolSize());
      assertEquals(d.commandTimeout(), o.commandTimeout());
      assertEquals(d.localHandoffLimit(), o.localHandoffLimit());
      assertEquals(d.outageTolerance(), o.outageTolerance());
      assertEquals(d.metricsNameLimit(), o.metricsNameLimit());
      assertEquals(d.replicaAcks(), o.replicaAcks());
    });
  }

  /** Without turnstile.uri, Turnstile goes where spring.data.redis.host/port (or url) points. */
  @Test
  void withoutUriUsesSpringDataRedis(TestRedis redis) {
    URI uri = URI.create(redis.uri());
    String name = unique("data-redis");
    try (Turnstile other = Turnstile.connect(redis.uri())) {
      runner.withPropertyValues("spring.data.redis.host=" + uri.getHost(), "spring.data.redis.port=" + uri.getPort(),
          "spring.data.redis.connect-timeout=2s")
          .run(context -> assertSharedWith(other, context.getBean(Turnstile.class), name));
      runner.withPropertyValues("spring.data.redis.url=" + redis.uri())
          .run(context -> assertSharedWith(other, context.getBean(Turnstile.class), name + "-url"));
    }
  }

  /**
   * Spring Boot 3.1+ gives an application's Redis location as a connection details bean
   * ({@code RedisConnectionDetails} on Boot 3.5, {@code DataRedisConnectionDetails} on Boot 4: from
   * {@code @ServiceConnection} with Testcontainers, Docker Compose, or the application's own bean),
   * and the auto-configuration read only {@code spring.data.redis.*}, so it connected elsewhere.
   * Now the details win over those properties: host, port, database and credentials (the
   * connections run as the details' ACL user), on Boot 4 here and Boot 3.5 in the child JVM.
   * {@code turnstile.uri} still wins over the details.
   */
  @Test
  void honoursTheApplicationsRedisConnectionDetails(TestRedis redis) {
    String user = unique("details-user");
    String password = "pw-" + java.util.UUID.randomUUID();
    redis.command("ACL", "SETUSER", user, "on", ">" + password, "~*", "&*", "+@all");
    String name = unique("details");
    try (Turnstile other = Turnstile.connect("redis://" + redis.host() + ":" + redis.port() + "/3")) {
      RedisDetails.withBean(runner, RedisDetails.standalone(redis.host(), redis.port(), 3, user, password, null))
          .withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=1") // not these
          .run(context -> {
            assertNull(context.getStartupFailure(), () -> String.valueOf(context.getStartupFailure()));
            assertSharedWith(other, context.getBean(Turnstile.class), name); // database 3 of that Redis
            String clientId = context.getBean(Turnstile.class).toString().replaceAll(".*client ([0-9a-f]+).*", "$1");
            List<String> mine = new ArrayList<>();
            for (String line : redis.command("CLIENT", "LIST").split("\n")) {
              if (line.contains("name=turnstile:" + clientId)) {
                mine.add(line);
              }
            }
            assertFalse(mine.isEmpty(), "connections of client " + clientId);
            for (String line : mine) {
              assertTrue(line.contains(" user=" + user + " ") || line.endsWith(" user=" + user), line);
            }
          });
      RedisDetails.withBean(runner, RedisDetails.standalone("127.0.0.1", 1, 0, null, null, null))
          .withPropertyValues("turnstile.uri=redis://" + redis.host() + ":" + redis.port() + "/3")
          .run(context -> assertSharedWith(other, context.getBean(Turnstile.class), name + "-uri"));
    } finally {
      redis.command("ACL", "DELUSER", user);
    }
  }

  /**
   * Connection details with an SSL bundle connect over TLS with that bundle's trust
   * material (here a self-signed certificate that the JVM's default trust store does not know, on
   * a TLS endpoint in front of the test Redis). With a bundle that lacks it, the context does not
   * start: the bundle, not a default, decided.
   */
  @Test
  void connectionDetailsWithAnSslBundleConnectOverTls(TestRedis redis) {
    try (TlsTerminator tls = TlsTerminator.start(redis.host(), redis.port());
        Turnstile other = Turnstile.connect("redis://" + redis.host() + ":" + redis.port())) {
      SslBundle trusting = SslBundle.of(SslStoreBundle.of(null, null, TlsTerminator.trustStore()));
      RedisDetails.withBean(runner, RedisDetails.standalone("127.0.0.1", tls.port(), 0, null, null, trusting))
          .run(context -> {
            assertNull(context.getStartupFailure(), () -> String.valueOf(context.getStartupFailure()));
            assertSharedWith(other, context.getBean(Turnstile.class), unique("details-tls"));
            assertTrue(tls.handshakes() > 0, "connected through the TLS endpoint");
          });
      SslBundle notTrusting = SslBundle.of(SslStoreBundle.of(null, null, null));
      RedisDetails.withBean(runner, RedisDetails.standalone("127.0.0.1", tls.port(), 0, null, null, notTrusting))
          .withPropertyValues("spring.data.redis.connect-timeout=2s")
          .run(context -> assertNotNull(context.getStartupFailure(), "a certificate the bundle does not trust"));
    }
  }

  /** A lock taken through the context's Turnstile is seen held by an independent client. */
  public static void assertSharedWith(Turnstile other, Turnstile fromContext, String name) {
    DistributedLock lock = fromContext.lock(name);
    lock.lock();
    try {
      assertTrue(other.lock(name).isLocked(), "the same Redis");
      assertFalse(other.lock(name).tryLock());
    } finally {
      lock.unlock();
    }
    assertFalse(other.lock(name).isLocked());
  }

  /** Each bean backs off from the application's own. */
  @Test
  void backsOffFromTheApplicationsBeans(TestRedis redis) {
    try (Turnstile mine = Turnstile.connect(redis.uri())) {
      DefaultLockRegistry localRegistry = new DefaultLockRegistry();
      LockProvider myProvider = config -> Optional.empty();
      runner.withPropertyValues("turnstile.uri=redis://127.0.0.1:1") // never used: the application has a Turnstile
          .withBean(Turnstile.class, () -> mine, d -> d.setDestroyMethodName(""))
          .withBean(LockRegistry.class, () -> localRegistry)
          .withBean(LockProvider.class, () -> myProvider)
          .run(context -> {
            assertSame(mine, context.getBean(Turnstile.class));
            assertSame(localRegistry, context.getBean(LockRegistry.class));
            assertSame(myProvider, context.getBean(LockProvider.class));
            assertTrue(context.getBeansOfType(TurnstileConnector.class).isEmpty());
            assertEquals("UP", Health.of(context).status, "the health indicator uses the application's Turnstile");
          });
      assertTrue(mine.lock("still-open").tryLock(), "the application's Turnstile is not closed by the context");
      mine.lock("still-open").unlock();
    }
  }

  /** Without Spring Integration, ShedLock, Micrometer or Actuator, their beans are absent. */
  @Test
  void optionalLibrariesAbsentMeansNoBean(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .withClassLoader(new FilteredClassLoader("org.springframework.integration", "net.javacrumbs.shedlock",
            "io.micrometer", "org.springframework.boot.health", "org.springframework.boot.actuate"))
        .run(context -> {
          assertNotNull(context.getBean(Turnstile.class));
          assertTrue(context.getBeansOfType(TurnstileLockRegistry.class).isEmpty());
          assertTrue(context.getBeansOfType(TurnstileLockProvider.class).isEmpty());
          assertFalse(context.containsBean("turnstileHealthIndicator"));
          assertFalse(context.containsBean("turnstileMeterRegistryCustomizer"));
        });
  }

  /** The application's MeterRegistry records Turnstile's meters; health shows the leases held. */
  @Test
  void micrometerRegistryIsWiredIn(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .withBean(MeterRegistry.class, SimpleMeterRegistry::new)
        .run(context -> {
          MeterRegistry registry = context.getBean(MeterRegistry.class);
          String name = unique("metered");
          DistributedLock lock = context.getBean(Turnstile.class).lock(name);
          lock.lock();
          try {
            assertEquals(1L, ((Number) Health.of(context).details.get("leasesHeld")).longValue());
          } finally {
            lock.unlock();
          }
          assertEquals(1.0, registry.get("turnstile.acquisitions").tag("name", name).counter().count());
        });
  }

  /** Health: UP while Redis answers, the leases lost so far, DOWN when Redis does not answer. */
  @Test
  void healthReportsRedisAndLostLeases(TestRedis redis) {
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port())) {
      runner.withPropertyValues("turnstile.uri=" + proxy.uri(), "turnstile.lease-time=1s",
          "turnstile.command-timeout=500ms")
          .run(context -> {
            Health up = Health.of(context);
            assertEquals("UP", up.status, up.toString());
            assertEquals("reachable", up.details.get("redis"));
            assertEquals(0L, up.details.get("leasesLost"));

            String name = unique("health-lost");
            DistributedLock lock = context.getBean(Turnstile.class).lock(name);
            lock.lock();
            Support.delete(redis, Support.lockKey(name));
            await("the loss to be counted", Duration.ofSeconds(5),
                () -> Long.valueOf(1L).equals(Health.of(context).details.get("leasesLost")));
            @SuppressWarnings("unchecked")
            Map<String, Object> last = (Map<String, Object>) Health.of(context).details.get("lastLeaseLost");
            assertEquals(name, last.get("name"));
            try {
              lock.unlock();
            } catch (IllegalMonitorStateException expected) {
              // LockLostException: the lease was lost
            }

            proxy.setPaused(true);
            try {
              Health down = Health.of(context);
              assertEquals("DOWN", down.status, down.toString());
              assertTrue(String.valueOf(down.details.get("redis")).startsWith("unreachable"), down.toString());
            } finally {
              proxy.setPaused(false);
            }
            assertEquals("UP", Health.of(context).status);
          });
    }
  }

  /** management.health.turnstile.enabled=false removes the indicator. */
  @Test
  void healthIndicatorCanBeTurnedOff(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "management.health.turnstile.enabled=false")
        .run(context -> assertFalse(context.containsBean("turnstileHealthIndicator")));
  }

  /** LeaseLossListener beans are registered; customizers run after the properties. */
  @Test
  void listenerBeansAndCustomizersApply(TestRedis redis) {
    LeaseLossListener listener = event -> { };
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.lease-time=10s")
        .withBean("myListener", LeaseLossListener.class, () -> listener)
        .withBean(TurnstileOptionsCustomizer.class, () -> options -> options.leaseTime(Duration.ofSeconds(7)))
        .run(context -> {
          TurnstileOptions o = context.getBean(Turnstile.class).options();
          assertEquals(Duration.ofSeconds(7), o.leaseTime());
          assertTrue(o.leaseLossListeners().contains(listener));
        });
  }

  /** turnstile.enabled=false turns everything off. */
  @Test
  void canBeDisabled() {
    runner.withPropertyValues("turnstile.enabled=false")
        .run(context -> {
          assertTrue(context.getBeansOfType(Turnstile.class).isEmpty());
          assertTrue(context.getBeansOfType(LockRegistry.class).isEmpty());
        });
  }

  /** A wrong value fails the start with a message naming it. */
  @Test
  void wrongValuesFailTheStartClearly(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.replica-acks.replicas=1")
        .run(context -> assertFailure(context.getStartupFailure(), "turnstile.replica-acks.timeout"));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.lease-time=50ms")
        .run(context -> assertFailure(context.getStartupFailure(), "leaseTime must be at least 100 ms"));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.key-prefix={x}")
        .run(context -> assertFailure(context.getStartupFailure(), "keyPrefix"));
  }

  static void assertFailure(Throwable failure, String text) {
    assertNotNull(failure, "the context should not start");
    StringBuilder all = new StringBuilder();
    for (Throwable t = failure; t != null; t = t.getCause()) {
      all.append(t.getMessage()).append('\n');
    }
    assertTrue(all.toString().contains(text), all.toString());
  }
}
