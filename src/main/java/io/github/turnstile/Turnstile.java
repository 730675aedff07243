package io.github.turnstile;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisCredentials;
import io.lettuce.core.RedisCredentialsProvider;
import io.lettuce.core.RedisURI;
import io.lettuce.core.StaticCredentialsProvider;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * Entry point: a connection to Redis and a registry of the distributed primitives used through it.
 *
 * <pre>{@code
 * try (Turnstile turnstile = Turnstile.connect("redis://localhost:6379")) {
 *   DistributedLock lock = turnstile.lock("orders:42");
 *   lock.lock();
 *   try {
 *     long token = lock.fencingToken(); // pass to the store you write to
 *     // ...
 *   } finally {
 *     lock.unlock();
 *   }
 * }
 * }</pre>
 *
 * <p>One Turnstile is one client in Turnstile's sense: its primitives' leases are renewed together
 * by one watchdog, and its waiters share one bounded pool of blocking connections. Create one per
 * application and share it; it is thread-safe. {@link #lock(String)} returns the same instance for
 * the same name for as long as the application references it (or a thread holds or waits for it);
 * instances nobody references are garbage collected, so the registry never grows without bound.
 *
 * <p>Closing a Turnstile ends its waiters and stops its watchdog, so leases still held run out in
 * Redis within the lease time; close it only after releasing (see {@link #close()}).
 *
 * <p><b>Threads.</b> Locks are owned by threads (platform or virtual), semaphore permits by the
 * Turnstile. Turnstile runs two daemon threads of its own, the watchdog and the event thread on
 * which {@link LeaseLossListener}s are called, besides Lettuce's I/O threads.
 *
 * <p><b>Failure model.</b> Acquisitions wait through Redis outages: untimed ones until
 * {@link TurnstileOptions#outageTolerance()} of continuous unavailability (then
 * {@link TurnstileException}, nothing held), timed ones until their deadline. Releases during an
 * outage finish locally and complete in Redis later. One-shot calls ({@code tryLock()}, queries)
 * throw {@link TurnstileException} while Redis cannot be reached. A lease lost while held is
 * reported by {@link LockLostException}, {@link LeaseLossListener}s and one WARNING log line.
 *
 * <p><b>Metrics and logging.</b> Metrics are recorded in a Micrometer registry if one is set with
 * {@link TurnstileOptions.Builder#meterRegistry}; Micrometer is otherwise never loaded. Logs go to
 * {@link System.Logger} {@code io.github.turnstile}: one WARNING per lost lease, one INFO per
 * reclaimed crashed holder, nothing else at INFO or above in normal operation.
 */
public final class Turnstile implements AutoCloseable {
  private final Engine engine;
  private final Registry<RedisLock> locks = new Registry<>();
  private final Registry<RedisReadWriteLock> readWriteLocks = new Registry<>();
  private final Registry<RedisSemaphore> semaphores = new Registry<>();

  private Turnstile(Engine engine) {
    this.engine = engine;
    // the client's identity record, before the first acquisition can be granted: a hold is named
    // (application, host, pid) to whoever inspects it from the moment it is taken
    engine.identity.writeAtConnect();
  }

  /**
   * Connects with default options to Redis at {@code uri}; see {@link #connect(String,
   * TurnstileOptions)} for the URI forms. The returned Turnstile owns its client and shuts it down
   * on {@link #close()}.
   *
   * @param uri the Redis URI
   * @return a connected Turnstile
   * @throws IllegalArgumentException if the URI cannot be parsed
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile connect(String uri) {
    return connect(uri, TurnstileOptions.defaults());
  }

  /**
   * Connects with the given options to Redis at {@code uri}. The returned Turnstile owns its
   * client and shuts it down on {@link #close()}. The URI forms are Lettuce's, plus one for a
   * Cluster:
   * <ul>
   *   <li>one server: {@code redis://[[user:]password@]host[:port][/database]}, or
   *       {@code rediss://...} for TLS, or {@code redis-socket:///path/to/socket};</li>
   *   <li>Sentinel: {@code redis-sentinel://[password@]host[:port][,host2[:port2]...][/database]#masterName}
   *       (Lettuce asks the sentinels for the current primary on every connect and reconnect);</li>
   *   <li>Cluster: {@code redis-cluster://[[user:]password@]host[:port][,host2[:port2]...]}, or
   *       {@code rediss-cluster://...} for TLS: the seed nodes of a Redis Cluster (Turnstile's
   *       form; Lettuce itself takes one {@code redis://} URI per seed, see
   *       {@link #create(RedisClusterClient, TurnstileOptions)}).</li>
   * </ul>
   *
   * <p>Before it returns, it stores this client's identity in Redis ({@code clientName}, host,
   * process id: one script, whose reply it waits for at most the command timeout), so that
   * inspections name its holds from the moment they are granted; a failure of that write does not
   * fail the connect (it is retried within a watchdog scan).
   *
   * @param uri the Redis URI
   * @param options the options
   * @return a connected Turnstile
   * @throws IllegalArgumentException if the URI cannot be parsed
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile connect(String uri, TurnstileOptions options) {
    Objects.requireNonNull(uri, "uri");
    Objects.requireNonNull(options, "options");
    String lower = uri.toLowerCase(java.util.Locale.ROOT);
    if (lower.startsWith("redis-cluster://") || lower.startsWith("rediss-cluster://")) {
      ClientResources resources = ownedResources();
      List<RedisURI> seeds = clusterSeeds(uri);
      RedisClusterClient client = RedisClusterClient.create(resources, seeds);
      Runnable shutdown = () -> shutdown(client, resources);
      client.setOptions(ClusterClientOptions.builder()
          .autoReconnect(true)
          .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
          // follow resharding and failovers: Lettuce's adaptive triggers (on by default in Lettuce
          // 7: MOVED/ASK, reconnect storms, unknown nodes), every 30 s in any case, and Turnstile's
          // own refresh when a command goes unanswered (Topology.suspect)
          .topologyRefreshOptions(ClusterTopologyRefreshOptions.builder()
              .enablePeriodicRefresh(Duration.ofSeconds(30))
              .build())
          .build());
      return open(shutdown, name -> Topology.cluster(client, seeds.get(0), shutdown, name), options);
    }
    RedisURI redisUri;
    try {
      redisUri = immediateCredentials(RedisURI.create(uri));
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("not a Redis URI: '" + uri + "': " + e.getMessage(), e);
    }
    ClientResources resources = ownedResources();
    RedisClient client = RedisClient.create(resources, redisUri);
    Runnable shutdown = () -> shutdown(client, resources);
    // Turnstile bounds every wait itself (command timeout, caller deadlines), so Lettuce's own
    // command timeout must not cut blocking waits short.
    client.setOptions(ClientOptions.builder()
        .autoReconnect(true)
        .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
        .build());
    return open(shutdown, name -> Topology.standalone(client, shutdown, name), options);
  }

  /**
   * Client resources for a client Turnstile owns. Reconnect attempts back off to at most 100 ms
   * (Lettuce's default grows to 30 s): after a restart or a failover, waiters must resume within
   * a few hundred milliseconds of Redis answering again, and holders must reach the new primary
   * well within a lease. A connection attempt every 100 ms during an outage costs nothing.
   *
   * <p>Lettuce's own per-command latency histograms are off: Lettuce turns them on whenever
   * LatencyUtils and HdrHistogram are on the class path (Micrometer brings both), and then wraps
   * and times every command. Nothing reads them here: Turnstile's metrics ({@link TurnstileOptions})
   * time acquisitions, not commands.
   * (Package-private for a test.)
   */
  static ClientResources ownedResources() {
    return ClientResources.builder()
        .reconnectDelay(() -> Delay.exponential(Duration.ofMillis(1), Duration.ofMillis(100), 2,
            java.util.concurrent.TimeUnit.MILLISECONDS))
        .commandLatencyRecorder(io.lettuce.core.metrics.CommandLatencyRecorder.disabled())
        .build();
  }

  private static void shutdown(io.lettuce.core.AbstractRedisClient client, ClientResources resources) {
    client.shutdown();
    resources.shutdown(0, 2, java.util.concurrent.TimeUnit.SECONDS).awaitUninterruptibly(3000);
  }

  /** Parses {@code redis[s]-cluster://[userinfo@]h1[:p1],h2[:p2]...[?query]} into one URI per seed. */
  static List<RedisURI> clusterSeeds(String uri) {
    int schemeEnd = uri.indexOf("://");
    String scheme = uri.substring(0, schemeEnd).toLowerCase(java.util.Locale.ROOT).replace("-cluster", "");
    String rest = uri.substring(schemeEnd + 3);
    String userInfo = "";
    int at = rest.lastIndexOf('@');
    if (at >= 0) {
      userInfo = rest.substring(0, at + 1);
      rest = rest.substring(at + 1);
    }
    String tail = "";
    int slash = rest.indexOf('/');
    int query = rest.indexOf('?');
    int cut = slash < 0 ? query : query < 0 ? slash : Math.min(slash, query);
    if (cut >= 0) {
      tail = rest.substring(cut);
      rest = rest.substring(0, cut);
    }
    List<RedisURI> seeds = new java.util.ArrayList<>();
    for (String hostPort : rest.split(",")) {
      if (hostPort.isBlank()) {
        continue;
      }
      try {
        seeds.add(immediateCredentials(RedisURI.create(scheme + "://" + userInfo + hostPort.trim() + tail)));
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("not a Redis Cluster URI: '" + uri + "': " + e.getMessage(), e);
      }
    }
    if (seeds.isEmpty()) {
      throw new IllegalArgumentException("a Redis Cluster URI names no seed node: '" + uri + "'");
    }
    return seeds;
  }

  /**
   * Gives a URI parsed from a string (and its Sentinels) a {@link StaticCredentialsProvider} for
   * the credentials the string holds. Lettuce gives such a URI a provider that is not
   * "immediate", and its handshake of every new connection then continues on the common
   * {@code ForkJoinPool} (from JDK 25 at any parallelism): a connection opened while the
   * application's tasks occupy that pool waited for a worker. With a static provider the
   * handshake stays on the connection's event loop.
   */
  static RedisURI immediateCredentials(RedisURI uri) {
    RedisCredentialsProvider p = uri.getCredentialsProvider();
    if (p != null && !(p instanceof RedisCredentialsProvider.ImmediateRedisCredentialsProvider)) {
      RedisCredentials c = p.resolveCredentials().block(); // from the string: already there
      if (c != null) {
        uri.setCredentialsProvider(new StaticCredentialsProvider(c));
      }
    }
    for (RedisURI sentinel : uri.getSentinels()) {
      immediateCredentials(sentinel);
    }
    return uri;
  }

  private static Turnstile open(Runnable shutdown, java.util.function.Function<String, Topology> topology,
      TurnstileOptions options) {
    try {
      return new Turnstile(new Engine(topology, options));
    } catch (RuntimeException e) {
      shutdown.run();
      throw e;
    }
  }

  /**
   * Creates a Turnstile on a client the application owns; {@link #close()} closes only the
   * connections Turnstile opened. The client must have a default URI (created with one); a
   * Sentinel URI works as in {@link #connect(String, TurnstileOptions)}. If the client has command
   * timeouts enabled, keep them longer than the lease time, or blocking waits are cut short (which
   * costs round trips, not correctness).
   *
   * @param client the client
   * @param options the options
   * @return a connected Turnstile
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile create(RedisClient client, TurnstileOptions options) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(options, "options");
    return wrapped(() -> new Turnstile(new Engine(name -> Topology.standalone(client, null, name), options)));
  }

  /**
   * Creates a Turnstile on a Redis Cluster client the application owns; {@link #close()} closes
   * only the connections Turnstile opened. Every primitive keeps its keys in one hash slot, so
   * each runs on one master. Keep Lettuce's adaptive topology refresh on (the default in
   * Lettuce 7), so that resharding is followed promptly (Turnstile itself re-reads the topology
   * when a command to a failed master goes unanswered); the same advice on command timeouts as for
   * {@link #create(RedisClient, TurnstileOptions)} applies.
   *
   * @param client the cluster client
   * @param options the options
   * @return a connected Turnstile
   * @throws TurnstileException if the cluster cannot be reached
   */
  public static Turnstile create(RedisClusterClient client, TurnstileOptions options) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(options, "options");
    return wrapped(() -> new Turnstile(new Engine(name -> Topology.cluster(client, null, null, name), options)));
  }

  private static Turnstile wrapped(java.util.function.Supplier<Turnstile> make) {
    try {
      return make.get();
    } catch (RedisException e) {
      throw new TurnstileException("cannot connect to Redis: " + e.getMessage(), e);
    }
  }

  /**
   * Returns the distributed lock of this name: the same instance for as long as it is referenced.
   * Costs no round trip.
   *
   * @param name the lock's name, shared by every client that uses the lock; non-blank, at most
   *     {@value #MAX_NAME_LENGTH} characters
   * @return the lock
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank or longer than {@value #MAX_NAME_LENGTH}
   *     characters
   * @throws TurnstileException if this Turnstile is closed
   */
  public DistributedLock lock(String name) {
    checkOpen("lock", name);
    return locks.get(name, n -> new RedisLock(engine, n));
  }

  /**
   * Returns the distributed read/write lock of this name: the same instance for as long as it is
   * referenced. Costs no round trip.
   *
   * @param name the lock's name, shared by every client that uses it; non-blank, at most
   *     {@value #MAX_NAME_LENGTH} characters
   * @return the read/write lock
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank or longer than {@value #MAX_NAME_LENGTH}
   *     characters
   * @throws TurnstileException if this Turnstile is closed
   */
  public DistributedReadWriteLock readWriteLock(String name) {
    checkOpen("read/write lock", name);
    return readWriteLocks.get(name, n -> new RedisReadWriteLock(engine, n));
  }

  /**
   * Returns the leased semaphore of this name, creating it in Redis with {@code permits} permits
   * if it does not exist yet. Its permits are held by live clients: a client that crashes, or is
   * cut off for longer than its lease, loses them to the others, and a client cannot release more
   * permits than it holds (see {@link DistributedSemaphore}). Costs one round trip, which checks the
   * stored capacity.
   *
   * @param name the semaphore's name, shared by every client that uses it; non-blank, at most
   *     {@value #MAX_NAME_LENGTH} characters
   * @param permits its capacity, any {@code int} (negative: acquisitions wait until permits are
   *     added); must equal the stored capacity if the semaphore exists
   * @return the semaphore: the same instance for as long as it is referenced
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank or too long, the semaphore exists with a
   *     different capacity (the message names both), or it exists as a counting semaphore
   * @throws TurnstileException if Redis cannot be reached, or this Turnstile is closed
   */
  public DistributedSemaphore semaphore(String name, int permits) {
    return semaphore(name, permits, true);
  }

  /**
   * Returns the counting semaphore of this name, creating it in Redis with {@code permits} free
   * permits if it does not exist yet (otherwise {@code permits} is not used). It has exactly the
   * counting semantics of {@link java.util.concurrent.Semaphore}: {@code release()} adds a permit
   * whether or not the caller acquired one, and nothing is leased or ever reclaimed, so a permit
   * acquired by a client that crashes is gone. Meant for signalling between JVMs (created with 0
   * permits: one JVM releases, another acquires). Costs one round trip.
   *
   * @param name the semaphore's name, shared by every client that uses it; non-blank, at most
   *     {@value #MAX_NAME_LENGTH} characters
   * @param permits the free permits it is created with, any {@code int}
   * @return the semaphore: the same instance for as long as it is referenced
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank or too long, or it exists as a leased semaphore
   * @throws TurnstileException if Redis cannot be reached, or this Turnstile is closed
   */
  public DistributedSemaphore countingSemaphore(String name, int permits) {
    return semaphore(name, permits, false);
  }

  private DistributedSemaphore semaphore(String name, int permits, boolean leased) {
    checkOpen("semaphore", name);
    RedisSemaphore s = semaphores.get(name, n -> new RedisSemaphore(engine, n, permits, leased));
    if (s.isLeased() != leased) {
      throw new IllegalArgumentException("semaphore '" + name + "' is used by this client as a "
          + (s.isLeased() ? "leased" : "counting") + " semaphore");
    }
    try {
      s.initialize(permits);
    } catch (RuntimeException e) {
      // an instance made by this call that Redis refused (another mode, another capacity) or could
      // not check is not kept: the next call makes a new one with its own arguments
      if (!s.initialized()) {
        semaphores.remove(name, s);
      }
      throw e;
    }
    return s;
  }

  /**
   * Returns who holds the primitive of this kind and name in Redis and how many wait for it, as
   * {@link DistributedLock#inspect()} does, without obtaining the primitive: for a semaphore, no
   * capacity is needed and none is created. Read-only and bounded: one round trip (plus one the
   * first time it names clients this Turnstile has not seen: why, in
   * {@link DistributedLock#inspect()}), and no key is created, so a name nobody uses answers "not
   * held" ({@link Inspection#isHeld()} false) and leaves Redis as it was.
   *
   * @param kind lock, read/write lock or semaphore (see {@link Inspection.Kind#of(String)})
   * @param name the primitive's name; non-blank, at most {@value #MAX_NAME_LENGTH} characters
   * @return a snapshot of its holders and waiters
   * @throws NullPointerException if kind or name is null
   * @throws IllegalArgumentException if name is blank or too long
   * @throws TurnstileException if Redis cannot be reached, or this Turnstile is closed
   */
  public Inspection inspect(Inspection.Kind kind, String name) {
    return engine.inspector.inspect(kind, name);
  }

  /**
   * Returns what this client holds and waits for now, from this JVM's own books: no round trip.
   * Holds are listed per lease (a thread's hold, an asynchronous hold, a semaphore's permits; not
   * a lock's grant that lock caching keeps idle, which no thread holds), waits per primitive (the thread that waits in Redis, and how many queue behind it), each with
   * how long it has lasted. A snapshot: it may be out of date the moment it returns.
   *
   * @return the holds, then the waits, of this client; an unmodifiable list
   */
  public List<Activity> activity() {
    long now = engine.ticker.read();
    List<Activity> out = new java.util.ArrayList<>();
    for (Lease l : engine.watchdog.leases()) {
      long left = l.remainingMillis(now);
      if (l.kind == null || left <= 0 || l.idle) {
        continue;
      }
      int permits = l.semaphore != null ? l.semaphore.heldPermits() : 1;
      if (permits <= 0) {
        continue;
      }
      out.add(new Activity(l.kind, l.name, true, l.holder, l.token, permits,
          Duration.ofNanos(Math.max(0, now - l.grantedAtNanos)), Duration.ofMillis(left), 0));
    }
    for (Engine.Waiting w : engine.waiting) {
      out.add(new Activity(w.kind(), w.name(), false, w.waiter(), 0, 0,
          Duration.ofNanos(Math.max(0, now - w.sinceNanos())), null, w.queued().getAsInt()));
    }
    return java.util.Collections.unmodifiableList(out);
  }

  /**
   * The longest primitive name, in characters. A name is part of every key and channel of its
   * primitive, sent with every command, so its length is bounded like every other argument that
   * becomes work in Redis; the check happens before anything is sent.
   */
  public static final int MAX_NAME_LENGTH = 1024;

  private void checkOpen(String kind, String name) {
    checkName(name);
    if (engine.isClosed()) {
      throw new TurnstileException("cannot obtain the " + kind + " '" + name + "': this Turnstile is closed");
    }
  }

  static void checkName(String name) {
    Objects.requireNonNull(name, "name must not be null");
    if (name.isBlank()) {
      throw new IllegalArgumentException("name must not be blank");
    }
    if (name.length() > MAX_NAME_LENGTH) {
      throw new IllegalArgumentException("name must be at most " + MAX_NAME_LENGTH
          + " characters (Turnstile.MAX_NAME_LENGTH), was " + name.length());
    }
  }

  /** {@return the options this Turnstile was made with} */
  public TurnstileOptions options() {
    return engine.options;
  }

  Engine engine() {
    return engine;
  }

  /**
   * {@return this client's id: 16 hex digits, random per Turnstile, which names its holds in Redis
   * ({@link Inspection.Holder#clientId()}) and its connections ({@code turnstile:<id>} in
   * {@code CLIENT LIST})}
   */
  public String clientId() {
    return engine.clientId;
  }

  /** Returns instances in the registry after draining collected ones (Caffeine drains 1000 a pass). */
  long cachedLocks() {
    return locks.size();
  }

  /**
   * Stops the watchdog and closes Turnstile's connections (and the client, if owned).
   *
   * <ul>
   *   <li>Threads waiting in an acquisition of one of its primitives end promptly with
   *       {@link TurnstileException}, whoever holds what they wait for: another client, or a
   *       thread of this one (threads queued behind such a holder included). Pending
   *       asynchronous acquisitions fail with it.</li>
   *   <li>Acquisitions started afterwards ({@code lock()}, {@code tryLock}, ...) and
   *       {@link #lock(String)}, {@link #readWriteLock(String)}, {@link #semaphore(String, int)}
   *       throw {@link TurnstileException} at once. Only a thread's re-entry of a lock it holds
   *       still succeeds (it is local).</li>
   *   <li>Holds still held are no longer renewed: other clients get them when their leases run
   *       out in Redis. Their holders may still {@code unlock()}: the hold ends in this JVM and
   *       the call returns normally, but the release cannot reach Redis any more, so only the
   *       lease ends the hold there. Release before closing to free them at once.</li>
   * </ul>
   *
   * <p>Closing again does nothing.
   */
  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String toString() {
    return "Turnstile[client " + engine.clientId + ", " + engine.options + "]";
  }
}
