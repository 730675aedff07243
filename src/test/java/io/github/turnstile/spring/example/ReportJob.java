package io.github.turnstile.spring.example;

import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import net.javacrumbs.shedlock.spring.annotation.SchedulerLock;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;

/**
 * A scheduled job that must run on one node per period: every node's scheduler fires it, and
 * ShedLock (on Turnstile's lock provider) lets one of them run it.
 */
@Component
public class ReportJob {
  /** Period (epoch second, even) → the nodes that ran the job in it; shared by the nodes of this JVM. */
  private static final Map<Long, List<String>> RUNS = new ConcurrentHashMap<>();

  @Value("${example.node:node}")
  private String node;

  /** Every two seconds, on one node. */
  @Scheduled(cron = "*/2 * * * * *")
  @SchedulerLock(name = "example-report", lockAtMostFor = "PT1M", lockAtLeastFor = "PT1S")
  public void report() {
    long period = Instant.now().getEpochSecond() / 2 * 2;
    RUNS.computeIfAbsent(period, p -> new CopyOnWriteArrayList<>()).add(node);
  }

  /**
   * Returns the runs so far, by period.
   *
   * @return the runs so far, by period
   */
  public static Map<Long, List<String>> runsByPeriod() {
    return Map.copyOf(RUNS);
  }
}
