package io.github.turnstile;

import io.lettuce.core.KeyValue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One wait of an acquisition on its primitive's wake list (the token-list tier): a {@code BLPOP}
 * on a connection lent by the engine's blocking pool, driven by callbacks, so that no thread waits
 * for it. A release that finds a waiting mark pushes one wake token; Redis serves the blocked
 * connections of every client in the order they blocked, so the tier is FIFO across clients and
 * a release wakes one waiter in one hop.
 *
 * <p>States: opening (the pool is opening a connection), blocked (the command is sent), ready (its
 * reply came: a token, or the server-side timeout), and then used (the acquisition attempts, and
 * the attempt consumes the token) or abandoned. An abandoned wait never loses a token:
 * <ul>
 *   <li>abandoned while opening: the connection goes back to the pool when it opens, nothing sent;</li>
 *   <li>abandoned while blocked: the command is stopped ({@link BlockingCommands#abandon}: {@code CLIENT
 *       UNBLOCK}, or the connection closed), and a token it took meanwhile, or may have taken, is
 *       handed on ({@code passWakeup});</li>
 *   <li>abandoned when ready with a token the acquisition will not use: the token is handed on.</li>
 * </ul>
 */
final class ListWait implements Wake {
  private static final int OPENING = 0;
  private static final int BLOCKED = 1;
  private static final int READY = 2;
  private static final int DONE = 3;

  private final Engine engine;
  private final String key;
  private final long sliceNanos;
  private final Runnable passWakeup;
  private final CompletableFuture<Boolean> woken = new CompletableFuture<>();
  private final ReentrantLock mu = new ReentrantLock();
  private int state = OPENING; // guarded by mu
  private BlockingPool.Conn conn; // guarded by mu
  private CompletableFuture<KeyValue<String, String>> reply; // guarded by mu
  private long serverEnd; // guarded by mu
  private boolean token; // guarded by mu: READY with a token

  private ListWait(Engine engine, String key, long sliceNanos, Runnable passWakeup) {
    this.engine = engine;
    this.key = key;
    this.sliceNanos = sliceNanos;
    this.passWakeup = passWakeup;
  }

  /**
   * Starts a wait of up to {@code sliceNanos} on {@code key}.
   *
   * @return the wait, or null if every pooled connection is lent out (wait by pub/sub)
   * @throws TurnstileException if no node serves the key right now
   */
  static ListWait start(Engine engine, String key, long sliceNanos, Runnable passWakeup) {
    CompletableFuture<BlockingPool.Conn> lent = engine.pool.lend(engine.topology().nodeOf(key));
    if (lent == null) {
      return null;
    }
    ListWait w = new ListWait(engine, key, sliceNanos, passWakeup);
    lent.whenComplete(w::opened);
    return w;
  }

  @Override
  public CompletableFuture<Boolean> woken() {
    return woken;
  }

  private void opened(BlockingPool.Conn c, Throwable error) {
    if (c == null) {
      woken.completeExceptionally(error); // cannot open one: the acquisition waits by pub/sub
      return;
    }
    long slice = engine.topology().optional.unblockRefused() || c.clientId < 0
        ? Math.min(sliceNanos, BlockingCommands.NO_UNBLOCK_SLICE_NANOS) : sliceNanos;
    CompletableFuture<KeyValue<String, String>> r;
    mu.lock();
    try {
      if (state != OPENING) {
        engine.pool.release(c); // abandoned while it opened: nothing was sent
        return;
      }
      conn = c;
      serverEnd = System.nanoTime() + slice;
      r = c.connection.async().blpop(BlockingCommands.seconds(slice), key).toCompletableFuture();
      reply = r;
      state = BLOCKED;
    } finally {
      mu.unlock();
    }
    r.whenComplete((v, e) -> answered(c, r));
  }

  private void answered(BlockingPool.Conn c, CompletableFuture<KeyValue<String, String>> r) {
    KeyValue<String, String> value = null;
    Throwable error = null;
    try {
      value = r.join();
    } catch (CompletionException | java.util.concurrent.CancellationException e) {
      error = e;
    }
    AclRefusal refused = error == null ? null : AclRefusal.of(error, null, null, null);
    mu.lock();
    try {
      if (state != BLOCKED) {
        return; // abandoned: BlockingCommands.abandon settles the connection and the token
      }
      // a failed command may have taken a token: DONE, and it is handed on below
      state = error != null ? DONE : READY;
      token = value != null;
    } finally {
      mu.unlock();
    }
    if (refused != null) {
      engine.pool.release(c); // refused before it ran: the connection is idle
      woken.completeExceptionally(refused);
    } else if (error != null) {
      engine.pool.discard(c); // failed: whether it took a token is unknown
      engine.suspectTopology();
      passWakeup.run();
      woken.complete(false);
    } else {
      engine.pool.release(c);
      woken.complete(value != null);
    }
  }

  @Override
  public void used() {
    Locks.withLock(mu, () -> {
      if (state == READY) {
        state = DONE;
      }
    });
  }

  @Override
  public void abandon() {
    int was;
    boolean hadToken;
    BlockingPool.Conn c;
    CompletableFuture<KeyValue<String, String>> r;
    long end;
    mu.lock();
    try {
      was = state;
      hadToken = token;
      c = conn;
      r = reply;
      end = serverEnd;
      state = DONE;
    } finally {
      mu.unlock();
    }
    if (was == BLOCKED) {
      engine.blocking.abandon(c, r, end, (late, known) -> {
        if (!known || late != null) {
          passWakeup.run();
        }
      });
    } else if (was == READY && hadToken) {
      passWakeup.run(); // a token this acquisition will not use
    }
  }
}
