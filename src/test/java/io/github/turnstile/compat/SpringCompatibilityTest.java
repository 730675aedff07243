package io.github.turnstile.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The oldest supported stack, in a child JVM: the build resolves it into
 * {@code target/compat/boot3.classpath} (src/compat/boot3/pom.xml: Spring Boot 3.5.x with its
 * Spring Framework 6.2, Spring Integration 6.5, Micrometer and Netty 4.1; ShedLock 6; the oldest
 * Lettuce and Caffeine Turnstile supports). The child's classpath is Turnstile's classes and test
 * classes, that stack, and this JVM's remaining test libraries (JUnit, the Redis test tools); every
 * jar of a library that the stack replaces is left out. It runs, through {@link CompatMain}, the
 * integration tests that this JVM runs on the newest stack (Spring Boot 4.1, Spring Integration
 * 7.1, ShedLock 7, Lettuce 7) and the core's contract suites, against this JVM's Redis.
 */
@ExtendWith(RedisExtension.class)
class SpringCompatibilityTest {
  /** Libraries the stack under test replaces, by Maven repository path: none of this JVM's jars stay. */
  private static final List<String> REPLACED = List.of("/org/springframework/", "/net/javacrumbs/", "/io/lettuce/",
      "/io/netty/", "/io/projectreactor/", "/io/micrometer/", "/redis/clients/authentication/",
      "/com/github/ben-manes/caffeine/");

  /**
   * What the child runs: every integration test class that needs no Cluster or Sentinel, the core's
   * contract suites, and the connection-details tests on Sentinel and Cluster.
   */
  private static final List<String> TESTS = List.of(
      "io.github.turnstile.DistributedLockContractTest",
      "io.github.turnstile.DistributedReadWriteLockContractTest",
      "io.github.turnstile.DistributedSemaphoreContractTest",
      "io.github.turnstile.spring.TurnstileLockRegistryTest",
      "io.github.turnstile.spring.LeaderElectionTest",
      "io.github.turnstile.shedlock.TurnstileLockProviderTest",
      "io.github.turnstile.shedlock.SchedulerLockTwoContextsTest",
      "io.github.turnstile.spring.boot.TurnstileAutoConfigurationTest",
      // the full @SpringBootTest; the two-node example main already runs once, in this JVM's ExampleApplicationTest
      "io.github.turnstile.spring.example.ExampleApplicationTest#theApplicationRunsOnTurnstile",
      // Boot 3.5's RedisConnectionDetails naming a Sentinel and a Cluster (the child starts its own)
      "io.github.turnstile.spring.TurnstileLockRegistryOnSentinelTest#autoConfigurationUsesRedisConnectionDetailsForSentinel",
      "io.github.turnstile.spring.TurnstileLockRegistryOnClusterTest#autoConfigurationUsesRedisConnectionDetailsForCluster");

  @Test
  void springBoot35StackWithTheOldestLettuceAndCaffeine(TestRedis redis) throws IOException {
    runOn("boot3", redis, TESTS);
  }

  static void runOn(String stack, TestRedis redis, List<String> tests) throws IOException {
    Path file = Paths.get("target", "compat", stack + ".classpath");
    if (!Files.isRegularFile(file)) {
      fail(file + " is missing: the build writes it before the tests (mvn -B verify, or mvn test)");
    }
    List<String> stackJars = Arrays.asList(Files.readString(file, StandardCharsets.UTF_8).trim().split(File.pathSeparator));
    Set<String> stackArtifacts = new HashSet<>();
    for (String jar : stackJars) {
      stackArtifacts.add(artifact(jar));
    }
    List<String> cp = new ArrayList<>();
    List<String> rest = new ArrayList<>();
    for (String entry : JvmProcess.testClasspath().split(File.pathSeparator)) {
      String unix = entry.replace(File.separatorChar, '/');
      if (unix.endsWith("classes") || unix.endsWith("classes/")) {
        cp.add(entry); // Turnstile's classes and test classes, first
      } else if (REPLACED.stream().noneMatch(unix::contains) && !stackArtifacts.contains(artifact(entry))) {
        rest.add(entry);
      }
    }
    cp.addAll(stackJars);
    cp.addAll(rest);
    String lettuce = stackJars.stream().map(j -> Paths.get(j).getFileName().toString())
        .filter(n -> n.startsWith("lettuce-core-")).findFirst().orElseThrow();
    String caffeine = stackJars.stream().map(j -> Paths.get(j).getFileName().toString())
        .filter(n -> n.startsWith("caffeine-")).findFirst().orElseThrow();

    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<String> jvmArgs = List.of("-Xmx768m", "-Dredis.uri=" + redis.uri(), "-Dturnstile.redis.testcontainers=false");
    long start = System.nanoTime();
    try (JvmProcess child = JvmProcess.start(java, String.join(File.pathSeparator, cp), jvmArgs, CompatMain.class,
        tests.toArray(new String[0]))) {
      String versions = child.awaitLine("VERSIONS ", Duration.ofMinutes(1));
      System.out.println(stack + ": " + versions);
      String result;
      try {
        result = child.awaitLine("COMPAT ", Duration.ofMinutes(15));
      } finally {
        child.output().forEach(l -> System.out.println(stack + "> " + l));
      }
      int exit = child.waitFor(Duration.ofSeconds(30));
      System.out.printf("%s: %s in %d s%n", stack, result, (System.nanoTime() - start) / 1_000_000_000L);
      assertTrue(versions.contains(lettuce) && versions.contains(caffeine), versions);
      assertTrue(result.contains(" 0 failed"), result + "\n" + child.stderr());
      assertEquals(0, exit, result + "\n" + child.stderr());
    }
  }

  /** groupId path + artifactId of a jar in a Maven repository ({@code .../g/r/o/u/p/artifact/version/x.jar}). */
  private static String artifact(String jar) {
    Path p = Paths.get(jar);
    Path versionDir = p.getParent();
    Path artifactDir = versionDir == null ? null : versionDir.getParent();
    return artifactDir == null ? jar : artifactDir.toString();
  }
}
