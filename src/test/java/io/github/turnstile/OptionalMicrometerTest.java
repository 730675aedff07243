package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.metrics.DefaultCommandLatencyCollector;
import io.lettuce.core.resource.ClientResources;
import java.io.File;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Micrometer is an optional dependency: a JVM whose classpath lacks it (and its own dependencies)
 * uses every primitive without a {@code NoClassDefFoundError}. With it, Lettuce's own per-command
 * latency histograms stay off.
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

  /**
   * Micrometer brings LatencyUtils and HdrHistogram, and with them Lettuce times every command
   * into histograms of its own unless told otherwise (nothing reads them, and the
   * uncontended pair allocated about 440 bytes more with them).
   */
  @Test
  void lettucesOwnCommandLatencyHistogramsAreOff() {
    assertTrue(DefaultCommandLatencyCollector.isAvailable(),
        "LatencyUtils and HdrHistogram are on the test classpath: Lettuce's default would record");
    ClientResources lettuceDefault = ClientResources.create();
    ClientResources owned = Turnstile.ownedResources();
    try {
      assertTrue(lettuceDefault.commandLatencyRecorder().isEnabled(), "Lettuce's default records latencies here");
      assertFalse(owned.commandLatencyRecorder().isEnabled(), "Turnstile's client resources record no latencies");
    } finally {
      lettuceDefault.shutdown(0, 1, TimeUnit.SECONDS);
      owned.shutdown(0, 1, TimeUnit.SECONDS);
    }
  }
}
