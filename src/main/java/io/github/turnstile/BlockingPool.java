package io.github.turnstile;

import io.lettuce.core.api.StatefulRedisConnection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * A bounded pool of connections reserved for commands that block a connection: BLPOP and BLMOVE
 * (the engine's waiting pool), or WAIT (a second pool, for replica acknowledgements, so that
 * acknowledgements never queue behind waiters). Connections are opened lazily, reused, and
 * discarded when a command was abandoned in a state that cannot be trusted.
 *
 * <p>Waiters never queue for a connection: {@link #lend} answers at once when every connection
 * is lent out, and the engine then waits by pub/sub instead. {@link #borrow} waits (in FIFO
 * order), for the acknowledgement pool.
 */
final class BlockingPool implements AutoCloseable {

  /**
   * A pooled connection, the server-side id needed to {@code CLIENT UNBLOCK} it, and the node it
   * is connected to ({@link Topology#nodeOf}: always {@code ""} on a single server).
   */
  static final class Conn {
    final StatefulRedisConnection<String, String> connection;
    final long clientId;
    final String node;
    /** Run once the connection is closed (the topology stops watching it). */
    private final Runnable onClose;

    Conn(StatefulRedisConnection<String, String> connection, long clientId, String node, Runnable onClose) {
      this.connection = connection;
      this.clientId = clientId;
      this.node = node;
      this.onClose = onClose;
    }

    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    /**
     * Closes the connection once. A connection that dropped was closed by the topology already
     * (it never reconnects); Lettuce logs a WARNING "Connection is already closed" for every
     * second close, which every waiter whose connection dropped in an outage caused.
     */
    CompletableFuture<Void> close() {
      onClose.run();
      if (!closed.compareAndSet(false, true)
          || (connection instanceof io.lettuce.core.RedisChannelHandler
              && ((io.lettuce.core.RedisChannelHandler<?, ?>) connection).isClosed())) {
        return CompletableFuture.completedFuture(null);
      }
      return connection.closeAsync();
    }
  }

  private final Semaphore permits;
  /** Idle connections per node; all of them count against the bound on open connections. */
  private final java.util.Map<String, ConcurrentLinkedDeque<Conn>> idle =
      new java.util.concurrent.ConcurrentHashMap<>();
  private final int size;
  private final Function<String, Conn> factory;
  private final AtomicInteger open = new AtomicInteger();
  /** Connections opened since the pool was created (for tests and the cost figures). */
  private final java.util.concurrent.atomic.LongAdder opened = new java.util.concurrent.atomic.LongAdder();
  private static final long CONNECT_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(15);
  private final java.util.concurrent.ExecutorService connector =
      java.util.concurrent.Executors.newCachedThreadPool(Engine.daemon("turnstile-connector"));
  private volatile boolean closed;

  BlockingPool(int size, Function<String, Conn> factory) {
    this.size = size;
    this.permits = new Semaphore(size, true);
    this.factory = factory;
  }

  /**
   * Borrows a connection to {@code node}, waiting up to {@code timeoutNanos} for one to be free,
   * never interrupted (an interrupt is re-asserted on return).
   *
   * @return a connection, or {@code null} if none became free in time
   */
  Conn borrow(String node, long timeoutNanos) {
    if (!Waits.acquire(permits, timeoutNanos)) {
      return null;
    }
    Conn c = idleOrEvict(node);
    if (c != null) {
      return c;
    }
    // Open a new one on the connector thread: Lettuce's connect is interrupted by the caller's
    // interrupt, which must not break an uninterruptible lock(), nor leak a half-made connection.
    CompletableFuture<Conn> opening = startOpening(node);
    try {
      return counted(Waits.get(opening, CONNECT_TIMEOUT_NANOS));
    } catch (java.util.concurrent.TimeoutException e) {
      // still opening: it goes to the idle list when ready
      opening.whenComplete((conn, error) -> {
        if (conn != null) {
          release(counted(conn));
        } else {
          permits.release();
        }
      });
      throw new TurnstileException("could not open a blocking connection within "
          + TimeUnit.NANOSECONDS.toSeconds(CONNECT_TIMEOUT_NANOS) + " s");
    } catch (java.util.concurrent.ExecutionException e) {
      permits.release();
      throw Engine.failure("cannot open a blocking connection", e.getCause());
    }
  }

  /**
   * Lends a connection to {@code node} without waiting on the calling thread (which may be an
   * event-loop thread): an idle one at once, or one opened on the connector thread; never waits
   * for another borrower to give one back.
   *
   * @return null if every connection is lent out; otherwise a future of the connection, which
   *     fails if it cannot be opened (the permit is then given back). A borrower that no longer
   *     wants a connection still opening must {@link #release} it when it opens.
   */
  CompletableFuture<Conn> lend(String node) {
    if (!permits.tryAcquire()) {
      return null;
    }
    Conn c = idleOrEvict(node);
    if (c != null) {
      return CompletableFuture.completedFuture(c);
    }
    CompletableFuture<Conn> opened = new CompletableFuture<>();
    try {
      startOpening(node).whenComplete((conn, error) -> {
        if (conn != null) {
          opened.complete(counted(conn));
        } else {
          permits.release();
          opened.completeExceptionally(Engine.unwrap(error));
        }
      });
    } catch (TurnstileException e) {
      opened.completeExceptionally(e);
    }
    return opened;
  }

  /** Starts opening a connection to {@code node} on the connector thread; if closed, gives the permit back. */
  private CompletableFuture<Conn> startOpening(String node) {
    try {
      return CompletableFuture.supplyAsync(() -> factory.apply(node), connector);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      permits.release(); // closed: the connector thread is gone
      throw new TurnstileException("cannot open a blocking connection: Turnstile is closed");
    }
  }

  /**
   * With a permit taken: an idle open connection to {@code node}, or null after making room for a
   * new one (closing an idle one elsewhere if the bound is reached).
   */
  private Conn idleOrEvict(String node) {
    Conn c;
    ConcurrentLinkedDeque<Conn> mine = idle.get(node);
    while (mine != null && (c = mine.pollFirst()) != null) {
      if (c.connection.isOpen()) {
        return c;
      }
      destroy(c);
    }
    if (open.get() >= size) {
      evictIdleElsewhere(node); // keep open connections within the bound across nodes
    }
    return null;
  }

  /** Counts a connection just opened. */
  private Conn counted(Conn c) {
    open.incrementAndGet();
    opened.increment();
    return c;
  }

  /** Closes one idle connection to another node (Cluster: the waits moved to other masters). */
  private void evictIdleElsewhere(String node) {
    for (java.util.Map.Entry<String, ConcurrentLinkedDeque<Conn>> e : idle.entrySet()) {
      if (!e.getKey().equals(node)) {
        Conn c = e.getValue().pollLast();
        if (c != null) {
          destroy(c);
          return;
        }
      }
    }
  }

  /** Returns a connection that is idle (no command in flight). */
  void release(Conn c) {
    if (closed) {
      destroy(c);
    } else {
      idle.computeIfAbsent(c.node, n -> new ConcurrentLinkedDeque<>()).addFirst(c);
    }
    permits.release();
  }

  /** Closes a connection whose state is unknown (a blocking command may still be running). */
  void discard(Conn c) {
    destroy(c);
    permits.release();
  }

  private final java.util.Queue<CompletableFuture<Void>> closing = new ConcurrentLinkedDeque<>();

  private void destroy(Conn c) {
    open.decrementAndGet();
    CompletableFuture<Void> f = c.close();
    closing.add(f);
    f.whenComplete((v, e) -> closing.remove(f));
  }

  /** Returns connections lent out now (or being opened for a borrower); for the metrics gauge. */
  int inUse() {
    return size - permits.availablePermits();
  }

  /** Returns borrowers waiting for a connection; for the metrics gauge. */
  int waiting() {
    return permits.getQueueLength();
  }

  /** Returns the bound on connections. */
  int size() {
    return size;
  }

  /** Returns connections currently open (idle or borrowed). */
  int openConnections() {
    return open.get();
  }

  /** Returns how many connections this pool has opened since it was created. */
  long opened() {
    return opened.sum();
  }

  @Override
  public void close() {
    closed = true;
    connector.shutdown();
    for (ConcurrentLinkedDeque<Conn> q : idle.values()) {
      Conn c;
      while ((c = q.pollFirst()) != null) {
        destroy(c);
      }
    }
    // wait (briefly) for the closes, so that a client shutdown right after does not close twice
    try {
      CompletableFuture.allOf(closing.toArray(new CompletableFuture<?>[0])).get(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      // closing is best effort
    }
  }
}
