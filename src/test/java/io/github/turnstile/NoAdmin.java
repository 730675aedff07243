package io.github.turnstile;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
 * in this JVM: the detection), apart from Lettuce's own commands (its handshake's
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
    // the child JVMs count too: the leased contract suite's two holder JVMs (SemaphoreHolderMain)
    // connect as the same user, and each detects the refusals once (before, the semaphore suite
    // on one server failed here: client|setname refused 5 times, "more than once per client (3)")
    return assertDetectedOnce(nodes, cluster, Engine.CREATED.get() + io.github.turnstile.testing.JvmProcess.STARTED.get());
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
