package io.github.turnstile;

import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.lang.System.Logger.Level;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The one engine under every Turnstile primitive (in the manner of Curator's
 * {@code LockInternals}): connections, script execution with NOSCRIPT fallback, the blocking
 * connection pool, the watchdog, and the wait loop that every primitive's acquisition runs.
 *
 * <p>A primitive plugs into the loop as a {@link Contender}: an idempotent attempt script keyed by
 * a request id, a cancel for an attempt whose outcome the caller no longer wants, a wake list to
 * block on, and a way to hand on a wake token it consumed but will not use.
 */
final class Engine implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  /** Extra client-side wait beyond a BLPOP's server-side timeout before it is abandoned. */
  private static final long BLOCK_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
  /** How long an abandoned BLPOP may take to answer its CLIENT UNBLOCK before it is discarded. */
  private static final long UNBLOCK_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  /** The least time a single attempt gets, even when the caller's deadline is closer. */
  private static final long MIN_ATTEMPT_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  /** The outcome of one attempt script. */
  static final class Attempt {
    final boolean acquired;
    /** The fencing token when acquired. */
    final long token;
    /** When not acquired: how long the current holder's lease still runs, in ms (-1 unknown). */
    final long retryMillis;

    Attempt(boolean acquired, long token, long retryMillis) {
      this.acquired = acquired;
      this.token = token;
      this.retryMillis = retryMillis;
    }
  }

  /** A primitive's side of the wait loop. */
  interface Contender {
    /** Runs the attempt script for this request (idempotent per request id). */
    CompletableFuture<Attempt> attempt(String requestId);

    /** Undoes a successful attempt whose caller gave up; runs after the attempt completed. */
    void cancel(String requestId);

    /** Hands on a wake token that was (or may have been) consumed and will not be used. */
    void passWakeup();

    /**
     * Returns the key whose existence is the hold {@code requestId} took (its lease).
     *
     * @return the key whose existence is the hold {@code requestId} took (its lease)
     */
    String leaseKey(String requestId);

    /**
     * Returns the list that release pushes wake tokens to.
     *
     * @return the list that release pushes wake tokens to
     */
    String wakeKey();

    /**
     * Returns e.g. "lock 'orders:42'", for messages.
     *
     * @return e.g. "lock 'orders:42'", for messages
     */
    String describe();

    /**
     * If another thread of this JVM holds the primitive, the remaining time of its lease in ms,
     * otherwise 0. A waiter then knows an attempt would fail, and goes straight to the wake list,
     * queueing behind waiters of other JVMs instead of racing the one Redis just woke.
     */
    long heldLocallyMillis();
  }

  final TurnstileOptions options;
  final String clientId;
  final long leaseMillis;
  private final long commandTimeoutNanos;
  private final Topology topology;
  private final RedisClusterAsyncCommands<String, String> async;
  final BlockingPool pool;
  final Watchdog watchdog;
  final Metrics metrics;
  private final ScheduledExecutorService scheduler;
  private final ExecutorService events;
  private final AtomicLong requests = new AtomicLong();
  /** The clock of lease bookkeeping; replaced only by tests (see {@link Ticker}). */
  volatile Ticker ticker = Ticker.SYSTEM;

  /**
   * @param connect opens the topology, given the client name prefix to set on its connections
   */
  Engine(java.util.function.Function<String, Topology> connect, TurnstileOptions options) {
    this.options = options;
    this.leaseMillis = options.leaseTime().toMillis();
    this.commandTimeoutNanos = options.commandTimeout().toNanos();
    byte[] id = new byte[8];
    new SecureRandom().nextBytes(id);
    this.clientId = HexFormat.of().formatHex(id);
    this.topology = connect.apply("turnstile:" + clientId);
    this.async = topology.async();
    String blockingName = "turnstile:" + clientId + ":blocking";
    this.pool = new BlockingPool(options.blockingPoolSize(), node -> topology.openBlocking(node, blockingName));
    this.scheduler = Executors.newSingleThreadScheduledExecutor(daemon("turnstile-watchdog-" + clientId));
    this.events = Executors.newSingleThreadExecutor(daemon("turnstile-events-" + clientId));
    this.watchdog = new Watchdog(this, scheduler, options.renewInterval().toMillis());
    this.metrics = Metrics.create(options, clientId, pool, watchdog);
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  String newRequestId() {
    return clientId + ":" + requests.incrementAndGet();
  }

  String ownerId(Thread t) {
    return clientId + ":" + t.getId();
  }

  RedisClusterAsyncCommands<String, String> async() {
    return async;
  }

  /** A command failed or went unanswered: let the topology re-check itself (see {@link Topology#suspect}). */
  void suspectTopology() {
    topology.suspect();
  }

  /**
   * Returns the renewal batch of a lease key (see {@link Topology#batchOf}).
   *
   * @return the renewal batch of a lease key (see {@link Topology#batchOf})
   */
  int batchOf(String key) {
    return topology.batchOf(key);
  }

  /** Runs a script by EVALSHA, falling back to EVAL (which also loads it) on NOSCRIPT. */
  <T> CompletableFuture<T> eval(Script s, ScriptOutputType type, String[] keys, String... args) {
    CompletableFuture<T> first = async.<T>evalsha(s.sha, type, keys, args).toCompletableFuture();
    return first.handle((value, error) -> {
          if (error == null) {
            return CompletableFuture.completedFuture(value);
          }
          Throwable cause = unwrap(error);
          if (cause instanceof RedisNoScriptException
              || (cause.getMessage() != null && cause.getMessage().startsWith("NOSCRIPT"))) {
            return async.<T>eval(s.body, type, keys, args).toCompletableFuture();
          }
          return CompletableFuture.<T>failedFuture(cause);
        })
        .thenCompose(f -> f);
  }

  static Throwable unwrap(Throwable error) {
    return error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
  }

  /**
   * Thrown when a hold was taken but fewer replicas than {@link TurnstileOptions#replicaAcks()}
   * acknowledged it in time; the primitive then gives the hold back.
   */
  static final class NotReplicated extends TurnstileException {
    private static final long serialVersionUID = 1L;

    NotReplicated(String message) {
      super(message);
    }
  }

  /**
   * With {@link TurnstileOptions#replicaAcks()} set, waits until that many replicas of the node
   * serving {@code leaseKey} have everything this node has done up to now, including the
   * acquisition that just wrote {@code leaseKey}; otherwise returns at once.
   *
   * <p>{@code WAIT} counts the writes of its own connection, and the main connection, shared by
   * every thread, must not block. So on a pooled connection to that node it sends a write,
   * {@code PEXPIRE leaseKey lease} (the lease is the hold's own key, just written, so this only
   * renews it), then {@code WAIT replicas timeout}, pipelined. Replication is one ordered stream
   * per node, so acknowledging this later write acknowledges the acquisition too.
   *
   * @throws NotReplicated if fewer replicas acknowledged within the timeout
   * @throws TurnstileException if Redis failed or no pooled connection was free in time
   */
  void awaitReplicas(String leaseKey) {
    int replicas = options.replicaAcks();
    if (replicas == 0) {
      return;
    }
    BlockingPool.Conn conn;
    try {
      conn = pool.borrow(topology.nodeOf(leaseKey), commandTimeoutNanos, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e); // not interruptible
    }
    if (conn == null) {
      throw new TurnstileException("no pooled connection free within the command timeout to await"
          + " replica acknowledgement");
    }
    long timeoutMillis = options.replicaAckTimeout().toMillis();
    RedisClusterAsyncCommands<String, String> on = conn.connection.async();
    CompletableFuture<Boolean> renewed = on.pexpire(leaseKey, leaseMillis).toCompletableFuture();
    CompletableFuture<Long> acked = on.waitForReplication(replicas, timeoutMillis).toCompletableFuture();
    long acks;
    try {
      boolean held = awaitQuietly(renewed, "replica acknowledgement");
      acks = awaitQuietly(acked, "replica acknowledgement");
      pool.release(conn);
      if (!held) {
        throw new TurnstileException("the hold vanished before its replica acknowledgement");
      }
    } catch (RuntimeException e) {
      if (!(e instanceof TurnstileException && renewed.isDone() && acked.isDone())) {
        pool.discard(conn);
      }
      throw e;
    }
    if (acks < replicas) {
      throw new NotReplicated("only " + acks + " of " + replicas + " replicas acknowledged within "
          + timeoutMillis + " ms (replicaAcks)");
    }
  }

  /** Fails fast with a clear message while the connection to Redis is down. */
  void checkConnected(String what) {
    if (!topology.isOpen()) {
      throw new TurnstileException(what + ": Redis is not reachable (connection down, reconnecting)");
    }
  }

  /** Thrown internally when the caller's deadline passed while waiting for a reply. */
  static final class DeadlinePassed extends Exception {
    private static final long serialVersionUID = 1L;

    DeadlinePassed() {
      super(null, null, false, false);
    }
  }

  /**
   * Waits for a non-blocking command's reply, bounded by the command timeout and, when timed, by
   * the caller's deadline (though never less than {@link #MIN_ATTEMPT_NANOS}).
   */
  <T> T await(CompletableFuture<T> f, boolean timed, long deadline, boolean interruptible, String what)
      throws InterruptedException, DeadlinePassed {
    long budget = commandTimeoutNanos;
    boolean deadlineBound = false;
    if (timed) {
      long remaining = Math.max(deadline - System.nanoTime(), MIN_ATTEMPT_NANOS);
      if (remaining < budget) {
        budget = remaining;
        deadlineBound = true;
      }
    }
    try {
      return Waits.get(f, budget, interruptible);
    } catch (TimeoutException e) {
      topology.suspect();
      if (deadlineBound) {
        throw new DeadlinePassed();
      }
      throw new TurnstileException(what + ": Redis did not answer within "
          + TimeUnit.NANOSECONDS.toMillis(commandTimeoutNanos) + " ms");
    } catch (ExecutionException e) {
      topology.suspect();
      throw failure(what, e.getCause());
    }
  }

  /** Waits for a reply with the command timeout only, never interrupted. */
  <T> T awaitQuietly(CompletableFuture<T> f, String what) {
    try {
      return await(f, false, 0, false, what);
    } catch (InterruptedException | DeadlinePassed e) {
      throw new AssertionError(e);
    }
  }

  static TurnstileException failure(String what, Throwable cause) {
    if (cause instanceof TurnstileException) {
      return (TurnstileException) cause;
    }
    return new TurnstileException(what + ": " + cause, cause);
  }

  /**
   * One attempt and no wait (tryLock()). If no reply comes in time, an attempt that Redis runs
   * later and that succeeds is cancelled once it does.
   *
   * @param sentAtNanos receives {@code System.nanoTime()} read before the attempt was sent
   */
  Attempt attemptOnce(Contender c, String requestId, long[] sentAtNanos) {
    checkConnected(c.describe());
    sentAtNanos[0] = ticker.read();
    CompletableFuture<Attempt> f = c.attempt(requestId);
    Attempt a;
    try {
      a = awaitQuietly(f, c.describe());
    } catch (RuntimeException e) {
      cancelIfAcquired(f, c, requestId);
      throw e;
    }
    if (a.acquired) {
      confirmReplicated(c, requestId);
    }
    return a;
  }

  /**
   * After a successful attempt, with {@link TurnstileOptions#replicaAcks()} set: waits for the
   * replicas (see {@link #awaitReplicas}); if they do not acknowledge, gives the hold back and
   * fails.
   */
  private void confirmReplicated(Contender c, String requestId) {
    if (options.replicaAcks() == 0) {
      return;
    }
    try {
      awaitReplicas(c.leaseKey(requestId));
    } catch (RuntimeException e) {
      c.cancel(requestId);
      throw new TurnstileException(c.describe() + " was acquired, but " + e.getMessage()
          + "; it was released again", e);
    }
  }

  /** Once the abandoned attempt completes: if it acquired, undo it. */
  static void cancelIfAcquired(CompletableFuture<Attempt> f, Contender c, String requestId) {
    f.whenComplete((r, err) -> {
      if (r != null && r.acquired) {
        c.cancel(requestId);
      }
    });
  }

  /**
   * The wait loop: attempt; if held by someone else, block on the wake list for at most the
   * holder's remaining lease (and the caller's deadline); repeat. Wake tokens are hints: every
   * wake-up is followed by a fresh attempt, so a lost or stale token costs at most the holder's
   * remaining lease, and never correctness.
   *
   * @return the successful attempt, with {@code sentAtNanos} read before it was sent; or
   *     {@code null} if the deadline passed
   */
  Attempt contend(Contender c, String requestId, boolean timed, long deadline, boolean interruptible,
      long[] sentAtNanos) throws InterruptedException {
    return contend(c, requestId, timed, deadline, interruptible, sentAtNanos, false);
  }

  /**
   * @param queueFirst block on the wake list before the first attempt: this JVM just released the
   *     primitive to let other JVMs' waiters in, and this waiter must queue behind them
   */
  Attempt contend(Contender c, String requestId, boolean timed, long deadline, boolean interruptible,
      long[] sentAtNanos, boolean queueFirst) throws InterruptedException {
    long local = queueFirst ? leaseMillis : c.heldLocallyMillis();
    if (local > 0) {
      long slice = TimeUnit.MILLISECONDS.toNanos(local + 1);
      if (timed) {
        slice = Math.min(slice, deadline - System.nanoTime());
      }
      if (slice > 0) {
        checkConnected(c.describe());
        awaitWake(c, slice, deadline, timed, interruptible);
      }
    }
    while (true) {
      if (interruptible && Thread.interrupted()) {
        throw new InterruptedException();
      }
      checkConnected(c.describe());
      long sentAt = ticker.read();
      CompletableFuture<Attempt> f = c.attempt(requestId);
      Attempt a;
      try {
        a = await(f, timed, deadline, interruptible, c.describe());
      } catch (InterruptedException | DeadlinePassed | RuntimeException e) {
        // We no longer want this attempt; if Redis runs (or ran) it successfully, undo it.
        cancelIfAcquired(f, c, requestId);
        if (e instanceof DeadlinePassed) {
          return null;
        }
        if (e instanceof InterruptedException) {
          throw (InterruptedException) e;
        }
        throw (RuntimeException) e;
      }
      if (a.acquired) {
        confirmReplicated(c, requestId);
        sentAtNanos[0] = sentAt;
        return a;
      }
      long slice;
      if (a.retryMillis == -2) {
        slice = 0; // the holder's key vanished between checks: try again at once
      } else if (a.retryMillis < 0) {
        slice = TimeUnit.MILLISECONDS.toNanos(leaseMillis);
      } else {
        slice = TimeUnit.MILLISECONDS.toNanos(a.retryMillis + 1);
      }
      if (timed) {
        long remaining = deadline - System.nanoTime();
        if (remaining <= 0) {
          return null;
        }
        slice = Math.min(slice, remaining);
      }
      if (slice > 0) {
        awaitWake(c, slice, timed ? deadline : 0, timed, interruptible);
      }
    }
  }

  /** Told of the late reply of a blocking command that was abandoned. */
  interface Abandoned<T> {
    /**
     * @param lateReply the reply, if it arrived (null: server-side timeout, or unknown)
     * @param known false if the connection had to be closed without a reply, so a reply may
     *     have been produced and lost (e.g. a token popped in flight)
     */
    void abandoned(T lateReply, boolean known);
  }

  /** Blocks on the contender's wake list for up to {@code sliceNanos} (see {@link #block}). */
  private void awaitWake(Contender c, long sliceNanos, long deadline, boolean timed, boolean interruptible)
      throws InterruptedException {
    block(c.wakeKey(), conn -> conn.async().blpop(seconds(sliceNanos), c.wakeKey()), sliceNanos, deadline, timed,
        interruptible, (reply, known) -> {
          if (!known || reply != null) {
            c.passWakeup();
          }
        });
  }

  /** A BLPOP/BLMOVE timeout in seconds: whole milliseconds, at least 1 ms (0 would block forever). */
  static double seconds(long sliceNanos) {
    return Math.max(1, TimeUnit.NANOSECONDS.toMillis(sliceNanos + 999_999)) / 1000.0;
  }

  /**
   * Runs one blocking command on {@code key} (whose server-side timeout is {@code sliceNanos}) on a
   * pooled connection to the node that serves the key. Returns its reply, or {@code null} when it timed out, when no pooled connection
   * freed up within the slice, or when it failed (the caller's next attempt on the main
   * connection reports an unreachable Redis). On interrupt, or when the reply is late, the command
   * is abandoned: CLIENT UNBLOCK, then {@code onAbandon} is told what it did after all.
   */
  <T> T block(String key, java.util.function.Function<StatefulRedisConnection<String, String>,
          io.lettuce.core.RedisFuture<T>> command,
      long sliceNanos, long deadline, boolean timed, boolean interruptible, Abandoned<T> onAbandon)
      throws InterruptedException {
    BlockingPool.Conn conn = pool.borrow(topology.nodeOf(key), sliceNanos, interruptible);
    if (conn == null) {
      return null; // every blocking connection is busy; re-check Redis now that the slice has passed
    }
    CompletableFuture<T> reply = command.apply(conn.connection).toCompletableFuture();
    long clientWait = sliceNanos + BLOCK_GRACE_NANOS;
    if (timed) {
      clientWait = Math.min(clientWait, deadline - System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(10));
    }
    try {
      T value = Waits.get(reply, clientWait, interruptible);
      pool.release(conn);
      return value;
    } catch (InterruptedException e) {
      abandon(conn, reply, onAbandon);
      throw e;
    } catch (TimeoutException e) {
      abandon(conn, reply, onAbandon);
      return null;
    } catch (ExecutionException e) {
      // Lettuce gave up on the command (its own timeout, or the connection failed): outcome unknown
      pool.discard(conn);
      onAbandon.abandoned(null, false);
      topology.suspect();
      LOG.log(Level.DEBUG, "blocking command failed: {0}", e.getCause());
      return null;
    }
  }

  /**
   * Stops a blocked command we no longer want: CLIENT UNBLOCK it and tell {@code onAbandon} what it
   * did (it may have raced the unblock). If it does not answer promptly, close the connection and
   * report the outcome unknown.
   */
  private <T> void abandon(BlockingPool.Conn conn, CompletableFuture<T> reply, Abandoned<T> onAbandon) {
    if (!reply.isDone()) {
      topology.unblock(conn);
    }
    try {
      T late = Waits.get(reply, UNBLOCK_GRACE_NANOS, false);
      pool.release(conn);
      onAbandon.abandoned(late, true);
    } catch (TimeoutException | ExecutionException e) {
      pool.discard(conn);
      onAbandon.abandoned(null, false);
    } catch (InterruptedException e) {
      throw new AssertionError(e); // not interruptible
    }
  }

  /** Delivers a lease-loss event to listeners on the event thread. */
  void notifyLost(LeaseLostEvent event, List<LeaseLossListener> listeners) {
    LOG.log(Level.WARNING, "Turnstile lease lost: {0} (fencing token {1}, holder {2}): {3}",
        event.name(), Long.toString(event.fencingToken()), event.holder(), event.reason());
    try {
      events.execute(() -> {
        for (LeaseLossListener l : listeners) {
          try {
            l.leaseLost(event);
          } catch (RuntimeException ex) {
            LOG.log(Level.WARNING, "lease-loss listener threw", ex);
          }
        }
      });
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      // Turnstile closed: nobody left to tell.
    }
  }

  @Override
  public void close() {
    metrics.close();
    watchdog.close();
    scheduler.shutdownNow();
    events.shutdown();
    pool.close();
    topology.close();
  }
}
