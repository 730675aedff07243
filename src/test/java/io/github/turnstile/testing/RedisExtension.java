package io.github.turnstile.testing;

import java.util.List;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.utility.DockerImageName;

/**
 * JUnit 5 extension that provides one Redis server per test class and injects it as a
 * {@link TestRedis} parameter (constructors, test methods, lifecycle methods). A JVM that runs
 * several classes (surefire's reused forks) starts a fresh server, Cluster or Sentinel for each:
 * they are stopped when the class's tests are done.
 *
 * <p>The server is chosen in this order:
 * <ol>
 *   <li>system property {@code redis.uri} or environment variable {@code REDIS_URI};</li>
 *   <li>a Testcontainers {@code redis:7.2} container, if a Docker engine answers (skip with
 *       {@code -Dturnstile.redis.testcontainers=false});</li>
 *   <li>a {@link RedisServerProcess} child process.</li>
 * </ol>
 * Non-JUnit code can get the same instance from {@link #shared()}.
 */
public final class RedisExtension implements ParameterResolver, BeforeAllCallback, ExecutionCondition {

    /** Store namespace holding the shared server handle in the root context. */
    public static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(RedisExtension.class);

    private static final String STORE_KEY = "shared-redis";
    private static final String REDIS_IMAGE = "redis:7.2";

    private static final Object LOCK = new Object();
    private static Started current; // guarded by LOCK
    private static boolean hookInstalled; // guarded by LOCK

    /** Creates the extension (instantiated by JUnit). */
    public RedisExtension() {
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        handle(context);
    }

    /**
     * Disables a class of {@link RedisTopology.Kind#NO_ADMIN_CLUSTER} where the redis-server binary
     * is older than 7.0: the README's Cluster line needs sharded pub/sub. Says so in one line.
     */
    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        RedisTopology topology = context.getTestClass().map(c -> c.getAnnotation(RedisTopology.class)).orElse(null);
        if (topology == null || topology.value() != RedisTopology.Kind.NO_ADMIN_CLUSTER
                || context.getTestMethod().isPresent()) {
            return ConditionEvaluationResult.enabled("");
        }
        String version;
        try (RedisServerProcess probe = RedisServerProcess.start()) {
            version = probe.version();
        }
        if (LeastPrivilege.major(version) < 7) {
            String why = "the README's Cluster ACL line needs Redis 7.0 or later (sharded pub/sub), this redis-server is "
                    + version;
            System.err.println("[turnstile-testing] SKIPPED " + context.getDisplayName() + ": " + why);
            return ConditionEvaluationResult.disabled(why);
        }
        return ConditionEvaluationResult.enabled("");
    }

    @Override
    public boolean supportsParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        return parameterContext.getParameter().getType() == TestRedis.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameterContext, ExtensionContext extensionContext) {
        RedisTopology topology = extensionContext.getTestClass()
                .map(c -> c.getAnnotation(RedisTopology.class)).orElse(null);
        if (topology == null || topology.value() == RedisTopology.Kind.SINGLE) {
            return handle(extensionContext).redis;
        }
        return classContext(extensionContext).getStore(NAMESPACE).computeIfAbsent(
                "shared-" + topology.value(), k -> Deployment.start(topology.value()), Deployment.class).redis;
    }

    /**
     * The context of the top-level test class (a nested class's is its enclosing class's): the
     * servers live as long as it does, so that every test class gets fresh ones, also when one JVM
     * runs many classes (surefire's reused forks, an IDE).
     */
    private static ExtensionContext classContext(ExtensionContext context) {
        ExtensionContext c = context;
        while (c.getParent().isPresent() && c.getParent().get() != c.getRoot()) {
            c = c.getParent().get();
        }
        return c;
    }

    /** A cluster, sentinel or ACL setup shared by the tests of one class; closed when the class is done. */
    private static final class Deployment implements AutoCloseable {
        final TestRedis redis;
        final AutoCloseable closer;

        Deployment(TestRedis redis, AutoCloseable closer) {
            this.redis = redis;
            this.closer = closer;
        }

        static Deployment start(RedisTopology.Kind kind) {
            if (kind == RedisTopology.Kind.CLUSTER) {
                RedisClusterProcesses c = RedisClusterProcesses.start(3, 1, 15_000);
                long epoch = c.epoch();
                System.err.println("[turnstile-testing] Redis Cluster " + c.uri());
                return new Deployment(TestRedis.ofNodes(c.uri(), c.masters(), "redis cluster processes"), () -> {
                    if (c.epoch() != epoch) {
                        System.err.println("[turnstile-testing] the shared Redis Cluster failed over during the run (epoch "
                                + epoch + " -> " + c.epoch() + ")");
                    }
                    c.close();
                });
            }
            String password = "pw-" + Long.toHexString(System.nanoTime());
            if (kind == RedisTopology.Kind.ACL_USER || kind == RedisTopology.Kind.NO_ADMIN) {
                RedisServerProcess server = RedisServerProcess.start();
                try {
                    List<String> user;
                    if (kind == RedisTopology.Kind.ACL_USER) {
                        LeastPrivilege.createFullUser(server, LeastPrivilege.Deployment.STANDALONE, LeastPrivilege.USER,
                                password);
                        user = new java.util.ArrayList<>(LeastPrivilege.readmeLine(LeastPrivilege.Deployment.STANDALONE));
                        user.addAll(LeastPrivilege.readmeOptionalLine().subList(1, LeastPrivilege.readmeOptionalLine().size()));
                    } else {
                        user = LeastPrivilege.restrictedUser(LeastPrivilege.Deployment.STANDALONE, LeastPrivilege.USER,
                                password);
                        LeastPrivilege.createUser(server, LeastPrivilege.USER, user);
                        user = user.subList(2, user.size());
                    }
                    TestRedis redis = TestRedis.asUser(server, LeastPrivilege.USER, password,
                            "redis-server process, " + (kind == RedisTopology.Kind.ACL_USER ? "README's ACL user"
                                    : "restricted ACL user"));
                    System.err.println("[turnstile-testing] Redis " + server.version() + " as ACL user "
                            + LeastPrivilege.USER + ": " + String.join(" ", user).replace(password, "..."));
                    return new Deployment(redis, server);
                } catch (RuntimeException | Error e) {
                    server.close();
                    throw e;
                }
            }
            if (kind == RedisTopology.Kind.NO_ADMIN_CLUSTER) {
                RedisClusterProcesses c = RedisClusterProcesses.start(3, 1, 15_000);
                try {
                    List<String> user = LeastPrivilege.restrictedUser(LeastPrivilege.Deployment.CLUSTER,
                            LeastPrivilege.USER, password);
                    for (RedisServerProcess node : c.nodes()) {
                        LeastPrivilege.createUser(node, LeastPrivilege.USER, user);
                    }
                    String uri = c.uri().replace("redis-cluster://", "redis-cluster://" + LeastPrivilege.USER + ":"
                            + password + "@");
                    System.err.println("[turnstile-testing] Redis Cluster " + c.uri() + " as ACL user "
                            + LeastPrivilege.USER + ": " + String.join(" ", user.subList(2, user.size())).replace(password, "..."));
                    return new Deployment(TestRedis.ofNodesAsUser(uri, c.masters(), c.nodes(), "redis cluster processes,"
                            + " restricted ACL user"), c);
                } catch (RuntimeException | Error e) {
                    c.close();
                    throw e;
                }
            }
            RedisSentinelProcesses s = RedisSentinelProcesses.start();
            System.err.println("[turnstile-testing] Redis Sentinel " + s.uri());
            return new Deployment(TestRedis.ofNodes(s.uri(), List.of(s.primary()), "redis sentinel processes"), s);
        }

        @Override
        public void close() {
            try {
                closer.close();
            } catch (Exception e) {
                System.err.println("[turnstile-testing] failed to stop " + redis + ": " + e);
            }
        }
    }

    /**
     * The Redis server shared by all tests in this JVM, started on first use. It is stopped when
     * the test class that asked the extension for it is done, or at JVM shutdown.
     *
     * @return the shared server
     */
    public static TestRedis shared() {
        synchronized (LOCK) {
            if (current == null) {
                current = startRedis();
                if (!hookInstalled) {
                    hookInstalled = true;
                    Runtime.getRuntime().addShutdownHook(
                            new Thread(RedisExtension::closeShared, "turnstile-shared-redis-reaper"));
                }
            }
            return current.redis;
        }
    }

    /** Stops the shared server, if running; a later {@link #shared()} starts a new one. */
    static void closeShared() {
        Started s;
        synchronized (LOCK) {
            s = current;
            current = null;
        }
        if (s != null) {
            s.close();
        }
    }

    private static Handle handle(ExtensionContext context) {
        return classContext(context).getStore(NAMESPACE)
                .computeIfAbsent(STORE_KEY, key -> new Handle(shared()), Handle.class);
    }

    private static Started startRedis() {
        String uri = System.getProperty("redis.uri");
        if (uri == null || uri.isBlank()) {
            uri = System.getenv("REDIS_URI");
        }
        Started started;
        if (uri != null && !uri.isBlank()) {
            started = new Started(TestRedis.fromUri(uri, TestRedis.SOURCE_REDIS_URI), () -> { });
        } else {
            started = tryTestcontainers();
            if (started == null) {
                RedisServerProcess process = RedisServerProcess.start();
                started = new Started(TestRedis.of(process.uri(), process.host(), process.port(),
                        TestRedis.SOURCE_PROCESS), process);
                System.err.println("[turnstile-testing] redis-server binary " + RedisServerProcess.binary());
            }
        }
        String version = started.redis.port() > 0 ? started.redis.version() : "unknown";
        System.err.println("[turnstile-testing] Redis source=" + started.redis.source()
                + " uri=" + started.redis.uri() + " version=" + version);
        return started;
    }

    private static Started tryTestcontainers() {
        if ("false".equalsIgnoreCase(System.getProperty("turnstile.redis.testcontainers"))) {
            return null;
        }
        try {
            if (!Docker.available()) {
                return null;
            }
        } catch (Throwable t) {
            return null; // Testcontainers missing or Docker probing failed: use a local process
        }
        try {
            return Docker.start();
        } catch (Throwable t) {
            System.err.println("[turnstile-testing] Docker is available but starting " + REDIS_IMAGE
                    + " failed (" + t + "); falling back to a redis-server process");
            return null;
        }
    }

    /** Testcontainers access, isolated so that this class loads without Testcontainers. */
    private static final class Docker {
        static boolean available() {
            return DockerClientFactory.instance().isDockerAvailable();
        }

        static Started start() {
            GenericContainer<?> container = new GenericContainer<>(DockerImageName.parse(REDIS_IMAGE))
                    .withExposedPorts(6379);
            container.start();
            try {
                String host = container.getHost();
                int port = container.getMappedPort(6379);
                return new Started(TestRedis.of("redis://" + host + ":" + port, host, port,
                        TestRedis.SOURCE_TESTCONTAINERS), container::stop);
            } catch (RuntimeException | Error e) {
                container.stop();
                throw e;
            }
        }
    }

    /** A started server plus how to stop it. */
    private static final class Started {
        final TestRedis redis;
        final AutoCloseable closer;

        Started(TestRedis redis, AutoCloseable closer) {
            this.redis = redis;
            this.closer = closer;
        }

        void close() {
            try {
                closer.close();
            } catch (Exception e) {
                System.err.println("[turnstile-testing] failed to stop Redis " + redis + ": " + e);
            }
        }
    }

    /** Class-store value; closing it (when the test class is done) stops the shared server. */
    private static final class Handle implements AutoCloseable {
        final TestRedis redis;

        Handle(TestRedis redis) {
            this.redis = redis;
        }

        @Override
        public void close() {
            closeShared();
        }
    }
}
