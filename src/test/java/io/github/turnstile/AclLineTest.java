package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.LeastPrivilege.Deployment;
import io.github.turnstile.testing.RedisServerProcess;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The {@code ACL SETUSER} lines of docs/ACL.md (the README links to them) grant exactly what Turnstile runs: the default lines the
 * commands of every Lua script (parsed from the resources), plus the fixed list of what Turnstile's
 * Java code and Lettuce send ({@link LeastPrivilege}), less the optional ones; the optional line
 * exactly those. No category, no key or channel beyond the prefix, and no {@code @admin} or
 * {@code @dangerous} command in a default line (asked of the server under test). A new command in a
 * script fails this test until docs/ACL.md says so. Then Redis itself must accept the lines.
 */
class AclLineTest {

  @Test
  void standaloneLineGrantsExactlyWhatTurnstileRuns() {
    check(Deployment.STANDALONE);
  }

  @Test
  void clusterLineGrantsExactlyWhatTurnstileRuns() {
    check(Deployment.CLUSTER);
  }

  private static void check(Deployment d) {
    List<String> line = LeastPrivilege.readmeLine(d);
    Map<String, String> required = LeastPrivilege.defaults(d);
    Set<String> granted = new TreeSet<>();
    List<String> problems = new ArrayList<>();
    assertEquals(LeastPrivilege.USER, line.get(0), "the README's user name");
    List<String> rules = line.subList(1, line.size());
    if (rules.size() < 4 || !rules.get(0).equals("reset") || !rules.get(1).equals("on")
        || !rules.get(2).startsWith(">")) {
      problems.add("the line must start 'ACL SETUSER turnstile reset on >PASSWORD' (the line is the whole user)");
    }
    List<String> keys = new ArrayList<>();
    List<String> channels = new ArrayList<>();
    boolean channelsReset = false;
    for (String rule : rules.subList(Math.min(3, rules.size()), rules.size())) {
      if (rule.startsWith("+") && !rule.startsWith("+@")) {
        if (!granted.add(rule.substring(1))) {
          problems.add("granted twice: " + rule);
        }
      } else if (rule.startsWith("~")) {
        keys.add(rule);
      } else if (rule.equals("resetchannels")) {
        channelsReset = true;
      } else if (rule.startsWith("&")) {
        if (!channelsReset) {
          problems.add(rule + " before 'resetchannels' (Redis 6.2 refuses it after reset grants allchannels)");
        }
        channels.add(rule);
      } else {
        problems.add("not a least-privilege rule: '" + rule + "' (grant single commands, '~{turnstile:*' and"
            + " '&{turnstile:*' only: no category, allkeys, allchannels or other pattern)");
      }
    }
    if (!keys.equals(List.of("~{turnstile:*"))) {
      problems.add("key patterns should be exactly ~{turnstile:* (every key is {prefix:name}:...): " + keys);
    }
    if (!channels.equals(List.of("&{turnstile:*"))) {
      problems.add("channel patterns should be exactly &{turnstile:*: " + channels);
    }
    for (Map.Entry<String, String> e : required.entrySet()) {
      if (!granted.contains(e.getKey())) {
        problems.add("missing +" + e.getKey() + " (" + e.getValue() + ")");
      }
    }
    for (String g : granted) {
      if (!required.containsKey(g)) {
        problems.add("+" + g + " is granted but nothing uses it (neither a script nor"
            + " LeastPrivilege's list of Java/Lettuce commands): remove it");
      }
    }
    if (!problems.isEmpty()) {
      fail("docs/ACL.md's ACL SETUSER line for " + d + " does not match what Turnstile runs:\n  - "
          + String.join("\n  - ", problems)
          + "\nUpdate the line in docs/ACL.md (and, for a command sent"
          + " from Java code or by Lettuce, the list in src/test/java/io/github/turnstile/testing/"
          + "LeastPrivilege.java). Required: +" + String.join(" +", required.keySet()));
    }
  }

  /** The optional line adds exactly the optional commands, each of which docs/ACL.md says what it buys. */
  @Test
  void optionalLineGrantsExactlyTheOptionalCommands() throws Exception {
    List<String> line = LeastPrivilege.readmeOptionalLine();
    assertEquals(LeastPrivilege.USER, line.get(0), "the README's user name");
    Set<String> granted = new TreeSet<>();
    for (String rule : line.subList(1, line.size())) {
      assertTrue(rule.startsWith("+") && !rule.startsWith("+@"), "the optional line only adds commands: " + rule);
      granted.add(rule.substring(1));
    }
    assertEquals(new TreeSet<>(LeastPrivilege.optional().keySet()), granted,
        "docs/ACL.md's optional ACL SETUSER line against LeastPrivilege's optional commands");
    String readme = java.nio.file.Files.readString(java.nio.file.Path.of(
        System.getProperty("basedir", "."), "docs", "ACL.md"));
    for (String c : granted) {
      // in a Markdown table a pipe inside code is written as backslash and pipe
      assertTrue(readme.contains("`+" + c + "`") || readme.contains("`+" + c.replace("|", "\\|") + "`"),
          "docs/ACL.md says what +" + c + " buys");
    }
  }

  /**
   * No default line grants an {@code @admin} or {@code @dangerous} command (as the server under test
   * categorizes them), and every such command Turnstile or Lettuce sends is optional.
   */
  @Test
  void noAdminOrDangerousCommandByDefault() {
    try (RedisServerProcess server = RedisServerProcess.start()) {
      Set<String> risky = new TreeSet<>();
      for (String category : List.of("admin", "dangerous")) {
        risky.addAll(List.of(server.command("ACL", "CAT", category).split("\n")));
      }
      for (Deployment d : Deployment.values()) {
        for (String c : LeastPrivilege.readmeLine(d)) {
          if (c.startsWith("+")) {
            assertFalse(risky.contains(c.substring(1)), "the default " + d + " line grants " + c
                + ", an @admin or @dangerous command on " + server.version());
          }
        }
        for (String c : LeastPrivilege.required(d).keySet()) {
          if (risky.contains(c)) {
            assertTrue(LeastPrivilege.optional(d).containsKey(c), c + " is @admin or @dangerous: it must be optional");
          }
        }
      }
    }
  }

  /** Redis accepts both lines as they are, alone and with the optional line (the Cluster one needs Redis 7: sharded pub/sub). */
  @Test
  void redisAcceptsTheLines() {
    try (RedisServerProcess server = RedisServerProcess.start()) {
      String version = server.version();
      LeastPrivilege.createUser(server, Deployment.STANDALONE, "standalone", "pw", r -> r);
      String user = server.command("ACL", "GETUSER", "standalone");
      assertTrue(user.contains("{turnstile:*"), user);
      LeastPrivilege.createFullUser(server, Deployment.STANDALONE, "standalone-full", "pw");
      if (LeastPrivilege.major(version) < 7) {
        System.err.println("[turnstile-testing] SKIPPED AclLineTest: the Cluster ACL line needs Redis >= 7"
            + " (sharded pub/sub commands); this redis-server is " + version);
        return;
      }
      LeastPrivilege.createUser(server, Deployment.CLUSTER, "cluster", "pw", r -> r);
      LeastPrivilege.createFullUser(server, Deployment.CLUSTER, "cluster-full", "pw");
    }
  }
}
