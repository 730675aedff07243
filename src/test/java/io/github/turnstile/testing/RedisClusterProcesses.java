package io.github.turnstile.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A real Redis Cluster on loopback ports, made of {@link RedisServerProcess} children: by default
 * 3 masters with one replica each, the 16384 slots split evenly. Built with plain cluster commands
 * ({@code CLUSTER ADDSLOTS}, {@code MEET}, {@code REPLICATE}), so no {@code redis-cli} is needed.
 *
 * <p>The node timeout is short by default (1 s) so that a killed master fails over within a few
 * seconds.
 */
public final class RedisClusterProcesses implements AutoCloseable {
    private static final int SLOTS = 16384;
    private static final Duration FORM_TIMEOUT = Duration.ofSeconds(30);

    private final List<RedisServerProcess> nodes;

    private RedisClusterProcesses(List<RedisServerProcess> nodes) {
        this.nodes = nodes;
    }

    /**
     * Starts {@code masters} masters with {@code replicasPerMaster} replicas each and waits until
     * the cluster reports {@code cluster_state:ok} everywhere and every replica is in sync.
     *
     * @param masters number of masters (at least 1)
     * @param replicasPerMaster replicas per master
     * @return the running cluster
     */
    public static RedisClusterProcesses start(int masters, int replicasPerMaster) {
        return start(masters, replicasPerMaster, 1000);
    }

    /**
     * As {@link #start(int, int)}, with the given {@code cluster-node-timeout}: how long a master
     * may be unreachable before its replica takes over. Clusters shared by many tests use a long
     * one, so that a loaded machine does not trigger failovers nobody asked for.
     *
     * @param masters number of masters (at least 1)
     * @param replicasPerMaster replicas per master
     * @param nodeTimeoutMillis the node timeout
     * @return the running cluster
     */
    public static RedisClusterProcesses start(int masters, int replicasPerMaster, int nodeTimeoutMillis) {
        return start(masters, replicasPerMaster, nodeTimeoutMillis, new String[0]);
    }

    /**
     * As {@link #start(int, int, int)}, with more {@code redis-server} arguments for every node
     * (e.g. {@code "--rename-command", "PUBLISH", ""}).
     *
     * @param masters number of masters (at least 1)
     * @param replicasPerMaster replicas per master
     * @param nodeTimeoutMillis the node timeout
     * @param extraArgs more arguments, one argv element each
     * @return the running cluster
     */
    public static RedisClusterProcesses start(int masters, int replicasPerMaster, int nodeTimeoutMillis,
            String... extraArgs) {
        List<RedisServerProcess> nodes = new ArrayList<>();
        try {
            for (int i = 0; i < masters * (1 + replicasPerMaster); i++) {
                List<String> args = new ArrayList<>(List.of("--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", Integer.toString(nodeTimeoutMillis),
                        "--cluster-require-full-coverage", "no", "--repl-ping-replica-period", "1"));
                args.addAll(List.of(extraArgs));
                nodes.add(RedisServerProcess.start(args.toArray(new String[0])));
            }
            RedisClusterProcesses cluster = new RedisClusterProcesses(nodes);
            cluster.form(masters, replicasPerMaster);
            return cluster;
        } catch (RuntimeException | Error e) {
            nodes.forEach(RedisServerProcess::close);
            throw e;
        }
    }

    private void form(int masters, int replicasPerMaster) {
        for (int m = 0; m < masters; m++) {
            int from = m * SLOTS / masters;
            int to = (m + 1) * SLOTS / masters;
            List<String> args = new ArrayList<>(List.of("CLUSTER", "ADDSLOTS"));
            for (int slot = from; slot < to; slot++) {
                args.add(Integer.toString(slot));
            }
            expectOk(nodes.get(m).command(args.toArray(new String[0])));
        }
        RedisServerProcess first = nodes.get(0);
        for (RedisServerProcess n : nodes.subList(1, nodes.size())) {
            expectOk(first.command("CLUSTER", "MEET", n.host(), Integer.toString(n.port())));
        }
        await("every node to know all " + nodes.size(), () -> nodes.stream()
                .allMatch(n -> info(n).contains("cluster_known_nodes:" + nodes.size())));
        for (int r = 0; r < masters * replicasPerMaster; r++) {
            RedisServerProcess replica = nodes.get(masters + r);
            String masterId = nodes.get(r % masters).command("CLUSTER", "MYID");
            expectOk(replica.command("CLUSTER", "REPLICATE", masterId));
        }
        awaitHealthy();
    }

    /**
     * Waits until every live node reports {@code cluster_state:ok} and every live master has as
     * many online replicas as it has live replica nodes.
     */
    public void awaitHealthy() {
        await("cluster_state:ok on every node", () -> live().stream()
                .allMatch(n -> info(n).contains("cluster_state:ok")));
        await("replicas online", () -> {
            for (RedisServerProcess n : live()) {
                String repl = n.command("INFO", "replication");
                if (repl.contains("role:slave") && !repl.contains("master_link_status:up")) {
                    return false;
                }
            }
            return true;
        });
    }

    /** @return {@code redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...} over every node */
    public String uri() {
        return "redis-cluster://" + nodes.stream().map(n -> n.host() + ":" + n.port())
                .collect(Collectors.joining(","));
    }

    /** @return every node process (masters first, as started) */
    public List<RedisServerProcess> nodes() {
        return List.copyOf(nodes);
    }

    /** @return the live nodes that currently are masters */
    public List<RedisServerProcess> masters() {
        return live().stream().filter(n -> n.command("INFO", "replication").contains("role:master"))
                .collect(Collectors.toList());
    }

    /** @return the live master that currently serves {@code key}'s slot */
    public RedisServerProcess masterOf(String key) {
        String slot = anyLive().command("CLUSTER", "KEYSLOT", key);
        for (RedisServerProcess m : masters()) {
            String nodes = m.command("CLUSTER", "NODES");
            for (String line : nodes.split("\n")) {
                if (line.contains("myself") && servesSlot(line, Integer.parseInt(slot.trim()))) {
                    return m;
                }
            }
        }
        throw new IllegalStateException("no live master serves slot " + slot);
    }

    /** @return the replica processes of {@code master} */
    public List<RedisServerProcess> replicasOf(RedisServerProcess master) {
        return live().stream().filter(n -> {
            String repl = n.command("INFO", "replication");
            return repl.contains("role:slave") && repl.contains("master_port:" + master.port() + "\r");
        }).collect(Collectors.toList());
    }

    private static boolean servesSlot(String nodesLine, int slot) {
        String[] parts = nodesLine.trim().split(" ");
        for (int i = 8; i < parts.length; i++) {
            String range = parts[i];
            if (range.startsWith("[")) {
                continue; // migrating/importing marker
            }
            int dash = range.indexOf('-');
            int lo = Integer.parseInt(dash < 0 ? range : range.substring(0, dash));
            int hi = dash < 0 ? lo : Integer.parseInt(range.substring(dash + 1));
            if (slot >= lo && slot <= hi) {
                return true;
            }
        }
        return false;
    }

    private List<RedisServerProcess> live() {
        return nodes.stream().filter(n -> n.isAlive() && !n.isPaused()).collect(Collectors.toList());
    }

    private RedisServerProcess anyLive() {
        return live().get(0);
    }

    private static String info(RedisServerProcess n) {
        try {
            return n.command("CLUSTER", "INFO");
        } catch (RuntimeException e) {
            return "";
        }
    }

    private static void expectOk(String reply) {
        if (reply == null || !reply.startsWith("OK")) {
            throw new IllegalStateException("cluster setup command failed: " + reply);
        }
    }

    static void await(String what, java.util.function.BooleanSupplier condition) {
        long deadline = System.nanoTime() + FORM_TIMEOUT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out after " + FORM_TIMEOUT + " waiting for " + what);
            }
            RedisServerProcess.sleep(50);
        }
    }

    /** @return the highest {@code cluster_current_epoch} among live nodes: it grows with every failover */
    public long epoch() {
        long max = 0;
        for (RedisServerProcess n : live()) {
            for (String line : info(n).split("\r?\n")) {
                if (line.startsWith("cluster_current_epoch:")) {
                    max = Math.max(max, Long.parseLong(line.substring("cluster_current_epoch:".length()).trim()));
                }
            }
        }
        return max;
    }

    @Override
    public void close() {
        nodes.forEach(RedisServerProcess::close);
    }

    @Override
    public String toString() {
        return "RedisClusterProcesses[" + uri() + "]";
    }
}
