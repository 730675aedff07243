package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Virtual threads: 10,000 of them contend on a few locks and a semaphore, across two clients,
 * with no deadlock, mutual exclusion and the permit bound kept, and no pinning recorded by JFR
 * ({@code jdk.VirtualThreadPinned}, no threshold). The code is built for release 17, so the
 * scenario runs in a child JVM on a JDK 21+: this JVM if it is one, else the one named by the
 * system property {@code turnstile.test.jdk21} or the environment variable {@code JDK21_HOME}
 * (a JDK home), else the newest JDK 21+ under {@code /usr/lib/jvm}. It is skipped, saying so,
 * only if there is none.
 *
 * <p>Since JDK 24 (JEP 491) a virtual thread blocked inside {@code synchronized} no longer pins
 * its carrier, so on such a JDK the JFR check sees only the remaining causes (native frames,
 * class loading, linking and initialization). The child sets aside only the JDK's own class
 * loading, by the reason the JVM gives ({@link VirtualThreadsMain#jdkOwnPin}); any park or
 * wait that pins counts, and a canary pin proves it is seen. {@link #noSynchronizedInMainCode}
 * covers JDK 21 to 23: Turnstile's own code holds no monitor at all, so none of its blocking calls
 * can pin there either.
 */
@ExtendWith(RedisExtension.class)
class VirtualThreadsTest {
  private static final int THREADS = 10_000;
  private static final Pattern RESULT = Pattern.compile("(\\w+)=(\\d+)");

  @Test
  void tenThousandVirtualThreads(TestRedis redis) {
    Optional<Path> java = jdk21();
    Assumptions.assumeTrue(java.isPresent(), "no JDK 21+ found (this JVM is " + Runtime.version()
        + "; set -Dturnstile.test.jdk21=<jdk home> or JDK21_HOME): virtual-thread scenario skipped");
    try (JvmProcess child = JvmProcess.start(java.get().toString(), JvmProcess.testClasspath(),
        List.of("-Xmx512m", "-XX:FlightRecorderOptions:stackdepth=512"), VirtualThreadsMain.class,
        redis.uri(), Integer.toString(THREADS), "4", "3", "45")) {
      String line = child.awaitLine("RESULT ", Duration.ofSeconds(180)); // a burner run at load 15-19 needed more than 60 s
      System.out.println(String.join("\n", child.output()));
      Map<String, Long> r = new HashMap<>();
      Matcher m = RESULT.matcher(line);
      while (m.find()) {
        r.put(m.group(1), Long.parseLong(m.group(2)));
      }
      assertTrue(r.get("java") >= 21, line);
      assertEquals(0, r.get("errors"), line + "\nthe child's stderr (the first errors' traces):\n" + child.stderr());
      assertEquals(0, r.get("notVirtual"), line);
      assertEquals(THREADS, r.get("counted"), "every critical section ran once: " + line);
      assertEquals(0, r.get("exclusionViolations"), line);
      assertEquals(0, r.get("permitViolations"), line);
      assertTrue(r.get("maxPermits") <= 3, line);
      assertEquals(3, r.get("permitsLeft"), "every permit back: " + line + "\n" + child.stderr());
      assertEquals(0, r.get("pinned"), "virtual threads pinned:\n" + String.join("\n", child.output()));
      assertTrue(r.get("canaryPinned") >= 1, "the deliberate pin (a park in a class initializer) was not seen: "
          + "the pinning check cannot fail\n" + String.join("\n", child.output()));
      assertEquals(0, child.waitFor(Duration.ofSeconds(10)));
    }
  }

  /**
   * Which pins the child sets aside as the JDK's own: by the reason the JVM gives (JDK 24+), never a
   * park or wait outside class initialization, never a Turnstile class initializer that blocks.
   * The first case is the shape of the CI failure of 2026-11-26 (a virtual thread at {@code new} in
   * {@code CompletableFuture.timedGet} while another thread links that class).
   */
  @Test
  void pinsAreToldApartByTheReasonTheJvmGives() {
    List<String> unlock = List.of("java.util.concurrent.CompletableFuture.timedGet",
        "java.util.concurrent.CompletableFuture.get", "io.github.turnstile.Waits.get",
        "io.github.turnstile.Releases.awaitWhileUp", "io.github.turnstile.RedisLock.handOff",
        "io.github.turnstile.RedisLock.unlock");
    List<String> parked = new ArrayList<>(List.of("java.lang.VirtualThread.parkOnCarrierThread",
        "java.lang.VirtualThread.parkNanos", "java.util.concurrent.locks.LockSupport.parkNanos",
        "java.util.concurrent.CompletableFuture$Signaller.block"));
    parked.addAll(unlock);
    String linking = "Freeze or preempt failed (2)";
    String monitor = "Contended monitor enter";
    String park = "LockSupport.park";
    // the JDK's own
    assertNotNull(VirtualThreadsMain.jdkOwnPin(linking, monitor, unlock));
    assertNotNull(VirtualThreadsMain.jdkOwnPin("Waited for initialization of java.util.concurrent.TimeoutException"
        + " by another thread", "Object.wait", unlock));
    assertNotNull(VirtualThreadsMain.jdkOwnPin("VM call to com.github.benmanes.caffeine.cache.stats.DisabledStatsCounter"
        + ".<clinit> on stack", monitor, List.of("com.github.benmanes.caffeine.cache.stats.DisabledStatsCounter.<clinit>")));
    assertNotNull(VirtualThreadsMain.jdkOwnPin("VM call to io.github.turnstile.Inspection$Kind.<clinit> on stack", monitor,
        List.of("io.github.turnstile.Inspection$Kind.<clinit>")));
    assertNotNull(VirtualThreadsMain.jdkOwnPin(null, null, List.of("jdk.internal.loader.BuiltinClassLoader.loadClassOrNull",
        "java.lang.ClassLoader.loadClass", "io.github.turnstile.RedisLock.lock")));
    // pins that count
    assertNull(VirtualThreadsMain.jdkOwnPin(linking, park, parked));
    assertNull(VirtualThreadsMain.jdkOwnPin("Freeze or preempt failed (5)", park, parked));
    assertNull(VirtualThreadsMain.jdkOwnPin("Native or VM frame on stack", park, parked));
    assertNull(VirtualThreadsMain.jdkOwnPin("Native or VM frame on stack", monitor, unlock));
    assertNull(VirtualThreadsMain.jdkOwnPin(linking, "Object.wait", unlock));
    assertNull(VirtualThreadsMain.jdkOwnPin("VM call to io.github.turnstile.Engine$Init.<clinit> on stack", park,
        List.of("java.util.concurrent.locks.LockSupport.parkNanos", "io.github.turnstile.Engine$Init.<clinit>")));
    assertNull(VirtualThreadsMain.jdkOwnPin(null, null, parked));
    // its frames alone do not show the CI failure's linking (the frame rule before JDK 24)
    assertNull(VirtualThreadsMain.jdkOwnPin(null, null, unlock));
    assertNull(VirtualThreadsMain.jdkOwnPin(null, null,
        List.of("java.util.concurrent.locks.LockSupport.parkNanos", "io.github.turnstile.Engine$Init.<clinit>")));
  }

  /**
   * No {@code synchronized} in Turnstile's main code: on JDK 21 to 23 a virtual thread that blocks
   * while holding a monitor pins its carrier thread, so every lock in the code is a j.u.c lock.
   */
  @Test
  void noSynchronizedInMainCode() throws IOException {
    Path main = Paths.get("src", "main", "java");
    Assumptions.assumeTrue(Files.isDirectory(main), "run from the project directory");
    List<String> found = new ArrayList<>();
    Pattern keyword = Pattern.compile("\\bsynchronized\\b");
    try (Stream<Path> files = Files.walk(main)) {
      for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".java"))::iterator) {
        List<String> lines = Files.readAllLines(f);
        for (int i = 0; i < lines.size(); i++) {
          String code = lines.get(i).replaceAll("//.*|/\\*.*|^\\s*\\*.*", "");
          if (keyword.matcher(code).find()) {
            found.add(f + ":" + (i + 1) + ": " + lines.get(i).trim());
          }
        }
      }
    }
    assertEquals(List.of(), found);
  }

  /** The java binary of a JDK 21+, if one can be found. */
  static Optional<Path> jdk21() {
    Path self = Paths.get(System.getProperty("java.home"), "bin", "java");
    if (Runtime.version().feature() >= 21 && Files.isExecutable(self)) {
      return Optional.of(self);
    }
    for (String home : new String[] {System.getProperty("turnstile.test.jdk21"), System.getenv("JDK21_HOME")}) {
      if (home != null && !home.isBlank() && feature(Paths.get(home)) >= 21) {
        return Optional.of(Paths.get(home, "bin", "java"));
      }
    }
    Path best = null;
    int bestFeature = 0;
    Path jvms = Paths.get("/usr/lib/jvm");
    if (Files.isDirectory(jvms)) {
      try (DirectoryStream<Path> homes = Files.newDirectoryStream(jvms)) {
        for (Path home : homes) {
          int f = feature(home);
          if (f >= 21 && f > bestFeature) {
            best = home;
            bestFeature = f;
          }
        }
      } catch (IOException e) {
        // nothing found there
      }
    }
    return Optional.ofNullable(best).map(h -> h.resolve("bin").resolve("java"));
  }

  /** The feature version of the JDK at {@code home} (from its {@code release} file), or 0. */
  private static int feature(Path home) {
    Path release = home.resolve("release");
    if (!Files.isExecutable(home.resolve("bin").resolve("java")) || !Files.isReadable(release)) {
      return 0;
    }
    try {
      for (String line : Files.readAllLines(release)) {
        Matcher m = Pattern.compile("^JAVA_VERSION=\"(1\\.)?(\\d+)").matcher(line);
        if (m.find()) {
          return Integer.parseInt(m.group(2));
        }
      }
    } catch (IOException | RuntimeException e) {
      return 0;
    }
    return 0;
  }
}
