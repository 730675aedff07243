package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.fault.History;
import io.github.turnstile.fault.Workload;
import io.github.turnstile.fault.Workload.Primitive;
import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisClusterProcesses;
import io.github.turnstile.testing.RedisSentinelProcesses;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The fault loops ("waiting that survives faults"): one fault, injected again and
 * again into a steady load of <b>untimed</b> acquisitions ({@link Workload}: 2 clients, each with
 * 4 threads on one lock, 4 on one semaphore of 2 permits, and a reader and a writer on one
 * read/write lock). The faults:
 * <ol>
 *   <li>{@code CLIENT KILL TYPE normal}: every connection of both clients at once;</li>
 *   <li>{@code CLIENT PAUSE 2000 ALL};</li>
 *   <li>kill -9 of redis-server, restarted on the same port 2 s later, empty (no persistence);</li>
 *   <li>Sentinel failover: kill -9 of the primary (1 primary, 1 replica, 3 sentinels);</li>
 *   <li>Cluster failover: kill -9 of the master serving the primitives' slot (3 masters, 3 replicas).</li>
 * </ol>
 * The failed node is brought back (as a replica) after each measurement, so that the next
 * iteration can fail over again.
 *
 * <p><b>Replica acknowledgement</b>: with {@code -Dturnstile.test.loopReplicaAcks=N} the two
 * failover scenarios run with {@code replicaAcks(N, 1 s)} on N + 1 replicas (so that the promoted
 * node still has N). Asynchronous replication's window is then closed, so any overlap or over
 * capacity is a defect. Acquisitions given back because too few replicas acknowledged in time
 * (FAILURE-MODEL section 4: a promoted replica still resyncing) throw by design; they are counted
 * apart ({@code unacknowledgedAcquisitions}), and only they are allowed. An acknowledgement cut by
 * the failover itself is ridden through, so an exception for it is a defect like any other.
 *
 * <p><b>Iterations</b>: {@code -Dturnstile.test.faultLoops=N}, default {@value #DEFAULT_ITERATIONS}
 * (the full run of the issue is 20).
 *
 * <p><b>Per iteration</b>: after some load, the fault; then "Redis answers again" at an instant
 * defined per fault: the CLIENT KILL's reply; the end of the pause (the reply to a PING sent right
 * after the CLIENT PAUSE); the restarted server answering PING; the promotion of the replica
 * (its {@code INFO replication} says {@code role:master}). <b>Resume</b> is the time from there to
 * the first acquisition that returns after it, per primitive. The load then runs for another
 * second, the workers stop between two holds (quiescence), and the first client checks that no
 * permit is missing and nothing is held: <b>stranded</b> is what is still missing 3 s later (less
 * than the 5 s lease, while the clients are alive, so a lease running out hides nothing),
 * <b>leaked</b> what is still missing a further lease + 2 s later, once the idle clients' liveness
 * has lapsed. Then the failed node is restored under load. <b>Longest idle</b> is the longest time
 * after resuming during which the primitive was held by nobody although 8 (4) threads wanted it.
 * Exceptions are counted over the whole run, restores included.
 *
 * <p><b>Asserted</b>: no exception from any acquisition; no exception other than
 * {@link LockLostException} from any unlock or release, and none took longer than
 * {@value #RELEASE_BOUND_MS} ms (they must return at once during an outage); no overlap of lock
 * holds, fencing tokens in acquisition order, no more permits held than exist, no write
 * overlapping another hold (after a failover without replica acknowledgement, only where a grant
 * the promoted replica lacked explains it: in the iteration's first moments, and its holder told
 * of the loss; docs/FAILURE-MODEL.md §3); nothing stranded on one server (where no write can be lost, so a
 * missing permit is the client's doing), nothing leaked after a failover (where an unreplicated
 * release can strand a permit until its client's liveness lapses); every worker reaches every
 * quiescence; resume within {@link #RESUME_BOUND_MS} on one server and
 * {@value #FAILOVER_RESUME_BOUND_MS} ms after a promotion (the clients must also learn of the new
 * master); longest idle within {@value #IDLE_BOUND_MS} ms. One {@code RELIABILITY ...} line per
 * scenario and primitive (the {@link History} summary plus the loop's figures, worst iteration)
 * goes to stdout for docs/RELIABILITY.md, and one {@code [loop]} line per iteration.
 *
 * <p>The lease is {@value #LEASE_MS} ms: short enough for a quick run, long enough that a waiter
 * that only recovers when a lease or a BLPOP timeout runs out shows up as a slow resume.
 */
class OutageLoopTest {
  static final int DEFAULT_ITERATIONS = 3;
  private static final int ITERATIONS = Integer.getInteger("turnstile.test.faultLoops", DEFAULT_ITERATIONS);
  static final long LEASE_MS = 5000;
  /**
   * The resume bound on one server and after the Sentinels name a new primary: 1500 ms by default,
   * under the lease (a waiter that recovers only when a lease or a BLPOP timeout runs out) and
   * generous enough for a loaded machine (the lock resumed 514 ms after a Sentinel failover beside
   * 4 burners at load 13-17, with no stall of this JVM: the Sentinels and servers were starved).
   * What Turnstile promises, 500 ms, is checked quiet with {@code -Dturnstile.test.resumeBoundMillis=500}
   * (docs/RELIABILITY.md: the 20-iteration loops).
   */
  static final long RESUME_BOUND_MS = Long.getLong("turnstile.test.resumeBoundMillis", 1500);

  /**
   * Scheduling stalls of this JVM (a thread that sleeps 5 ms and records how much later it woke), so
   * that the resume bound counts only time the clients could have run: on a loaded machine (CI
   * runs test classes in parallel) a resume can be late by time in which no thread of this JVM ran,
   * which says nothing of Turnstile. The bound itself stays what the product promises.
   */
  static final Stalls STALLS = new Stalls();

  /** See {@link #STALLS}. */
  static final class Stalls {
    /** How long a stall is kept: longer than any iteration. */
    private static final long KEEP_NANOS = TimeUnit.MINUTES.toNanos(10);
    /** {end, length} of each stall over 10 ms, in nanoTime; appended by the probe thread only. */
    private final java.util.concurrent.ConcurrentLinkedDeque<long[]> stalls = new java.util.concurrent.ConcurrentLinkedDeque<>();

    Stalls() {
      Thread probe = new Thread(() -> {
        long sleep = TimeUnit.MILLISECONDS.toNanos(5);
        while (true) {
          long before = System.nanoTime();
          java.util.concurrent.locks.LockSupport.parkNanos(sleep);
          long after = System.nanoTime();
          long late = after - before - sleep;
          if (late > TimeUnit.MILLISECONDS.toNanos(10)) {
            stalls.addLast(new long[] {after, late});
            long[] oldest;
            while ((oldest = stalls.peekFirst()) != null && after - oldest[0] > KEEP_NANOS) {
              stalls.pollFirst(); // older than any iteration asks about
            }
          }
        }
      }, "outage-loop-stall-probe");
      probe.setDaemon(true);
      probe.start();
    }

    /** Milliseconds of stalls within [from, to] (nanoTime). */
    long millisBetween(long from, long to) {
      long total = 0;
      for (long[] st : stalls) {
        long end = Math.min(st[0], to);
        long start = Math.max(st[0] - st[1], from);
        if (end > start) {
          total += end - start;
        }
      }
      return TimeUnit.NANOSECONDS.toMillis(total);
    }
  }
  static final long FAILOVER_RESUME_BOUND_MS = 3000;
  static final long IDLE_BOUND_MS = 1000;
  static final long RELEASE_BOUND_MS = 1000;
  /**
   * How long the load runs after resuming, before the quiescence: past the longest wait of a
   * waiter whose wake token was lost ({@link BlockingCommands#NO_UNBLOCK_SLICE_NANOS} and the
   * 250 ms hand-on grace), so that such a gap is measured whole and fails {@link #IDLE_BOUND_MS}.
   * At 1000 ms a 2 s gap of the restricted user's read/write lock read as 956-1,020 ms: the
   * window, not the gap.
   */
  private static final long RUN_AFTER_RESUME_MS = 2500;
  /** The longest wait for a resume: well past the lease, so that a waiter asleep until its lease ends still counts as resumed (late). */
  private static final Duration RESUME_WAIT = Duration.ofSeconds(15);

  /**
   * Replica acknowledgements the failover scenarios ask of every acquisition
   * ({@code -Dturnstile.test.loopReplicaAcks=N}, default 0: asynchronous replication, the default
   * of {@link TurnstileOptions}). With N &gt; 0 the failover deployments get N + 1 replicas, so
   * that the promoted node still has N to acknowledge.
   */
  static final int FAILOVER_ACKS = Integer.getInteger("turnstile.test.loopReplicaAcks", 0);
  static final Duration ACK_TIMEOUT = Duration.ofMillis(1000);

  /**
   * Whether the clients cache their lock grants: the default of {@link TurnstileOptions} (on, but
   * never with replica acknowledgements), off with {@code -Dturnstile.test.lockCaching=false}.
   */
  static final boolean LOCK_CACHING = Boolean.parseBoolean(System.getProperty("turnstile.test.lockCaching", "true"));

  private static TurnstileOptions options(int replicaAcks) {
    TurnstileOptions.Builder b = TurnstileOptions.builder().leaseTime(Duration.ofMillis(LEASE_MS));
    if (replicaAcks > 0) {
      b.replicaAcks(replicaAcks, ACK_TIMEOUT);
    } else {
      b.lockCaching(LOCK_CACHING);
    }
    return b.build();
  }

  /** When a fault began, and when Redis answered again ({@link System#nanoTime()}). */
  record Injected(long startNanos, long answeredNanos, String note) { }

  /** A fault, injected once per iteration. */
  interface Fault {
    /**
     * Injects the fault; returns once Redis answers again.
     *
     * @return when the fault began and when Redis answered again
     */
    Injected inject() throws Exception;

    /** Makes the deployment ready for the next iteration (after the measurement). */
    default void restore() throws Exception { }

    /**
     * Returns the node serving the primitives now, for a diagnostic dump.
     *
     * @return the node serving the primitives now, or null if the scenario does not say
     */
    default RedisServerProcess primary() {
      return null;
    }
  }

  /** What one iteration measured, from its start to the end of its restore. */
  record Iteration(int number, long faultAtMs, long outageMs, String note, Map<Primitive, Long> resumeMs,
      Map<Primitive, Long> idleMs, Map<Primitive, Integer> acquireErrors, Map<Primitive, Integer> releaseErrors,
      Map<Primitive, Long> lost, Map<Primitive, Long> maxReleaseMs, Workload.Leaks stranded, Workload.Leaks leaked,
      List<String> busy, boolean loaded, long faultNanos, long answeredNanos, Map<Primitive, Long> stallMs) {

    String line(String scenario) {
      return "[loop] scenario=" + scenario + " iteration=" + number + " faultAtMs=" + faultAtMs + " outageMs=" + outageMs
          + " resumeMs=" + resumeMs + " stalledMs=" + stallMs + " longestIdleMs=" + idleMs + " acquireExceptions=" + acquireErrors
          + " releaseExceptions=" + releaseErrors + " leasesLost=" + lost + " maxReleaseMs=" + maxReleaseMs
          + " stranded=" + stranded + (leaked == stranded ? "" : " leakedAfterLease=" + leaked)
          + (busy.isEmpty() ? "" : " stuckWorkers=" + busy) + (loaded ? "" : " (little load before the fault)")
          + (note.isEmpty() ? "" : " " + note);
    }
  }

  /** Holds or permits of {@code p} unaccounted for in {@code leaks} (0 if not measured). */
  private static int count(Workload.Leaks leaks, Primitive p) {
    if (leaks == null) {
      return 0;
    }
    return switch (p) {
      case LOCK -> leaks.lockHeld() ? 1 : 0;
      case SEMAPHORE -> leaks.permitsMissing();
      case READ_WRITE -> (leaks.writeHeld() ? 1 : 0) + leaks.readers();
    };
  }

  // ------------------------------------------------------------------ the scenarios

  /**
   * The control: the same loop with no fault. It passes on an engine that does not survive faults
   * (the one this test class was written against), which shows that the harness itself (load,
   * quiescence, leak check, checker) reports clean figures, and that what the other scenarios
   * report comes from their faults.
   */
  @Test
  void noFaultControl() throws Exception {
    try (RedisServerProcess redis = RedisServerProcess.start()) {
      loop("loop-no-fault", redis.uri(), unique("loop"), () -> {
        long now = System.nanoTime();
        return new Injected(now, now, "");
      }, RESUME_BOUND_MS, "now", true);
    }
  }

  /** {@code CLIENT KILL TYPE normal}: every connection of both clients is cut at once; Redis answers throughout. */
  @Test
  void clientKillTypeNormal() throws Exception {
    try (RedisServerProcess redis = RedisServerProcess.start()) {
      loop("loop-client-kill", redis.uri(), unique("loop"), () -> {
        long start = System.nanoTime();
        String killed = redis.command("CLIENT", "KILL", "TYPE", "normal");
        return new Injected(start, System.nanoTime(), "killed=" + killed);
      }, RESUME_BOUND_MS, "kill", true);
    }
  }

  /** {@code CLIENT PAUSE 2000 ALL}: Redis answers nobody for 2 s; connections stay open. */
  @Test
  void clientPauseTwoSeconds() throws Exception {
    try (RedisServerProcess redis = RedisServerProcess.start()) {
      loop("loop-client-pause", redis.uri(), unique("loop"), () -> {
        long start = System.nanoTime();
        redis.command("CLIENT", "PAUSE", "2000", "ALL");
        redis.command("PING"); // answered when the pause ends
        return new Injected(start, System.nanoTime(), "");
      }, RESUME_BOUND_MS, "pause-end", true);
    }
  }

  /**
   * kill -9 of redis-server, restarted on the same port after 2 s. It runs as a lock server should
   * (AOF, fsync on every write: docs/FAILURE-MODEL.md), so the restart keeps the holds; without
   * persistence a restart forgets them, and exclusion is broken until their holders reconnect and
   * learn of the loss (FaultInjectionTest.redisRestartWithDataLoss and FAILURE-MODEL cover that).
   */
  @Test
  void killAndRestartAfterTwoSeconds() throws Exception {
    try (RedisServerProcess redis = RedisServerProcess.start("--appendonly", "yes", "--appendfsync", "always")) {
      loop("loop-restart", redis.uri(), unique("loop"), () -> {
        long start = System.nanoTime();
        redis.kill9();
        Thread.sleep(2000); // the outage
        redis.restart(); // returns once the new server answers PING
        return new Injected(start, System.nanoTime(), "");
      }, RESUME_BOUND_MS, "restart-ping", true);
    }
  }

  /**
   * As a user without {@code @admin}: the three faults of one server in turn (kill -9 and restart as above, then
   * {@code CLIENT KILL TYPE normal} sent by an admin connection, then {@code CLIENT PAUSE}), with both
   * clients connected as the restricted user: no {@code client|unblock}, {@code client|id},
   * {@code client|setname}, {@code info} or {@code wait} (a {@code --user} directive, so that it
   * survives the restarts). Every recovery ends the blocked waits by closing their connections.
   * Afterwards {@code ACL LOG} (since the last restart) holds refusals of those commands only, at
   * most one each per client.
   */
  @Test
  void restrictedUserRestartKillPause() throws Exception {
    String password = "restricted-loop";
    List<String> args = new ArrayList<>(List.of("--appendonly", "yes", "--appendfsync", "always"));
    args.addAll(LeastPrivilege.serverArgs(LeastPrivilege.restrictedUser(LeastPrivilege.Deployment.STANDALONE,
        LeastPrivilege.USER, password)));
    try (RedisServerProcess redis = RedisServerProcess.start(args.toArray(new String[0]))) {
      String uri = "redis://" + LeastPrivilege.USER + ":" + password + "@" + redis.host() + ":" + redis.port();
      int[] round = {0};
      loop("loop-restricted-user", uri, unique("loop"), () -> {
        long start = System.nanoTime();
        switch (round[0]++ % 3) {
          case 0:
            redis.kill9();
            Thread.sleep(2000);
            redis.restart();
            return new Injected(start, System.nanoTime(), "restart");
          case 1:
            String killed = redis.command("CLIENT", "KILL", "TYPE", "normal");
            return new Injected(start, System.nanoTime(), "kill killed=" + killed);
          default:
            redis.command("CLIENT", "PAUSE", "2000", "ALL");
            redis.command("PING");
            return new Injected(start, System.nanoTime(), "pause");
        }
      }, RESUME_BOUND_MS, "restart-ping, kill, pause-end", true);
      NoAdmin.assertDetectedOnce(List.of(redis), false, 2);
    }
  }

  /** Sentinel: kill -9 of the primary; the sentinels promote the replica. The old primary comes back as its replica. */
  @Test
  void sentinelFailover() throws Exception {
    try (RedisSentinelProcesses sentinel = RedisSentinelProcesses.start(FAILOVER_ACKS + 1)) {
      RedisServerProcess[] killed = new RedisServerProcess[1];
      RedisServerProcess[] promoted = new RedisServerProcess[1];
      loop("loop-sentinel-failover" + acksLabel(), sentinel.uri(), unique("loop"), new Fault() {
        @Override
        public Injected inject() {
          RedisServerProcess primary = sentinel.primary();
          List<RedisServerProcess> replicas = sentinel.dataNodes().stream().filter(n -> n != primary).toList();
          long start = System.nanoTime();
          primary.kill9();
          RedisServerProcess replica = awaitPromoted(replicas);
          long promotedAt = System.nanoTime();
          try {
            TestSupport.await("the sentinels to name the new primary", Duration.ofSeconds(30),
                () -> named(sentinel, replica));
          } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + " (" + replica.port() + " promoted, " + primary.port()
                + " killed)\n" + sentinel.describe(), e);
          }
          long namedAt = System.nanoTime();
          killed[0] = primary;
          promoted[0] = replica;
          // clients find the new primary through the sentinels: Redis answers them again once the
          // sentinels name it
          return new Injected(start, namedAt, "namedBySentinelsMs=" + History.millis(namedAt - promotedAt));
        }

        @Override
        public void restore() {
          killed[0].restart();
          killed[0].command("REPLICAOF", promoted[0].host(), Integer.toString(promoted[0].port()));
          sentinel.awaitHealthy();
        }

        @Override
        public RedisServerProcess primary() {
          return sentinel.primary();
        }
      }, RESUME_BOUND_MS, "sentinels-named", false, FAILOVER_ACKS);
    }
  }

  /** Cluster: kill -9 of the master serving the primitives' slot; its replica is promoted. The old master comes back as its replica. */
  @Test
  void clusterFailover() throws Exception {
    try (RedisClusterProcesses cluster = RedisClusterProcesses.start(3, FAILOVER_ACKS + 1)) {
      String name = unique("loop");
      String key = "{turnstile:" + name + "}:lock"; // every key of the three primitives shares this slot
      RedisServerProcess[] killed = new RedisServerProcess[1];
      loop("loop-cluster-failover" + acksLabel(), cluster.uri(), name, new Fault() {
        @Override
        public Injected inject() {
          RedisServerProcess master = cluster.masterOf(key);
          List<RedisServerProcess> replicas = cluster.replicasOf(master);
          long start = System.nanoTime();
          master.kill9();
          awaitPromoted(replicas);
          long promotedAt = System.nanoTime();
          killed[0] = master;
          return new Injected(start, promotedAt, "");
        }

        @Override
        public void restore() {
          killed[0].restart(); // it rejoins as a replica of the promoted node
          cluster.awaitHealthy();
        }

        @Override
        public RedisServerProcess primary() {
          return cluster.masterOf(key);
        }
      }, FAILOVER_RESUME_BOUND_MS, "promotion", false, FAILOVER_ACKS);
    }
  }

  /** Waits until one of {@code candidates} is promoted; returns it. */
  private static RedisServerProcess awaitPromoted(List<RedisServerProcess> candidates) {
    RedisServerProcess[] promoted = new RedisServerProcess[1];
    TestSupport.await(candidates + ": one promoted", Duration.ofSeconds(30), () -> {
      for (RedisServerProcess node : candidates) {
        try {
          if (node.command("INFO", "replication").contains("role:master")) {
            promoted[0] = node;
            return true;
          }
        } catch (RuntimeException e) {
          // a promoting Sentinel kills the node's normal clients
        }
      }
      return false;
    });
    return promoted[0];
  }

  private static String acksLabel() {
    return FAILOVER_ACKS == 0 ? "" : "-acks" + FAILOVER_ACKS;
  }

  private static boolean named(RedisSentinelProcesses sentinel, RedisServerProcess node) {
    try {
      return sentinel.primary() == node;
    } catch (RuntimeException e) {
      return false;
    }
  }

  // ------------------------------------------------------------------ the loop

  private static void loop(String scenario, String uri, String name, Fault fault, long resumeBoundMs, String resumeFrom,
      boolean strandedIsLeak) throws Exception {
    loop(scenario, uri, name, fault, resumeBoundMs, resumeFrom, strandedIsLeak, 0);
  }

  private static void loop(String scenario, String uri, String name, Fault fault, long resumeBoundMs, String resumeFrom,
      boolean strandedIsLeak, int replicaAcks) throws Exception {
    if (LOCK_CACHING && replicaAcks == 0) {
      scenario = scenario + "-cached";
    }
    List<Turnstile> clients = new ArrayList<>();
    List<Iteration> iterations = new ArrayList<>();
    Workload workload = null;
    long origin = System.nanoTime();
    try {
      for (int c = 0; c < 2; c++) {
        clients.add(Turnstile.connect(uri, options(replicaAcks)));
      }
      workload = Workload.start(clients, name, 4, 4, 1, 1);
      for (int i = 1; i <= ITERATIONS; i++) {
        Iteration it = iteration(i, workload, fault, origin, () -> semaphoreState(fault, name, clients));
        iterations.add(it);
        System.out.println(it.line(scenario));
        if (!it.busy().isEmpty()) {
          break; // workers stuck in an acquisition: the next iterations would measure nothing
        }
      }
    } finally {
      if (workload != null) {
        workload.close();
      }
      for (Turnstile t : clients) {
        t.close();
      }
    }
    report(scenario, workload, iterations, resumeBoundMs, resumeFrom, strandedIsLeak, origin, replicaAcks);
  }

  /**
   * One iteration: load, the fault, the resume, a second of load, a quiescence with the leak check,
   * then the restore (under load again). Everything counted from its start to the restore's end.
   */
  private static Iteration iteration(int number, Workload w, Fault fault, long origin, Supplier<String> semaphoreState)
      throws Exception {
    long begin = System.nanoTime();
    Map<Primitive, Long> lostBefore = new EnumMap<>(Primitive.class);
    Map<Primitive, Long> countBefore = new EnumMap<>(Primitive.class);
    for (Primitive p : Primitive.values()) {
      w.takeMaxReleaseMillis(p);
      lostBefore.put(p, w.leasesLost(p));
      countBefore.put(p, w.acquisitions(p));
    }
    boolean loaded = awaitQuietly(Duration.ofSeconds(10),
        () -> w.acquisitions(Primitive.LOCK) - countBefore.get(Primitive.LOCK) >= 20
            && w.acquisitions(Primitive.SEMAPHORE) - countBefore.get(Primitive.SEMAPHORE) >= 20
            && w.acquisitions(Primitive.READ_WRITE) - countBefore.get(Primitive.READ_WRITE) >= 5);
    Injected injected = fault.inject();
    long answered = injected.answeredNanos();
    awaitQuietly(RESUME_WAIT, () -> {
      for (Primitive p : Primitive.values()) {
        if (w.latestAcquisitionNanos(p) - answered < 0) {
          return false;
        }
      }
      return true;
    });
    long resumed = answered;
    for (Primitive p : Primitive.values()) {
      resumed = Math.max(resumed, w.latestAcquisitionNanos(p));
    }
    long runUntil = resumed + TimeUnit.MILLISECONDS.toNanos(RUN_AFTER_RESUME_MS);
    while (System.nanoTime() - runUntil < 0) {
      Thread.sleep(20); // the load runs on, for the longest-idle figure
    }
    long quiesceAt = System.nanoTime();
    boolean quiet = w.quiesce(RESUME_WAIT);
    List<String> busy = quiet ? List.of() : w.busyWorkers();
    // Stranded: still missing 3 s after the quiescence, less than a lease, while the clients are
    // alive. Leaked: still missing after a further lease, once the idle clients' liveness lapsed.
    Workload.Leaks stranded = quiet ? w.leaks(Duration.ofSeconds(3)) : null;
    if (!quiet || stranded.permitsMissing() > 0) {
      System.out.println("[loop] iteration=" + number + (quiet ? " permits stranded" : " workers stuck")
          + ", the semaphore now: " + semaphoreState.get());
    }
    Workload.Leaks leaked = stranded == null || stranded.none() ? stranded
        : w.leaks(Duration.ofMillis(LEASE_MS + 2000));
    Map<Primitive, Long> resume = new EnumMap<>(Primitive.class);
    Map<Primitive, Long> idle = new EnumMap<>(Primitive.class);
    Map<Primitive, Long> stall = new EnumMap<>(Primitive.class);
    for (Primitive p : Primitive.values()) {
      List<History.Hold> holds = w.history(p).holds();
      long first = firstStartAfter(holds, answered);
      resume.put(p, first == Long.MIN_VALUE ? -1 : History.millis(first - answered));
      stall.put(p, first == Long.MIN_VALUE ? 0 : STALLS.millisBetween(answered, first));
      idle.put(p, first == Long.MIN_VALUE ? -1 : longestIdleMillis(holds, first, quiesceAt));
    }
    if (quiet) {
      w.resume();
      fault.restore();
    }
    long end = System.nanoTime();
    Map<Primitive, Integer> acquireErrors = new EnumMap<>(Primitive.class);
    Map<Primitive, Integer> releaseErrors = new EnumMap<>(Primitive.class);
    Map<Primitive, Long> lost = new EnumMap<>(Primitive.class);
    Map<Primitive, Long> maxRelease = new EnumMap<>(Primitive.class);
    for (Primitive p : Primitive.values()) {
      acquireErrors.put(p, w.acquireErrors(p).countBetween(begin, end));
      releaseErrors.put(p, w.releaseErrors(p).countBetween(begin, end));
      lost.put(p, w.leasesLost(p) - lostBefore.get(p));
      maxRelease.put(p, w.takeMaxReleaseMillis(p));
    }
    return new Iteration(number, History.millis(injected.startNanos() - origin),
        History.millis(answered - injected.startNanos()), injected.note(), resume, idle, acquireErrors,
        releaseErrors, lost, maxRelease, stranded, leaked, busy, loaded, injected.startNanos(), answered, stall);
  }

  /**
   * The semaphore's keys on the node serving it (each with its content and PTTL) and each client's
   * id and ledger, for diagnosing a stranded permit or a stuck semaphore; never throws.
   */
  static String semaphoreState(Fault fault, String name, List<Turnstile> clients) {
    StringBuilder b = new StringBuilder();
    for (Turnstile t : clients) {
      try {
        RedisSemaphore s = (RedisSemaphore) t.semaphore(name, Workload.CAPACITY);
        b.append("\n  client ").append(t.engine().clientId).append(": ").append(s.books());
      } catch (RuntimeException e) {
        b.append("\n  client: ").append(e);
      }
    }
    RedisServerProcess node;
    try {
      node = fault.primary();
    } catch (RuntimeException e) {
      return b.append("\n  no primary: ").append(e).toString();
    }
    if (node == null) {
      return b.toString();
    }
    try {
      String prefix = "{turnstile:" + name + "}:s";
      for (String key : node.command("KEYS", prefix + "*").lines().sorted().toList()) {
        if (key.isBlank()) {
          continue;
        }
        String type = node.command("TYPE", key).trim();
        String content = switch (type) {
          case "hash" -> node.command("HGETALL", key);
          case "list" -> node.command("LRANGE", key, "0", "-1");
          case "zset" -> node.command("ZRANGE", key, "0", "-1", "WITHSCORES");
          case "string" -> node.command("GET", key);
          default -> type;
        };
        b.append("\n  ").append(key.substring(prefix.length())).append(" pttl=")
            .append(node.command("PTTL", key).trim()).append(": ").append(content.replace('\n', ' ').trim());
      }
      b.append("\n  server time: ").append(node.command("TIME").replace('\n', ' ').trim());
    } catch (RuntimeException e) {
      b.append("\n  ").append(node).append(": ").append(e);
    }
    return b.toString();
  }

  /** @return the start of the first hold that began at or after {@code instant}, or Long.MIN_VALUE */
  private static long firstStartAfter(List<History.Hold> holds, long instant) {
    long first = Long.MIN_VALUE;
    for (History.Hold h : holds) {
      if (h.startNanos() - instant >= 0 && (first == Long.MIN_VALUE || h.startNanos() - first < 0)) {
        first = h.startNanos();
      }
    }
    return first;
  }

  /** The longest stretch within [from, to) during which no hold was valid. */
  private static long longestIdleMillis(List<History.Hold> holds, long from, long to) {
    List<History.Hold> window = new ArrayList<>();
    for (History.Hold h : holds) {
      if (h.endNanos() - from >= 0 && h.startNanos() - to < 0) {
        window.add(h);
      }
    }
    window.sort((a, b) -> Long.compare(a.startNanos(), b.startNanos()));
    long coveredUntil = from;
    long longest = 0;
    for (History.Hold h : window) {
      if (h.startNanos() - coveredUntil > longest) {
        longest = h.startNanos() - coveredUntil;
      }
      if (h.endNanos() - coveredUntil > 0) {
        coveredUntil = h.endNanos();
      }
    }
    longest = Math.max(longest, to - coveredUntil);
    return History.millis(longest);
  }

  private static boolean awaitQuietly(Duration timeout, BooleanSupplier condition) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        return false;
      }
      Thread.sleep(5);
    }
    return true;
  }

  // ------------------------------------------------------------------ the report

  private static void report(String scenario, Workload w, List<Iteration> iterations, long resumeBoundMs,
      String resumeFrom, boolean strandedIsLeak, long origin, int replicaAcks) {
    List<Executable> checks = new ArrayList<>();
    List<String> stuck = new ArrayList<>();
    for (Iteration it : iterations) {
      stuck.addAll(it.busy());
    }
    for (Primitive p : Primitive.values()) {
      History h = w.history(p);
      List<Long> resume = new ArrayList<>();
      List<Long> outage = new ArrayList<>();
      List<String> notes = new ArrayList<>();
      long idle = 0;
      long maxRelease = 0;
      int stranded = 0;
      List<Long> beyondStalls = new ArrayList<>();
      for (Iteration it : iterations) {
        resume.add(it.resumeMs().get(p));
        beyondStalls.add(it.resumeMs().get(p) - it.stallMs().get(p));
        h.recovery(it.resumeMs().get(p));
        outage.add(it.outageMs());
        if (!it.note().isEmpty()) {
          notes.add(it.note());
        }
        idle = Math.max(idle, it.idleMs().get(p));
        maxRelease = Math.max(maxRelease, it.maxReleaseMs().get(p));
        stranded += count(it.stranded(), p);
        h.leaked(count(strandedIsLeak ? it.stranded() : it.leaked(), p));
      }
      if (p == Primitive.LOCK) {
        h.staleWritesRejected(w.store().rejected());
      }
      int capacityOf = switch (p) {
        case LOCK -> 1;
        case SEMAPHORE -> Workload.CAPACITY;
        case READ_WRITE -> 0;
      };
      // Without replica acknowledgement, a failover can lose a grant the old primary had answered
      // (docs/FAILURE-MODEL.md §3): its holder goes on until it is told, and the new primary may
      // grant the same to another meanwhile. That is the documented window, not a defect, when the
      // holder is told: a violation counts as explained only in a failover without acks, in an
      // iteration whose holders of this primitive were told of a lost lease, and beginning between
      // the fault and 1 s past the resume bound after Redis answered again. Any other fails.
      List<Long> starts = h.violationStarts(capacityOf);
      int explained = 0;
      if (replicaAcks == 0 && scenario.contains("failover")) {
        for (long start : starts) {
          for (Iteration it : iterations) {
            if (it.lost().get(p) > 0 && start - it.faultNanos() >= 0
                && start - (it.answeredNanos() + TimeUnit.MILLISECONDS.toNanos(resumeBoundMs + 1000)) <= 0) {
              explained++;
              break;
            }
          }
        }
      }
      int unexplained = starts.size() - explained;
      History.Report r = switch (p) {
        case LOCK -> h.check(scenario, p.label(), 1);
        case SEMAPHORE -> h.check(scenario, p.label(), Workload.CAPACITY);
        case READ_WRITE -> h.checkReadWrite(scenario, p.label());
      };
      // with replicaAcks, an acquisition whose acknowledgement failed (too few replicas, or the
      // failover cut the acknowledgement step) throws after giving the hold back, as documented
      // (FAILURE-MODEL section 4): counted apart, and only those
      int unacknowledged = replicaAcks > 0 ? w.acquireErrors(p).unacknowledged() : 0;
      int acquireErrors = w.acquireErrors(p).count() - unacknowledged;
      int releaseErrors = w.releaseErrors(p).count();
      Map<String, Object> extra = new LinkedHashMap<>();
      extra.put("iterations", iterations.size());
      extra.put("outageMs", outage);
      extra.put("resumeFrom", resumeFrom);
      extra.put("resumeMs", resume);
      extra.put("longestIdleMs", idle);
      extra.put("acquireExceptions", acquireErrors);
      if (replicaAcks > 0) {
        extra.put("unacknowledgedAcquisitions", unacknowledged);
      }
      extra.put("releaseExceptions", releaseErrors);
      extra.put("leasesLost", w.leasesLost(p));
      extra.put("maxReleaseMs", maxRelease);
      extra.put("stranded", stranded);
      extra.put("stuckWorkers", stuck.size());
      if (explained > 0) {
        extra.put("violationsOfALostGrantTold", explained);
      }
      if (!notes.isEmpty()) {
        extra.put("notes", notes);
      }
      String line = r.summaryLine(extra);
      System.out.println(line);
      if (r.overlaps() + r.overCapacity() > 0) {
        for (String v : h.describeViolations(capacityOf, origin, 5)) {
          System.out.println("[loop] scenario=" + scenario + " " + p.label() + " violation (ms from the start): " + v);
        }
      }
      long idleWorst = idle;
      long maxReleaseWorst = maxRelease;
      checks.add(() -> assertEquals(0, acquireErrors, "exceptions from untimed acquisitions: " + w.acquireErrors(p)
          + "\n" + line));
      checks.add(() -> assertEquals(0, releaseErrors, "exceptions (other than LockLostException) from unlock/release: "
          + w.releaseErrors(p) + "\n" + line));
      if (explained == 0) {
        checks.add(() -> assertEquals(0, r.overlaps(), "overlapping holds\n" + line));
        checks.add(() -> assertEquals(0, r.overCapacity(), "more permits held than exist\n" + line));
      } else {
        checks.add(() -> assertEquals(0, unexplained, "violations other than a lost grant's, told to its holder,"
            + " right after a failover without acks\n" + line));
      }
      checks.add(() -> assertEquals(0, r.tokenViolations(), "fencing tokens out of acquisition order\n" + line));
      checks.add(() -> assertEquals(0, r.leaked(), (strandedIsLeak ? "held or missing 3 s after a quiescence"
          : "held or missing a lease after a quiescence") + "\n" + line));
      checks.add(() -> assertTrue(resume.stream().allMatch(ms -> ms >= 0)
          && beyondStalls.stream().allMatch(ms -> ms <= resumeBoundMs),
          "every iteration resumes within " + resumeBoundMs + " ms of Redis answering again (" + resumeFrom
          + "), besides the time this JVM's threads were not scheduled meanwhile (" + beyondStalls
          + " ms beyond the stalls)\n" + line));
      checks.add(() -> assertTrue(idleWorst <= IDLE_BOUND_MS, "longest idle after resuming within " + IDLE_BOUND_MS
          + " ms\n" + line));
      checks.add(() -> assertTrue(maxReleaseWorst <= RELEASE_BOUND_MS, "unlock/release returns at once (within "
          + RELEASE_BOUND_MS + " ms)\n" + line));
    }
    checks.add(() -> assertTrue(stuck.isEmpty(), "workers that never got out of an acquisition: " + stuck));
    checks.add(() -> assertEquals(0, w.deaths().count(), "workers died: " + w.deaths()));
    checks.add(() -> assertEquals(ITERATIONS, iterations.size(), "iterations run"));
    checks.add(() -> assertTrue(iterations.stream().allMatch(Iteration::loaded), "load before every fault"));
    assertAll(scenario, checks);
  }
}
