package io.github.turnstile.compat;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectMethod;

import java.io.File;
import java.io.PrintWriter;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import org.junit.platform.engine.DiscoverySelector;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Runs JUnit test classes (or {@code Class#method}s) given as arguments, in this JVM, on whatever
 * classpath it was started with, and reports: one {@code VERSIONS} line naming the jars that the
 * libraries under test came from, one line per test, and a closing {@code COMPAT n passed, m
 * failed} line. Exits 0 only if every test passed and at least one ran. Started by
 * {@link SpringCompatibilityTest} with another stack's classpath.
 */
public final class CompatMain {
  private CompatMain() {}

  public static void main(String[] args) {
    System.out.println("VERSIONS " + jarOf("org.springframework.boot.SpringApplication")
        + " " + jarOf("org.springframework.context.ApplicationContext")
        + " " + jarOf("org.springframework.integration.support.locks.LockRegistry")
        + " " + jarOf("net.javacrumbs.shedlock.core.LockProvider")
        + " " + jarOf("io.lettuce.core.RedisClient")
        + " " + jarOf("io.netty.channel.Channel")
        + " " + jarOf("com.github.benmanes.caffeine.cache.Caffeine")
        + " " + jarOf("io.micrometer.core.instrument.MeterRegistry")
        + " " + jarOf("org.junit.jupiter.api.Test"));
    List<DiscoverySelector> selectors = new ArrayList<>();
    for (String a : args) {
      selectors.add(a.contains("#") ? selectMethod(a) : selectClass(a));
    }
    LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(selectors).build();
    Launcher launcher = LauncherFactory.create();
    SummaryGeneratingListener summary = new SummaryGeneratingListener();
    TestExecutionListener progress = new TestExecutionListener() {
      @Override
      public void executionFinished(TestIdentifier id, TestExecutionResult result) {
        if (id.isTest()) {
          System.out.println("TEST " + result.getStatus() + " " + id.getUniqueId()
              + result.getThrowable().map(t -> " " + t).orElse(""));
          System.out.flush();
        }
      }
    };
    launcher.execute(request, summary, progress);
    TestExecutionSummary s = summary.getSummary();
    if (s.getTotalFailureCount() > 0) {
      s.printFailuresTo(new PrintWriter(System.out, true), 40);
    }
    long passed = s.getTestsSucceededCount();
    long failed = s.getTotalFailureCount();
    System.out.println("COMPAT " + passed + " passed, " + failed + " failed, " + s.getTestsSkippedCount()
        + " skipped, " + s.getTestsAbortedCount() + " aborted");
    System.out.flush();
    System.exit(failed == 0 && passed > 0 && s.getTestsAbortedCount() == 0 ? 0 : 1);
  }

  /** The file name of the jar a class came from, or "absent". */
  private static String jarOf(String className) {
    try {
      URL location = Class.forName(className).getProtectionDomain().getCodeSource().getLocation();
      return new File(location.getPath()).getName();
    } catch (ClassNotFoundException e) {
      return "absent:" + className;
    } catch (RuntimeException e) {
      return "unknown:" + className;
    }
  }
}
