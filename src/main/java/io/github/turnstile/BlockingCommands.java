package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Blocking commands on the pooled blocking connections ({@link Engine#pool}) that are no longer
 * wanted: a wait on a wake list ({@link ListWait}) is stopped by {@code CLIENT UNBLOCK} or by
 * closing its connection ({@link #abandon}), and what it did after all is reported late
 * ({@link Abandoned}).
 */
final class BlockingCommands {
  /** Extra client-side wait beyond a BLPOP's server-side timeout before it is abandoned. */
  private static final long BLOCK_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
  /** How long an abandoned blocking command may take to answer its CLIENT UNBLOCK before it is discarded. */
  private static final long UNBLOCK_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  /**
   * The longest a wait on the wake list stays in Redis where this client cannot {@code CLIENT
   * UNBLOCK} it (see {@link #abandon}): a closed connection's command ends in Redis only when Redis
   * reads the close, and at its own timeout at the latest; until then it may take a wake token.
   */
  static final long NO_UNBLOCK_SLICE_NANOS = TimeUnit.SECONDS.toNanos(2);

  /** Told of the late reply of a blocking command that was abandoned. */
  interface Abandoned<T> {
    /**
     * @param lateReply the reply, if it arrived (null: server-side timeout, or unknown)
     * @param known false if the connection had to be closed without a reply, so a reply may
     *     have been produced and lost (e.g. a token popped in flight); told twice then, the second
     *     time once Redis has ended the command for certain (see {@link #close})
     */
    void abandoned(T lateReply, boolean known);
  }

  private final Engine engine;
  private final Topology topology;
  private final BlockingPool pool;

  BlockingCommands(Engine engine, Topology topology, BlockingPool pool) {
    this.engine = engine;
    this.topology = topology;
    this.pool = pool;
  }

  /** A BLPOP/BLMOVE timeout in seconds: whole milliseconds, at least 1 ms (0 would block forever). */
  static double seconds(long sliceNanos) {
    return Math.max(1, TimeUnit.NANOSECONDS.toMillis(sliceNanos + 999_999)) / 1000.0;
  }

  /**
   * Stops a blocked command we no longer want, without waiting, and once its outcome is known tells
   * {@code onAbandon} what it did (it may have raced the stop) and returns or closes the connection:
   * <ul>
   *   <li>{@code CLIENT UNBLOCK} ends it, and the connection is kept;</li>
   *   <li>where this client cannot unblock ({@code CLIENT UNBLOCK} or {@code CLIENT ID} refused, once,
   *       see {@link OptionalCommands}; or the main connection is down), the connection is closed,
   *       which ends the command in Redis, and the pool opens another when next needed.</li>
   * </ul>
   * Leaving the command to its own timeout is no option, even at the caller's deadline (which
   * bounds that timeout): Redis ends timed-out blocked commands on its cron (every 100 ms at the
   * default {@code hz 10}), so the command would stay queued in Redis for up to that long, where it
   * may take a wake token or a permit meant for the next waiter. A command that does not answer its
   * unblock within {@link #UNBLOCK_GRACE_NANOS} has its connection closed too, and its outcome is
   * reported unknown.
   */
  <T> void abandon(BlockingPool.Conn conn, CompletableFuture<T> reply, long serverEnd,
      Abandoned<T> onAbandon) {
    if (reply.isDone()) {
      settle(conn, reply, 0, onAbandon);
      return;
    }
    if (!topology.isOpen()) {
      close(conn, reply, serverEnd, onAbandon); // no connection to send CLIENT UNBLOCK on
      return;
    }
    topology.optional.unblock(conn, topology::unblock).whenComplete((unblocked, e) -> {
      if (Boolean.TRUE.equals(unblocked)) {
        settle(conn, reply, UNBLOCK_GRACE_NANOS, onAbandon);
      } else {
        close(conn, reply, serverEnd, onAbandon);
      }
    });
  }

  /** Waits up to {@code graceNanos} for the reply of an abandoned command: then the connection is idle again; else closed, the outcome unknown. */
  private <T> void settle(BlockingPool.Conn conn, CompletableFuture<T> reply, long graceNanos, Abandoned<T> onAbandon) {
    reply.copy().orTimeout(graceNanos, TimeUnit.NANOSECONDS).whenComplete((v, e) -> {
      if (e == null) {
        pool.release(conn);
        onAbandon.abandoned(v, true);
      } else {
        pool.discard(conn);
        onAbandon.abandoned(null, false);
      }
    });
  }

  /**
   * Closes the connection of an abandoned command that cannot be unblocked: Redis ends the command
   * with the connection. What it did is known only if its reply arrived first (it raced the
   * close); otherwise a reply may have been produced and lost with the connection, and
   * {@code onAbandon} is told so twice: now, and again at {@code serverEnd} (plus a grace), when
   * Redis has ended the command for certain. Redis ends it only when it reads the close (a loaded
   * server may first run commands sent later on other connections), so in between it still waits
   * in Redis, ahead of later waiters, and takes what is pushed for them: the first hand-on may run
   * before that push, the second runs after it
   * ({@code NoAdminTest.aWakeTokenTakenByAClosedConnectionThatRedisStillServesIsHandedOn}).
   */
  private <T> void close(BlockingPool.Conn conn, CompletableFuture<T> reply, long serverEnd, Abandoned<T> onAbandon) {
    engine.abandonedByClose.increment();
    pool.discard(conn);
    reply.copy().orTimeout(UNBLOCK_GRACE_NANOS, TimeUnit.NANOSECONDS).whenComplete((v, e) -> {
      if (e == null) {
        onAbandon.abandoned(v, true);
      } else {
        onAbandon.abandoned(null, false);
        engine.schedule(() -> onAbandon.abandoned(null, false),
            Math.max(0, serverEnd - System.nanoTime()) + BLOCK_GRACE_NANOS);
      }
    });
  }

}
