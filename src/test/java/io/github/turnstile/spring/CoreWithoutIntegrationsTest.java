package io.github.turnstile.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.io.File;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The core needs only Lettuce and Caffeine at run time: a JVM whose classpath holds Turnstile's
 * classes, Lettuce (with Netty and Reactor) and Caffeine, and nothing else (no Spring, no
 * ShedLock, no Micrometer, none of the test libraries), uses every primitive.
 */
@ExtendWith(RedisExtension.class)
class CoreWithoutIntegrationsTest {
  /** Lettuce, Caffeine and what they need at run time, by Maven repository path. */
  private static final List<String> RUNTIME = List.of("/io/lettuce/", "/io/netty/", "/io/projectreactor/",
      "/org/reactivestreams/", "/redis/clients/authentication/", "/com/github/ben-manes/caffeine/",
      "/org/jspecify/", "/com/google/errorprone/");

  @Test
  void theCoreRunsOnLettuceAndCaffeineAlone(TestRedis redis) {
    List<String> full = Arrays.asList(JvmProcess.testClasspath().split(File.pathSeparator));
    String only = full.stream()
        .filter(e -> e.endsWith("classes") || e.endsWith("classes" + File.separator)
            || RUNTIME.stream().anyMatch(p -> e.replace(File.separatorChar, '/').contains(p)))
        .collect(Collectors.joining(File.pathSeparator));
    assertFalse(only.contains("springframework") || only.contains("shedlock") || only.contains("micrometer"), only);
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    try (JvmProcess child = JvmProcess.start(java, only, List.of(), CoreOnlyMain.class, redis.uri())) {
      child.awaitLine("OK", Duration.ofSeconds(60));
      assertEquals(0, child.waitFor(Duration.ofSeconds(10)));
      List<String> out = child.output();
      assertEquals(5, out.stream().filter(l -> l.startsWith("ABSENT ")).count(), String.join("\n", out));
      assertTrue(out.stream().anyMatch(l -> l.startsWith("USED lock")), String.join("\n", out));
      assertFalse(child.stderr().contains("NoClassDefFoundError"), child.stderr());
    }
  }
}
