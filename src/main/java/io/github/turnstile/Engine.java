package io.github.turnstile;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.UnblockType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.codec.StringCodec;
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

    /** @return the list that release pushes wake tokens to */
    String wakeKey();

    /** @return e.g. "lock 'orders:42'", for messages */
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
  private final RedisClient client;
  private final boolean ownsClient;
  private final StatefulRedisConnection<String, String> connection;
  private final RedisAsyncCommands<String, String> async;
  final BlockingPool pool;
  final Watchdog watchdog;
  final Metrics metrics;
  private final ScheduledExecutorService scheduler;
  private final ExecutorService events;
  private final AtomicLong requests = new AtomicLong();

  Engine(RedisClient client, boolean ownsClient, TurnstileOptions options) {
    this.options = options;
    this.client = client;
    this.ownsClient = ownsClient;
    this.leaseMillis = options.leaseTime().toMillis();
    this.commandTimeoutNanos = options.commandTimeout().toNanos();
    byte[] id = new byte[8];
    new SecureRandom().nextBytes(id);
    this.clientId = HexFormat.of().formatHex(id);
    try {
      this.connection = client.connect(StringCodec.UTF8);
    } catch (RedisException e) {
      throw new TurnstileException("cannot connect to Redis: " + e.getMessage(), e);
    }
    this.async = connection.async();
    try {
      connection.sync().clientSetname("turnstile:" + clientId + ":main");
    } catch (RedisException e) {
      connection.close();
      throw new TurnstileException("cannot talk to Redis: " + e.getMessage(), e);
    }
    this.pool = new BlockingPool(options.blockingPoolSize(), this::openBlockingConnection);
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

  private BlockingPool.Conn openBlockingConnection() {
    StatefulRedisConnection<String, String> c;
    try {
      c = client.connect(StringCodec.UTF8);
    } catch (RedisException e) {
      throw new TurnstileException("cannot open a blocking connection to Redis: " + e.getMessage(), e);
    }
    try {
      c.sync().clientSetname("turnstile:" + clientId + ":blocking");
      return new BlockingPool.Conn(c, c.sync().clientId());
    } catch (RedisException e) {
      c.closeAsync();
      throw new TurnstileException("cannot set up a blocking connection: " + e.getMessage(), e);
    }
  }

  String newRequestId() {
    return clientId + ":" + requests.incrementAndGet();
  }

  String ownerId(Thread t) {
    return clientId + ":" + t.getId();
  }

  RedisAsyncCommands<String, String> async() {
    return async;
  }

  /** Runs a script by EVALSHA, falling back to EVAL (which also loads it) on NOSCRIPT. */
  <T> CompletableFuture<T> eval(Script s, ScriptOutputType type, String[] keys, String... args) {
    CompletableFuture<T> first = async.<T>evalsha(s.sha, type, keys, args).toCompletableFuture();
    return first.handle((value, error) -> {
          if (error == null) {
            return CompletableFuture.completedFuture(value);
          }
          Throwable cause = error instanceof CompletionException && error.getCause() != null
              ? error.getCause() : error;
          if (cause instanceof RedisNoScriptException
              || (cause.getMessage() != null && cause.getMessage().startsWith("NOSCRIPT"))) {
            return async.<T>eval(s.body, type, keys, args).toCompletableFuture();
          }
          return CompletableFuture.<T>failedFuture(cause);
        })
        .thenCompose(f -> f);
  }

  /** Fails fast with a clear message while the connection to Redis is down. */
  void checkConnected(String what) {
    if (!connection.isOpen()) {
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
      if (deadlineBound) {
        throw new DeadlinePassed();
      }
      throw new TurnstileException(what + ": Redis did not answer within "
          + TimeUnit.NANOSECONDS.toMillis(commandTimeoutNanos) + " ms");
    } catch (ExecutionException e) {
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
    sentAtNanos[0] = System.nanoTime();
    CompletableFuture<Attempt> f = c.attempt(requestId);
    try {
      return awaitQuietly(f, c.describe());
    } catch (RuntimeException e) {
      cancelIfAcquired(f, c, requestId);
      throw e;
    }
  }

  /** Once the abandoned attempt completes: if it acquired, undo it. */
  private static void cancelIfAcquired(CompletableFuture<Attempt> f, Contender c, String requestId) {
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
    long local = c.heldLocallyMillis();
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
      long sentAt = System.nanoTime();
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
    block(conn -> conn.async().blpop(seconds(sliceNanos), c.wakeKey()), sliceNanos, deadline, timed,
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
   * Runs one blocking command (whose server-side timeout is {@code sliceNanos}) on a pooled
   * connection. Returns its reply, or {@code null} when it timed out, when no pooled connection
   * freed up within the slice, or when it failed (the caller's next attempt on the main
   * connection reports an unreachable Redis). On interrupt, or when the reply is late, the command
   * is abandoned: CLIENT UNBLOCK, then {@code onAbandon} is told what it did after all.
   */
  <T> T block(java.util.function.Function<StatefulRedisConnection<String, String>,
          io.lettuce.core.RedisFuture<T>> command,
      long sliceNanos, long deadline, boolean timed, boolean interruptible, Abandoned<T> onAbandon)
      throws InterruptedException {
    BlockingPool.Conn conn = pool.borrow(sliceNanos, interruptible);
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
      async.clientUnblock(conn.clientId, UnblockType.TIMEOUT);
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
    connection.close();
    if (ownsClient) {
      client.shutdown();
    }
  }
}
