package io.github.turnstile.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A real Sentinel setup on loopback ports, made of {@link RedisServerProcess} children: one
 * primary, one replica (or more) and three sentinels (quorum 2) monitoring the primary as
 * {@value #MASTER_NAME}. Failure detection is fast for tests: down after 1 s.
 */
public final class RedisSentinelProcesses implements AutoCloseable {
    /** The name the sentinels monitor the primary under. */
    public static final String MASTER_NAME = "turnstile";

    private final List<RedisServerProcess> data; // [0] the first primary, then replicas
    private final List<RedisServerProcess> sentinels;

    private RedisSentinelProcesses(List<RedisServerProcess> data, List<RedisServerProcess> sentinels) {
        this.data = data;
        this.sentinels = sentinels;
    }

    /**
     * Starts the primary, the replica and the sentinels, and waits until the replica is in sync
     * and every sentinel knows the other sentinels and the replica.
     *
     * @return the running setup
     */
    public static RedisSentinelProcesses start() {
        return start(1);
    }

    /**
     * Starts the primary, {@code replicas} replicas and the sentinels, and waits until the
     * replicas are in sync and every sentinel knows the other sentinels and the replicas.
     *
     * @param replicas how many replicas, at least 1
     * @return the running setup
     */
    public static RedisSentinelProcesses start(int replicas) {
        if (replicas < 1) {
            throw new IllegalArgumentException("at least one replica, was " + replicas);
        }
        List<RedisServerProcess> data = new ArrayList<>();
        List<RedisServerProcess> sentinels = new ArrayList<>();
        try {
            RedisServerProcess primary = RedisServerProcess.start("--repl-ping-replica-period", "1");
            data.add(primary);
            for (int r = 0; r < replicas; r++) {
                data.add(RedisServerProcess.start("--replicaof", primary.host(), Integer.toString(primary.port()),
                        "--repl-ping-replica-period", "1"));
            }
            String conf = "sentinel monitor " + MASTER_NAME + " " + primary.host() + " " + primary.port() + " 2\n"
                    + "sentinel down-after-milliseconds " + MASTER_NAME + " 1000\n"
                    + "sentinel failover-timeout " + MASTER_NAME + " 5000\n"
                    + "sentinel parallel-syncs " + MASTER_NAME + " 1\n";
            for (int i = 0; i < 3; i++) {
                sentinels.add(RedisServerProcess.startWithConfig(conf, "--sentinel"));
            }
            RedisSentinelProcesses s = new RedisSentinelProcesses(data, sentinels);
            s.awaitHealthy();
            return s;
        } catch (RuntimeException | Error e) {
            data.forEach(RedisServerProcess::close);
            sentinels.forEach(RedisServerProcess::close);
            throw e;
        }
    }

    /** Waits until the live replicas are in sync and every sentinel sees its peers and the replicas. */
    public void awaitHealthy() {
        RedisClusterProcesses.await("replicas in sync", () -> data.stream().filter(RedisServerProcess::isAlive)
                .map(RedisSentinelProcesses::replicationInfo)
                .allMatch(r -> r.contains("role:master") || r.contains("master_link_status:up")));
        long replicas = data.stream().filter(RedisServerProcess::isAlive).count() - 1;
        RedisClusterProcesses.await("sentinels to discover each other and the replicas", () -> {
            for (RedisServerProcess s : sentinels) {
                String master = s.command("SENTINEL", "MASTER", MASTER_NAME);
                if (!master.contains("num-other-sentinels\n" + (sentinels.size() - 1))
                        || !master.contains("num-slaves\n" + replicas)) {
                    return false;
                }
            }
            return true;
        });
    }

    /** INFO replication, or "" while the node drops clients (a Sentinel reconfiguring it kills them). */
    private static String replicationInfo(RedisServerProcess n) {
        try {
            return n.command("INFO", "replication");
        } catch (RuntimeException e) {
            return "";
        }
    }

    /** @return {@code redis-sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3#turnstile} */
    public String uri() {
        return "redis-sentinel://" + sentinels.stream().map(n -> n.host() + ":" + n.port())
                .collect(Collectors.joining(",")) + "#" + MASTER_NAME;
    }

    /** @return the data node the sentinels currently name as primary */
    public RedisServerProcess primary() {
        for (RedisServerProcess s : sentinels) {
            if (!s.isAlive()) {
                continue;
            }
            String[] addr = s.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME).split("\n");
            int port = Integer.parseInt(addr[1].trim());
            for (RedisServerProcess d : data) {
                if (d.port() == port) {
                    return d;
                }
            }
        }
        throw new IllegalStateException("no sentinel names a primary");
    }

    /** @return the data nodes (the first primary, then the replicas) */
    public List<RedisServerProcess> dataNodes() {
        return List.copyOf(data);
    }

    /** @return each data node's role and each sentinel's primary, for a failure message */
    public String describe() {
        StringBuilder b = new StringBuilder();
        for (RedisServerProcess d : data) {
            String info = d.isAlive() ? replicationInfo(d) : "down";
            b.append(d.port()).append(": ").append(info.lines()
                    .filter(l -> l.startsWith("role") || l.startsWith("master_port") || l.startsWith("master_link_status")
                            || l.startsWith("connected_slaves"))
                    .collect(Collectors.joining(" "))).append('\n');
        }
        for (RedisServerProcess s : sentinels) {
            try {
                b.append("sentinel ").append(s.port()).append(" names ")
                        .append(s.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME).replace('\n', ' ')).append('\n');
            } catch (RuntimeException e) {
                b.append("sentinel ").append(s.port()).append(": ").append(e.getMessage()).append('\n');
            }
        }
        return b.toString();
    }

    @Override
    public void close() {
        sentinels.forEach(RedisServerProcess::close);
        data.forEach(RedisServerProcess::close);
    }

    @Override
    public String toString() {
        return "RedisSentinelProcesses[" + uri() + "]";
    }
}
