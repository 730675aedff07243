package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
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
 * Micrometer is an optional dependency: a JVM whose classpath lacks it (and its own dependencies)
 * uses every primitive without a {@code NoClassDefFoundError}.
 */
@ExtendWith(RedisExtension.class)
class OptionalMicrometerTest {

  @Test
  void worksWithoutMicrometerOnTheClasspath(TestRedis redis) {
    String full = JvmProcess.testClasspath();
    List<String> entries = Arrays.asList(full.split(File.pathSeparator));
    String stripped = entries.stream()
        .filter(e -> !e.contains(File.separator + "micrometer")
            && !e.contains("HdrHistogram") && !e.contains("LatencyUtils"))
        .collect(Collectors.joining(File.pathSeparator));
    assertNotEquals(full, stripped, "the test classpath has Micrometer, to take away");
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    try (JvmProcess child = JvmProcess.start(java, stripped, List.of(), NoMicrometerMain.class, redis.uri())) {
      child.awaitLine("NO-MICROMETER", Duration.ofSeconds(30));
      child.awaitLine("OK", Duration.ofSeconds(30));
      assertEquals(0, child.waitFor(Duration.ofSeconds(10)));
      assertTrue(!child.stderr().contains("NoClassDefFoundError"), child.stderr());
      assertTrue(child.output().stream().anyMatch(l -> l.startsWith("OPTIONS ") && l.contains("metrics=off")),
          String.join("\n", child.output()));
    }
  }
}
