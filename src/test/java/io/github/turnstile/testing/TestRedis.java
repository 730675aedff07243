package io.github.turnstile.testing;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Immutable description of the Redis server a test talks to: its URI, host, port and where it
 * came from ({@link #SOURCE_REDIS_URI}, {@link #SOURCE_TESTCONTAINERS} or {@link #SOURCE_PROCESS}).
 * Obtain one from {@link RedisExtension} (as a test parameter) or {@link RedisExtension#shared()}.
 */
public final class TestRedis {

    /** Source: an externally provided {@code REDIS_URI} / {@code redis.uri}. */
    public static final String SOURCE_REDIS_URI = "REDIS_URI";
    /** Source: a Testcontainers-managed Docker container. */
    public static final String SOURCE_TESTCONTAINERS = "testcontainers";
    /** Source: a {@link RedisServerProcess} child process. */
    public static final String SOURCE_PROCESS = "redis-server process";

    private final String uri;
    private final String host;
    private final int port;
    private final String source;
    private final List<RedisServerProcess> nodes; // the masters of a deployment; empty for a single server
    private final String adminUri; // the URI whose credentials command() uses: uri(), or an admin's
    private final List<RedisServerProcess> all; // every node of a deployment, replicas included

    private TestRedis(String uri, String host, int port, String source, List<RedisServerProcess> nodes) {
        this(uri, host, port, source, nodes, uri, nodes);
    }

    private TestRedis(String uri, String host, int port, String source, List<RedisServerProcess> nodes,
            String adminUri, List<RedisServerProcess> all) {
        this.uri = Objects.requireNonNull(uri, "uri");
        this.host = host;
        this.port = port;
        this.source = Objects.requireNonNull(source, "source");
        this.nodes = List.copyOf(nodes);
        this.adminUri = adminUri;
        this.all = List.copyOf(all);
    }

    /**
     * Returns every server process of the deployment (a Cluster's replicas included; the one
     * server of {@link #asUser}), or an empty list when the server is not a process started here.
     *
     * @return the processes
     */
    public List<RedisServerProcess> allNodes() {
        return all;
    }

    /**
     * One server that Turnstile reaches as a restricted ACL user, while the tests' own commands
     * ({@link #command}, {@link #infoSum}, {@link #commandOnEachMaster}) go through the server's
     * default user, which may run anything (INFO, PUBSUB, CLIENT LIST, ACL LOG).
     *
     * @param server the server, whose default user is unrestricted
     * @param user the ACL user {@link #uri()} authenticates as
     * @param password its password
     * @param source where it came from
     * @return the value
     */
    public static TestRedis asUser(RedisServerProcess server, String user, String password, String source) {
        String uri = "redis://" + user + ":" + password + "@" + server.host() + ":" + server.port();
        return new TestRedis(uri, server.host(), server.port(), source, List.of(server), server.uri(), List.of(server));
    }

    private TestRedis(String uri, String host, int port, String source) {
        this(uri, host, port, source, List.of());
    }

    /**
     * A deployment of several servers (a Cluster, or a Sentinel-managed primary): {@link #command}
     * goes to the first master, {@link #commandOnEachMaster} to all of them.
     *
     * @param uri the Turnstile URI ({@code redis-cluster://...} or {@code redis-sentinel://...})
     * @param masters the servers that take writes
     * @param source where it came from
     * @return the value
     */
    public static TestRedis ofNodes(String uri, List<RedisServerProcess> masters, String source) {
        RedisServerProcess first = masters.get(0);
        return new TestRedis(uri, first.host(), first.port(), source, masters);
    }

    /**
     * As {@link #ofNodes}, reached as a restricted ACL user whose credentials {@code uri} carries,
     * while {@link #command} runs as the first master's default user (as {@link #asUser} does).
     *
     * @param uri the Turnstile URI, with the user's credentials
     * @param masters the servers that take writes
     * @param all every server of the deployment
     * @param source where it came from
     * @return the value
     */
    public static TestRedis ofNodesAsUser(String uri, List<RedisServerProcess> masters, List<RedisServerProcess> all,
            String source) {
        RedisServerProcess first = masters.get(0);
        return new TestRedis(uri, first.host(), first.port(), source, masters, first.uri(), all);
    }

    /**
     * Runs one command on every master (a single server: on it) and returns the replies, so that
     * tests can add up {@code INFO} figures over a Cluster.
     *
     * @param args command name and arguments
     * @return one reply per master
     */
    public List<String> commandOnEachMaster(String... args) {
        if (nodes.isEmpty()) {
            return List.of(command(args));
        }
        List<String> replies = new ArrayList<>();
        for (RedisServerProcess n : nodes) {
            replies.add(n.command(args));
        }
        return replies;
    }

    /**
     * Adds up a numeric {@code INFO} field over every master.
     *
     * @param section the INFO section, e.g. {@code "clients"}
     * @param field the field, e.g. {@code "blocked_clients"}
     * @return the sum
     */
    public long infoSum(String section, String field) {
        long sum = 0;
        for (String info : commandOnEachMaster("INFO", section)) {
            for (String line : info.split("\r?\n")) {
                if (line.startsWith(field + ":")) {
                    sum += Long.parseLong(line.substring(field.length() + 1).trim());
                }
            }
        }
        return sum;
    }

    /**
     * Creates a value with explicit parts.
     *
     * @param uri    Lettuce-style URI, e.g. {@code redis://127.0.0.1:6379}
     * @param host   host name, or {@code null} if unknown
     * @param port   port, or {@code -1} if unknown
     * @param source one of the {@code SOURCE_*} constants
     * @return the value
     */
    public static TestRedis of(String uri, String host, int port, String source) {
        return new TestRedis(uri, host, port, source);
    }

    /**
     * Creates a value from a URI, taking host and port from it (port defaults to 6379).
     *
     * @param uri    e.g. {@code redis://host:6379/0}
     * @param source one of the {@code SOURCE_*} constants
     * @return the value
     */
    public static TestRedis fromUri(String uri, String source) {
        URI parsed = URI.create(uri.trim());
        String host = parsed.getHost();
        int port = host == null ? -1 : (parsed.getPort() > 0 ? parsed.getPort() : 6379);
        return new TestRedis(uri.trim(), host, port, source);
    }

    /** @return the Redis URI, usable with {@code RedisClient.create(uri)} */
    public String uri() {
        return uri;
    }

    /** @return the host, or {@code null} if it could not be determined */
    public String host() {
        return host;
    }

    /** @return the port, or {@code -1} if it could not be determined */
    public int port() {
        return port;
    }

    /** @return where this server came from: {@code "REDIS_URI"}, {@code "testcontainers"} or {@code "redis-server process"} */
    public String source() {
        return source;
    }

    /**
     * Runs one command over a fresh raw socket (see {@link RedisServerProcess#command(String, int, String...)}),
     * authenticating and selecting the database first if the URI says so (for a value made by
     * {@link #asUser}: as the server's default user).
     *
     * @param args command name and arguments
     * @return the decoded reply
     * @throws IllegalStateException if host/port are unknown or the URI uses TLS
     */
    public String command(String... args) {
        if (host == null || port <= 0) {
            throw new IllegalStateException("host/port unknown for " + uri);
        }
        URI parsed = URI.create(adminUri);
        if ("rediss".equalsIgnoreCase(parsed.getScheme())) {
            throw new IllegalStateException("raw commands over TLS are not supported: " + uri);
        }
        List<String[]> prelude = new ArrayList<>();
        String userInfo = parsed.getRawUserInfo();
        if (userInfo != null && !userInfo.isEmpty()) {
            int colon = userInfo.indexOf(':');
            String user = colon < 0 ? "" : decode(userInfo.substring(0, colon));
            String password = decode(colon < 0 ? userInfo : userInfo.substring(colon + 1));
            prelude.add(user.isEmpty() ? new String[] {"AUTH", password} : new String[] {"AUTH", user, password});
        }
        String path = parsed.getPath();
        if (path != null && path.length() > 1) {
            String db = path.substring(1);
            if (!db.equals("0")) {
                prelude.add(new String[] {"SELECT", db});
            }
        }
        return RedisServerProcess.pipeline(host, port, Duration.ofSeconds(10), prelude, args);
    }

    /** @return the server's {@code redis_version}, or {@code "unknown"} if it cannot be read */
    public String version() {
        try {
            String info = command("INFO", "server");
            if (info != null) {
                for (String line : info.split("\r?\n")) {
                    if (line.startsWith("redis_version:")) {
                        return line.substring("redis_version:".length()).trim();
                    }
                }
            }
        } catch (RuntimeException ignored) {
            // fall through
        }
        return "unknown";
    }

    private static String decode(String s) {
        return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof TestRedis)) {
            return false;
        }
        TestRedis other = (TestRedis) o;
        return port == other.port && uri.equals(other.uri) && Objects.equals(host, other.host)
                && source.equals(other.source);
    }

    @Override
    public int hashCode() {
        return Objects.hash(uri, host, port, source);
    }

    @Override
    public String toString() {
        return "TestRedis[" + uri + " via " + source + "]";
    }
}
