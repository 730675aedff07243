package io.github.turnstile;

import io.lettuce.core.ConnectionState;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.StatefulRedisConnectionImpl;
import io.lettuce.core.api.StatefulConnection;
import java.lang.System.Logger.Level;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The commands a client uses when Redis lets it, and does without when it does not, each detected
 * once per client (README, "Least privilege"; DESIGN §14):
 * <ul>
 *   <li>{@code CLIENT SETNAME}: names the connections ({@code CLIENT LIST} shows
 *       {@code turnstile:<id>:...}); without it they stay unnamed;</li>
 *   <li>{@code CLIENT ID}: the id of a blocking connection, for {@code CLIENT UNBLOCK}; asked only
 *       when the handshake ({@code HELLO 3}) did not give it (RESP2);</li>
 *   <li>{@code CLIENT UNBLOCK} ({@code @admin}): a waiter that gives up (deadline, interrupt, recovery
 *       event, close) ends its blocking command and the connection is reused; without it the
 *       connection is closed instead, which ends the command in Redis, and a new one is opened
 *       when next needed (DESIGN §5, "Giving up");</li>
 *   <li>{@code INFO} ({@code @dangerous}): the server version on a Cluster (sharded pub/sub from
 *       7.0), read only when the handshake did not give it.</li>
 * </ul>
 *
 * <p>A <b>refusal</b> is an error reply that is not transient ({@link Engine#isTransient}):
 * {@code NOPERM} (an ACL), an unknown command or subcommand (renamed away, or not offered by a
 * managed service), or any other error the server gives for it. The first refusal of a command is
 * logged once (INFO) and the client never sends that command again; while it is being detected,
 * other callers wait for the verdict rather than send it too, so {@code ACL LOG} holds at most one
 * refusal per command and client. A transient failure (a dropped connection, {@code LOADING})
 * decides nothing.
 */
final class OptionalCommands {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  private static final CompletableFuture<Boolean> NO = CompletableFuture.completedFuture(false);
  private static final CompletableFuture<Boolean> YES = CompletableFuture.completedFuture(true);

  /** One synchronous command, sent until refused. */
  private static final class Probe {
    final String command;
    final String without;
    /** Serializes the sends until the first verdict, so that one client is refused at most once. */
    final ReentrantLock deciding = new ReentrantLock();
    volatile boolean decided;
    volatile boolean refused;

    Probe(String command, String without) {
      this.command = command;
      this.without = without;
    }

    /** Runs {@code send} unless refused before; returns null if refused (now or before). */
    <T> T run(Supplier<T> send) {
      if (refused) {
        return null;
      }
      if (decided) {
        return call(send);
      }
      deciding.lock();
      try {
        if (refused) {
          return null;
        }
        T value = call(send);
        decided = true;
        return value;
      } finally {
        deciding.unlock();
      }
    }

    private <T> T call(Supplier<T> send) {
      try {
        return send.get();
      } catch (RedisException e) {
        if (!isRefusal(e)) {
          throw e;
        }
        refuse(e);
        return null;
      }
    }

    void refuse(Throwable e) {
      if (!refused) {
        refused = true;
        decided = true;
        LOG.log(Level.INFO, "Redis refused {0} to this client ({1}): {2} (README, \"Least privilege\")",
            command, Engine.unwrap(e).getMessage(), without);
      }
    }
  }

  private final Probe naming = new Probe("CLIENT SETNAME", "its connections stay unnamed");
  private final Probe ids = new Probe("CLIENT ID",
      "a waiter that gives up closes its blocking connection instead of unblocking it");
  private final Probe info = new Probe("INFO", "the server version is assumed to be 7.0 or later");
  /**
   * The verdict on CLIENT UNBLOCK: null while unknown; a future while the first one is in flight
   * (others wait on it); completed true once one was accepted, false once one was refused.
   */
  private final AtomicReference<CompletableFuture<Boolean>> unblocking = new AtomicReference<>();

  /** Returns whether a server's error reply refuses the command for good (not a transient state). */
  static boolean isRefusal(Throwable e) {
    Throwable c = Engine.unwrap(e);
    return c instanceof AclRefusal
        || (c instanceof RedisCommandExecutionException && !Engine.isTransient(c));
  }

  /** Names a connection ({@code CLIENT SETNAME}, sent by {@code setName}) unless this client was refused that before. */
  void name(Supplier<String> setName) {
    naming.run(setName);
  }

  /**
   * Returns the server-side id of {@code c}: from its handshake ({@code HELLO 3} answers it), else
   * by {@code CLIENT ID} (sent by {@code clientId}) unless refused before or not needed
   * ({@code CLIENT UNBLOCK} refused); -1 if unknown.
   */
  long idOf(StatefulConnection<String, String> c, Supplier<Long> clientId) {
    ConnectionState state = handshake(c);
    Long id = state == null ? null : state.getConnectionId();
    if (id != null) {
      return id;
    }
    if (unblockRefused()) {
      return -1;
    }
    Long asked = ids.run(clientId);
    return asked == null ? -1 : asked;
  }

  /**
   * Returns the major server version: from the handshake of {@code c} ({@code HELLO 3}), else from
   * {@code INFO server} (sent by {@code infoServer}) unless refused; -1 if unknown.
   */
  int majorVersion(StatefulConnection<String, String> c, Supplier<String> infoServer) {
    ConnectionState state = handshake(c);
    String version = state == null ? null : state.getRedisVersion();
    if (version != null && !version.isBlank()) {
      return major(version);
    }
    String reply = info.run(infoServer);
    if (reply == null) {
      return -1;
    }
    for (String line : reply.split("\r?\n")) {
      if (line.startsWith("redis_version:")) {
        return major(line.substring("redis_version:".length()).trim());
      }
    }
    return -1;
  }

  /** The major number of a version string ("7.2.6" gives 7; 0 if it has none). */
  static int major(String version) {
    int dot = version.indexOf('.');
    try {
      return Integer.parseInt(dot < 0 ? version : version.substring(0, dot));
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  /** What Lettuce learned from the connection's handshake, or null (not Lettuce's own class). */
  private static ConnectionState handshake(StatefulConnection<String, String> c) {
    return c instanceof StatefulRedisConnectionImpl ? ((StatefulRedisConnectionImpl<?, ?>) c).getConnectionState() : null;
  }

  /** Returns whether {@code CLIENT UNBLOCK} was refused to this client. */
  boolean unblockRefused() {
    CompletableFuture<Boolean> v = unblocking.get();
    return v != null && v.isDone() && !v.join();
  }

  /**
   * Unblocks {@code conn}'s blocked command ({@code CLIENT UNBLOCK}, through {@code send}) unless
   * this client was refused that before. The first one decides: callers that come while it is in
   * flight wait for its verdict.
   *
   * @param send sends {@code CLIENT UNBLOCK <id> TIMEOUT} for it
   * @return completes true once Redis accepted the unblock; false if it could not be sent (no id,
   *     refused now or before, or a transient failure): then the caller closes the connection
   */
  CompletableFuture<Boolean> unblock(BlockingPool.Conn conn, Function<BlockingPool.Conn, CompletableFuture<?>> send) {
    if (conn.clientId < 0) {
      return NO;
    }
    while (true) {
      CompletableFuture<Boolean> verdict = unblocking.get();
      if (verdict == null) {
        CompletableFuture<Boolean> probe = new CompletableFuture<>();
        if (!unblocking.compareAndSet(null, probe)) {
          continue;
        }
        send(conn, send).whenComplete((ok, e) -> {
          if (ok == null) {
            unblocking.compareAndSet(probe, null); // a transient failure decides nothing
          }
          probe.complete(Boolean.TRUE.equals(ok));
        });
        return probe;
      }
      if (verdict.isDone() && !verdict.join()) {
        return NO;
      }
      return verdict.thenCompose(ok -> ok ? send(conn, send).thenApply(Boolean.TRUE::equals) : NO);
    }
  }

  /** Sends one unblock: true if accepted, false if refused (the verdict becomes false), null if it failed transiently. */
  private CompletableFuture<Boolean> send(BlockingPool.Conn conn, Function<BlockingPool.Conn, CompletableFuture<?>> send) {
    CompletableFuture<?> sent;
    try {
      sent = send.apply(conn);
    } catch (RuntimeException e) {
      sent = CompletableFuture.failedFuture(e);
    }
    return sent.handle((r, e) -> {
      if (e == null) {
        unblocking.compareAndSet(null, YES); // (while the first is in flight, its probe completes true)
        return Boolean.TRUE;
      }
      if (isRefusal(e)) {
        CompletableFuture<Boolean> before = unblocking.getAndSet(NO);
        if (before != NO) {
          LOG.log(Level.INFO, "Redis refused CLIENT UNBLOCK to this client ({0}): a waiter that gives up"
              + " closes its blocking connection instead, and a new one is opened when next needed"
              + " (README, \"Least privilege\")", Engine.unwrap(e).getMessage());
        }
        return Boolean.FALSE;
      }
      return null;
    });
  }
}
