package io.github.turnstile.spring.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.endpoint.jmx.JmxEndpointAutoConfiguration;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jmx.JmxAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The Actuator endpoint {@code turnstile} in real Boot application contexts (Spring Boot 4): there
 * only as Actuator's exposure rules allow, and answering through Actuator's own machinery over JMX
 * (Boot's own exporter, with its Jackson response mapper): this application's holds and waits, and
 * any primitive by name. {@link TurnstileEndpointWebTest} asks the same over HTTP.
 */
@ExtendWith(RedisExtension.class)
class TurnstileEndpointTest {
  private final ApplicationContextRunner runner = new ApplicationContextRunner()
      .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class));

  @Test
  void onlyWhereExposureAllows(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .run(context -> assertFalse(context.containsBean("turnstileEndpoint"), "not exposed by default"));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "management.endpoints.web.exposure.include=*",
        "management.endpoints.web.exposure.exclude=turnstile")
        .run(context -> assertFalse(context.containsBean("turnstileEndpoint"), "excluded"));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "management.endpoints.web.exposure.include=turnstile")
        .run(context -> assertTrue(context.containsBean("turnstileEndpoint"), "exposed on the web"));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "spring.jmx.enabled=true",
        "management.endpoints.jmx.exposure.include=turnstile")
        .run(context -> assertTrue(context.containsBean("turnstileEndpoint"), "exposed over JMX"));
  }

  @Test
  void clientNameIsThePropertyElseTheApplicationName(TestRedis redis) {
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "spring.application.name=orders")
        .run(context -> assertEquals("orders", context.getBean(Turnstile.class).options().clientName()));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "spring.application.name=orders",
        "turnstile.client-name=orders-eu")
        .run(context -> assertEquals("orders-eu", context.getBean(Turnstile.class).options().clientName()));
    runner.withPropertyValues("turnstile.uri=" + redis.uri())
        .run(context -> assertNull(context.getBean(Turnstile.class).options().clientName()));
    runner.withPropertyValues("turnstile.uri=" + redis.uri(), "turnstile.client-name= ")
        .run(context -> assertTrue(String.valueOf(context.getStartupFailure()).contains("clientName"),
            String.valueOf(context.getStartupFailure())));
  }

  @Test
  @SuppressWarnings("unchecked")
  void answersThroughActuatorOverJmx(TestRedis redis) {
    String name = "endpoint:" + UUID.randomUUID();
    String domain = "turnstile-test-" + UUID.randomUUID();
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(JmxAutoConfiguration.class, EndpointAutoConfiguration.class,
            JmxEndpointAutoConfiguration.class, TurnstileAutoConfiguration.class))
        .withPropertyValues("turnstile.uri=" + redis.uri(), "spring.application.name=billing",
            "spring.jmx.enabled=true", "management.endpoints.jmx.domain=" + domain,
            "management.endpoints.jmx.exposure.include=turnstile")
        .run(context -> {
          assertNull(context.getStartupFailure(), () -> String.valueOf(context.getStartupFailure()));
          MBeanServer server = ManagementFactory.getPlatformMBeanServer();
          Set<ObjectName> names = server.queryNames(new ObjectName(domain + ":type=Endpoint,name=Turnstile,*"), null);
          assertEquals(1, names.size(), "the turnstile MBean: " + server.queryNames(new ObjectName(domain + ":*"), null));
          ObjectName mbean = names.iterator().next();
          Turnstile app = context.getBean(Turnstile.class);
          DistributedLock lock = app.lock(name);
          lock.lock();
          try {
            long token = lock.fencingToken();
            Map<String, Object> activity = (Map<String, Object>) server.invoke(mbean, "activity", new Object[0], new String[0]);
            assertEquals(app.clientId(), activity.get("client"));
            assertEquals("billing", activity.get("clientName"));
            List<Map<String, Object>> holds = (List<Map<String, Object>>) activity.get("holds");
            assertEquals(1, holds.size(), activity.toString());
            assertEquals(name, holds.get(0).get("name"));
            assertEquals("lock", holds.get(0).get("kind"));
            assertEquals(token, ((Number) holds.get(0).get("fencingToken")).longValue());

            // another client's view, by name: the holder named after its identity record is written
            try (Turnstile other = Turnstile.connect(redis.uri(), TurnstileOptions.defaults())) {
              long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
              Map<String, Object> seen;
              do {
                seen = (Map<String, Object>) server.invoke(mbean, "lock", new Object[] {name},
                    new String[] {String.class.getName()});
              } while (((List<Map<String, Object>>) seen.get("holders")).get(0).get("thread") == null
                  && System.nanoTime() - deadline < 0);
              assertEquals(Boolean.TRUE, seen.get("held"), seen.toString());
              Map<String, Object> holder = ((List<Map<String, Object>>) seen.get("holders")).get(0);
              assertEquals("billing", holder.get("clientName"));
              assertEquals(Thread.currentThread().getName(), holder.get("thread"));
              assertEquals(token, ((Number) holder.get("fencingToken")).longValue());
              assertEquals(ProcessHandle.current().pid(), ((Number) holder.get("pid")).longValue());
              assertTrue(other.lock(name).inspect().isHeld());
            }
            Map<String, Object> sem = (Map<String, Object>) server.invoke(mbean, "primitive",
                new Object[] {"semaphore", "nobody:" + UUID.randomUUID()},
                new String[] {String.class.getName(), String.class.getName()});
            assertEquals(Boolean.FALSE, sem.get("held"), sem.toString());
          } finally {
            lock.unlock();
          }
          TurnstileEndpoint endpoint = context.getBean(TurnstileEndpoint.class);
          InvalidEndpointRequestException bad = assertThrows(InvalidEndpointRequestException.class,
              () -> endpoint.primitive("mutex", name));
          assertTrue(bad.getMessage().contains("lock, rwlock or semaphore"), bad.getMessage());
          assertThrows(InvalidEndpointRequestException.class, () -> endpoint.lock(" "));
          assertEquals(List.of(), endpoint.activity().get("holds"));
        });
  }
}
