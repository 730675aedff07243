package io.github.turnstile.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.Turnstile;
import io.github.turnstile.spring.boot.TurnstileAutoConfiguration;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The README is what a newcomer copies, so every snippet in it is held to the build:
 * <ul>
 *   <li>each Java block is the text of a twin under {@code src/test/java} between
 *       {@code // README: <id>} and {@code // README: end} markers (so it compiles with the
 *       tests), and every twin is shown in the README;</li>
 *   <li>the twins run against the test Redis: the first example's {@code main}, the semaphore and
 *       read/write fragments, and the Spring service in a context made from the README's
 *       properties;</li>
 *   <li>the dependency block names this build's artifact, the properties exist, the two commands
 *       are the build's ({@code .ci/run} calls the second), and every relative link resolves (to
 *       a file, and to a heading of it when it names one).</li>
 * </ul>
 */
@ExtendWith(RedisExtension.class)
class ReadmeSnippetsTest {
  private static final Pattern FENCE = Pattern.compile("^```(\\w*)\\s*$");
  private static final Pattern BEGIN = Pattern.compile("^\\s*// README: ([a-z][a-z-]*)\\s*$");
  private static final Pattern END = Pattern.compile("^\\s*// README: end\\s*$");

  private final TestRedis redis;

  ReadmeSnippetsTest(TestRedis redis) {
    this.redis = redis;
  }

  /** A fenced block of the README: its language and lines. */
  record Block(String language, List<String> lines, int line) {
    String text() {
      return String.join("\n", lines);
    }
  }

  static List<Block> readmeBlocks() throws IOException {
    List<String> lines = Files.readAllLines(Paths.get("README.md"), StandardCharsets.UTF_8);
    List<Block> blocks = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher open = FENCE.matcher(lines.get(i));
      if (!open.matches()) {
        continue;
      }
      int start = i;
      List<String> body = new ArrayList<>();
      for (i++; i < lines.size() && !lines.get(i).startsWith("```"); i++) {
        body.add(lines.get(i));
      }
      blocks.add(new Block(open.group(1), body, start + 1));
    }
    return blocks;
  }

  /** The twins: id to text (dedented, trailing spaces dropped), from every test source. */
  static Map<String, String> twins() throws IOException {
    Map<String, String> twins = new LinkedHashMap<>();
    try (Stream<Path> files = Files.walk(Paths.get("src", "test", "java"))) {
      for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        for (int i = 0; i < lines.size(); i++) {
          Matcher begin = BEGIN.matcher(lines.get(i));
          if (!begin.matches() || begin.group(1).equals("end")) {
            continue;
          }
          List<String> body = new ArrayList<>();
          for (i++; i < lines.size() && !END.matcher(lines.get(i)).matches(); i++) {
            body.add(lines.get(i));
          }
          if (twins.put(begin.group(1), dedent(body)) != null) {
            fail("two twins named " + begin.group(1));
          }
        }
      }
    }
    return twins;
  }

  static String dedent(List<String> lines) {
    int indent = lines.stream().filter(l -> !l.isBlank())
        .mapToInt(l -> l.length() - l.stripLeading().length()).min().orElse(0);
    List<String> out = new ArrayList<>();
    for (String l : lines) {
      out.add(l.isBlank() ? "" : l.substring(indent).stripTrailing());
    }
    return String.join("\n", out);
  }

  /** Every Java block of the README is a twin's text, and every twin is in the README. */
  @Test
  void everyJavaSnippetIsACompiledTwin() throws IOException {
    Map<String, String> twins = twins();
    List<String> shown = new ArrayList<>();
    for (Block b : readmeBlocks()) {
      if (!b.language().equals("java")) {
        continue;
      }
      String text = dedent(b.lines());
      String id = twins.entrySet().stream().filter(e -> e.getValue().equals(text)).map(Map.Entry::getKey)
          .findFirst().orElse(null);
      if (id == null) {
        fail("README.md line " + b.line() + ": this Java block has no twin under src/test/java (a region"
            + " between '// README: <id>' and '// README: end' with exactly its text):\n" + text);
      }
      shown.add(id);
    }
    List<String> unshown = new ArrayList<>(twins.keySet());
    unshown.removeAll(shown);
    assertEquals(List.of(), unshown, "twins the README does not show (stale)");
    assertTrue(shown.containsAll(List.of("quick-start", "semaphore", "read-write-lock", "spring-service")), shown.toString());
  }

  /** The first example runs as written, against the test Redis (its argument), and prints its token. */
  @Test
  void theFirstExampleRuns() throws Exception {
    java.io.PrintStream out = System.out;
    java.io.ByteArrayOutputStream printed = new java.io.ByteArrayOutputStream();
    System.setOut(new java.io.PrintStream(printed, true, StandardCharsets.UTF_8));
    try {
      Class.forName("QuickStart").getMethod("main", String[].class).invoke(null, (Object) new String[] {redis.uri()});
    } finally {
      System.setOut(out);
    }
    String line = printed.toString(StandardCharsets.UTF_8).trim();
    System.out.println("QuickStart printed: " + line);
    assertTrue(line.matches("orders:42 is ours, fencing token \\d{16,}"), line);
  }

  /** The fragments run: the semaphore lets the call through, the read lock the read. */
  @Test
  void theFragmentsRun() throws Exception {
    try (Turnstile turnstile = Turnstile.connect(redis.uri())) {
      int calls = ReadmeSnippets.CALLS.get();
      ReadmeSnippets.semaphore(turnstile);
      assertEquals(calls + 1, ReadmeSnippets.CALLS.get(), "the partner was called under a permit");
      assertEquals(4, turnstile.semaphore("partner-api", 4).availablePermits(), "the permit was released");
      assertEquals("orders:42", ReadmeSnippets.whoHoldsIt(turnstile).name());
      int reads = ReadmeSnippets.READS.get();
      ReadmeSnippets.readWriteLock(turnstile);
      assertEquals(reads + 1, ReadmeSnippets.READS.get());
      assertFalse(turnstile.readWriteLock("catalog").readLock().isLocked(), "the read lock was released");
    }
  }

  /**
   * The Spring Boot part: the README's properties (with the test Redis's URI) make a context whose
   * Turnstile has the lease time they say, and the README's service runs in it.
   */
  @Test
  void theSpringServiceRunsOnTheReadmesProperties() throws IOException {
    Block props = readmeBlocks().stream().filter(b -> b.language().equals("properties")).findFirst().orElseThrow();
    String json;
    try (InputStream in = getClass().getClassLoader().getResourceAsStream("META-INF/spring-configuration-metadata.json")) {
      json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    List<String> values = new ArrayList<>();
    for (String line : props.lines()) {
      String key = line.substring(0, line.indexOf('=')).trim();
      assertTrue(json.contains("\"name\": \"" + key + "\""), key + " is a property of Turnstile's");
      values.add(key.equals("turnstile.uri") ? "turnstile.uri=" + redis.uri() : line);
    }
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class))
        .withPropertyValues(values.toArray(new String[0]))
        .withBean(Payouts.class)
        .run(context -> {
          assertNull(context.getStartupFailure());
          assertEquals(Duration.ofSeconds(10), context.getBean(Turnstile.class).options().leaseTime());
          context.getBean(Payouts.class).run();
          assertFalse(context.getBean(Turnstile.class).lock("payouts").isLocked(), "released");
        });
  }

  /** The dependency is this build's; the two commands are the build's, and CI runs the second. */
  @Test
  void theDependencyAndTheTwoCommandsAreTheBuilds() throws IOException {
    String pom = Files.readString(Paths.get("pom.xml"), StandardCharsets.UTF_8);
    String project = pom.substring(0, pom.indexOf("<properties>"));
    Block xml = readmeBlocks().stream().filter(b -> b.language().equals("xml")).findFirst().orElseThrow();
    for (String tag : List.of("groupId", "artifactId", "version")) {
      assertEquals(tag(project, tag), tag(xml.text(), tag), "the README's dependency: " + tag);
    }
    Block commands = readmeBlocks().stream().filter(b -> b.language().equals("bash")).findFirst().orElseThrow();
    List<String> twoCommands = commands.lines().stream().map(l -> l.replaceAll("\\s*#.*$", "")).toList();
    assertEquals(List.of("mvn -B -q test-compile exec:java@demo", "mvn -B verify"), twoCommands);
    assertTrue(pom.contains("<id>demo</id>") && pom.contains("<mainClass>io.github.turnstile.demo.Demo</mainClass>"));
    List<String> ci = Files.readAllLines(Paths.get(".ci", "run"), StandardCharsets.UTF_8);
    assertTrue(ci.contains("mvn -B verify"), ".ci/run calls the README's test command");
  }

  /** Every relative link of the README names a file that exists, and a heading of it if it names one. */
  @Test
  void everyLinkResolves() throws IOException {
    String readme = Files.readString(Paths.get("README.md"), StandardCharsets.UTF_8);
    Matcher link = Pattern.compile("\\]\\(([^)\\s]+)\\)").matcher(readme);
    int checked = 0;
    while (link.find()) {
      String target = link.group(1);
      if (target.startsWith("http")) {
        continue;
      }
      String file = target.contains("#") ? target.substring(0, target.indexOf('#')) : target;
      Path path = file.isEmpty() ? Paths.get("README.md") : Paths.get(file);
      assertTrue(Files.exists(path), "README links to " + target + ": no such file");
      if (target.contains("#")) {
        String anchor = target.substring(target.indexOf('#') + 1);
        List<String> anchors = Files.readAllLines(path, StandardCharsets.UTF_8).stream()
            .filter(l -> l.startsWith("#")).map(ReadmeSnippetsTest::slug).toList();
        assertTrue(anchors.contains(anchor), "README links to " + target + ": no such heading in " + anchors);
      }
      checked++;
    }
    assertTrue(checked >= 10, "links checked: " + checked);
  }

  /** GitHub's anchor of a Markdown heading. */
  static String slug(String heading) {
    String text = heading.replaceFirst("^#+\\s*", "").toLowerCase(Locale.ROOT);
    return text.replaceAll("[^a-z0-9 _-]", "").replace(' ', '-');
  }

  private static String tag(String xml, String name) {
    int from = xml.indexOf("<" + name + ">") + name.length() + 2;
    return xml.substring(from, xml.indexOf("</" + name + ">", from)).trim();
  }
}
