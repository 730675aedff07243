package io.github.turnstile;

import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.lang.System.Logger.Level;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The pub/sub half of waiting: one subscriber connection per node carries the wake-up channels
 * of every primitive this client waits on beyond its blocking connections, however many there
 * are, and the broadcasts (a write release admitting every waiting reader).
 *
 * <p>A waiter {@link #subscribe}s to its primitive's channel (reference-counted: the first local
 * waiter sends {@code SUBSCRIBE}, the last one {@code UNSUBSCRIBE}), waits until the
 * subscription is confirmed, takes {@link Sub#next()} before each attempt, and after a refusal
 * waits on it. Every message on the channel completes it, and so does every (re)confirmation of
 * the subscription, which Lettuce sends after a reconnect: a message is a hint, and a waiter
 * re-attempts after every message and every (re)subscribe. A subscription the server drops by
 * itself (a shard channel whose slot moved) is marked {@link Sub#lost()}, so the waiter
 * subscribes again where the slot now lives.
 */
final class Subscriptions implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  /**
   * How long a subscription nobody waits on any more stays before its UNSUBSCRIBE: a primitive
   * waited on again and again (a read-mostly read/write lock's readers) reuses it instead of
   * paying a SUBSCRIBE and an UNSUBSCRIBE, two round trips on the subscriber connection, per wait.
   */
  static final long LINGER_NANOS = java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(
      Long.getLong("turnstile.subscriptionLingerMillis", 250));

  /** Opens a node's subscriber connection (blocking; run on {@link #connector}). */
  interface Opener {
    StatefulRedisPubSubConnection<String, String> open(String node);
  }

  private final Opener opener;
  private final boolean sharded;
  private final Executor connector;
  private final Map<String, Node> nodes = new ConcurrentHashMap<>();
  /** Guards the reference counts and the order of SUBSCRIBE/UNSUBSCRIBE per channel. */
  private final ReentrantLock lock = new ReentrantLock();
  private volatile boolean closed;

  Subscriptions(Opener opener, boolean sharded, Executor connector) {
    this.opener = opener;
    this.sharded = sharded;
    this.connector = connector;
  }

  /** One channel subscribed on one node, shared by this client's waiters on it. */
  final class Sub {
    final String channel;
    final Node node;
    /** Completes when the subscription is confirmed; fails if it could not be made. */
    final CompletableFuture<Void> ready;
    private final Signal event = new Signal();
    /** Fired by a message {@code r} (a revocation of a cached lock grant: lock_acquire.lua) and when lost. */
    private final Signal revocation = new Signal();
    private int refs = 1; // guarded by lock
    /** When refs last fell to 0 (nanoTime); guarded by lock. */
    private long idleSince;
    /** Whether a check that may unsubscribe it is scheduled; guarded by lock. */
    private boolean checkPending;
    private volatile boolean lost;

    Sub(String channel, Node node, CompletableFuture<Void> ready) {
      this.channel = channel;
      this.node = node;
      this.ready = ready;
    }

    /**
     * Returns the future the next message (or re-subscription) completes. Take it before the
     * attempt whose refusal makes the waiter wait: a message that arrives meanwhile completes it.
     */
    CompletableFuture<Void> next() {
      return event.next();
    }

    void fire() {
      event.fire();
    }

    /**
     * Returns the future the next revocation message ({@code r}) on this channel completes, or
     * the subscription's loss.
     */
    CompletableFuture<Void> nextRevocation() {
      return revocation.next();
    }

    /** Returns whether the server dropped this subscription (its slot moved, or its node left). */
    boolean lost() {
      return lost || node.dead;
    }

    void markLost() {
      lost = true;
      fire();
      revocation.fire();
    }

    /** This waiter no longer needs the subscription. */
    void close() {
      release(this);
    }
  }

  /** The subscriber connection of one node and its subscriptions. */
  final class Node extends RedisPubSubAdapter<String, String> {
    final String name;
    final CompletableFuture<StatefulRedisPubSubConnection<String, String>> connection;
    /** The current subscription per channel; guarded by lock (read lock-free by the listener). */
    final Map<String, Sub> subs = new ConcurrentHashMap<>();
    /** Unsubscriptions sent and not yet confirmed, per channel; guarded by lock. */
    final Map<String, Integer> leaving = new HashMap<>();
    /**
     * Completes once the last SUBSCRIBE/UNSUBSCRIBE was handed to the connection; guarded by lock.
     * Each send is chained on it, so sends go out in call order even while the connection is still
     * opening (callbacks on one future run last-registered first: an UNSUBSCRIBE chained on
     * {@link #connection} would overtake its SUBSCRIBE and leave the channel subscribed).
     */
    private CompletableFuture<StatefulRedisPubSubConnection<String, String>> dispatched;
    volatile boolean dead;

    Node(String name) {
      this.name = name;
      this.connection = CompletableFuture.supplyAsync(() -> {
        StatefulRedisPubSubConnection<String, String> c = opener.open(name);
        c.addListener(this);
        return c;
      }, connector);
      this.dispatched = connection;
    }

    /**
     * A message on {@code channel}, or (null) a (re)confirmation of its subscription: wakes its
     * waiters; {@code r} also revokes a cached lock grant.
     */
    private void received(String channel, String message) {
      Sub s = subs.get(channel);
      if (s != null) {
        s.fire();
        if ("r".equals(message)) {
          s.revocation.fire();
        }
      }
    }

    private void dropped(String channel) {
      lock.lock();
      try {
        Integer n = leaving.get(channel);
        if (n != null) {
          if (n == 1) {
            leaving.remove(channel);
          } else {
            leaving.put(channel, n - 1);
          }
          return; // the confirmation of our own UNSUBSCRIBE
        }
      } finally {
        lock.unlock();
      }
      Sub s = subs.get(channel);
      if (s != null) {
        s.markLost(); // the server dropped it: the waiter re-subscribes where the slot lives now
      }
    }

    @Override
    public void message(String channel, String message) {
      received(channel, message);
    }

    @Override
    public void subscribed(String channel, long count) {
      received(channel, null);
    }

    @Override
    public void unsubscribed(String channel, long count) {
      dropped(channel);
    }

    @Override
    public void smessage(String channel, String message) {
      received(channel, message);
    }

    @Override
    public void ssubscribed(String channel, long count) {
      received(channel, null);
    }

    @Override
    public void sunsubscribed(String channel, long count) {
      dropped(channel);
    }

    /** Sends SUBSCRIBE or UNSUBSCRIBE (sharded on a Redis 7 Cluster), after every earlier send; call under lock. */
    CompletableFuture<Void> send(String channel, boolean subscribe) {
      String command = (sharded ? "s" : "") + (subscribe ? "" : "un") + "subscribe";
      CompletableFuture<Void> reply = new CompletableFuture<>();
      dispatched = dispatched.thenApply(c -> {
        try {
          io.lettuce.core.RedisFuture<Void> f = sharded
              ? (subscribe ? c.async().ssubscribe(channel) : c.async().sunsubscribe(channel))
              : (subscribe ? c.async().subscribe(channel) : c.async().unsubscribe(channel));
          f.whenComplete((v, e) -> {
            if (e == null) {
              reply.complete(null);
            } else {
              reply.completeExceptionally(e);
            }
          });
        } catch (RuntimeException e) {
          reply.completeExceptionally(e);
        }
        return c;
      });
      dispatched.whenComplete((c, e) -> {
        if (e != null) {
          reply.completeExceptionally(e); // the connection could not be opened
        }
      });
      return reply.exceptionallyCompose(e -> {
        // an ACL refusal (the command, or a channel outside the user's patterns) names the command
        AclRefusal refused = AclRefusal.of(e, command, null, null);
        return CompletableFuture.failedFuture(refused != null ? refused : e);
      });
    }

    /** Closes the connection, once it has opened if it is opening; returns when it is closed. */
    CompletableFuture<Void> close() {
      dead = true;
      CompletableFuture<Void> closed = connection.thenCompose(c -> c.isOpen() ? c.closeAsync()
          : CompletableFuture.<Void>completedFuture(null));
      for (Sub s : subs.values()) {
        s.fire();
      }
      return closed;
    }
  }

  /**
   * Subscribes this client to {@code channel} on {@code node} (or joins the subscription another
   * local waiter made). The caller waits for {@link Sub#ready} before its first attempt, and
   * must {@link Sub#close()} the handle when it stops waiting.
   */
  Sub subscribe(String channel, String node) {
    return Locks.locked(lock, () -> {
      if (closed) {
        throw new TurnstileException("Turnstile is closed");
      }
      Node n = nodes.get(node);
      if (n == null || n.dead || n.connection.isCompletedExceptionally()) {
        n = new Node(node);
        nodes.put(node, n);
      }
      Sub s = n.subs.get(channel);
      if (s != null && !s.lost && !s.ready.isCompletedExceptionally()) {
        s.refs++;
        return s;
      }
      CompletableFuture<Void> ready = n.send(channel, true);
      Sub created = new Sub(channel, n, ready);
      n.subs.put(channel, created);
      ready.whenComplete((v, e) -> {
        if (e != null) {
          LOG.log(Level.DEBUG, "subscribing to {0} on {1} failed: {2}", channel, node, e.toString());
          Locks.withLock(lock, () -> created.node.subs.remove(channel, created)); // the next waiter tries again
        }
      });
      return created;
    });
  }

  /** Whether {@code node}'s subscriber connection is open; if there is none, starts opening it. */
  boolean open(String node) {
    Node n = nodes.get(node);
    if (n != null && !n.dead && n.connection.isDone() && !n.connection.isCompletedExceptionally()) {
      return true;
    }
    Locks.withLock(lock, () -> {
      Node m = nodes.get(node);
      if (!closed && (m == null || m.dead || m.connection.isCompletedExceptionally())) {
        nodes.put(node, new Node(node));
      }
    });
    return false;
  }

  private void release(Sub s) {
    Locks.withLock(lock, () -> {
      if (--s.refs > 0) {
        return;
      }
      if (LINGER_NANOS > 0 && !s.lost && !s.node.dead && !closed && !s.ready.isCompletedExceptionally()) {
        // kept for a while: the next waiter on the channel reuses it (see LINGER_NANOS)
        s.idleSince = System.nanoTime();
        if (!s.checkPending) {
          s.checkPending = true;
          lingerCheck(s, LINGER_NANOS);
        }
        return;
      }
      unsubscribe(s);
    });
  }

  /** Schedules the check that unsubscribes {@code s} once it has been idle for the linger time. */
  private void lingerCheck(Sub s, long delayNanos) {
    // on the JDK's one delay-scheduler thread (the check is short, and sends asynchronously), not a
    // thread per subscription going idle
    Executor later = CompletableFuture.delayedExecutor(delayNanos, java.util.concurrent.TimeUnit.NANOSECONDS,
        Runnable::run);
    try {
      later.execute(() -> Locks.withLock(lock, () -> {
        if (s.refs > 0) {
          s.checkPending = false; // in use again: its next release schedules a check
          return;
        }
        long idle = System.nanoTime() - s.idleSince;
        if (idle < LINGER_NANOS && !closed) {
          lingerCheck(s, LINGER_NANOS - idle);
          return;
        }
        s.checkPending = false;
        unsubscribe(s);
      }));
    } catch (java.util.concurrent.RejectedExecutionException e) {
      s.checkPending = false;
      unsubscribe(s); // closed: let it go now
    }
  }

  /** Drops {@code s} (nobody waits on it) and sends its UNSUBSCRIBE if it is still subscribed; call under lock. */
  private void unsubscribe(Sub s) {
    Node n = s.node;
    if (n.subs.remove(s.channel, s) && !s.lost && !n.dead && !s.ready.isCompletedExceptionally()) {
      n.leaving.merge(s.channel, 1, Integer::sum);
      n.send(s.channel, false);
    }
  }

  /**
   * Replaces a node's subscriber connection that did not confirm a subscription in time: it is
   * closed, its subscriptions count as lost, and their waiters subscribe again on a new one.
   */
  void reset(Node node) {
    Locks.withLock(lock, () -> {
      if (nodes.remove(node.name, node)) {
        node.close();
      }
    });
  }

  /**
   * Wakes every waiter on every subscription, as a message would: the connection to Redis
   * dropped, and a waiter parked until a message or its slice (up to a lease) would not notice
   * the outage, nor count it against its outage tolerance, until then. Each re-checks the
   * connection and counts the outage; wake-ups are hints.
   */
  void wakeAll() {
    for (Node n : nodes.values()) {
      for (Sub s : n.subs.values()) {
        s.fire();
      }
    }
  }

  /**
   * Closes the subscriber connections of nodes that are no longer masters (a Cluster failover):
   * their subscriptions count as lost, and their waiters subscribe again on the new master.
   */
  void prune(java.util.function.Predicate<String> isMaster) {
    Locks.withLock(lock, () -> {
      for (Map.Entry<String, Node> e : nodes.entrySet()) {
        if (!isMaster.test(e.getKey())) {
          nodes.remove(e.getKey());
          e.getValue().close();
        }
      }
    });
  }

  /** Returns the number of channels subscribed now (for tests and diagnostics). */
  int channels() {
    int n = 0;
    for (Node node : nodes.values()) {
      n += node.subs.size();
    }
    return n;
  }

  /**
   * Describes every subscription held now, one line each: channel, references, whether its linger
   * check is scheduled, how long it has been idle, lost, confirmed (for diagnostics in tests).
   */
  String describe() {
    return Locks.locked(lock, () -> {
      StringBuilder b = new StringBuilder();
      long now = System.nanoTime();
      for (Node node : nodes.values()) {
        for (Sub s : node.subs.values()) {
          b.append(node.name).append(' ').append(s.channel).append(" refs=").append(s.refs)
              .append(" checkPending=").append(s.checkPending)
              .append(" idleMs=").append(s.refs > 0 ? -1 : (now - s.idleSince) / 1_000_000)
              .append(" lost=").append(s.lost).append(" ready=").append(s.ready.isDone())
              .append(" leaving=").append(node.leaving.getOrDefault(s.channel, 0)).append('\n');
        }
      }
      return b.toString();
    });
  }

  /** Returns the number of subscriber connections (open or opening). */
  int connections() {
    return nodes.size();
  }

  /**
   * Closes every subscriber connection; the future completes when all are closed, those still
   * opening once they have opened (the caller shuts the client down only then: a connection the
   * client closes under a close in flight makes Lettuce log "Connection is already closed").
   */
  CompletableFuture<Void> closeAll() {
    java.util.List<CompletableFuture<Void>> all = new java.util.ArrayList<>();
    Locks.withLock(lock, () -> {
      closed = true;
      for (Node n : nodes.values()) {
        all.add(n.close().exceptionally(e -> null)); // one that never opened has nothing to close
      }
      nodes.clear();
    });
    return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
  }

  @Override
  public void close() {
    closeAll();
  }
}
