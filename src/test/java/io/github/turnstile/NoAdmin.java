package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisServerProcess;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.function.Executable;

/**
 * The check of the suites that run as {@link LeastPrivilege#restrictedUser} (without
 * {@code client|unblock}, {@code client|id}, {@code client|setname}, {@code info}, {@code wait}):
 * Redis refused nothing else, and each of those at most once per client ({@link Engine#CREATED}
 * in this JVM, plus one per child JVM started ({@link JvmProcess#STARTED}): the detection), apart from Lettuce's own commands (its handshake's
 * {@code CLIENT SETINFO} is not counted at all; on a Cluster its topology refresh opens a
 * connection per node and refresh, names it and reads {@code INFO} there, so those two may also
 * be refused once per such connection: one {@code CLUSTER NODES} each, counted from
 * {@code INFO commandstats}).
 */
final class NoAdmin {
  private NoAdmin() {}

  /**
   * Asserts the refusals in the {@code ACL LOG} of {@code nodes} (every node of a Cluster).
   *
   * @param nodes the servers
   * @param cluster whether they form a Cluster
   * @return the refusals per command, added up over the nodes
   */
  static Map<String, Long> assertDetectedOnce(List<RedisServerProcess> nodes, boolean cluster) {
    // each child JVM of the suites (a holder killed with kill -9) is one client of its own
    return assertDetectedOnce(nodes, cluster, Engine.CREATED.get() + JvmProcess.STARTED.get());
  }

  /**
   * As {@link #assertDetectedOnce(List, boolean)}, for the given number of clients.
   *
   * @param nodes the servers
   * @param cluster whether they form a Cluster
   * @param clients how many clients ran since the {@code ACL LOG} was last reset
   * @return the refusals per command, added up over the nodes
   */
  static Map<String, Long> assertDetectedOnce(List<RedisServerProcess> nodes, boolean cluster, long clients) {
    Map<String, Long> refused = new TreeMap<>();
    long refreshes = 0;
    for (RedisServerProcess node : nodes) {
      if (!node.isAlive()) {
        continue;
      }
      LeastPrivilege.refusalCounts(node.command("ACL", "LOG")).forEach((k, v) -> refused.merge(k, v, Long::sum));
      if (cluster) {
        refreshes += calls(node.command("INFO", "commandstats"), "cluster|nodes");
      }
    }
    System.err.println("[turnstile-testing] ACL LOG of the restricted user: " + refused + " refusals, " + clients
        + " clients" + (cluster ? ", " + refreshes + " CLUSTER NODES calls (Lettuce's topology refresh)" : ""));
    List<Executable> checks = new ArrayList<>();
    boolean over = false;
    for (Map.Entry<String, Long> e : refused.entrySet()) {
      over |= e.getValue() > clients
          + (cluster && (e.getKey().equals("info") || e.getKey().equals("client|setname")) ? refreshes : 0);
    }
    if (over) { // which connections: the entries' client-info names them
      for (RedisServerProcess node : nodes) {
        if (node.isAlive()) {
          System.err.println("[turnstile-testing] ACL LOG of " + node + ":\n" + node.command("ACL", "LOG"));
        }
      }
    }
    for (Map.Entry<String, Long> e : refused.entrySet()) {
      String command = e.getKey();
      long count = e.getValue();
      long bound = clients + (cluster && (command.equals("info") || command.equals("client|setname")) ? refreshes : 0);
      checks.add(() -> assertTrue(LeastPrivilege.WITHOUT.contains(command),
          "Redis refused " + command + " (" + count + " times), which Turnstile cannot do without: " + refused));
      checks.add(() -> assertTrue(count <= bound, command + " refused " + count + " times, more than once per client ("
          + clients + ")" + (bound > clients ? " and Lettuce's refresh connection (" + (bound - clients) + ")" : "")));
    }
    assertAll("ACL LOG of the restricted user", checks);
    return refused;
  }

  /**
   * Every client connection of the nodes that has sent a command, but this check's own (and
   * replication and Sentinel links), is authenticated as {@code user}: on a Cluster, the topology
   * view's node addresses carry no credentials, and connections opened to them as they are log in
   * as {@code default}.
   */
  static void assertAllConnectionsAre(List<RedisServerProcess> nodes, String user) {
    for (RedisServerProcess node : nodes) {
      for (String line : node.command("CLIENT", "LIST").split("\\r?\\n")) {
        if (line.isBlank() || line.contains(" cmd=client|list ") || line.matches(".* flags=[SM] .*")
            || line.contains(" name=sentinel-") // the Sentinels' own links (their auth-user is not ours)
            || line.contains(" cmd=NULL ")) { // has sent nothing yet, not even its AUTH: a connection opening
          continue;
        }
        assertTrue(line.contains(" user=" + user + " "), "a connection of another user on " + node + ": " + line);
      }
    }
  }

  /** The calls of {@code command} in an {@code INFO commandstats} reply. */
  static long calls(String commandstats, String command) {
    for (String line : commandstats.split("\r?\n")) {
      if (line.startsWith("cmdstat_" + command + ":calls=")) {
        return Long.parseLong(line.substring(line.indexOf('=') + 1, line.indexOf(',')));
      }
    }
    return 0;
  }
}
