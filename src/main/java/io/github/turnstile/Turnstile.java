package io.github.turnstile;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
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
 * <p>Closing a Turnstile stops its watchdog, so leases still held run out in Redis within the lease
 * time; close it only after releasing.
 *
 * <p><b>Threads.</b> Locks are owned by threads (platform or virtual), semaphore permits by the
 * Turnstile. Turnstile runs two daemon threads of its own, the watchdog and the event thread on
 * which {@link LeaseLossListener}s are called, besides Lettuce's I/O threads.
 *
 * <p><b>Failure model.</b> Methods that talk to Redis throw {@link TurnstileException} when it
 * cannot be reached, leaving nothing held. A lease lost while held is reported by
 * {@link LockLostException}, {@link LeaseLossListener}s and one WARNING log line.
 *
 * <p><b>Metrics and logging.</b> Metrics are recorded in a Micrometer registry if one is set with
 * {@link TurnstileOptions.Builder#meterRegistry}; Micrometer is otherwise never loaded. Logs go to
 * {@link System.Logger} {@code io.github.turnstile}: one WARNING per lost lease, one INFO per
 * reclaimed crashed holder, nothing else at INFO or above in normal operation.
 */
public final class Turnstile implements AutoCloseable {
  private final Engine engine;
  private final Cache<String, RedisLock> locks =
      Caffeine.newBuilder().weakValues().executor(Runnable::run).build();
  private final Cache<String, RedisReadWriteLock> readWriteLocks =
      Caffeine.newBuilder().weakValues().executor(Runnable::run).build();
  private final Cache<String, RedisSemaphore> semaphores =
      Caffeine.newBuilder().weakValues().executor(Runnable::run).build();

  private Turnstile(Engine engine) {
    this.engine = engine;
  }

  /**
   * Connects with default options to the Redis at {@code uri} (a Lettuce URI such as
   * {@code redis://host:6379}, {@code rediss://...} or {@code redis://password@host:port/db}).
   * The returned Turnstile owns its client and shuts it down on {@link #close()}.
   *
   * @param uri the Redis URI
   * @return a connected Turnstile
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile connect(String uri) {
    return connect(uri, TurnstileOptions.defaults());
  }

  /**
   * Connects with the given options to the Redis at {@code uri}. The returned Turnstile owns its
   * client and shuts it down on {@link #close()}.
   *
   * @param uri the Redis URI
   * @param options the options
   * @return a connected Turnstile
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile connect(String uri, TurnstileOptions options) {
    Objects.requireNonNull(uri, "uri");
    Objects.requireNonNull(options, "options");
    RedisURI redisUri;
    try {
      redisUri = RedisURI.create(uri);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("not a Redis URI: '" + uri + "': " + e.getMessage(), e);
    }
    RedisClient client = RedisClient.create(redisUri);
    // Turnstile bounds every wait itself (command timeout, caller deadlines), so Lettuce's own
    // command timeout must not cut blocking waits short.
    client.setOptions(ClientOptions.builder()
        .autoReconnect(true)
        .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
        .build());
    try {
      return new Turnstile(new Engine(client, true, options));
    } catch (RuntimeException e) {
      client.shutdown();
      throw e;
    }
  }

  /**
   * Creates a Turnstile on a client the application owns; {@link #close()} closes only the
   * connections Turnstile opened. The client must have a default URI (created with one). If the
   * client has command timeouts enabled, keep them longer than the lease time, or blocking waits
   * are cut short (which costs round trips, not correctness).
   *
   * @param client the client
   * @param options the options
   * @return a connected Turnstile
   * @throws TurnstileException if Redis cannot be reached
   */
  public static Turnstile create(RedisClient client, TurnstileOptions options) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(options, "options");
    try {
      return new Turnstile(new Engine(client, false, options));
    } catch (RedisException e) {
      throw new TurnstileException("cannot connect to Redis: " + e.getMessage(), e);
    }
  }

  /**
   * Returns the distributed lock of this name: the same instance for as long as it is referenced.
   * Costs no round trip.
   *
   * @param name the lock's name, shared by every client that uses the lock; non-blank
   * @return the lock
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank
   */
  public DistributedLock lock(String name) {
    checkName(name);
    return locks.get(name, n -> new RedisLock(engine, n));
  }

  /**
   * Returns the distributed read/write lock of this name: the same instance for as long as it is
   * referenced. Costs no round trip.
   *
   * @param name the lock's name, shared by every client that uses it; non-blank
   * @return the read/write lock
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank
   */
  public DistributedReadWriteLock readWriteLock(String name) {
    checkName(name);
    return readWriteLocks.get(name, n -> new RedisReadWriteLock(engine, n));
  }

  /**
   * Returns the distributed semaphore of this name, creating it in Redis with {@code permits}
   * permits if it does not exist yet. Costs one round trip, which checks the stored capacity.
   *
   * @param name the semaphore's name, shared by every client that uses it; non-blank
   * @param permits its capacity; must equal the stored capacity if the semaphore exists
   * @return the semaphore: the same instance for as long as it is referenced
   * @throws NullPointerException if name is null
   * @throws IllegalArgumentException if name is blank, permits is negative, or the semaphore
   *     exists with a different capacity (the message names both)
   * @throws TurnstileException if Redis cannot be reached
   */
  public DistributedSemaphore semaphore(String name, int permits) {
    checkName(name);
    if (permits < 0) {
      throw new IllegalArgumentException("permits must not be negative, was " + permits);
    }
    RedisSemaphore s = semaphores.get(name, n -> new RedisSemaphore(engine, n, permits));
    s.initialize(permits);
    return s;
  }

  static void checkName(String name) {
    Objects.requireNonNull(name, "name must not be null");
    if (name.isBlank()) {
      throw new IllegalArgumentException("name must not be blank");
    }
  }

  /** @return the options this Turnstile was made with */
  public TurnstileOptions options() {
    return engine.options;
  }

  Engine engine() {
    return engine;
  }

  /** @return instances in the registry after draining collected ones (Caffeine drains 1000 a pass) */
  long cachedLocks() {
    long size;
    long previous = Long.MAX_VALUE;
    while ((size = locks.estimatedSize()) < previous) {
      previous = size;
      locks.cleanUp();
    }
    return size;
  }

  /** Stops the watchdog and closes Turnstile's connections (and the client, if owned). */
  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String toString() {
    return "Turnstile[client " + engine.clientId + ", " + engine.options + "]";
  }
}
