package io.github.turnstile.bench.jmh;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Turnstile;
import io.github.turnstile.bench.SetNxPollLock;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Single-operation costs, one thread, no contention, against the Redis named by the system
 * property {@value JmhMain#URI_PROPERTY} (set by {@link JmhMain} for every fork, so all forks of
 * one run use the same server). Method names are {@code <operation>_<implementation>};
 * {@link JmhMain} turns them into a side-by-side table.
 *
 * <p>A derived state overrides its base's one {@code @Setup} / {@code @TearDown} method and calls
 * {@code super}, because JMH does not order several setup methods of one state class. Every
 * state is {@link Scope#Thread} with one benchmark thread, and JMH runs trial-level
 * setup and tear-down on that thread, so a lock taken in a setup is owned by the measuring thread
 * (both Turnstile and Redisson locks are thread-owned).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Threads(1)
public class SingleOpBenchmarks {

  static String uri() {
    String uri = System.getProperty(JmhMain.URI_PROPERTY);
    if (uri == null || uri.isBlank()) {
      throw new IllegalStateException("no Redis: run through JmhMain (mvn -B -q test-compile exec:java@jmh),"
          + " or pass -D" + JmhMain.URI_PROPERTY + "=redis://host:port to the forks");
    }
    return uri;
  }

  static String name(String what) {
    return "jmh:" + what + ":" + UUID.randomUUID();
  }

  static RedissonClient redisson() {
    Config config = new Config();
    config.useSingleServer().setAddress(uri());
    return Redisson.create(config);
  }

  // ------------------------------------------------------------------ floor

  /** A plain Lettuce connection. */
  @State(Scope.Thread)
  public static class Ping {
    RedisClient client;
    StatefulRedisConnection<String, String> conn;
    RedisCommands<String, String> sync;

    @Setup(Level.Trial)
    public void setup() {
      client = io.github.turnstile.bench.LeanLettuce.create(uri());
      conn = client.connect();
      sync = conn.sync();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      conn.close();
      io.github.turnstile.bench.LeanLettuce.shutdown(client);
    }
  }

  /**
   * PING on a Lettuce sync connection: one round trip, the floor for anything else here.
   *
   * @param s state
   * @return the reply
   */
  @Benchmark
  public String ping_lettuce(Ping s) {
    return s.sync.ping();
  }

  // ------------------------------------------------------------------ Turnstile

  /** One Turnstile client and an uncontended lock. */
  @State(Scope.Thread)
  public static class TurnstileLock {
    Turnstile turnstile;
    DistributedLock lock;

    @Setup(Level.Trial)
    public void setup() {
      turnstile = Turnstile.connect(uri());
      lock = turnstile.lock(name("lock"));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      turnstile.close();
    }
  }

  /** A Turnstile lock that the measuring thread already holds once. */
  @State(Scope.Thread)
  public static class TurnstileHeld extends TurnstileLock {
    @Override
    public void setup() {
      super.setup();
      lock.lock();
    }

    @Override
    public void tearDown() {
      if (lock.getHoldCount() != 1) {
        throw new IllegalStateException("hold count " + lock.getHoldCount() + " after the reentrant benchmark");
      }
      lock.unlock();
      super.tearDown();
    }
  }

  /** A Turnstile lock held by another client (another Turnstile, so another owner in Redis). */
  @State(Scope.Thread)
  public static class TurnstileHeldElsewhere extends TurnstileLock {
    Turnstile other;

    @Override
    public void setup() {
      super.setup();
      String n = name("held");
      other = Turnstile.connect(uri());
      other.lock(n).lock();
      lock = turnstile.lock(n);
    }

    @Override
    public void tearDown() {
      other.close(); // the hold goes with the client; the key expires after the lease
      super.tearDown();
    }
  }

  /** A Turnstile semaphore with 4 permits and nobody else using it. */
  @State(Scope.Thread)
  public static class TurnstileSemaphore extends TurnstileLock {
    DistributedSemaphore semaphore;

    @Override
    public void setup() {
      super.setup();
      semaphore = turnstile.semaphore(name("sem"), 4);
    }
  }

  /**
   * Uncontended {@code lock(); unlock();}.
   *
   * @param s state
   */
  @Benchmark
  public void pair_turnstile(TurnstileLock s) {
    s.lock.lock();
    s.lock.unlock();
  }

  /**
   * Re-entry: {@code lock(); unlock();} on a lock this thread already holds.
   *
   * @param s state
   */
  @Benchmark
  public void reentrant_turnstile(TurnstileHeld s) {
    s.lock.lock();
    s.lock.unlock();
  }

  /**
   * {@code tryLock()} on a lock another client holds: the fast failure.
   *
   * @param s state
   * @return false
   */
  @Benchmark
  public boolean tryLockHeld_turnstile(TurnstileHeldElsewhere s) {
    if (s.lock.tryLock()) {
      throw new IllegalStateException("acquired a lock another client holds");
    }
    return false;
  }

  /**
   * Uncontended semaphore {@code tryAcquire(); release();}.
   *
   * @param s state
   */
  @Benchmark
  public void semaphore_turnstile(TurnstileSemaphore s) {
    if (!s.semaphore.tryAcquire()) {
      throw new IllegalStateException("no permit on an idle semaphore");
    }
    s.semaphore.release();
  }

  // ------------------------------------------------------------------ Redisson

  /** One Redisson client and an uncontended RLock (watchdog lease, as with lock()). */
  @State(Scope.Thread)
  public static class RedissonLock {
    RedissonClient redisson;
    RLock lock;

    @Setup(Level.Trial)
    public void setup() {
      redisson = redisson();
      lock = redisson.getLock(name("lock"));
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      redisson.shutdown(0, 5, TimeUnit.SECONDS);
    }
  }

  /** A Redisson lock that the measuring thread already holds once. */
  @State(Scope.Thread)
  public static class RedissonHeld extends RedissonLock {
    @Override
    public void setup() {
      super.setup();
      lock.lock();
    }

    @Override
    public void tearDown() {
      lock.unlock();
      super.tearDown();
    }
  }

  /** A Redisson lock held by another Redisson client. */
  @State(Scope.Thread)
  public static class RedissonHeldElsewhere extends RedissonLock {
    RedissonClient other;

    @Override
    public void setup() {
      super.setup();
      String n = name("held");
      other = redisson();
      other.getLock(n).lock();
      lock = redisson.getLock(n);
    }

    @Override
    public void tearDown() {
      other.shutdown(0, 5, TimeUnit.SECONDS);
      super.tearDown();
    }
  }

  /** A Redisson RSemaphore with 4 permits and nobody else using it. */
  @State(Scope.Thread)
  public static class RedissonSemaphore extends RedissonLock {
    RSemaphore semaphore;

    @Override
    public void setup() {
      super.setup();
      semaphore = redisson.getSemaphore(name("sem"));
      semaphore.trySetPermits(4);
    }
  }

  /**
   * Uncontended {@code lock(); unlock();}.
   *
   * @param s state
   */
  @Benchmark
  public void pair_redisson(RedissonLock s) {
    s.lock.lock();
    s.lock.unlock();
  }

  /**
   * Re-entry on a lock this thread already holds.
   *
   * @param s state
   */
  @Benchmark
  public void reentrant_redisson(RedissonHeld s) {
    s.lock.lock();
    s.lock.unlock();
  }

  /**
   * {@code tryLock()} on a lock another client holds.
   *
   * @param s state
   * @return false
   */
  @Benchmark
  public boolean tryLockHeld_redisson(RedissonHeldElsewhere s) {
    if (s.lock.tryLock()) {
      throw new IllegalStateException("acquired a lock another client holds");
    }
    return false;
  }

  /**
   * Uncontended RSemaphore {@code tryAcquire(); release();}.
   *
   * @param s state
   */
  @Benchmark
  public void semaphore_redisson(RedissonSemaphore s) {
    if (!s.semaphore.tryAcquire()) {
      throw new IllegalStateException("no permit on an idle semaphore");
    }
    s.semaphore.release();
  }

  // ------------------------------------------------------------------ SET NX PX (not reentrant)

  /** The naive lock of the load harness on one Lettuce connection. */
  @State(Scope.Thread)
  public static class SetNx {
    RedisClient client;
    StatefulRedisConnection<String, String> conn;
    String releaseSha;
    Lock lock;

    @Setup(Level.Trial)
    public void setup() {
      client = io.github.turnstile.bench.LeanLettuce.create(uri());
      conn = client.connect();
      releaseSha = conn.sync().scriptLoad(SetNxPollLock.RELEASE);
      lock = new SetNxPollLock(conn.sync(), name("lock"), releaseSha, 30_000, 5);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
      conn.close();
      io.github.turnstile.bench.LeanLettuce.shutdown(client);
    }
  }

  /** A SET NX lock held by another connection. */
  @State(Scope.Thread)
  public static class SetNxHeldElsewhere extends SetNx {
    StatefulRedisConnection<String, String> otherConn;

    @Override
    public void setup() {
      super.setup();
      String n = name("held");
      otherConn = client.connect();
      new SetNxPollLock(otherConn.sync(), n, releaseSha, 600_000, 5).lock();
      lock = new SetNxPollLock(conn.sync(), n, releaseSha, 600_000, 5);
    }

    @Override
    public void tearDown() {
      otherConn.close();
      super.tearDown();
    }
  }

  /**
   * SET NX PX, then the owner-checked delete script.
   *
   * @param s state
   */
  @Benchmark
  public void pair_setnx(SetNx s) {
    s.lock.lock();
    s.lock.unlock();
  }

  /**
   * SET NX PX that fails because another connection holds the key.
   *
   * @param s state
   * @return false
   */
  @Benchmark
  public boolean tryLockHeld_setnx(SetNxHeldElsewhere s) {
    if (s.lock.tryLock()) {
      throw new IllegalStateException("acquired a lock another client holds");
    }
    return false;
  }
}
