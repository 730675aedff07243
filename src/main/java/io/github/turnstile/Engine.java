package io.github.turnstile;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.lang.System.Logger.Level;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CancellationException;
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
 * {@code LockInternals}): connections, script execution with NOSCRIPT fallback, the resources of
 * the two tiers of waiting (a bounded pool of blocking connections, and pub/sub), the watchdog,
 * outage handling and recovery events. Every acquisition, of every primitive and by either API,
 * runs on them as an {@link AsyncAcquisition} at its primitive's {@link AsyncGate}; a primitive
 * plugs in as an {@link AcquisitionSide}. Its parts are classes of their own, reached through its
 * fields (DESIGN §1).
 *
 * <p><b>Faults.</b> Wake-ups are hints; Redis state decides. Whenever Redis may have come back (a
 * connection of the main client reconnected, the Cluster topology changed, a subscription was
 * re-confirmed), every waiter is woken ({@link #faults()}) and attempts again. Untimed calls wait
 * through an outage for up to {@link TurnstileOptions#outageTolerance()}; timed calls until their
 * deadline.
 */
final class Engine implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  /** The longest a waiter queues behind other JVMs' waiters before its first attempt (fairness after a streak). */
  static final long QUEUE_FIRST_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  /**
   * An acquisition of this client waiting in Redis for a primitive (the head of a gate,
   * {@link AsyncAcquisition}, a thread's or a future's), for {@link Turnstile#activity()}.
   *
   * @param waiter the waiting thread's name, or "async acquisition ..." for a future's
   * @param queued how many more acquisitions of this JVM queue behind it (-1 if not known)
   */
  record Waiting(Inspection.Kind kind, String name, String waiter, long sinceNanos,
      java.util.function.IntSupplier queued) {}

  /**
   * The acquisitions of this client that wait in Redis now (one per contended primitive and JVM:
   * the gate's head, a thread's or a future's). An entry is added only once an attempt was
   * refused, so an acquisition that is granted at once costs nothing here.
   */
  final java.util.Set<Waiting> waiting = java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * Engines (clients) created in this JVM. Tests bound per-client figures by it: a command refused
   * to every client shows in {@code ACL LOG} at most this many times.
   */
  static final java.util.concurrent.atomic.AtomicLong CREATED = new java.util.concurrent.atomic.AtomicLong();

  final TurnstileOptions options;
  final String clientId;
  /** When this client was created, ms since the epoch by this JVM's clock (its identity record). */
  final long startedAtMillis = System.currentTimeMillis();
  final long leaseMillis;
  /** {@link #leaseMillis} as a script argument. */
  final String leaseArg;
  private final long commandTimeoutNanos;
  /** The outage clock: since when the calls have found Redis unreachable, and what that costs a call. */
  final Outages outages;
  private final Topology topology;
  private final RedisClusterAsyncCommands<String, String> async;
  final BlockingPool pool;
  /** Blocking connections closed to end a command that could not be unblocked (for tests and the cost figures). */
  final java.util.concurrent.atomic.LongAdder abandonedByClose = new java.util.concurrent.atomic.LongAdder();
  /** Stops blocking commands on {@link #pool} that are no longer wanted. */
  final BlockingCommands blocking;
  /**
   * A test's seam: runs when a head has started a wait on a wake list (its BLPOP sent, or its
   * connection still opening), before the head watches that wait for a recovery event.
   */
  volatile Runnable listWaitStarted;
  /** Connections for WAIT (replica acknowledgements): separate, so they never queue behind waiters. */
  private final BlockingPool acks;
  /** Replica acknowledgement of grants ({@link TurnstileOptions#replicaAcks()}), on {@link #acks}. */
  final Replicas replicas;
  final Subscriptions subscriptions;
  /** The bounds of cached lock grants, or null if lock caching is off ({@link LockCache}). */
  final LockCache.Registry lockCaches;
  final Watchdog watchdog;
  /** This client's identity record in Redis (written at connect, then kept by the watchdog). */
  final Identity identity;
  /** Reads primitives' state and clients' identities for {@link Inspection}s. */
  final Inspector inspector;
  final Metrics metrics;
  /** The leases the watchdog renews (0 before it exists). */
  private int leasesRenewed() {
    Watchdog w = watchdog;
    return w == null ? 0 : w.size();
  }

  /** JFR events and Micrometer Observations of waits, holds, losses and outages. */
  final Telemetry telemetry;
  private final ScheduledExecutorService scheduler;
  /** Releases: waits for their replies, and their re-sends after transient failures. */
  final Releases releases;
  private final ExecutorService events;
  private final ExecutorService connector;
  private final AtomicLong requests = new AtomicLong();
  /** Completed (and replaced) whenever Redis may have come back: every waiter then re-attempts. */
  private final Signal faults = new Signal();
  /** Completed (and replaced) whenever a connection of the main client dropped. */
  private final Signal losses = new Signal();
  /** The clock of lease bookkeeping; replaced only by tests (see {@link Ticker}). */
  volatile Ticker ticker = Ticker.SYSTEM;
  private volatile boolean closed;

  /**
   * @param connect opens the topology, given the client name prefix to set on its connections
   */
  Engine(java.util.function.Function<String, Topology> connect, TurnstileOptions options) {
    CREATED.incrementAndGet();
    this.options = options;
    this.leaseMillis = options.leaseTime().toMillis();
    this.leaseArg = Long.toString(leaseMillis);
    this.commandTimeoutNanos = options.commandTimeout().toNanos();
    this.outages = new Outages(options, () -> waiting.size(), this::leasesRenewed);
    this.telemetry = Telemetry.create(options.observationRegistry());
    byte[] id = new byte[8];
    new SecureRandom().nextBytes(id);
    this.clientId = HexFormat.of().formatHex(id);
    String name = "turnstile:" + clientId;
    this.topology = connect.apply(name);
    if (options.replicaAcks() > 0) {
      Replicas.requireWait(topology, options);
    }
    this.async = topology.async();
    this.pool = new BlockingPool(options.blockingPoolSize(), node -> topology.openBlocking(node, name + ":blocking"));
    this.blocking = new BlockingCommands(this, topology, pool);
    this.acks = new BlockingPool(options.blockingPoolSize(), node -> topology.openBlocking(node, name + ":acks"));
    this.replicas = new Replicas(this, topology, acks);
    this.connector = Executors.newCachedThreadPool(daemon("turnstile-subscriber-" + clientId));
    this.lockCaches = options.lockCaching() ? new LockCache.Registry(options) : null;
    this.subscriptions = new Subscriptions(node -> topology.openSubscriber(node, name + ":subscriber"),
        topology.sharded(), connector);
    this.scheduler = Executors.newSingleThreadScheduledExecutor(daemon("turnstile-watchdog-" + clientId));
    this.releases = new Releases(this, topology, scheduler);
    this.events = Executors.newSingleThreadExecutor(daemon("turnstile-events-" + clientId));
    this.identity = new Identity(this);
    this.inspector = new Inspector(this);
    this.watchdog = new Watchdog(this, scheduler, options.renewInterval().toMillis());
    this.metrics = Metrics.create(options, clientId, pool, watchdog);
    topology.onRecovered(this::recovered);
    topology.onLost(() -> {
      losses.fire(); // a wait on a wake list looks at the connection again
      try {
        events.execute(subscriptions::wakeAll); // off the event loop that reported the drop
      } catch (java.util.concurrent.RejectedExecutionException closed) {
        // Turnstile closed: no waiter left
      }
    });
  }

  static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }

  String newRequestId() {
    return clientId + ":" + requests.incrementAndGet();
  }

  /**
   * Returns a fresh request sequence number: {@code newRequestId()} is the client id, a colon and
   * such a number.
   */
  long newRequestSeq() {
    return requests.incrementAndGet();
  }

  /** Runs {@code task} after {@code delayNanos} on the engine's scheduler (not at all once closed). */
  void schedule(Runnable task, long delayNanos) {
    try {
      scheduler.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closed
    }
  }

  String ownerId(Thread t) {
    return clientId + ":" + t.getId();
  }

  RedisClusterAsyncCommands<String, String> async() {
    return async;
  }

  /** Returns how this engine reaches Redis (for tests). */
  Topology topology() {
    return topology;
  }

  /** Returns the command scripts publish wake-ups with ({@code PUBLISH} or {@code SPUBLISH}). */
  String publishCommand() {
    return topology.publishCommand();
  }

  /** A command failed or went unanswered: let the topology re-check itself (see {@link Topology#suspect}). */
  void suspectTopology() {
    topology.suspect();
  }

  /** Returns the renewal batch of a lease key (see {@link Topology#batchOf}). */
  int batchOf(String key) {
    return topology.batchOf(key);
  }

  // ---------------------------------------------------------------- faults

  /**
   * Returns the future the next recovery event completes: take it before an attempt, and wait on
   * it together with the wake-up, so that no waiter sleeps through Redis coming back.
   */
  CompletableFuture<Void> faults() {
    return faults.next();
  }

  /**
   * Returns the future the next drop of a connection of the main client completes: a wait that
   * watches no command on that connection (a wait on a wake list) ends with it, and finds Redis
   * unreachable, which counts against its call.
   */
  CompletableFuture<Void> losses() {
    return losses.next();
  }

  /** Returns the number of dropped connections and recoveries so far (see {@link Topology#generation}). */
  long generation() {
    return topology.generation.get();
  }

  /** Redis may have come back (a reconnect, a topology change): every waiter attempts again. */
  void recovered() {
    subscriptions.prune(topology::isMaster);
    faults.fire();
    watchdog.renewNow(); // a restart without persistence: holders learn of their loss at once
    // A failover can lose writes that the old primary acknowledged but had not yet replicated.
    // Releases are idempotent by request id, so the recent ones are sent again: a lost release
    // would otherwise leave the hold to expire with its lease while waiters wait for it.
    replays.live(System.nanoTime()).forEach(Runnable::run);
    for (Runnable hook : recoveryHooks) {
      hook.run();
    }
    for (Runnable retry : releases.pendingRetries) {
      retry.run();
    }
  }

  /** The latest releases, sent again on recovery (see {@link #recovered()}). */
  private final ReplayLog replays = new ReplayLog();
  /** Run on recovery: primitives with state to reconcile after a failover (a semaphore's count). */
  private final java.util.Set<Runnable> recoveryHooks = java.util.concurrent.ConcurrentHashMap.newKeySet();

  /**
   * Remembers a release of the hold at {@code key}, to be sent again ({@code resend}) after a
   * recovery until {@code untilNanos} ({@link ReplayLog}: the latest {@value ReplayLog#PER_KEY} per
   * key and {@value ReplayLog#MAX} in all; O(1) amortized).
   */
  void replayOnRecovery(String key, long untilNanos, Runnable resend) {
    replays.add(key, untilNanos, resend, System.nanoTime());
  }

  /** The release log (tests). */
  ReplayLog replayLog() {
    return replays;
  }

  /** Adds or removes a hook run after every recovery. */
  void onRecovery(Runnable hook, boolean on) {
    if (on) {
      recoveryHooks.add(hook);
    } else {
      recoveryHooks.remove(hook);
    }
  }

  /**
   * Whether a failure means "Redis unreachable or not serving right now" (retry once it is
   * back), rather than a bug or a refused argument (report it).
   */
  static boolean isTransient(Throwable t) {
    if (t instanceof RedisCommandExecutionException) {
      String m = String.valueOf(t.getMessage());
      return m.startsWith("LOADING") || m.startsWith("BUSY") || m.startsWith("MASTERDOWN")
          || m.startsWith("CLUSTERDOWN") || m.startsWith("TRYAGAIN") || m.startsWith("READONLY")
          || m.startsWith("NOREPLICAS") || m.startsWith("UNBLOCKED") || m.startsWith("MOVED")
          || m.startsWith("ASK") || m.startsWith("NOTBUSY");
    }
    if (t instanceof AclRefusal) {
      return false;
    }
    if (t instanceof TurnstileException) {
      // our own wrapper (e.g. "cannot connect to Redis (subscriber connection ...)"): as its cause
      return t instanceof Unavailable || (t.getCause() != null && t.getCause() != t && isTransient(t.getCause()));
    }
    return t instanceof RedisException || t instanceof CancellationException
        || t instanceof java.io.IOException || t instanceof TimeoutException;
  }

  /** Redis cannot be used right now (e.g. no master is known for a slot); retried like a lost connection. */
  static final class Unavailable extends TurnstileException {
    private static final long serialVersionUID = 1L;

    Unavailable(String message) {
      super(message);
    }
  }

  /**
   * Returns {@code args} without its trailing optional arguments that hold their defaults: a script
   * defaults a missing trailing argument, and Redis does work for each argument sent, read or not.
   * {@code defaults} are the defaults of the last {@code defaults.length} arguments, in order; an
   * argument that differs from its default is sent with every argument before it.
   */
  static String[] withoutDefaults(String[] args, String... defaults) {
    int first = args.length - defaults.length;
    int n = args.length;
    while (n > first && args[n - 1].equals(defaults[n - 1 - first])) {
      n--;
    }
    return n == args.length ? args : java.util.Arrays.copyOf(args, n);
  }

  /**
   * Runs a script by EVALSHA, falling back to EVAL (which also loads it) on NOSCRIPT. An ACL
   * refusal (of the EVALSHA, or of a command inside the script) fails it with an
   * {@link AclRefusal} that names the refused command.
   */
  <T> CompletableFuture<T> eval(Script s, ScriptOutputType type, String[] keys, String... args) {
    // One completion stage per call on the answered path (this runs on the event loop).
    CompletableFuture<T> result = new CompletableFuture<>();
    CompletableFuture<T> sent;
    try {
      sent = async.<T>evalsha(s.sha, type, keys, args).toCompletableFuture();
    } catch (RuntimeException e) {
      sent = CompletableFuture.failedFuture(e); // e.g. the connection closed with the client: fail the future, never the caller
    }
    sent.whenComplete((value, error) -> {
      if (error == null) {
        outages.reached();
        result.complete(value);
        return;
      }
      Throwable cause = unwrap(error);
      if (cause instanceof RedisNoScriptException
          || (cause.getMessage() != null && cause.getMessage().startsWith("NOSCRIPT"))) {
        outages.reached();
        evalBody(result, s, type, keys, args);
        return;
      }
      failEval(result, cause, "evalsha", s);
    });
    return result;
  }

  /**
   * Runs a script by {@code EVAL} (its body), never by {@code EVALSHA}: it runs in Redis in the
   * order it was sent among the commands of the main connection, which a NOSCRIPT fallback (a
   * second command, sent later) would not. For checks whose meaning depends on that order.
   */
  <T> CompletableFuture<T> evalInOrder(Script s, ScriptOutputType type, String[] keys, String... args) {
    return evalBody(new CompletableFuture<>(), s, type, keys, args);
  }

  /** Sends {@code s} by EVAL and completes {@code result} with its reply or its failure. */
  private <T> CompletableFuture<T> evalBody(CompletableFuture<T> result, Script s, ScriptOutputType type,
      String[] keys, String[] args) {
    async.<T>eval(s.body, type, keys, args).toCompletableFuture().whenComplete((v, e) -> {
      if (e == null) {
        outages.reached();
        result.complete(v);
      } else {
        failEval(result, unwrap(e), "eval", s);
      }
    });
    return result;
  }

  /** Fails {@code result} with {@code error}, as an {@link AclRefusal} naming the command when Redis refused it to this user. */
  private <T> void failEval(CompletableFuture<T> result, Throwable error, String sent, Script s) {
    AclRefusal refused = AclRefusal.of(unwrap(error), sent, s, topology.publishCommand());
    result.completeExceptionally(refused != null ? refused : error);
  }

  static Throwable unwrap(Throwable error) {
    return error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
  }

  /**
   * How long a lock record may outlive its holder's lease: a grant sets the record's expiry to a
   * lease after the end of its token's 2^15 µs window (at most 32.8 ms and 3 ms of rounding after
   * the grant), so that later grants in that window need no {@code PEXPIRE} (lock_acquire.lua,
   * field {@code d}; DESIGN §3).
   */
  static final long RECORD_SPARE_MILLIS = 36;

  // ---------------------------------------------------------------- one-shot commands

  /** Fails fast with a clear message while the connection to Redis is down. */
  void checkConnected(String what) {
    checkOpen(what);
    if (!topology.isOpen()) {
      throw new TurnstileException(what + ": Redis is not reachable (connection down, reconnecting)");
    }
  }

  boolean connected() {
    return topology.isOpen();
  }

  /** Waits for a reply with the command timeout only, never interrupted; any failure throws. */
  <T> T awaitQuietly(CompletableFuture<T> f, String what) {
    try {
      return Waits.get(f, commandTimeoutNanos);
    } catch (TimeoutException e) {
      topology.suspect();
      throw new TurnstileException(what + ": Redis did not answer within "
          + TimeUnit.NANOSECONDS.toMillis(commandTimeoutNanos) + " ms");
    } catch (ExecutionException e) {
      topology.suspect();
      throw failure(what, unwrap(e.getCause()));
    } catch (CancellationException e) {
      throw failure(what, e);
    }
  }

  static TurnstileException failure(String what, Throwable cause) {
    AclRefusal refused = AclRefusal.of(cause, null, null, null);
    if (refused != null) {
      return refused.in(what); // a configuration error: never retried, names the refused command
    }
    if (cause instanceof TurnstileException) {
      return (TurnstileException) cause;
    }
    return new TurnstileException(what + ": " + cause, cause);
  }

  // ---------------------------------------------------------------- acquisition

  /**
   * Waits of a gate's head on the wake list before its attempt after its JVM yielded
   * ({@link #QUEUE_FIRST_NANOS}) that ended without a token: nobody woke this JVM's waiter while it stood back (a test's
   * figure; a release that yields pushes a token, so with the primitive free this stays 0).
   */
  final java.util.concurrent.atomic.LongAdder queueFirstLapsed = new java.util.concurrent.atomic.LongAdder();
  /** Waits before a first attempt on the wake list, begun (a test's figure, with {@link #queueFirstLapsed}). */
  final java.util.concurrent.atomic.LongAdder queueFirstWaits = new java.util.concurrent.atomic.LongAdder();

  /**
   * Subscribes to {@code channel} on the node that serves it now, without waiting for the
   * confirmation ({@link AsyncAcquisition} waits for it).
   *
   * @return the subscription handle; {@link Subscriptions.Sub#close()} it when done
   * @throws Unavailable if no node serves the channel right now
   */
  Subscriptions.Sub subscribe(String channel) {
    return subscriptions.subscribe(channel, topology.nodeOf(channel));
  }

  /** Whether the subscriber connection that would carry {@code channel} is open; starts opening it if not. */
  boolean subscriberOpen(String channel) {
    try {
      return subscriptions.open(topology.nodeOf(channel));
    } catch (RuntimeException e) {
      return false; // no node serves it right now
    }
  }

  /**
   * Returns whether {@code sub} can no longer be waited on: dropped by the server, failed, or its
   * Cluster slot moved.
   */
  boolean stale(Subscriptions.Sub sub) {
    return sub.lost() || sub.ready.isCompletedExceptionally() || movedAway(sub);
  }

  /** Whether a Cluster slot moved: the subscription's node no longer serves its channel. */
  private boolean movedAway(Subscriptions.Sub sub) {
    try {
      return !sub.node.name.equals(topology.nodeOf(sub.channel));
    } catch (TurnstileException e) {
      return false; // no master known right now: keep it until one is
    }
  }

  boolean isClosed() {
    return closed;
  }

  /**
   * Fails an acquisition once this client is closed, before it queues or sends anything.
   *
   * @throws TurnstileException if this engine was closed
   */
  void checkOpen(String what) {
    if (closed) {
      throw new TurnstileException(what + ": Turnstile is closed");
    }
  }

  /**
   * Logs a lease loss on this thread, recording the primitive's kind in the JFR event, and delivers
   * the event to listeners on the event thread.
   */
  void notifyLost(LeaseLostEvent event, List<LeaseLossListener> listeners, Inspection.Kind kind, String describe) {
    logLost(event, kind, describe);
    tellLost(event, listeners);
  }

  /** Logs a lease loss (a WARNING), on the thread that declared it, with the JFR event's primitive. */
  void logLost(LeaseLostEvent event, Inspection.Kind kind, String describe) {
    telemetry.leaseLost(kind, describe, event.name(), event.holder(), event.reason(), event.fencingToken());
    LOG.log(Level.WARNING, "Turnstile lease lost: {0} (fencing token {1}, holder {2}): {3}",
        event.name(), Long.toString(event.fencingToken()), event.holder(), event.reason());
  }

  /** Tells the listeners of a lease loss, on the event thread. */
  void tellLost(LeaseLostEvent event, List<LeaseLossListener> listeners) {
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
    if (lockCaches != null && !closed) {
      // the idle cached grants go first, while the connection is up: other clients need not wait for their leases
      try {
        lockCaches.releaseAll().get(Math.min(commandTimeoutNanos, TimeUnit.SECONDS.toNanos(2)), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
        LOG.log(Level.DEBUG, "releasing the cached lock grants at close: {0}", e.toString());
      }
    }
    closed = true;
    metrics.close();
    watchdog.close();
    scheduler.shutdownNow();
    events.shutdown();
    CompletableFuture<Void> subscribers = subscriptions.closeAll();
    connector.shutdown();
    try {
      // closed before the client below shuts down under them, those still opening (lock caching
      // starts one at a release) as they open
      subscribers.get(Math.min(commandTimeoutNanos, TimeUnit.SECONDS.toNanos(2)), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      LOG.log(Level.DEBUG, "closing the subscriber connections: {0}", e.toString());
    }
    pool.close();
    acks.close();
    topology.close();
    faults.fire();
  }
}
