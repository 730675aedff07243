package io.github.turnstile;

import java.lang.System.Logger.Level;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * Releases: waiting briefly for a release's reply, never through an outage ({@link #release}), and
 * sending an idempotent release again after transient failures, once Redis is up, until its lease
 * would have run out ({@link #retrying}); a recovery event sends a release still waiting for its
 * reply again at once ({@link #pendingRetries}, run by {@link Engine#recovered()}).
 */
final class Releases {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  /** How often an outage is re-checked while no reconnect event arrives, and the pause between re-sends after a transient error. */
  private static final long RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  /**
   * How long {@code unlock()} and {@code release()} wait for their reply before they finish
   * locally and leave the release to the background: Redis answers a healthy release in well
   * under a millisecond, so a longer wait means it is paused, failing over or unreachable.
   */
  static final long RELEASE_PATIENCE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

  /** Releases waiting for a reply, to be sent again at the next recovery event (see {@link #retrying}). */
  final java.util.Set<Runnable> pendingRetries = java.util.concurrent.ConcurrentHashMap.newKeySet();

  private final Engine engine;
  private final Topology topology;
  private final ScheduledExecutorService scheduler;
  private final long commandTimeoutNanos;

  Releases(Engine engine, Topology topology, ScheduledExecutorService scheduler) {
    this.engine = engine;
    this.topology = topology;
    this.scheduler = scheduler;
    this.commandTimeoutNanos = engine.options.commandTimeout().toNanos();
  }

  /**
   * Waits for a release's reply, but never through an outage: if Redis is unreachable (the
   * connection is down, or goes down) or slow (no reply within {@link #RELEASE_PATIENCE_NANOS}),
   * this returns null, so {@code unlock()} and {@code release()} finish locally, and the release
   * goes on in the background ({@code done}). The patience is the command timeout if shorter.
   *
   * @param done the release, re-sent after transient failures (see {@link #retrying})
   * @return the reply, or null if the release was left to complete in the background
   * @throws TurnstileException if the release failed for a reason other than an outage
   */
  <T> T release(CompletableFuture<T> done, String what) {
    long start = System.nanoTime();
    long patience = Math.min(commandTimeoutNanos, RELEASE_PATIENCE_NANOS);
    while (topology.isOpen() && System.nanoTime() - start < patience) {
      try {
        // in slices: a connection that drops meanwhile ends the wait at once
        return Waits.get(done, Math.min(RECHECK_NANOS, patience - (System.nanoTime() - start)));
      } catch (TimeoutException e) {
        continue;
      } catch (ExecutionException | CancellationException e) {
        Throwable cause = e instanceof ExecutionException ? Engine.unwrap(e.getCause()) : e;
        if (!Engine.isTransient(cause)) {
          throw Engine.failure(what, cause);
        }
      }
      break;
    }
    return null;
  }

  /**
   * Sends a command that is idempotent (a release by request id), and sends it again after each
   * transient failure, once the connection is up, until it is answered or {@code untilNanos}
   * passes (the lease it releases has run out by then anyway).
   *
   * @return completes with the reply, or with the failure that ended the retries
   */
  <T> CompletableFuture<T> retrying(Supplier<CompletableFuture<T>> send, long untilNanos) {
    CompletableFuture<T> result = new CompletableFuture<>();
    retry(send.get(), send, untilNanos, result);
    return result;
  }

  private <T> void retry(CompletableFuture<T> f, Supplier<CompletableFuture<T>> send, long untilNanos,
      CompletableFuture<T> result) {
    // No reply within the command timeout counts as a transient failure: the copy may be queued
    // for a dead Cluster master's connection. A later reply of it is ignored (the command is
    // idempotent: the copy that runs second answers "already done").
    CompletableFuture<T> bounded = Timer.orTimeout(f.copy(), commandTimeoutNanos);
    // a recovery event (a reconnect, a new Cluster topology) while the copy waits: send it again
    // now rather than after the command timeout
    Runnable onRecovery = () -> bounded.completeExceptionally(new TimeoutException("recovery event"));
    pendingRetries.add(onRecovery);
    bounded.whenComplete((v, e) -> pendingRetries.remove(onRecovery));
    bounded.whenComplete((v, e) -> {
      if (e == null) {
        result.complete(v);
        return;
      }
      Throwable cause = Engine.unwrap(e);
      if (cause instanceof TimeoutException) {
        topology.suspect();
      }
      if (!(Engine.isTransient(cause) || cause instanceof TimeoutException) || engine.isClosed()
          || System.nanoTime() - untilNanos >= 0) {
        LOG.log(Level.DEBUG, "gave up re-sending a release: {0}", cause.toString());
        result.completeExceptionally(cause);
        return;
      }
      whenUp(() -> retry(send.get(), send, untilNanos, result), untilNanos,
          () -> result.completeExceptionally(cause));
    });
  }

  /**
   * Runs {@code r} once the main connection is up (checked every {@link #RECHECK_NANOS}), or
   * {@code giveUp} if {@code untilNanos} passes first or the engine closes.
   */
  private void whenUp(Runnable r, long untilNanos, Runnable giveUp) {
    try {
      scheduler.schedule(() -> {
        if (engine.isClosed() || System.nanoTime() - untilNanos >= 0) {
          giveUp.run();
        } else if (topology.isOpen()) {
          r.run();
        } else {
          whenUp(r, untilNanos, giveUp);
        }
      }, RECHECK_NANOS, TimeUnit.NANOSECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      giveUp.run(); // closed
    }
  }
}
