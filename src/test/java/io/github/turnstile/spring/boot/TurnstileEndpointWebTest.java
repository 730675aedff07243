package io.github.turnstile.spring.boot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Turnstile;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The Actuator endpoint {@code turnstile} over HTTP: a Spring Boot application with an embedded
 * web server (Tomcat, on a free port) and its auto-configuration, asked with a plain HTTP client,
 * as an operator's tool asks it. The JSON of a held lock, a semaphore with permits taken and a free
 * name; and a 404 wherever the user did not expose the endpoint, as for every Actuator endpoint.
 */
@ExtendWith(RedisExtension.class)
class TurnstileEndpointWebTest {
  private static final JsonMapper JSON = JsonMapper.builder().build();
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();

  /** A Spring Boot application as a user writes one: auto-configuration, nothing else. */
  @SpringBootConfiguration
  @EnableAutoConfiguration
  static class App {
  }

  private static ConfigurableApplicationContext start(TestRedis redis, String... properties) {
    List<String> all = new ArrayList<>(List.of("server.port=0", "server.address=127.0.0.1",
        "spring.main.banner-mode=off", "turnstile.uri=" + redis.uri(), "spring.application.name=billing"));
    all.addAll(List.of(properties));
    return new SpringApplicationBuilder(App.class).properties(all.toArray(new String[0])).run();
  }

  private static int port(ConfigurableApplicationContext context) {
    return Integer.parseInt(context.getEnvironment().getRequiredProperty("local.server.port"));
  }

  private HttpResponse<String> get(ConfigurableApplicationContext context, String path) throws Exception {
    HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port(context) + path))
        .timeout(Duration.ofSeconds(30)).GET().build();
    return http.send(request, HttpResponse.BodyHandlers.ofString());
  }

  private JsonNode getJson(ConfigurableApplicationContext context, String path) throws Exception {
    HttpResponse<String> response = get(context, path);
    assertEquals(200, response.statusCode(), path + ": " + response.body());
    String type = response.headers().firstValue("Content-Type").orElse("");
    assertTrue(type.contains("json"), path + ": " + type);
    return JSON.readTree(response.body());
  }

  private static String path(String name) {
    return URLEncoder.encode(name, StandardCharsets.UTF_8);
  }

  @Test
  void answersOverHttpWhenExposed(TestRedis redis) throws Exception {
    String lockName = "web:lock:" + UUID.randomUUID();
    String semName = "web:sem:" + UUID.randomUUID();
    String free = "web:free:" + UUID.randomUUID();
    try (ConfigurableApplicationContext context = start(redis, "management.endpoints.web.exposure.include=turnstile")) {
      Turnstile app = context.getBean(Turnstile.class);
      DistributedLock lock = app.lock(lockName);
      DistributedSemaphore semaphore = app.semaphore(semName, 5);
      lock.lock();
      semaphore.acquire(2);
      try {
        long token = lock.fencingToken();

        // this application's own books: GET /actuator/turnstile
        JsonNode activity = getJson(context, "/actuator/turnstile");
        assertEquals(app.clientId(), activity.get("client").asString());
        assertEquals("billing", activity.get("clientName").asString());
        assertEquals(2, activity.get("holds").size(), activity.toString());
        JsonNode lockHold = null;
        JsonNode semHold = null;
        for (JsonNode hold : activity.get("holds")) {
          if (hold.get("name").asString().equals(lockName)) {
            lockHold = hold;
          } else if (hold.get("name").asString().equals(semName)) {
            semHold = hold;
          }
        }
        assertNotNull(lockHold, activity.toString());
        assertNotNull(semHold, activity.toString());
        assertEquals("lock", lockHold.get("kind").asString());
        assertEquals(token, lockHold.get("fencingToken").asLong());
        assertEquals(Thread.currentThread().getName(), lockHold.get("thread").asString());
        assertEquals("semaphore", semHold.get("kind").asString());
        assertEquals(2, semHold.get("permits").asInt());
        assertEquals(0, activity.get("waits").size());

        // any client's hold, by kind and name: GET /actuator/turnstile/{kind}/{name}, and {name} for a lock
        for (String path : List.of("/actuator/turnstile/lock/" + path(lockName), "/actuator/turnstile/" + path(lockName))) {
          JsonNode seen = getJson(context, path);
          assertEquals("lock", seen.get("kind").asString(), seen.toString());
          assertEquals(lockName, seen.get("name").asString());
          assertTrue(seen.get("held").asBoolean(), seen.toString());
          assertEquals(1, seen.get("holderCount").asInt());
          JsonNode holder = seen.get("holders").get(0);
          assertEquals(app.clientId(), holder.get("client").asString());
          assertEquals(token, holder.get("fencingToken").asLong());
          assertNotNull(seen.get("inspectedAt").asString());
          assertTrue(holder.get("leaseRemainingMs").asLong() > 0, seen.toString());
        }

        JsonNode sem = getJson(context, "/actuator/turnstile/semaphore/" + path(semName));
        assertEquals("semaphore", sem.get("kind").asString(), sem.toString());
        assertTrue(sem.get("held").asBoolean(), sem.toString());
        assertEquals(3, sem.get("availablePermits").asInt(), sem.toString());
        assertEquals(1, sem.get("holderCount").asInt(), sem.toString());
        assertEquals(2, sem.get("holders").get(0).get("permits").asInt(), sem.toString());
        assertEquals(app.clientId(), sem.get("holders").get(0).get("client").asString());

        JsonNode nobody = getJson(context, "/actuator/turnstile/lock/" + path(free));
        assertEquals(false, nobody.get("held").asBoolean(), nobody.toString());
        assertEquals(0, nobody.get("holderCount").asInt());
        assertEquals(0, nobody.get("holders").size());

        assertEquals(400, get(context, "/actuator/turnstile/mutex/" + path(free)).statusCode(), "an unknown kind");
      } finally {
        semaphore.release(2);
        lock.unlock();
      }
      JsonNode after = getJson(context, "/actuator/turnstile/lock/" + path(lockName));
      // released, or kept idle by this client's lock cache (the default), which no thread holds
      assertTrue(!after.get("held").asBoolean() || after.get("holders").get(0).get("cached").asBoolean(),
          after.toString());
      assertEquals(0, getJson(context, "/actuator/turnstile").get("holds").size());
    }
  }

  /**
   * Without {@code management.endpoints.web.exposure.include=turnstile} the endpoint answers 404,
   * as every Actuator endpoint does, while the server and Actuator are up (the health endpoint,
   * exposed by default, answers 200); and 404 when it is excluded from {@code include=*}.
   */
  @Test
  void notFoundUnlessExposed(TestRedis redis) throws Exception {
    List<String[]> setups = List.of(new String[0],
        new String[] {"management.endpoints.web.exposure.include=*", "management.endpoints.web.exposure.exclude=turnstile"});
    for (String[] properties : setups) {
      try (ConfigurableApplicationContext context = start(redis, properties)) {
        assertEquals(200, get(context, "/actuator/health").statusCode(), "Actuator answers on this server");
        for (String path : List.of("/actuator/turnstile", "/actuator/turnstile/lock/x", "/actuator/turnstile/x")) {
          HttpResponse<String> response = get(context, path);
          assertEquals(404, response.statusCode(), List.of(properties) + " " + path + ": " + response.body());
        }
      }
    }
  }
}
