package io.github.turnstile.spring.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.Turnstile;
import io.github.turnstile.shedlock.TurnstileLockProvider;
import io.github.turnstile.spring.Support;
import io.github.turnstile.spring.TurnstileLockRegistry;
import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.LockProvider;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ApplicationContext;
import org.springframework.integration.support.locks.LockRegistry;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The example application as a full {@code @SpringBootTest} against a real Redis: the
 * auto-configured beans are Turnstile's, the scheduled job runs, the inventory service does not
 * oversell under contention, the health indicator is UP; and the README's command runs the
 * two-node example to its end.
 */
@SpringBootTest(classes = ExampleApplication.class, properties = {"turnstile.lease-time=10s", "example.node=test"})
// closed after this class: a test JVM runs other classes next (reused forks), and the cached
// context would keep running its scheduled job against this class's Redis
@DirtiesContext
class ExampleApplicationTest {

  @DynamicPropertySource
  static void redis(DynamicPropertyRegistry registry) {
    registry.add("turnstile.uri", () -> RedisExtension.shared().uri());
  }

  @Autowired
  ApplicationContext context;

  @Autowired
  InventoryService inventory;

  @Test
  void theApplicationRunsOnTurnstile() throws Exception {
    assertInstanceOf(TurnstileLockRegistry.class, context.getBean(LockRegistry.class));
    assertInstanceOf(TurnstileLockProvider.class, context.getBean(LockProvider.class));
    assertEquals(Duration.ofSeconds(10), context.getBean(Turnstile.class).options().leaseTime());

    String sku = Support.unique("sku");
    inventory.restock(sku, 60);
    ExecutorService buyers = Executors.newFixedThreadPool(6);
    List<Future<Integer>> sold = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      sold.add(buyers.submit(() -> {
        int n = 0;
        while (inventory.reserve(sku, 1)) {
          n++;
        }
        return n;
      }));
    }
    int total = 0;
    for (Future<Integer> f : sold) {
      total += f.get(60, TimeUnit.SECONDS);
    }
    buyers.shutdown();
    assertEquals(60, total, "sold exactly the stock");
    assertEquals(0, inventory.stock(sku));

    Support.await("the scheduled job to run", Duration.ofSeconds(10), () -> !ReportJob.runsByPeriod().isEmpty());
    Object indicator = context.getBean("turnstileHealthIndicator");
    Object health = indicator.getClass().getInterfaces()[0].getMethod("health").invoke(indicator);
    assertEquals("UP", health.getClass().getMethod("getStatus").invoke(health).toString());
  }

  /** README: mvn -B -q test-compile exec:java@spring-example runs the same main, two nodes, to "OK". */
  @Test
  void theExampleMainRunsTwoNodesToItsEnd() {
    try (JvmProcess example = JvmProcess.start(List.of("-Dexample.seconds=5", "-Xmx384m"), ExampleApplication.class)) {
      String inventoryLine = example.awaitLine("Inventory:", Duration.ofSeconds(90));
      assertTrue(inventoryLine.contains("oversold: no"), inventoryLine);
      String jobLine = example.awaitLine("Report job ran once per period:", Duration.ofSeconds(60));
      assertTrue(jobLine.contains(": yes"), String.join("\n", example.output()));
      example.awaitLine("OK", Duration.ofSeconds(30));
      assertEquals(0, example.waitFor(Duration.ofSeconds(30)));
      assertFalse(example.output().contains("FAILED"));
    }
  }
}
