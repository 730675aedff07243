package io.github.turnstile.shedlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.spring.Support;
import io.github.turnstile.spring.boot.TurnstileAutoConfiguration;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Instant;
import java.util.Map;
import java.util.Queue;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock;
import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;

/**
 * A Spring {@code @Scheduled} job with ShedLock's {@code @SchedulerLock}, in two application
 * contexts at once ("nodes" a and b, each with its own auto-configured Turnstile and
 * {@link TurnstileLockProvider}) on one Redis: both schedulers fire every second, and the job runs
 * exactly once per second, never on both nodes at once.
 */
@ExtendWith(RedisExtension.class)
class SchedulerLockTwoContextsTest {
  static final Queue<String> RUNS = new ConcurrentLinkedQueue<>();
  static final Queue<String> FIRED = new ConcurrentLinkedQueue<>();
  static final AtomicInteger INSIDE = new AtomicInteger();
  static final AtomicInteger MAX_INSIDE = new AtomicInteger();

  /** The job, as an application writes it. */
  public static class ReportJob {
    @Value("${node}")
    private String node;

    /** Every second, on one node only. */
    @Scheduled(cron = "* * * * * *")
    @SchedulerLock(name = "${job.name}", lockAtMostFor = "PT30S", lockAtLeastFor = "PT0.5S")
    public void run() {
      MAX_INSIDE.accumulateAndGet(INSIDE.incrementAndGet(), Math::max);
      RUNS.add(node + "@" + Instant.now().getEpochSecond());
      Support.sleep(100);
      INSIDE.decrementAndGet();
    }

    /** Every second, on every node: shows that both schedulers fire. */
    @Scheduled(cron = "* * * * * *")
    public void fired() {
      FIRED.add(node);
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableScheduling
  @EnableSchedulerLock(defaultLockAtMostFor = "PT30S")
  static class JobApplication {
    @Bean
    ReportJob reportJob() {
      return new ReportJob();
    }
  }

  @Test
  void theJobRunsOncePerPeriodAcrossTwoContexts(TestRedis redis) {
    String job = Support.unique("report");
    ApplicationContextRunner runner = new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class))
        .withUserConfiguration(JobApplication.class)
        .withPropertyValues("turnstile.uri=" + redis.uri(), "job.name=" + job);
    runner.withPropertyValues("node=a").run(a -> runner.withPropertyValues("node=b").run(b -> {
      assertInstanceOf(TurnstileLockProvider.class, a.getBean(LockProvider.class));
      assertInstanceOf(TurnstileLockProvider.class, b.getBean(LockProvider.class));
      long seconds = 6;
      Support.sleep(seconds * 1000);
    }));
    Map<Long, Integer> perSecond = new TreeMap<>();
    Map<String, Integer> perNode = new TreeMap<>();
    for (String run : RUNS) {
      String[] parts = run.split("@");
      perSecond.merge(Long.parseLong(parts[1]), 1, Integer::sum);
      perNode.merge(parts[0], 1, Integer::sum);
    }
    long firedA = FIRED.stream().filter("a"::equals).count();
    long firedB = FIRED.stream().filter("b"::equals).count();
    System.out.printf("SCHEDULERLOCK runs per second %s, per node %s; the schedulers fired a=%d b=%d times%n",
        perSecond, perNode, firedA, firedB);
    assertEquals(1, MAX_INSIDE.get(), "never on both nodes at once");
    assertTrue(firedA >= 4 && firedB >= 4, "both nodes' schedulers fired every second");
    assertTrue(perSecond.size() >= 4, "ran in most periods: " + perSecond);
    perSecond.forEach((second, count) -> assertEquals(1, count, "runs in second " + second + ": " + perSecond));
  }
}
