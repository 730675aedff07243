package io.github.turnstile.spring.boot;

import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.SslOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.boot.ssl.SslManagerBundle;
import org.springframework.core.env.Environment;

/**
 * Opens the auto-configured Turnstile, where the first of these points:
 * <ol>
 *   <li>{@code turnstile.uri} (then the Turnstile owns its Lettuce client);</li>
 *   <li>the application's Redis connection details: a {@code RedisConnectionDetails} bean (Spring
 *       Boot 3.1 to 3.5) or {@code DataRedisConnectionDetails} bean (Spring Boot 4), as
 *       {@code @ServiceConnection} (Testcontainers), Docker Compose support or the application
 *       itself define: standalone, Sentinel or Cluster, credentials, and an SSL bundle. Boot's own
 *       details made from {@code spring.data.redis.*} are skipped: those properties are read
 *       directly (next item);</li>
 *   <li>Spring Data Redis's {@code spring.data.redis.*} properties.</li>
 * </ol>
 * In the last two cases this bean builds a Lettuce client, owns it, and shuts it down after the
 * Turnstile is closed (the Turnstile bean depends on this one, so Spring destroys it first); the
 * connect timeout comes from {@code spring.data.redis.connect-timeout} in both, as for Spring Data
 * Redis.
 *
 * <p>The properties are read with Spring Boot's {@link Binder}, and the connection details by
 * their method names ({@link ConnectionDetails}), rather than through Spring Boot's own classes,
 * which moved and were renamed between Boot 3 and 4.
 */
final class TurnstileConnector implements DisposableBean {
  private static final String DATA_REDIS = "spring.data.redis";

  private final String uri;
  private final Binder binder;
  private final Object connectionDetails;
  private volatile Runnable shutdown = () -> { };

  /**
   * @param connectionDetails the application's Redis connection details bean (see
   *     {@link ConnectionDetails#find}), or null
   */
  TurnstileConnector(TurnstileProperties properties, Environment environment, Object connectionDetails) {
    this.uri = properties.getUri();
    this.binder = Binder.get(environment);
    this.connectionDetails = connectionDetails;
  }

  Turnstile open(TurnstileOptions options) {
    if (uri != null && !uri.isBlank()) {
      return Turnstile.connect(uri.trim(), options);
    }
    DataRedis d = DataRedis.bind(binder);
    if (connectionDetails != null) {
      ConnectionDetails.applyTo(connectionDetails, d);
    }
    ClientResources resources = ClientResources.builder()
        // as Turnstile.connect: reconnect within 100 ms at most, so that a failover does not cost
        // holders their leases (Lettuce's default backs off to 30 s)
        .reconnectDelay(() -> Delay.exponential(Duration.ofMillis(1), Duration.ofMillis(100), 2, TimeUnit.MILLISECONDS))
        // as Turnstile.connect: no per-command latency histograms (nothing reads them)
        .commandLatencyRecorder(io.lettuce.core.metrics.CommandLatencyRecorder.disabled())
        .build();
    SocketOptions.Builder socket = SocketOptions.builder();
    if (d.connectTimeout != null) {
      socket.connectTimeout(d.connectTimeout);
    }
    SslOptions ssl = d.sslBundle == null ? null : sslOptions(d.sslBundle);
    // Turnstile bounds every wait itself: Lettuce's command timeout must not cut blocking waits
    TimeoutOptions noCommandTimeout = TimeoutOptions.builder().timeoutCommands(false).build();
    AbstractRedisClient client = null;
    try {
      if (d.sentinelMaster == null && !d.clusterNodes.isEmpty()) {
        List<RedisURI> seeds = new ArrayList<>();
        for (String node : d.clusterNodes) {
          seeds.add(d.authenticate(hostPort(node)).withSsl(d.ssl).build());
        }
        RedisClusterClient cluster = RedisClusterClient.create(resources, seeds);
        ClusterClientOptions.Builder clusterOptions = ClusterClientOptions.builder();
        if (ssl != null) {
          clusterOptions.sslOptions(ssl);
        }
        cluster.setOptions(clusterOptions
            .autoReconnect(true)
            .socketOptions(socket.build())
            .timeoutOptions(noCommandTimeout)
            // follow failovers and resharding; adaptive triggers are Lettuce 7's default, not 6's
            .topologyRefreshOptions(topologyRefresh())
            .build());
        client = cluster;
        shutdown = () -> shutdown(cluster, resources);
        return Turnstile.create(cluster, options);
      }
      RedisURI redisUri;
      if (d.sentinelMaster != null) {
        RedisURI.Builder b = RedisURI.builder().withSentinelMasterId(d.sentinelMaster);
        for (String node : d.sentinelNodes) {
          b.withSentinel(authenticate(hostPort(node), d.sentinelUsername, d.sentinelPassword).withSsl(d.ssl).build());
        }
        redisUri = d.authenticate(b).withDatabase(d.database).withSsl(d.ssl).build();
      } else if (d.url != null) {
        redisUri = RedisURI.create(d.url);
        if (d.ssl) {
          redisUri.setSsl(true);
        }
      } else {
        redisUri = d.authenticate(RedisURI.builder().withHost(d.host).withPort(d.port))
            .withDatabase(d.database).withSsl(d.ssl).build();
      }
      RedisClient single = RedisClient.create(resources, redisUri);
      ClientOptions.Builder clientOptions = ClientOptions.builder();
      if (ssl != null) {
        clientOptions.sslOptions(ssl);
      }
      single.setOptions(clientOptions
          .autoReconnect(true)
          .socketOptions(socket.build())
          .timeoutOptions(noCommandTimeout)
          .build());
      client = single;
      shutdown = () -> shutdown(single, resources);
      return Turnstile.create(single, options);
    } catch (RuntimeException e) {
      shutdown = () -> { };
      if (client != null) {
        client.shutdown();
      }
      resources.shutdown(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(3000);
      throw e;
    }
  }

  /**
   * Lettuce 7 refreshes the topology on every adaptive trigger by default and deprecates asking
   * for it; Lettuce 6 (Spring Boot 3.5 and 4.0 manage 6.6 and 6.8) does not, so it is asked for.
   */
  @SuppressWarnings("deprecation")
  private static ClusterTopologyRefreshOptions topologyRefresh() {
    return ClusterTopologyRefreshOptions.builder()
        .enableAllAdaptiveRefreshTriggers()
        .enablePeriodicRefresh(Duration.ofSeconds(30))
        .build();
  }

  /**
   * Lettuce's TLS settings from a Spring Boot SSL bundle: its key and trust managers, and its
   * ciphers and protocols when it names them.
   */
  static SslOptions sslOptions(SslBundle bundle) {
    SslOptions.Builder b = SslOptions.builder();
    SslManagerBundle managers = bundle.getManagers();
    b.keyManager(managers.getKeyManagerFactory());
    b.trustManager(managers.getTrustManagerFactory());
    org.springframework.boot.ssl.SslOptions options = bundle.getOptions();
    if (options != null && options.getCiphers() != null) {
      b.cipherSuites(options.getCiphers());
    }
    if (options != null && options.getEnabledProtocols() != null) {
      b.protocols(options.getEnabledProtocols());
    }
    return b.build();
  }

  private static RedisURI.Builder hostPort(String node) {
    String n = node.trim();
    int colon = n.lastIndexOf(':');
    if (colon <= 0 || colon == n.length() - 1) {
      throw new IllegalArgumentException("a Redis node must be host:port, was '" + node + "'");
    }
    String host = n.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1); // [IPv6]
    }
    return RedisURI.builder().withHost(host).withPort(Integer.parseInt(n.substring(colon + 1)));
  }

  private static RedisURI.Builder authenticate(RedisURI.Builder b, String username, String password) {
    if (password != null) {
      if (username != null) {
        b.withAuthentication(username, password);
      } else {
        b.withPassword(password);
      }
    }
    return b;
  }

  private static void shutdown(AbstractRedisClient client, ClientResources resources) {
    client.shutdown();
    resources.shutdown(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(3000);
  }

  /** Shuts down the Lettuce client this bean created, if any (after the Turnstile closed). */
  @Override
  public void destroy() {
    Runnable s = shutdown;
    shutdown = () -> { };
    s.run();
  }

  /** The spring.data.redis settings Turnstile honours. */
  static final class DataRedis {
    String url;
    String host;
    int port;
    String username;
    String password;
    int database;
    boolean ssl;
    Duration connectTimeout;
    String sentinelMaster;
    List<String> sentinelNodes;
    String sentinelUsername;
    String sentinelPassword;
    List<String> clusterNodes;
    /** The SSL bundle of the connection details, if they name one (TLS is then on). */
    SslBundle sslBundle;

    static DataRedis bind(Binder b) {
      DataRedis d = new DataRedis();
      d.url = b.bind(DATA_REDIS + ".url", String.class).orElse(null);
      d.host = b.bind(DATA_REDIS + ".host", String.class).orElse("localhost");
      d.port = b.bind(DATA_REDIS + ".port", Integer.class).orElse(6379);
      d.username = b.bind(DATA_REDIS + ".username", String.class).orElse(null);
      d.password = b.bind(DATA_REDIS + ".password", String.class).orElse(null);
      d.database = b.bind(DATA_REDIS + ".database", Integer.class).orElse(0);
      d.ssl = b.bind(DATA_REDIS + ".ssl.enabled", Boolean.class).orElse(false)
          || b.bind(DATA_REDIS + ".ssl.bundle", String.class).isBound();
      d.connectTimeout = b.bind(DATA_REDIS + ".connect-timeout", Duration.class).orElse(null);
      d.sentinelMaster = b.bind(DATA_REDIS + ".sentinel.master", String.class).orElse(null);
      d.sentinelNodes = b.bind(DATA_REDIS + ".sentinel.nodes", Bindable.listOf(String.class)).orElse(List.of());
      d.sentinelUsername = b.bind(DATA_REDIS + ".sentinel.username", String.class).orElse(null);
      d.sentinelPassword = b.bind(DATA_REDIS + ".sentinel.password", String.class).orElse(null);
      d.clusterNodes = b.bind(DATA_REDIS + ".cluster.nodes", Bindable.listOf(String.class)).orElse(List.of());
      if (d.sentinelMaster != null && d.sentinelNodes.isEmpty()) {
        throw new IllegalArgumentException("spring.data.redis.sentinel.master is set but spring.data.redis.sentinel.nodes is not");
      }
      return d;
    }

    RedisURI.Builder authenticate(RedisURI.Builder b) {
      return TurnstileConnector.authenticate(b, username, password);
    }
  }
}
