package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Replica acknowledgement ({@link TurnstileOptions#replicaAcks()}): after a grant, waits until
 * enough replicas have it ({@code WAIT}, on connections of their own), and tells a fault that cut
 * the acknowledgement from an answer. Checks at connect that Redis runs {@code WAIT} for this
 * client.
 */
final class Replicas {
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

  private final Engine engine;
  private final TurnstileOptions options;
  private final Topology topology;
  /** Connections for WAIT (replica acknowledgements): separate, so they never queue behind waiters. */
  private final BlockingPool acks;
  private final long commandTimeoutNanos;

  Replicas(Engine engine, Topology topology, BlockingPool acks) {
    this.engine = engine;
    this.options = engine.options;
    this.topology = topology;
    this.acks = acks;
    this.commandTimeoutNanos = options.commandTimeout().toNanos();
  }

  /**
   * With {@code replicaAcks} set: fails at once, naming the option, if Redis does not run
   * {@code WAIT} for this client (an ACL without it, a managed service that refuses it), rather
   * than at the first acquisition. Closes the topology when it fails.
   */
  static void requireWait(Topology topology, TurnstileOptions options) {
    String option = "replicaAcks(" + options.replicaAcks() + ", " + options.replicaAckTimeout().toMillis() + " ms)";
    try {
      topology.probeWait();
    } catch (RuntimeException e) {
      topology.close();
      Throwable cause = Engine.unwrap(e);
      if (OptionalCommands.isRefusal(cause)) {
        throw new TurnstileException(option + " needs WAIT, which Redis refused to this client: "
            + cause.getMessage() + ". Grant +wait (README, \"Least privilege\"), or connect without"
            + " replicaAcks", cause);
      }
      throw new TurnstileException("cannot check that Redis runs WAIT, which " + option + " needs: " + cause, cause);
    }
  }

  /**
   * With {@link TurnstileOptions#replicaAcks()} set, waits until that many replicas of the node
   * serving {@code leaseKey} have everything this node has done up to now, including the
   * acquisition that just wrote {@code leaseKey}; otherwise returns at once.
   *
   * <p>{@code WAIT} counts the writes of its own connection, and the main connection, shared by
   * every thread, must not block. So on a connection of the acknowledgement pool (never the
   * waiters' pool, so acknowledgements do not queue behind waiters) it sends a write, then
   * {@code WAIT replicas timeout}, pipelined. Replication is one ordered stream per node, so
   * acknowledging this later write acknowledges the acquisition too. The write renews the hold's
   * own lease, just written: where the lease key names its request ({@code request} not null),
   * by {@code renew.lua} for that one lease, which writes only if field {@code r} is still
   * {@code request} (a holder paused past its lease between the grant and this must not set the
   * expiry of another's hold, and must learn it lost); sent by {@code EVAL}, so that it runs
   * before the {@code WAIT} whatever the script cache holds. Otherwise (a semaphore call's memo)
   * {@code PEXPIRE leaseKey lease}.
   *
   * @param request the request id in field {@code r} of {@code leaseKey}, or null if it has none
   * @throws NotReplicated if fewer replicas acknowledged within the timeout
   * @throws TurnstileException if Redis failed, no connection was free in time, or the hold is
   *     gone or no longer this request's
   */
  void awaitReplicas(String leaseKey, String request) {
    int replicas = options.replicaAcks();
    if (replicas == 0) {
      return;
    }
    BlockingPool.Conn conn = acks.borrow(topology.nodeOf(leaseKey), commandTimeoutNanos);
    if (conn == null) {
      throw new TurnstileException("no connection free within the command timeout to await"
          + " replica acknowledgement");
    }
    long timeoutMillis = options.replicaAckTimeout().toMillis();
    RedisClusterAsyncCommands<String, String> on = conn.connection.async();
    CompletableFuture<Boolean> renewed = request == null
        ? on.pexpire(leaseKey, engine.leaseMillis).toCompletableFuture()
        : on.<List<Object>>eval(Script.RENEW.body, ScriptOutputType.MULTI, new String[] {leaseKey}, request, engine.leaseArg)
            .toCompletableFuture().thenApply(r -> Long.valueOf(1).equals(r.get(0)));
    CompletableFuture<Long> acked = on.waitForReplication(replicas, timeoutMillis).toCompletableFuture();
    long acks;
    try {
      boolean held = engine.awaitQuietly(renewed, "replica acknowledgement");
      acks = engine.awaitQuietly(acked, "replica acknowledgement");
      this.acks.release(conn);
      if (!held) {
        throw new TurnstileException("the hold vanished (expired or taken by another request) before its"
            + " replica acknowledgement");
      }
    } catch (RuntimeException e) {
      if (!(e instanceof TurnstileException && renewed.isDone() && acked.isDone())) {
        this.acks.discard(conn);
      }
      throw e;
    }
    if (acks < replicas) {
      throw new NotReplicated("only " + acks + " of " + replicas + " replicas acknowledged within "
          + timeoutMillis + " ms (replicaAcks)");
    }
  }

  /**
   * Whether a failure of {@link #awaitReplicas} is a fault that cut the acknowledgement (the
   * connection reset, no reply came, no connection could be opened, the hold was no longer on the
   * node asked), so that the hold's fate is unknown, rather than an answer: too few replicas
   * ({@link NotReplicated}), an ACL refusal, or another error Redis gave.
   */
  static boolean cutsAcknowledgement(RuntimeException e) {
    return !(e instanceof NotReplicated || e instanceof AclRefusal
        || (e.getCause() != null && !Engine.isTransient(e.getCause())));
  }
}
