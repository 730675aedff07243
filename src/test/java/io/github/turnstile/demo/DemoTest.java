package io.github.turnstile.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * README's first command, the demo, as a newcomer meets it: in a JVM of its own, it
 * runs on its embedded Redis and prints no logging noise (no SLF4J warnings, no stack trace); a
 * wrong {@code REDIS_URI} gets one line and a non-zero exit, not a stack trace.
 */
class DemoTest {
  @Test
  void runsQuietlyOnItsOwnRedis() throws Exception {
    Run run = demo(null);
    assertEquals(0, run.exit, run.out);
    assertTrue(run.out.startsWith("Redis: started embedded redis-server "), run.out);
    assertFalse(run.out.contains("SLF4J"), run.out);
    assertFalse(run.out.contains("\tat "), "no stack trace: " + run.out);
    assertFalse(run.err.contains("SLF4J"), run.err);
    assertFalse(run.err.contains("\tat "), "no stack trace: " + run.err);
  }

  @Test
  void aWrongRedisUriGetsOneLineAndANonZeroExit() throws Exception {
    Run run = demo("redis://127.0.0.1:1");
    assertEquals(1, run.exit, run.out);
    List<String> lines = run.out.lines().toList();
    assertEquals(1, lines.size(), "one line: " + run.out);
    assertTrue(lines.get(0).startsWith("Redis: cannot use REDIS_URI redis://127.0.0.1:1: "), run.out);
    assertFalse(run.err.contains("\tat "), "no stack trace: " + run.err);
  }

  private record Run(int exit, String out, String err) {}

  private static Run demo(String redisUri) throws IOException, InterruptedException {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb = new ProcessBuilder(java, "-Ddemo.clients=2", "-Ddemo.threads=2", "-Ddemo.seconds=1",
        Demo.class.getName());
    pb.environment().put("CLASSPATH", JvmProcess.testClasspath());
    pb.environment().remove("REDIS_URI");
    if (redisUri != null) {
      pb.environment().put("REDIS_URI", redisUri);
    }
    Process p = pb.start();
    p.getOutputStream().close();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    Thread drain = new Thread(() -> copy(p.getErrorStream(), err));
    drain.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    // generous: a JVM start, an embedded Redis and a 1 s demo on a machine at load 10
    assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the demo ended: " + out);
    drain.join(10_000);
    return new Run(p.exitValue(), out, err.toString(StandardCharsets.UTF_8));
  }

  private static void copy(InputStream in, ByteArrayOutputStream out) {
    try {
      in.transferTo(out);
    } catch (IOException e) {
      // the process ended
    }
  }
}
