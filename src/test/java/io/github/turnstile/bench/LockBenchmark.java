package io.github.turnstile.bench;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import io.github.turnstile.testing.RedisServerProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import java.util.function.DoubleUnaryOperator;
import java.util.function.ToDoubleFunction;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Side-by-side harness: Turnstile, Redisson's RLock and a naive SET NX PX + polling lock, measured
 * one after the other against the same Redis in one run.
 *
 * <pre>
 * mvn -B -q test-compile exec:java@bench
 * mvn -B -q test-compile exec:java@bench -Dbench.seconds=10 -Dbench.impls=turnstile,redisson
 * REDIS_URI=redis://localhost:6379 mvn -B -q test-compile exec:java@bench
 * </pre>
 *
 * <p>System properties (defaults in brackets): {@code bench.impls} [turnstile,redisson,setnx],
 * {@code bench.seconds} hot-lock measurement [5], {@code bench.warmup} warm-up seconds for the
 * uncontended and hot runs [1], {@code bench.uncontended.seconds} [3], {@code bench.clients} [4],
 * {@code bench.threads} per client [4], {@code bench.pings} [2000],
 * {@code bench.pair.rounds} [7] and {@code bench.pair.roundMillis} [1000]: the uncontended pair
 * again, every implementation and two PINGs taking turns round after round (medians; see
 * {@link #pairRounds}), {@code bench.reentrant.iterations} [100000], {@code bench.reentrant.maxSeconds} cap on the
 * reentrant loop [3], {@code bench.poll.millis} SETNX polling interval [5],
 * {@code bench.alternating.rounds} [5] and {@code bench.alternating.roundMillis} [1000]: two
 * clients of each implementation taking turns on one lock, pair after pair, in rounds like the
 * pair in turns (see {@link AlternatingBenchmark}). Parts:
 * {@code bench.main} (this class's table: uncontended, reentrant, hot lock),
 * {@code bench.alternating} (alternating pairs), {@code bench.semaphore},
 * {@code bench.rw}, {@code bench.scaling}, {@code bench.distinct} (distinct waits),
 * {@code bench.async} (asynchronous acquisition), all [true]; {@code =false} turns a part off.
 *
 * <p>Redis command counts come from {@code INFO commandstats} deltas (the INFO calls themselves
 * excluded). Redis counts commands issued from inside Lua scripts as well, so "cmds" is the work
 * Redis did; "scripts" counts EVAL/EVALSHA calls alone.
 */
public final class LockBenchmark {

  private static final int HOT_SECONDS = Integer.getInteger("bench.seconds", 5);
  private static final int WARMUP_SECONDS = Integer.getInteger("bench.warmup", 1);
  private static final int UNCONTENDED_SECONDS = Integer.getInteger("bench.uncontended.seconds", 3);
  private static final int PAIR_ROUNDS = Integer.getInteger("bench.pair.rounds", 7);
  private static final int PAIR_ROUND_MILLIS = Integer.getInteger("bench.pair.roundMillis", 1000);
  /** Whether the pair in turns also runs the probes that bound a pair's floor (PERFORMANCE.md). */
  private static final boolean PAIR_PROBES = Boolean.getBoolean("bench.pair.probes");

  /**
   * A probe, not a protocol: an acquire script for a lock whose hold is a field named by its
   * request ({@code h:<request>}), which a plain {@code HDEL} releases. It reads the record with
   * one {@code HGETALL} (the hold's field name is not known in advance), the clock, and writes the
   * hold and the token. It measures what an uncontended release without a script would buy
   * (PERFORMANCE.md, the reference run); waiters, replays and the fence are left out.
   */
  private static final String NATIVE_RELEASE_PROBE = """
      local lock, owner, req, lease = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
      local a = redis.call('HGETALL', lock)
      local t, q, held
      for i = 1, #a, 2 do
        local k = a[i]
        if k == 't' then t = a[i + 1] elseif k == 'q' then q = a[i + 1]
        elseif string.byte(k, 1) == 104 then held = k end
      end
      if held then return {0, redis.call('PTTL', lock)} end
      local tm = redis.call('TIME')
      local now = tm[1] * 1000000 + tm[2]
      local us = tm[2]
      local token = tm[1] .. (#us == 6 and us or string.sub('00000' .. us, -6))
      if t and not q then
        local last = t + 0
        if now > last and now - now % 32768 == last - last % 32768 then
          redis.call('HSET', lock, 'h:' .. req, owner, 'r', req, 't', token)
          return {1, token}
        end
      end
      redis.call('HSET', lock, 'h:' .. req, owner, 'r', req, 't', token, 'd', lease)
      redis.call('PEXPIRE', lock, lease)
      return {1, token}
      """;
  private static final int CLIENTS = Integer.getInteger("bench.clients", 4);
  private static final int THREADS = Integer.getInteger("bench.threads", 4);
  private static final int PINGS = Integer.getInteger("bench.pings", 2000);
  private static final int REENTRANT_ITERATIONS = Integer.getInteger("bench.reentrant.iterations", 100_000);
  private static final int REENTRANT_MAX_SECONDS = Integer.getInteger("bench.reentrant.maxSeconds", 3);
  private static final int POLL_MILLIS = Integer.getInteger("bench.poll.millis", 5);
  private static final long JOIN_TIMEOUT_MILLIS = 40_000;

  private LockBenchmark() {}

  // ------------------------------------------------------------------ implementations

  /** One client of a lock implementation: its own connection(s) to Redis. */
  interface Client extends AutoCloseable {
    Lock lock(String name);

    /** @return the current holder's fencing token, or null if the implementation has none */
    default Long fencingToken(Lock lock) {
      return null;
    }

    @Override
    void close();
  }

  /** A lock implementation under test. */
  interface Impl {
    String label();

    boolean reentrant();

    Client connect(String uri);
  }

  static class TurnstileImpl implements Impl {
    @Override
    public String label() {
      return "Turnstile";
    }

    @Override
    public boolean reentrant() {
      return true;
    }

    /** Lock caching off: every pair goes to Redis (the figure to compare with other clients of Redis). */
    @Override
    public Client connect(String uri) {
      return new TurnstileClient(Turnstile.connect(uri,
          io.github.turnstile.TurnstileOptions.builder().lockCaching(false).build()));
    }
  }

  /** Turnstile with lock caching on: a client keeps an idle lock's grant until another asks for it. */
  static final class CachedTurnstileImpl extends TurnstileImpl {
    @Override
    public String label() {
      return "Turnstile cached";
    }

    @Override
    public Client connect(String uri) {
      return new TurnstileClient(Turnstile.connect(uri,
          io.github.turnstile.TurnstileOptions.builder().lockCaching(true).build()));
    }
  }

  static final class TurnstileClient implements Client {
    private final Turnstile turnstile;

    TurnstileClient(Turnstile turnstile) {
      this.turnstile = turnstile;
    }

    @Override
    public Lock lock(String name) {
      return turnstile.lock(name);
    }

    @Override
    public Long fencingToken(Lock lock) {
      return ((DistributedLock) lock).fencingToken();
    }

    @Override
    public void close() {
      turnstile.close();
    }
  }

  static final class RedissonImpl implements Impl {
    @Override
    public String label() {
      return "Redisson";
    }

    @Override
    public boolean reentrant() {
      return true;
    }

    @Override
    public Client connect(String uri) {
      Config config = new Config();
      config.useSingleServer().setAddress(uri);
      return new RedissonLockClient(Redisson.create(config));
    }
  }

  static final class RedissonLockClient implements Client {
    private final RedissonClient redisson;

    RedissonLockClient(RedissonClient redisson) {
      this.redisson = redisson;
    }

    @Override
    public Lock lock(String name) {
      return redisson.getLock(name);
    }

    @Override
    public void close() {
      redisson.shutdown(0, 5, TimeUnit.SECONDS);
    }
  }

  static final class SetNxImpl implements Impl {
    @Override
    public String label() {
      return "SETNX-poll";
    }

    @Override
    public boolean reentrant() {
      return false;
    }

    @Override
    public Client connect(String uri) {
      RedisClient client = LeanLettuce.create(uri);
      StatefulRedisConnection<String, String> conn = client.connect();
      RedisCommands<String, String> sync = conn.sync();
      String sha = sync.scriptLoad(SetNxPollLock.RELEASE);
      return new SetNxClient(client, conn, sha);
    }
  }

  static final class SetNxClient implements Client {
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> conn;
    private final String releaseSha;

    SetNxClient(RedisClient client, StatefulRedisConnection<String, String> conn, String releaseSha) {
      this.client = client;
      this.conn = conn;
      this.releaseSha = releaseSha;
    }

    @Override
    public Lock lock(String name) {
      return new SetNxPollLock(conn.sync(), name, releaseSha, 30_000, POLL_MILLIS);
    }

    @Override
    public void close() {
      conn.close();
      LeanLettuce.shutdown(client);
    }
  }

  // ------------------------------------------------------------------ results

  /** Everything measured for one implementation; NaN where not measured. */
  static final class Result {
    final String label;
    String error;
    double uncPairsPerSec = Double.NaN;
    double uncP50Micros = Double.NaN;
    double uncP99Micros = Double.NaN;
    double uncCmdsPerPair = Double.NaN;
    double uncCpuMicrosPerPair = Double.NaN;
    double reNanosPerOp = Double.NaN;
    double reCommands = Double.NaN;
    long reOps;
    String reNote;
    double hotAcqPerSec = Double.NaN;
    double hotHandoffsPerSec = Double.NaN;
    double hotCrossClientPerSec = Double.NaN;
    double hotHandoffP50Ms = Double.NaN;
    double hotHandoffP99Ms = Double.NaN;
    double hotHandoffMaxMs = Double.NaN;
    double hotWaitP50Ms = Double.NaN;
    double hotWaitP99Ms = Double.NaN;
    double hotWaitMaxMs = Double.NaN;
    double hotWaitsOver100Ms = Double.NaN;
    double hotJain = Double.NaN;
    double hotMinPerThread = Double.NaN;
    double hotMaxPerThread = Double.NaN;
    double hotCmdsPerAcq = Double.NaN;
    double hotScriptsPerAcq = Double.NaN;
    double hotCpuMicrosPerAcq = Double.NaN;
    double hotOverlaps = Double.NaN;
    double hotFencingViolations = Double.NaN;
    double hotErrors = Double.NaN;
    double hotDrainSeconds = Double.NaN;
    double hotStuckThreads = Double.NaN;
    double handoffP50OverPing = Double.NaN;
    double hotConnections = Double.NaN;
    Map<String, Long> hotCommands = Map.of();
    long hotAcquisitions;
    Map<String, Long> uncCommands = Map.of();
    long uncPairs;

    Result(String label) {
      this.label = label;
    }
  }

  // ------------------------------------------------------------------ main

  /**
   * Runs the benchmark.
   *
   * @param args ignored; see the class comment for the system properties
   */
  public static void main(String[] args) {
    int code = 0;
    try {
      preloadOwnClasses();
      run();
    } catch (Throwable t) {
      System.out.println("benchmark failed: " + t);
      t.printStackTrace(System.out);
      code = 2;
    }
    System.out.flush();
    System.exit(code);
  }

  private static void run() throws Exception {
    RedisServerProcess embedded = null;
    RedisClient aux = null;
    StatefulRedisConnection<String, String> auxConn = null;
    try {
      String uri = configuredUri();
      if (uri == null) {
        embedded = RedisServerProcess.start();
        uri = embedded.uri();
        System.out.println("Redis: started embedded redis-server " + embedded.version() + " at " + uri
            + " (set REDIS_URI to use your own)");
      } else {
        System.out.println("Redis: using REDIS_URI " + uri);
      }
      aux = LeanLettuce.create(uri);
      auxConn = aux.connect();
      RedisCommands<String, String> redis = auxConn.sync();
      System.out.printf(Locale.ROOT,
          "Setup: %d cores, hot lock %d clients x %d threads, warm-up %d s, hot %d s, uncontended %d s,"
              + " SETNX poll %d ms%n",
          Runtime.getRuntime().availableProcessors(), CLIENTS, THREADS, WARMUP_SECONDS, HOT_SECONDS,
          UNCONTENDED_SECONDS, POLL_MILLIS);

      // a. PING: the physical floor
      for (int i = 0; i < Math.min(500, PINGS); i++) {
        redis.ping();
      }
      LongSamples pings = new LongSamples();
      for (int i = 0; i < PINGS; i++) {
        long t0 = System.nanoTime();
        redis.ping();
        pings.add(System.nanoTime() - t0);
      }
      double pingP50 = pings.percentile(0.5) / 1e3;
      double pingP99 = pings.percentile(0.99) / 1e3;
      System.out.printf(Locale.ROOT, "PING round trip (Lettuce sync, %d pings): p50 %.1f us, p99 %.1f us%n",
          PINGS, pingP50, pingP99);
      double[] pingPairs = pingPairs(redis);
      System.out.printf(Locale.ROOT,
          "two sync PINGs (the floor of a 2-round-trip pair), %d s: %.0f pairs/s, Redis CPU %.1f us/pair%n",
          UNCONTENDED_SECONDS, pingPairs[0], pingPairs[1]);

      boolean main = Boolean.parseBoolean(System.getProperty("bench.main", "true"));
      List<Impl> impls = main ? selectedImpls() : List.of();
      List<Result> results = new ArrayList<>();
      String runId = Long.toHexString(ThreadLocalRandom.current().nextLong());
      for (Impl impl : impls) {
        Result r = new Result(impl.label());
        results.add(r);
        try {
          uncontendedAndReentrant(impl, uri, redis, runId, r);
        } catch (Throwable t) {
          r.error = "uncontended/reentrant: " + t;
          System.out.println("[bench] " + impl.label() + " FAILED in uncontended/reentrant: " + t);
          t.printStackTrace(System.out);
        }
        try {
          hot(impl, uri, redis, runId, r);
          r.handoffP50OverPing = r.hotHandoffP50Ms * 1000 / pingP50;
        } catch (Throwable t) {
          r.error = (r.error == null ? "" : r.error + "; ") + "hot: " + t;
          System.out.println("[bench] " + impl.label() + " FAILED in hot lock: " + t);
          t.printStackTrace(System.out);
        }
      }
      if (main) {
        printTable(results, pingP50, pingP99, pingPairs);
        if (PAIR_ROUNDS > 0) {
          pairRounds(impls, uri, redis, runId);
        }
      }
      if (Boolean.parseBoolean(System.getProperty("bench.revocation", "true"))) {
        RevocationBenchmark.run(uri);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.alternating", "true"))) {
        AlternatingBenchmark.run(uri, redis);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.semaphore", "true"))) {
        SemaphoreBenchmark.run(uri, redis);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.rw", "true"))) {
        ReadWriteBenchmark.run(uri, redis);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.scaling", "true"))) {
        ScalingBenchmark.run(uri, redis);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.distinct", "true"))) {
        DistinctWaitsBenchmark.run(uri, redis);
      }
      if (Boolean.parseBoolean(System.getProperty("bench.async", "true"))) {
        AsyncBenchmark.run(uri, redis);
      }
    } finally {
      if (auxConn != null) {
        auxConn.close();
      }
      if (aux != null) {
        LeanLettuce.shutdown(aux);
      }
      if (embedded != null) {
        embedded.close();
      }
    }
  }

  /**
   * Loads this harness's classes up front, so that a concurrent build recompiling
   * target/test-classes during a long run cannot make a lazily loaded class disappear.
   */
  private static void preloadOwnClasses() {
    for (Class<?> c : LockBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    CommandStats.class.getDeclaredMethods();
    RedisCpu.class.getDeclaredMethods();
    SemaphoreBenchmark.class.getDeclaredMethods();
    ReadWriteBenchmark.class.getDeclaredMethods();
    for (Class<?> c : ReadWriteBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    for (Class<?> c : SemaphoreBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    LongSamples.class.getDeclaredMethods();
    SetNxPollLock.class.getDeclaredMethods();
    ScalingBenchmark.class.getDeclaredMethods();
    for (Class<?> c : ScalingBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    DistinctWaitsBenchmark.class.getDeclaredMethods();
    for (Class<?> c : DistinctWaitsBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    AsyncBenchmark.class.getDeclaredMethods();
    for (Class<?> c : AsyncBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
    AlternatingBenchmark.class.getDeclaredMethods();
    for (Class<?> c : AlternatingBenchmark.class.getDeclaredClasses()) {
      c.getDeclaredMethods();
    }
  }

  static List<Impl> selectedImpls() {
    List<Impl> out = new ArrayList<>();
    for (String s : System.getProperty("bench.impls", "turnstile,turnstile-cached,redisson,setnx").split(",")) {
      switch (s.trim().toLowerCase(Locale.ROOT)) {
        case "turnstile":
          out.add(new TurnstileImpl());
          break;
        case "turnstile-cached":
          out.add(new CachedTurnstileImpl());
          break;
        case "redisson":
          out.add(new RedissonImpl());
          break;
        case "setnx":
          out.add(new SetNxImpl());
          break;
        case "":
          break;
        default:
          throw new IllegalArgumentException("unknown implementation in bench.impls: " + s);
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ b + c

  private static void uncontendedAndReentrant(Impl impl, String uri, RedisCommands<String, String> redis,
      String runId, Result r) {
    Client client = impl.connect(uri);
    try {
      Lock lock = client.lock("bench:" + runId + ":uncontended:" + impl.label());
      long warmEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(WARMUP_SECONDS);
      while (System.nanoTime() < warmEnd) {
        lock.lock();
        lock.unlock();
      }
      LongSamples pairs = new LongSamples();
      CommandStats before = CommandStats.take(redis);
      RedisCpu cpuBefore = RedisCpu.take(redis);
      long start = System.nanoTime();
      long end = start + TimeUnit.SECONDS.toNanos(UNCONTENDED_SECONDS);
      long now = start;
      while (now < end) {
        lock.lock();
        lock.unlock();
        long t = System.nanoTime();
        pairs.add(t - now);
        now = t;
      }
      RedisCpu cpuAfter = RedisCpu.take(redis);
      Map<String, Long> cmds = CommandStats.take(redis).since(before);
      r.uncPairs = pairs.size();
      r.uncCpuMicrosPerPair = cpuAfter.microsPerOp(cpuBefore, pairs.size());
      r.uncPairsPerSec = pairs.size() / ((now - start) / 1e9);
      r.uncP50Micros = pairs.percentile(0.5) / 1e3;
      r.uncP99Micros = pairs.percentile(0.99) / 1e3;
      r.uncCommands = cmds;
      r.uncCmdsPerPair = (double) CommandStats.total(cmds) / pairs.size();
      System.out.printf(Locale.ROOT, "[bench] %-10s uncontended: %.0f pairs/s, p50 %.1f us, Redis CPU %.1f us/pair%n",
          impl.label(), r.uncPairsPerSec, r.uncP50Micros, r.uncCpuMicrosPerPair);

      if (!impl.reentrant()) {
        r.reNote = "n/a";
        return;
      }
      lock.lock();
      try {
        CommandStats b = CommandStats.take(redis);
        long t0 = System.nanoTime();
        long cap = t0 + TimeUnit.SECONDS.toNanos(REENTRANT_MAX_SECONDS);
        int i = 0;
        while (i < REENTRANT_ITERATIONS) {
          lock.lock();
          lock.unlock();
          i++;
          if ((i & 255) == 0 && System.nanoTime() > cap) {
            break;
          }
        }
        long t1 = System.nanoTime();
        Map<String, Long> d = CommandStats.take(redis).since(b);
        r.reOps = i;
        r.reNanosPerOp = (double) (t1 - t0) / i;
        r.reCommands = CommandStats.total(d);
        if (i < REENTRANT_ITERATIONS) {
          r.reNote = "capped at " + i + " ops";
        }
        System.out.printf(Locale.ROOT, "[bench] %-10s reentrant: %.0f ns/op over %d ops, %d Redis cmds %s%n",
            impl.label(), r.reNanosPerOp, i, (long) r.reCommands, d);
      } finally {
        lock.unlock();
      }
    } finally {
      client.close();
    }
  }

  /**
   * The uncontended pair measured in turns: each round runs every implementation (and two
   * synchronous PINGs) for {@code bench.pair.roundMillis}, in an order that rotates from round to
   * round, on clients connected once. On a shared machine the load drifts within seconds; taking
   * turns exposes every implementation to the same drift, and the medians over rounds (and the
   * median of the per-round ratios) are what the targets are checked against. With Turnstile
   * among them, two references take turns too: its two scripts sent by plain Lettuce ("scripts
   * raw") and two scripts that only return 1 with the same keys and arguments ("'return 1' x2").
   */
  private static void pairRounds(List<Impl> impls, String uri, RedisCommands<String, String> redis, String runId) {
    List<String> labels = new ArrayList<>();
    List<Runnable> pairs = new ArrayList<>();
    List<Client> clients = new ArrayList<>();
    try {
      for (Impl impl : impls) {
        Client c = impl.connect(uri);
        clients.add(c);
        labels.add(impl.label());
        Lock lock = c.lock("bench:" + runId + ":rounds:" + impl.label());
        pairs.add(() -> {
          lock.lock();
          lock.unlock();
        });
      }
      if (impls.stream().anyMatch(i -> i.label().equals("Turnstile"))) {
        // References that split Turnstile's pair (PERFORMANCE.md): its two scripts sent
        // by plain Lettuce (the client's share is what Turnstile adds to this), and two scripts
        // that only return 1, with the same keys and arguments (the floor of any pair whose
        // acquire and release are one script each: what EVALSHA costs beyond a PING)
        String tag = "{bench:" + runId + ":raw}";
        String[] acquireKeys = {tag + ":lock", tag + ":fence"};
        String[] releaseKeys = {tag + ":lock", tag + ":wake"};
        String acquire = redis.scriptLoad(resource("lock_acquire.lua"));
        String release = redis.scriptLoad(resource("lock_release.lua"));
        String one = redis.scriptLoad("return 1");
        AtomicLong seq = new AtomicLong();
        labels.add("scripts raw");
        pairs.add(() -> {
          String request = "c1:" + seq.incrementAndGet();
          redis.evalsha(acquire, io.lettuce.core.ScriptOutputType.MULTI, acquireKeys, "c1:1", request, "30000");
          redis.evalsha(release, io.lettuce.core.ScriptOutputType.INTEGER, releaseKeys, request, "0", "30000");
        });
        labels.add("'return 1' x2");
        pairs.add(() -> {
          String request = "c1:" + seq.incrementAndGet();
          redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER, acquireKeys, "c1:1", request, "30000");
          redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER, releaseKeys, request, "0", "30000");
        });
        if (PAIR_PROBES) {
          // PERFORMANCE.md, the reference run: the same 'return 1' with fewer keys and arguments, and a
          // lock whose uncontended release is a plain HDEL
          String[] lockKey = {tag + ":lock"};
          labels.add("ret1 4+2 args");
          pairs.add(() -> {
            String request = "c1:" + seq.incrementAndGet();
            redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER, lockKey, "c1:1", request, "30000");
            redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER, lockKey, request);
          });
          labels.add("ret1 no args");
          pairs.add(() -> {
            redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER);
            redis.evalsha(one, io.lettuce.core.ScriptOutputType.INTEGER);
          });
          String probe = redis.scriptLoad(NATIVE_RELEASE_PROBE);
          String[] probeKey = {tag + ":probe"};
          labels.add("HDEL release");
          pairs.add(() -> {
            String request = "c1:" + seq.incrementAndGet();
            redis.evalsha(probe, io.lettuce.core.ScriptOutputType.MULTI, probeKey, "c1:1", request, "30000");
            if (redis.hdel(probeKey[0], "h:" + request) != 1L) {
              throw new IllegalStateException("the probe's hold was not there to release");
            }
          });
        }
      }
      labels.add("2 PINGs");
      pairs.add(() -> {
        redis.ping();
        redis.ping();
      });
      int n = labels.size();
      double[][] rate = new double[n][PAIR_ROUNDS];
      double[][] cpu = new double[n][PAIR_ROUNDS];
      for (int i = 0; i < n; i++) {
        loop(pairs.get(i), redis, 300); // warm-up
      }
      for (int round = 0; round < PAIR_ROUNDS; round++) {
        for (int k = 0; k < n; k++) {
          int i = (k + round) % n;
          double[] m = loop(pairs.get(i), redis, PAIR_ROUND_MILLIS);
          rate[i][round] = m[0];
          cpu[i][round] = m[1];
        }
      }
      System.out.println();
      System.out.printf(Locale.ROOT, "Uncontended pair in turns: %d rounds of %d ms each, medians (min-max)%n",
          PAIR_ROUNDS, PAIR_ROUND_MILLIS);
      System.out.printf(Locale.ROOT, "%-14s | %24s | %26s%n", "", "pairs/s", "Redis CPU/pair (us)");
      for (int i = 0; i < n; i++) {
        System.out.printf(Locale.ROOT, "%-14s | %8.0f (%6.0f-%6.0f) | %8.1f (%6.1f-%6.1f)%n", labels.get(i),
            median(rate[i]), min(rate[i]), max(rate[i]), median(cpu[i]), min(cpu[i]), max(cpu[i]));
      }
      int ts = labels.indexOf("Turnstile");
      int rd = labels.indexOf("Redisson");
      int rc = labels.indexOf("SETNX-poll");
      int ping = n - 1;
      System.out.println("Medians of the per-round ratios:");
      if (ts >= 0 && rc >= 0) {
        System.out.printf(Locale.ROOT, "  Turnstile / recipe (SETNX-poll) Redis CPU/pair   %.2f  [target: <= 1.5]%n",
            medianRatio(cpu[ts], cpu[rc]));
      }
      if (ts >= 0 && rd >= 0) {
        System.out.printf(Locale.ROOT, "  Turnstile / Redisson Redis CPU/pair            %.2f  [target: <= 0.75]%n",
            medianRatio(cpu[ts], cpu[rd]));
        System.out.printf(Locale.ROOT, "  Turnstile / Redisson pairs/s                   %.2f%n",
            medianRatio(rate[ts], rate[rd]));
      }
      int tc = labels.indexOf("Turnstile cached");
      if (tc >= 0 && rd >= 0) {
        System.out.printf(Locale.ROOT, "  Turnstile cached / Redisson pairs/s            %.1f  [lock caching target: >= 50]%n",
            medianRatio(rate[tc], rate[rd]));
      }
      for (int i = 0; i < n - 1; i++) {
        System.out.printf(Locale.ROOT, "  %-14s pairs/s / two sync PINGs     %.2f%s%n", labels.get(i),
            medianRatio(rate[i], rate[ping]), i == ts ? "  [target: >= 0.75]"
                : i == tc ? "  [lock caching target: >= 50]" : "");
      }
    } finally {
      for (Client c : clients) {
        c.close();
      }
    }
  }

  /** A script of Turnstile's, read from the class path. */
  private static String resource(String name) {
    try (java.io.InputStream in = LockBenchmark.class.getResourceAsStream("/io/github/turnstile/lua/" + name)) {
      return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Runs {@code op} again and again on this thread for {@code millis}.
   *
   * @return {runs/s, Redis CPU µs per run, runs}
   */
  static double[] loop(Runnable op, RedisCommands<String, String> redis, long millis) {
    RedisCpu before = RedisCpu.take(redis);
    long start = System.nanoTime();
    long end = start + TimeUnit.MILLISECONDS.toNanos(millis);
    long runs = 0;
    long now = start;
    while (now < end) {
      op.run();
      runs++;
      now = System.nanoTime();
    }
    double cpu = RedisCpu.take(redis).microsPerOp(before, runs);
    return new double[] {runs / ((now - start) / 1e9), cpu, runs};
  }

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static double min(double[] v) {
    return Arrays.stream(v).min().orElse(Double.NaN);
  }

  private static double max(double[] v) {
    return Arrays.stream(v).max().orElse(Double.NaN);
  }

  static double medianRatio(double[] a, double[] b) {
    double[] r = new double[a.length];
    for (int i = 0; i < a.length; i++) {
      r[i] = a[i] / b[i];
    }
    return median(r);
  }

  // ------------------------------------------------------------------ d

  /** Per-thread counters of the hot-lock run; written only by the owning thread. */
  static final class Worker {
    final int id;
    final int client;
    long acquisitions;
    long handoffs;
    long crossClient;
    long errors;
    final LongSamples waits = new LongSamples();
    final LongSamples handoffLatencies = new LongSamples();

    Worker(int id, int client) {
      this.id = id;
      this.client = client;
    }
  }

  /** Shared state of one hot-lock run. */
  static final class Hot {
    final AtomicInteger inside = new AtomicInteger();
    final AtomicLong overlaps = new AtomicLong();
    final AtomicLong lastToken = new AtomicLong(Long.MIN_VALUE);
    final AtomicLong fencingViolations = new AtomicLong();
    final AtomicLong errors = new AtomicLong();
    volatile String firstError;
    volatile int lastHolder = -1;
    volatile long lastUnlockStart;
    volatile boolean measuring;
    volatile boolean stop;
  }

  private static void hot(Impl impl, String uri, RedisCommands<String, String> redis, String runId, Result r)
      throws InterruptedException {
    hot(impl, uri, redis, "bench:" + runId + ":hot:" + impl.label(), CLIENTS, THREADS,
        TimeUnit.SECONDS.toMillis(WARMUP_SECONDS), TimeUnit.SECONDS.toMillis(HOT_SECONDS), r, true);
  }

  /**
   * One hot-lock run: {@code clientCount} clients × {@code threadsPerClient} threads loop on
   * lock/unlock of one lock. Also records the peak number of Redis connections above the
   * baseline taken before the clients connect ({@code INFO clients}, sampled every 250 ms).
   */
  static void hot(Impl impl, String uri, RedisCommands<String, String> redis, String name, int clientCount,
      int threadsPerClient, long warmupMillis, long measureMillis, Result r, boolean verbose)
      throws InterruptedException {
    List<Client> clients = new ArrayList<>();
    Hot hot = new Hot();
    try {
      long baseline = CommandStats.settledConnectedClients(redis);
      for (int c = 0; c < clientCount; c++) {
        clients.add(impl.connect(uri));
      }
      int n = clientCount * threadsPerClient;
      Worker[] workers = new Worker[n];
      Thread[] threads = new Thread[n];
      for (int c = 0; c < clientCount; c++) {
        Client client = clients.get(c);
        Lock lock = client.lock(name);
        for (int t = 0; t < threadsPerClient; t++) {
          int id = c * threadsPerClient + t;
          Worker w = new Worker(id, c);
          workers[id] = w;
          threads[id] = new Thread(() -> hotLoop(w, lock, client, hot, threadsPerClient),
              "bench-" + impl.label() + "-c" + c + "-t" + t);
        }
      }
      for (Thread t : threads) {
        t.start();
      }
      Thread.sleep(warmupMillis);
      CommandStats before = CommandStats.take(redis);
      RedisCpu cpuBefore = RedisCpu.take(redis);
      long start = System.nanoTime();
      hot.measuring = true;
      long peak = CommandStats.connectedClients(redis);
      long windowEnd = start + TimeUnit.MILLISECONDS.toNanos(measureMillis);
      for (long left = windowEnd - System.nanoTime(); left > 0; left = windowEnd - System.nanoTime()) {
        Thread.sleep(Math.max(1, Math.min(250, TimeUnit.NANOSECONDS.toMillis(left))));
        peak = Math.max(peak, CommandStats.connectedClients(redis));
      }
      hot.measuring = false;
      long end = System.nanoTime();
      RedisCpu cpuAfter = RedisCpu.take(redis);
      Map<String, Long> cmds = CommandStats.take(redis).since(before);
      r.hotConnections = peak - baseline;
      hot.stop = true;
      int stuck = 0;
      long joinDeadline = System.currentTimeMillis() + JOIN_TIMEOUT_MILLIS;
      for (Thread t : threads) {
        t.join(Math.max(1, joinDeadline - System.currentTimeMillis()));
        if (t.isAlive()) {
          stuck++;
          System.out.println("[bench] WARNING: " + t.getName() + " still running "
              + JOIN_TIMEOUT_MILLIS / 1000 + " s after stop: " + Arrays.toString(t.getStackTrace()));
        }
      }
      long drained = System.nanoTime();

      double secs = (end - start) / 1e9;
      long acq = 0;
      long handoffs = 0;
      long cross = 0;
      double sumSq = 0;
      long min = Long.MAX_VALUE;
      long max = 0;
      LongSamples waits = new LongSamples();
      LongSamples handoffLat = new LongSamples();
      for (Worker w : workers) {
        acq += w.acquisitions;
        handoffs += w.handoffs;
        cross += w.crossClient;
        sumSq += (double) w.acquisitions * w.acquisitions;
        min = Math.min(min, w.acquisitions);
        max = Math.max(max, w.acquisitions);
        waits.addAll(w.waits);
        handoffLat.addAll(w.handoffLatencies);
      }
      r.hotAcquisitions = acq;
      r.hotAcqPerSec = acq / secs;
      r.hotHandoffsPerSec = handoffs / secs;
      r.hotCrossClientPerSec = cross / secs;
      r.hotHandoffP50Ms = handoffLat.percentile(0.5) / 1e6;
      r.hotHandoffP99Ms = handoffLat.percentile(0.99) / 1e6;
      r.hotHandoffMaxMs = handoffLat.max() / 1e6;
      r.hotWaitP50Ms = waits.percentile(0.5) / 1e6;
      r.hotWaitP99Ms = waits.percentile(0.99) / 1e6;
      r.hotWaitMaxMs = waits.max() / 1e6;
      r.hotWaitsOver100Ms = waits.countAbove(TimeUnit.MILLISECONDS.toNanos(100));
      r.hotJain = sumSq == 0 ? Double.NaN : (double) acq * acq / (n * sumSq);
      r.hotMinPerThread = min;
      r.hotMaxPerThread = max;
      r.hotCommands = cmds;
      r.hotCmdsPerAcq = acq == 0 ? Double.NaN : (double) CommandStats.total(cmds) / acq;
      r.hotScriptsPerAcq = acq == 0 ? Double.NaN : (double) CommandStats.scripts(cmds) / acq;
      // the connection sampling above adds a few INFO calls: negligible against thousands of acquisitions
      r.hotCpuMicrosPerAcq = cpuAfter.microsPerOp(cpuBefore, acq);
      r.hotOverlaps = hot.overlaps.get();
      r.hotFencingViolations = impl instanceof TurnstileImpl ? hot.fencingViolations.get() : Double.NaN;
      r.hotErrors = hot.errors.get();
      r.hotDrainSeconds = (drained - end) / 1e9;
      r.hotStuckThreads = stuck;
      if (verbose) {
        System.out.printf(Locale.ROOT,
            "[bench] %-10s hot lock: %.0f acq/s, handoff p50 %.3f ms p99 %.3f ms, wait max %.1f ms, %.2f cmds/acq,"
                + " %.0f connections%n",
            impl.label(), r.hotAcqPerSec, r.hotHandoffP50Ms, r.hotHandoffP99Ms, r.hotWaitMaxMs, r.hotCmdsPerAcq,
            r.hotConnections);
      }
      if (hot.overlaps.get() > 0) {
        System.out.println("[bench] WARNING: " + impl.label() + ": mutual exclusion VIOLATED "
            + hot.overlaps.get() + " times in the hot-lock run");
      }
      if (hot.fencingViolations.get() > 0) {
        System.out.println("[bench] WARNING: " + impl.label() + ": fencing token not increasing "
            + hot.fencingViolations.get() + " times");
      }
      if (hot.errors.get() > 0) {
        System.out.println("[bench] WARNING: " + impl.label() + ": " + hot.errors.get()
            + " errors in the hot-lock run; first: " + hot.firstError);
      }
    } finally {
      hot.stop = true;
      for (Client c : clients) {
        try {
          c.close();
        } catch (RuntimeException e) {
          System.out.println("[bench] closing a " + impl.label() + " client failed: " + e);
        }
      }
    }
  }

  private static void hotLoop(Worker w, Lock lock, Client client, Hot hot, int threadsPerClient) {
    int clientsPerThread = threadsPerClient;
    while (!hot.stop) {
      long t0 = System.nanoTime();
      try {
        lock.lock();
      } catch (RuntimeException e) {
        error(hot, e);
        continue;
      }
      long t1 = System.nanoTime();
      try {
        if (hot.inside.incrementAndGet() != 1) {
          hot.overlaps.incrementAndGet();
        }
        int prev = hot.lastHolder;
        long prevUnlock = hot.lastUnlockStart;
        Long token = client.fencingToken(lock);
        if (token != null) {
          if (token <= hot.lastToken.get()) {
            hot.fencingViolations.incrementAndGet();
          }
          hot.lastToken.set(token);
        }
        if (hot.measuring) {
          w.acquisitions++;
          w.waits.add(t1 - t0);
          if (prev >= 0 && prev != w.id) {
            w.handoffs++;
            w.handoffLatencies.add(t1 - prevUnlock);
            if (prev / clientsPerThread != w.client) {
              w.crossClient++;
            }
          }
        }
      } catch (RuntimeException e) {
        error(hot, e);
      } finally {
        hot.inside.decrementAndGet();
        hot.lastHolder = w.id;
        hot.lastUnlockStart = System.nanoTime();
        try {
          lock.unlock();
        } catch (RuntimeException e) {
          error(hot, e);
        }
      }
    }
  }

  private static void error(Hot hot, RuntimeException e) {
    if (hot.errors.getAndIncrement() == 0) {
      hot.firstError = Thread.currentThread().getName() + ": " + e;
    }
  }

  // ------------------------------------------------------------------ report

  /**
   * Two synchronous PINGs in a loop for {@code bench.uncontended.seconds}, as the uncontended pair
   * loop runs lock and unlock: the floor of any pair of round trips.
   *
   * @return {pairs/s, Redis CPU µs per pair}
   */
  private static double[] pingPairs(RedisCommands<String, String> redis) {
    long warmEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(WARMUP_SECONDS);
    while (System.nanoTime() < warmEnd) {
      redis.ping();
      redis.ping();
    }
    return loop(() -> {
      redis.ping();
      redis.ping();
    }, redis, TimeUnit.SECONDS.toMillis(UNCONTENDED_SECONDS));
  }

  private static void printTable(List<Result> results, double pingP50, double pingP99, double[] pingPairs) {
    System.out.println();
    System.out.printf(Locale.ROOT, "PING RTT: p50 %.1f us, p99 %.1f us (the floor for any round trip)%n",
        pingP50, pingP99);
    StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-44s", "metric"));
    for (Result r : results) {
      header.append(String.format(Locale.ROOT, " | %14s", r.label));
    }
    System.out.println(header);
    System.out.println("-".repeat(header.length()));
    row(results, "b. uncontended lock+unlock pairs/s", r -> r.uncPairsPerSec, "%.0f");
    row(results, "b. uncontended pair p50 (us)", r -> r.uncP50Micros, "%.1f");
    row(results, "b. uncontended pair p99 (us)", r -> r.uncP99Micros, "%.1f");
    row(results, "b. uncontended Redis cmds/pair (incl. Lua)", r -> r.uncCmdsPerPair, "%.2f");
    row(results, "b. uncontended Redis CPU/pair (us)", r -> r.uncCpuMicrosPerPair, "%.1f");
    rowText(results, "c. reentrant lock+unlock (ns/op)", r -> !Double.isNaN(r.reNanosPerOp)
        ? fmt("%.0f", r.reNanosPerOp) : "n/a".equals(r.reNote) ? "not reentrant" : "n/a");
    rowText(results, "c. reentrant ops measured", r -> r.reOps == 0 ? "n/a" : Long.toString(r.reOps));
    rowText(results, "c. Redis cmds during reentrant loop", r -> Double.isNaN(r.reCommands) ? "n/a"
        : fmt("%.0f", r.reCommands));
    row(results, "d. hot: acquisitions/s", r -> r.hotAcqPerSec, "%.0f");
    row(results, "d. hot: handoffs (different thread)/s", r -> r.hotHandoffsPerSec, "%.0f");
    row(results, "d. hot: handoffs across clients/s", r -> r.hotCrossClientPerSec, "%.0f");
    row(results, "d. hot: handoff latency p50 (ms)", r -> r.hotHandoffP50Ms, "%.3f");
    row(results, "d. hot: handoff latency p99 (ms)", r -> r.hotHandoffP99Ms, "%.3f");
    row(results, "d. hot: handoff latency max (ms)", r -> r.hotHandoffMaxMs, "%.3f");
    row(results, "d. hot: waiter wait p50 (ms)", r -> r.hotWaitP50Ms, "%.3f");
    row(results, "d. hot: waiter wait p99 (ms)", r -> r.hotWaitP99Ms, "%.3f");
    row(results, "d. hot: waiter wait max (ms)", r -> r.hotWaitMaxMs, "%.3f");
    row(results, "d. hot: waits > 100 ms", r -> r.hotWaitsOver100Ms, "%.0f");
    row(results, "d. hot: Jain fairness (1 = equal)", r -> r.hotJain, "%.4f");
    rowText(results, "d. hot: per-thread acquisitions min/max", r -> Double.isNaN(r.hotMinPerThread) ? "n/a"
        : fmt("%.0f", r.hotMinPerThread) + "/" + fmt("%.0f", r.hotMaxPerThread));
    row(results, "d. hot: Redis cmds/acquisition (incl. Lua)", r -> r.hotCmdsPerAcq, "%.2f");
    row(results, "d. hot: scripts (EVAL*)/acquisition", r -> r.hotScriptsPerAcq, "%.2f");
    row(results, "d. hot: Redis CPU/acquisition (us)", r -> r.hotCpuMicrosPerAcq, "%.1f");
    row(results, "d. hot: mutual-exclusion overlaps", r -> r.hotOverlaps, "%.0f");
    row(results, "d. hot: fencing-token violations", r -> r.hotFencingViolations, "%.0f");
    row(results, "d. hot: errors", r -> r.hotErrors, "%.0f");
    row(results, "d. hot: drain after stop (s)", r -> r.hotDrainSeconds, "%.2f");
    row(results, "d. hot: Redis connections, all clients", r -> r.hotConnections, "%.0f");
    row(results, "d. hot: Redis connections per client", r -> r.hotConnections / CLIENTS, "%.1f");
    row(results, "handoff p50 / PING RTT p50", r -> r.handoffP50OverPing, "%.1f");

    Result ts = find(results, "Turnstile");
    Result rd = find(results, "Redisson");
    if (ts != null && rd != null) {
      System.out.println();
      System.out.println("Ratios Turnstile / Redisson");
      ratio("uncontended pairs/s", ts.uncPairsPerSec, rd.uncPairsPerSec, v -> v);
      ratio("hot handoffs (different thread)/s", ts.hotHandoffsPerSec, rd.hotHandoffsPerSec, v -> v);
      ratio("hot Redis cmds/acquisition", ts.hotCmdsPerAcq, rd.hotCmdsPerAcq, v -> v);
      ratio("hot handoff p50 in PING RTTs", ts.handoffP50OverPing, rd.handoffP50OverPing, v -> v);
      System.out.printf(Locale.ROOT, "  %-36s %.1f RTT (Turnstile) vs %.1f RTT (Redisson)%n",
          "  i.e. handoff p50 / PING p50", ts.handoffP50OverPing, rd.handoffP50OverPing);
      ratio("uncontended Redis CPU/pair", ts.uncCpuMicrosPerPair, rd.uncCpuMicrosPerPair, v -> v);
      ratio("hot Redis CPU/acquisition", ts.hotCpuMicrosPerAcq, rd.hotCpuMicrosPerAcq, v -> v);
    }
    Result recipe = find(results, "SETNX-poll");
    if (ts != null && recipe != null) {
      System.out.println("Ratios Turnstile / the recipe (SETNX-poll uncontended = SET NX PX + compare-and-delete script)");
      ratio("uncontended Redis CPU/pair", ts.uncCpuMicrosPerPair, recipe.uncCpuMicrosPerPair, v -> v);
      ratio("uncontended Redis cmds/pair", ts.uncCmdsPerPair, recipe.uncCmdsPerPair, v -> v);
    }
    System.out.println("Ratios to two sync PINGs (" + fmt("%.0f", pingPairs[0]) + " pairs/s, Redis CPU "
        + fmt("%.1f", pingPairs[1]) + " us/pair)");
    for (Result r : results) {
      ratio(r.label + " uncontended pairs/s", r.uncPairsPerSec, pingPairs[0], v -> v);
    }

    System.out.println();
    System.out.println("Redis commands per acquisition in the hot-lock window (INFO commandstats, incl. Lua-internal)");
    for (Result r : results) {
      System.out.println("  " + r.label + ": " + perAcq(r.hotCommands, r.hotAcquisitions));
    }
    System.out.println("Redis commands per uncontended lock+unlock pair");
    for (Result r : results) {
      System.out.println("  " + r.label + ": " + perAcq(r.uncCommands, r.uncPairs));
    }
    for (Result r : results) {
      if (r.error != null) {
        System.out.println("ERROR " + r.label + ": " + r.error);
      }
    }
  }

  private static String perAcq(Map<String, Long> cmds, long n) {
    if (n == 0) {
      return "n/a";
    }
    Map<String, String> out = new LinkedHashMap<>();
    cmds.entrySet().stream()
        .sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
        .forEach(e -> out.put(e.getKey(), fmt("%.3f", (double) e.getValue() / n)));
    return out.toString();
  }

  private static Result find(List<Result> results, String label) {
    return results.stream().filter(r -> r.label.equals(label)).findFirst().orElse(null);
  }

  private static void ratio(String what, double a, double b, DoubleUnaryOperator f) {
    System.out.printf(Locale.ROOT, "  %-36s %s%n", what,
        Double.isNaN(a) || Double.isNaN(b) || b == 0 ? "n/a" : fmt("%.2f", f.applyAsDouble(a / b)));
  }

  private static void row(List<Result> results, String metric, ToDoubleFunction<Result> f, String format) {
    rowText(results, metric, r -> {
      double v = f.applyAsDouble(r);
      return Double.isNaN(v) ? "n/a" : fmt(format, v);
    });
  }

  private static void rowText(List<Result> results, String metric, java.util.function.Function<Result, String> f) {
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-44s", metric));
    for (Result r : results) {
      sb.append(String.format(Locale.ROOT, " | %14s", f.apply(r)));
    }
    System.out.println(sb);
  }

  private static String fmt(String format, double v) {
    return String.format(Locale.ROOT, format, v);
  }

  private static String configuredUri() {
    String uri = System.getenv("REDIS_URI");
    if (uri == null || uri.isBlank()) {
      uri = System.getProperty("redis.uri");
    }
    return uri == null || uri.isBlank() ? null : uri.trim();
  }
}
