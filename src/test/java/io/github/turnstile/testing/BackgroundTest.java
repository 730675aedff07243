package io.github.turnstile.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The build's runner of jcstress beside the tests: its result reaches the build, and only this build's. */
class BackgroundTest {
  private static final String JAVA = Path.of(System.getProperty("java.home"), "bin", "java").toString();

  /** A command that prints a line and exits with the given code (a JVM, so that it runs anywhere). */
  private static List<String> exitWith(int code) {
    return List.of(JAVA, "-cp", System.getProperty("java.class.path"), Exit.class.getName(), Integer.toString(code));
  }

  @Test
  void theCommandsExitCodeAndOutputReachTheAwaitingStep(@TempDir Path dir) throws Exception {
    assertEquals(0, Background.start(dir, "build-1", exitWith(3)));
    assertEquals(3, Background.await(dir, "build-1", 1), "the command's exit code");
    assertTrue(Files.readString(dir.resolve("output.txt")).contains("exiting with 3"));
    assertEquals(0, Background.start(dir, "build-2", exitWith(0)));
    assertEquals(0, Background.await(dir, "build-2", 1));
  }

  @Test
  void anEarlierBuildsResultIsNotThisBuilds(@TempDir Path dir) throws Exception {
    Background.start(dir, "old-build", exitWith(0));
    // this build's command has not started (yet): the old result must not be taken for it
    CompletableFuture<Integer> awaited = CompletableFuture.supplyAsync(() -> {
      try {
        return Background.await(dir, "new-build", 1);
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    Thread.sleep(1000);
    assertTrue(!awaited.isDone(), "took the earlier build's result");
    Background.start(dir, "new-build", exitWith(4));
    assertEquals(4, awaited.get(30, TimeUnit.SECONDS));
  }

  @Test
  void aCommandThatCannotStartFailsTheAwaitingStepAtOnce(@TempDir Path dir) throws Exception {
    Background.start(dir, "b", List.of(dir.resolve("no-such-program").toString()));
    long t0 = System.nanoTime();
    assertEquals(127, Background.await(dir, "b", 10));
    assertDidNotWaitItsTime(t0);
    assertTrue(Files.readString(dir.resolve("output.txt")).contains("no-such-program"), "says what could not start");
  }

  @Test
  void aStarterThatDiedWithoutAResultFailsTheAwaitingStepAtOnce(@TempDir Path dir) throws Exception {
    Process gone = new ProcessBuilder(exitWith(0)).start();
    gone.waitFor();
    Files.writeString(dir.resolve("pid"), "b " + gone.pid() + "\n"); // as if killed before writing its result
    long t0 = System.nanoTime();
    assertEquals(1, Background.await(dir, "b", 10));
    assertDidNotWaitItsTime(t0);
  }

  /**
   * The defect these catch is a wait for the whole 10 min: the bound is half of that, not speed
   * (the answer takes about a poll, 200 ms, and still holds on a machine at load 10).
   */
  private static void assertDidNotWaitItsTime(long t0) {
    long waited = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0);
    assertTrue(waited < 300, "waited " + waited + " s: the awaiting step sat out (most of) its 10 min");
  }

  /** The command of these tests. */
  public static final class Exit {
    public static void main(String[] args) {
      System.out.println("exiting with " + args[0]);
      System.exit(Integer.parseInt(args[0]));
    }
  }
}
