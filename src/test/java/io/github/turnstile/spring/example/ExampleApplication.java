package io.github.turnstile.spring.example;

import io.github.turnstile.testing.RedisServerProcess;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.scheduling.annotation.EnableScheduling;

/**
 * The example application of the README: a Spring Boot application with Turnstile's
 * auto-configuration, a ShedLock {@code @SchedulerLock} job ({@link ReportJob}) and a service that
 * guards a read-check-write with Spring Integration's {@code LockRegistry}
 * ({@link InventoryService}). Its whole configuration is two properties:
 * {@code turnstile.uri} and {@code turnstile.lease-time}.
 *
 * <pre>
 * mvn -B -q test-compile exec:java@spring-example      # -Dexample.seconds=8; REDIS_URI=... for your Redis
 * </pre>
 *
 * <p>{@link #main} starts an embedded {@code redis-server} (unless {@code REDIS_URI} is set), then
 * two instances ("nodes") of the application in this JVM, each with its own Turnstile client, as
 * two machines would run it. Both schedulers fire the job every two seconds; it runs once per
 * period. Both nodes sell the same stock from four threads each; the lock keeps it from being
 * oversold. It prints what happened and exits 0 if all of it held.
 */
@SpringBootApplication
@EnableScheduling
@EnableSchedulerLock(defaultLockAtMostFor = "PT1M")
public class ExampleApplication {

  /**
   * Starts one node of the application.
   *
   * @param node the node's name
   * @param redisUri where Redis is
   * @return the running application context
   */
  public static ConfigurableApplicationContext startNode(String node, String redisUri) {
    return new SpringApplicationBuilder(ExampleApplication.class)
        .web(WebApplicationType.NONE)
        .properties(Map.of(
            "turnstile.uri", redisUri,
            "turnstile.lease-time", "10s",
            "example.node", node,
            "spring.main.banner-mode", "off",
            "logging.level.root", "warn"))
        .run();
  }

  public static void main(String[] args) throws Exception {
    int seconds = Integer.getInteger("example.seconds", 8);
    String uri = System.getenv("REDIS_URI");
    RedisServerProcess embedded = null;
    if (uri == null || uri.isBlank()) {
      embedded = RedisServerProcess.start();
      uri = embedded.uri();
      System.out.println("Redis: embedded redis-server " + embedded.version() + " at " + uri + " (set REDIS_URI to use yours)");
    } else {
      System.out.println("Redis: " + uri);
    }
    boolean ok;
    try (ConfigurableApplicationContext a = startNode("node-a", uri);
        ConfigurableApplicationContext b = startNode("node-b", uri)) {
      System.out.println("Started two nodes; running for " + seconds + " s ...");
      InventoryService shopA = a.getBean(InventoryService.class);
      InventoryService shopB = b.getBean(InventoryService.class);
      String sku = "sku-" + System.nanoTime();
      int stock = 200;
      shopA.restock(sku, stock);
      ExecutorService buyers = Executors.newFixedThreadPool(8);
      List<Future<Integer>> sold = new java.util.ArrayList<>();
      for (int i = 0; i < 8; i++) {
        InventoryService shop = i % 2 == 0 ? shopA : shopB;
        sold.add(buyers.submit(() -> {
          int mine = 0;
          while (shop.reserve(sku, 1)) {
            mine++;
          }
          return mine;
        }));
      }
      int total = 0;
      for (Future<Integer> f : sold) {
        total += f.get(2, TimeUnit.MINUTES);
      }
      buyers.shutdown();
      System.out.printf("Inventory: %d units in stock, 8 buyers on 2 nodes sold %d, %d left, oversold: %s%n",
          stock, total, shopA.stock(sku), total > stock ? "YES" : "no");

      Thread.sleep(seconds * 1000L);
      Map<Long, List<String>> runs = new TreeMap<>(ReportJob.runsByPeriod());
      runs.forEach((period, nodes) -> System.out.println("Report job, period " + period + ": ran on " + nodes));
      boolean oncePerPeriod = runs.values().stream().allMatch(n -> n.size() == 1);
      System.out.println("Report job ran once per period: " + (oncePerPeriod ? "yes" : "NO") + " (" + runs.size()
          + " periods)");
      ok = total == stock && shopA.stock(sku) == 0 && oncePerPeriod && runs.size() >= 2;
    } finally {
      if (embedded != null) {
        embedded.close();
      }
    }
    System.out.println(ok ? "OK" : "FAILED");
    System.exit(ok ? 0 : 1);
  }
}
