package io.github.turnstile;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.UnblockType;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.event.ClusterTopologyChangedEvent;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.lang.reflect.Method;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * How the engine reaches Redis: one server (including a Sentinel-managed primary, which Lettuce
 * resolves through the sentinels on every (re)connect), or a Redis Cluster; the differences are
 * confined here (DESIGN §11). Every primitive keeps all its keys in one hash slot, so on a Cluster a
 * script or a blocking command runs on exactly one node: the master of that slot ({@link #nodeOf}).
 * Blocking connections never reconnect: Lettuce would re-send a BLPOP or BLMOVE that may already
 * have run (a wake token swallowed, a second permit moved), so a connection that drops is closed at
 * once and its outcome reconciled by the engine ({@link ConnectionEvents}). Subscriber connections
 * reconnect and re-subscribe by themselves (a SUBSCRIBE is harmless to repeat). {@link #onRecovered}
 * is told when a connection of the main client comes back after a drop, and (Cluster) when the
 * topology changes, so that waiters re-check Redis at once.
 */
abstract class Topology implements AutoCloseable {
  /** The main connection: one multiplexed connection, or Lettuce's cluster connection. */
  private final StatefulConnection<String, String> main;
  private final RedisClusterAsyncCommands<String, String> async;
  private final AbstractRedisClient client;
  /** What shuts down the client (and its resources) when Turnstile owns them; null when the application does. */
  private final Runnable shutdown;
  /** The client's connection events; each variant registers it once it is set up. */
  final ConnectionEvents events;
  private volatile Runnable recovered = () -> {};
  /** The commands this client does without once refused (CLIENT SETNAME, CLIENT ID, CLIENT UNBLOCK, INFO). */
  final OptionalCommands optional;

  Topology(AbstractRedisClient client, Runnable shutdown, StatefulConnection<String, String> main,
      RedisClusterAsyncCommands<String, String> async, OptionalCommands optional, Predicate<Object> watched) {
    this.client = client;
    this.shutdown = shutdown;
    this.main = main;
    this.async = async;
    this.optional = optional;
    this.events = new ConnectionEvents(watched);
  }

  /** Returns the commands of the main connection (scripts, non-blocking commands). */
  final RedisClusterAsyncCommands<String, String> async() {
    return async;
  }

  final boolean isOpen() {
    return main.isOpen();
  }

  /** Sets what to run when Redis may have come back: a dropped connection reconnected, or the topology changed. */
  final void onRecovered(Runnable r) {
    this.recovered = r;
  }

  final void recovered() {
    generation.incrementAndGet();
    recovered.run();
  }

  /**
   * Counts dropped connections and recoveries: a semaphore hands permits on locally only once
   * Redis confirmed its grants in the current generation ({@link SemaphoreBooks#confirm}).
   */
  final AtomicLong generation = new AtomicLong();

  /**
   * Opens a main connection and checks that Redis answers {@code check}; wraps failures in
   * TurnstileException and closes what was opened.
   */
  static <C extends StatefulConnection<String, String>> C openMain(Supplier<C> connect, Consumer<C> check,
      String what) {
    C c = open(connect, what);
    try {
      check.accept(c);
      return c;
    } catch (RedisException e) {
      c.close();
      throw refusedOr(e, "cannot talk to Redis (" + what + ")");
    }
  }

  /** {@code e} as an {@link AclRefusal} naming the refused command if it is one, else wrapped. */
  static TurnstileException refusedOr(RedisException e, String what) {
    AclRefusal refused = AclRefusal.of(e, null, null, null);
    return refused != null ? refused.in(what) : new TurnstileException(what + ": " + e.getMessage(), e);
  }

  /**
   * @return the node a blocking command or a subscription on {@code key} must use, as a pool
   *     partition name
   * @throws TurnstileException if no node is known to serve the key's slot
   */
  abstract String nodeOf(String key);

  /** Opens a dedicated connection to {@code node} (a {@link #nodeOf} value), named for CLIENT LIST. */
  abstract BlockingPool.Conn openBlocking(String node, String clientName);

  /** Opens the subscriber connection of {@code node}; it reconnects and re-subscribes by itself. */
  abstract StatefulRedisPubSubConnection<String, String> openSubscriber(String node, String clientName);

  /** Returns whether wake-up channels are shard channels (Redis Cluster 7.0 or later). */
  boolean sharded() {
    return false;
  }

  /**
   * Returns the command scripts publish wake-ups with: {@code SPUBLISH} on a Cluster of Redis 7
   * or later (the message stays on the slot's shard), {@code PUBLISH} otherwise.
   */
  final String publishCommand() {
    return sharded() ? "SPUBLISH" : "PUBLISH";
  }

  /** Returns whether {@code node} is still a master of the topology (always true on one server). */
  boolean isMaster(String node) {
    return true;
  }

  /**
   * Asks the node holding {@code conn} to unblock its blocked command (as if it timed out); see
   * {@link OptionalCommands#unblock} for when it is sent at all.
   *
   * @return the reply of {@code CLIENT UNBLOCK}
   */
  abstract CompletableFuture<?> unblock(BlockingPool.Conn conn);

  /**
   * Checks that Redis runs {@code WAIT} for this client ({@code replicaAcks} needs it), on the
   * primary or on every Cluster master: {@code WAIT 0 0} answers at once.
   *
   * @throws RedisException if a node refused it or did not answer
   */
  abstract void probeWait();

  /** Returns the renewal batch a lease key belongs to: keys of one batch may share a script. */
  abstract int batchOf(String key);

  /**
   * Told that a command went unanswered or failed: on a Cluster the slot may have failed over, so
   * the topology is re-read (at most every 500 ms). Lettuce's own triggers are slow to notice a
   * dead master: commands queued to it get no MOVED, and reconnect attempts back off.
   */
  void suspect() {}

  /**
   * A connection of the main client dropped (it reconnects by itself). On one server or Sentinel
   * that is the main connection: the hook set by {@link #onLost} runs, so that waiters parked on
   * pub/sub (which a disconnect does not otherwise wake) count the outage from now on. A Cluster
   * re-reads its topology instead; a dead master's waiters are woken by the recovery that follows.
   */
  void lostConnection() {
    lost.run();
  }

  private volatile Runnable lost = () -> { };

  /** Sets what to run when the main connection drops (one server or Sentinel). */
  final void onLost(Runnable r) {
    this.lost = r;
  }

  /** Stops listening to the client's events, closes the main connection and (if owned) the client. */
  @Override
  public void close() {
    client.removeListener(events);
    main.close();
    if (shutdown != null) {
      shutdown.run();
    }
  }

  /**
   * @param shutdown what shuts down the client (and its resources) when Turnstile owns them;
   *     {@code null} when the application owns the client
   */
  static Topology standalone(RedisClient client, Runnable shutdown, String clientName) {
    return new Standalone(client, shutdown, clientName, new OptionalCommands());
  }

  /**
   * @param seed the URI whose credentials, TLS settings and timeout the connections Turnstile opens
   *     to each node carry (as Lettuce's own node connections do); {@code null}: the client's first
   *     initial URI
   * @param shutdown as for {@link #standalone}
   */
  static Topology cluster(RedisClusterClient client, RedisURI seed, Runnable shutdown, String clientName) {
    return new Cluster(client, seed != null ? seed : seedOf(client), shutdown, clientName, new OptionalCommands());
  }

  /**
   * The first initial URI of a cluster client the application made. Lettuce applies its
   * credentials and TLS settings to every node connection it opens, but the node URIs of its
   * topology view carry none, so Turnstile's own node connections must apply them too. Lettuce
   * offers the initial URIs to subclasses only ({@code getInitialUris()}); read reflectively (Lettuce
   * is an unnamed or automatic module, whose packages are open). Without it, node connections
   * would authenticate as the {@code default} user: connecting fails instead.
   */
  static RedisURI seedOf(RedisClusterClient client) {
    try {
      Method m = RedisClusterClient.class.getDeclaredMethod("getInitialUris");
      m.setAccessible(true);
      @SuppressWarnings("unchecked")
      Iterable<RedisURI> uris = (Iterable<RedisURI>) m.invoke(client);
      for (RedisURI u : uris) {
        return u;
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new TurnstileException("cannot read the initial URIs of the RedisClusterClient (Lettuce "
          + "changed?): Turnstile's connections to the nodes need their credentials; use Turnstile.connect(uri)", e);
    }
    throw new TurnstileException("the RedisClusterClient has no initial URI");
  }

  /** Opens a connection and names it; wraps failures in TurnstileException. */
  static <C extends StatefulConnection<String, String>> C open(Supplier<C> connect, String what) {
    try {
      return connect.get();
    } catch (RedisException e) {
      throw refusedOr(e, "cannot connect to Redis (" + what + ")");
    }
  }

  /**
   * Names a new blocking connection and learns its id (both optional: {@link OptionalCommands});
   * closes it if that fails for another reason.
   */
  final BlockingPool.Conn named(StatefulRedisConnection<String, String> c, String node, String clientName,
      Runnable onClose) {
    try {
      optional.name(() -> c.sync().clientSetname(clientName));
      return new BlockingPool.Conn(c, optional.idOf(c, () -> c.sync().clientId()), node, onClose);
    } catch (RedisException e) {
      c.closeAsync();
      onClose.run();
      throw new TurnstileException("cannot set up a blocking connection: " + e.getMessage(), e);
    }
  }

  final StatefulRedisPubSubConnection<String, String> namedSubscriber(
      StatefulRedisPubSubConnection<String, String> c, String clientName) {
    try {
      optional.name(() -> c.sync().clientSetname(clientName));
      return c;
    } catch (RedisException e) {
      c.closeAsync();
      throw new TurnstileException("cannot set up a subscriber connection: " + e.getMessage(), e);
    }
  }

  /**
   * Tells the topology of reconnections: a connection in {@code watched} that comes back after a
   * drop runs {@link #recovered()}; a connection in {@code neverReconnect} that drops is closed
   * at once. Lettuce fires these events on the connection's event loop, after it moved the
   * commands in flight to its re-send buffer and before its reconnect is scheduled, so closing
   * there cancels them: a dropped blocking command is never re-sent.
   */
  final class ConnectionEvents implements RedisConnectionStateListener {
    /**
     * Connections that have connected before, so that their next connect is a comeback. Weak:
     * Lettuce's topology refresh opens and closes connections of its own all the time.
     */
    private final Set<Object> seen =
        Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));
    final Set<Object> neverReconnect = ConcurrentHashMap.newKeySet();
    private final Predicate<Object> watched;

    ConnectionEvents(Predicate<Object> watched) {
      this.watched = watched;
    }

    @Override
    public void onRedisConnected(RedisChannelHandler<?, ?> connection, SocketAddress socketAddress) {
      if (watched.test(connection) && !seen.add(connection)) {
        recovered();
      }
    }

    @Override
    public void onRedisDisconnected(RedisChannelHandler<?, ?> connection) {
      if (neverReconnect.remove(connection)) {
        connection.closeAsync();
      } else if (watched.test(connection)) {
        generation.incrementAndGet();
        lostConnection();
      }
    }

    /** Registers a dedicated connection that must be closed, not reconnected, when it drops. */
    Runnable neverReconnect(Object connection) {
      neverReconnect.add(connection);
      return () -> neverReconnect.remove(connection);
    }
  }

  /** One server, or the primary a Sentinel URI resolves to. */
  private static final class Standalone extends Topology {
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> main;

    Standalone(RedisClient client, Runnable shutdown, String clientName, OptionalCommands optional) {
      // naming the main connection also checks that Redis answers (a refusal is an answer)
      this(client, shutdown, openMain(() -> client.connect(StringCodec.UTF8),
          c -> optional.name(() -> c.sync().clientSetname(clientName + ":main")), "main connection"), optional);
    }

    private Standalone(RedisClient client, Runnable shutdown, StatefulRedisConnection<String, String> main,
        OptionalCommands optional) {
      super(client, shutdown, main, main.async(), optional, c -> c == main);
      this.client = client;
      this.main = main;
      events.seen.add(main); // it has connected once already: a later connect is a reconnect
      client.addListener(events);
    }

    @Override
    String nodeOf(String key) {
      return "";
    }

    @Override
    BlockingPool.Conn openBlocking(String node, String clientName) {
      StatefulRedisConnection<String, String> c = open(() -> client.connect(StringCodec.UTF8), "blocking connection");
      return named(c, node, clientName, events.neverReconnect(c));
    }

    @Override
    StatefulRedisPubSubConnection<String, String> openSubscriber(String node, String clientName) {
      return namedSubscriber(open(() -> client.connectPubSub(StringCodec.UTF8), "subscriber connection"),
          clientName);
    }

    @Override
    CompletableFuture<?> unblock(BlockingPool.Conn conn) {
      return main.async().clientUnblock(conn.clientId, UnblockType.TIMEOUT).toCompletableFuture();
    }

    @Override
    void probeWait() {
      main.sync().waitForReplication(0, 0);
    }

    @Override
    int batchOf(String key) {
      return 0;
    }
  }

  /**
   * A Redis Cluster. Blocking and subscriber connections are plain connections to one master
   * each, made by {@link RedisClient}s per node that share the cluster client's resources (event
   * loops); the node URIs come from Lettuce's topology view, which carries the seed URI's
   * credentials and TLS settings.
   */
  private static final class Cluster extends Topology {
    private final RedisClusterClient client;
    /** Whose credentials, TLS settings and timeout every node connection carries. */
    private final RedisURI seed;
    private final StatefulRedisClusterConnection<String, String> main;
    /** Per node: the client of blocking connections (no reconnect) and of the subscriber (reconnects). */
    private final Map<String, RedisClient> blockingClients = new ConcurrentHashMap<>();
    private final Map<String, RedisClient> subscriberClients = new ConcurrentHashMap<>();
    private final AtomicLong lastRefresh = new AtomicLong(System.nanoTime());
    private final reactor.core.Disposable topologyEvents;
    private final boolean sharded;
    private final AtomicBoolean watching = new AtomicBoolean();
    private volatile long watchUntil;
    private volatile boolean closed;

    Cluster(RedisClusterClient client, RedisURI seed, Runnable shutdown, String clientName, OptionalCommands optional) {
      this(client, seed, shutdown, openMain(() -> client.connect(StringCodec.UTF8), c -> c.sync().ping(),
          "cluster connection"), optional);
    }

    private Cluster(RedisClusterClient client, RedisURI seed, Runnable shutdown,
        StatefulRedisClusterConnection<String, String> main, OptionalCommands optional) {
      // any connection of the cluster client that comes back after a drop: the node may be up again
      super(client, shutdown, main, main.async(), optional, c -> true);
      this.client = client;
      this.seed = seed;
      this.main = main;
      // unknown (no RESP3 handshake, INFO refused): 7.0 or later is assumed (DESIGN §11)
      int major = majorVersion(main, optional);
      this.sharded = major < 0 || major >= 7;
      client.addListener(events);
      this.topologyEvents = client.getResources().eventBus().get()
          .filter(e -> e instanceof ClusterTopologyChangedEvent)
          .subscribe(e -> recovered());
    }

    /**
     * The major version of a master's server: from the handshake of its node connection
     * ({@code HELLO 3} answers it), else {@code INFO server} unless refused; -1 if unknown.
     */
    private static int majorVersion(StatefulRedisClusterConnection<String, String> main, OptionalCommands optional) {
      try {
        for (RedisClusterNode n : main.getPartitions()) {
          if (n.is(RedisClusterNode.NodeFlag.UPSTREAM) && n.getUri() != null) {
            StatefulRedisConnection<String, String> node = main.getConnection(n.getUri().getHost(), n.getUri().getPort());
            return optional.majorVersion(node, () -> node.sync().info("server"));
          }
        }
        return optional.majorVersion(main, () -> main.sync().info("server"));
      } catch (RedisException e) {
        main.close();
        throw refusedOr(e, "cannot talk to Redis (cluster connection)");
      }
    }

    @Override
    boolean sharded() {
      return sharded;
    }

    @Override
    String nodeOf(String key) {
      int slot = SlotHash.getSlot(key);
      RedisClusterNode master = main.getPartitions().getMasterBySlot(slot);
      if (master == null) {
        suspect();
        throw new Engine.Unavailable("no Redis Cluster master is known to serve slot " + slot
            + " (key " + key + "); the topology is being refreshed");
      }
      RedisURI uri = master.getUri();
      return uri.getHost() + ":" + uri.getPort();
    }

    @Override
    boolean isMaster(String node) {
      RedisClusterNode n = find(node);
      return n != null && n.is(RedisClusterNode.NodeFlag.UPSTREAM) && !n.getSlots().isEmpty();
    }

    /** The node of the topology view whose address is {@code node} (a {@link #nodeOf} value), or null. */
    private RedisClusterNode find(String node) {
      for (RedisClusterNode n : main.getPartitions()) {
        RedisURI uri = n.getUri();
        if ((uri.getHost() + ":" + uri.getPort()).equals(node)) {
          return n;
        }
      }
      return null;
    }

    private RedisClient nodeClient(Map<String, RedisClient> clients, String node, boolean reconnect) {
      return clients.computeIfAbsent(node, n -> {
        RedisClient c = RedisClient.create(client.getResources());
        ClientOptions options = client.getOptions();
        ClientOptions.Builder b = ClientOptions.builder();
        if (options.getConfiguredProtocolVersion() != null) {
          b.protocolVersion(options.getConfiguredProtocolVersion());
        }
        c.setOptions(b
            .sslOptions(options.getSslOptions()) // the application's trust and key material
            .socketOptions(options.getSocketOptions())
            .autoReconnect(reconnect)
            .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
            .build());
        return c;
      });
    }

    @Override
    BlockingPool.Conn openBlocking(String node, String clientName) {
      RedisURI uri = uriOf(node);
      RedisClient nodeClient = nodeClient(blockingClients, node, false); // a dropped one is discarded
      return suspecting(() -> named(open(() -> nodeClient.connect(StringCodec.UTF8, uri),
          "blocking connection to " + node), node, clientName, () -> {}));
    }

    @Override
    StatefulRedisPubSubConnection<String, String> openSubscriber(String node, String clientName) {
      RedisURI uri = uriOf(node);
      RedisClient nodeClient = nodeClient(subscriberClients, node, true);
      return suspecting(() -> namedSubscriber(open(() -> nodeClient.connectPubSub(StringCodec.UTF8, uri),
          "subscriber connection to " + node), clientName));
    }

    /** Opens a node connection; if that fails, the node may have failed over: learn the new master. */
    private <C> C suspecting(Supplier<C> open) {
      try {
        return open.get();
      } catch (TurnstileException e) {
        suspect();
        throw e;
      }
    }

    /**
     * The node's address from the topology view, with the seed's credentials, TLS settings and
     * timeout (the view's URIs carry none: Lettuce applies them when it connects, as this does).
     */
    private RedisURI uriOf(String node) {
      RedisClusterNode n = find(node);
      if (n == null) {
        throw new TurnstileException("Redis Cluster node " + node + " left the topology");
      }
      RedisURI out = RedisURI.create(n.getUri().getHost(), n.getUri().getPort());
      out.applyAuthentication(seed);
      out.applySsl(seed);
      out.setTimeout(seed.getTimeout());
      return out;
    }

    /**
     * Through the cluster connection's connection to the node, opened asynchronously if it has none
     * yet: this may run on a Lettuce event loop (OptionalCommands sends the unblocks that waited for
     * the first one's verdict from the thread that completes it), which must never block.
     */
    @Override
    CompletableFuture<?> unblock(BlockingPool.Conn conn) {
      int colon = conn.node.lastIndexOf(':');
      try {
        return main.getConnectionAsync(conn.node.substring(0, colon), Integer.parseInt(conn.node.substring(colon + 1)))
            .thenCompose(c -> c.async().clientUnblock(conn.clientId, UnblockType.TIMEOUT).toCompletableFuture());
      } catch (RedisException e) {
        return CompletableFuture.failedFuture(e); // the node is gone: the caller closes the connection
      }
    }

    @Override
    void probeWait() {
      for (RedisClusterNode n : main.getPartitions()) {
        if (n.is(RedisClusterNode.NodeFlag.UPSTREAM) && !n.getSlots().isEmpty() && n.getUri() != null) {
          main.getConnection(n.getUri().getHost(), n.getUri().getPort()).sync().waitForReplication(0, 0);
        }
      }
    }

    @Override
    int batchOf(String key) {
      return SlotHash.getSlot(key);
    }

    @Override
    void suspect() {
      long now = System.nanoTime();
      long last = lastRefresh.get();
      if (now - last > 500_000_000L && lastRefresh.compareAndSet(last, now)) {
        client.refreshPartitionsAsync();
      }
    }

    /**
     * A node connection dropped: its master may be dead, and Lettuce's adaptive refresh is
     * rate-limited (30 s by default), while commands queued to the dead master get no MOVED. So
     * the topology is re-read every 250 ms for a while (10 s after the last drop), and a failover
     * is noticed within a fraction of a second of the promotion, not at the next command timeout.
     */
    @Override
    void lostConnection() {
      watchUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      if (watching.compareAndSet(false, true)) {
        scheduleRefresh();
      }
    }

    private void scheduleRefresh() {
      try {
        client.getResources().eventExecutorGroup().schedule(() -> {
          if (closed || System.nanoTime() - watchUntil >= 0) {
            watching.set(false);
            return;
          }
          client.refreshPartitionsAsync();
          scheduleRefresh();
        }, 250, TimeUnit.MILLISECONDS);
      } catch (RuntimeException e) {
        watching.set(false); // the client is shutting down
      }
    }

    @Override
    public void close() {
      closed = true;
      topologyEvents.dispose();
      for (Map<String, RedisClient> clients : List.of(blockingClients, subscriberClients)) {
        for (RedisClient c : clients.values()) {
          c.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
      }
      super.close();
    }
  }
}
