package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Keeps every lease this client holds alive with one batched {@code renew.lua} call per tick
 * (per hash slot on a Cluster, all sent together), whatever the number of leases, and detects lost
 * leases.
 *
 * <p>Each tick (every {@code renewInterval}) sends one renewal for all registered leases unless
 * the previous one is still unanswered (then it waits: piling renewals onto a stalled connection
 * helps nothing). Between ticks a cheap local scan marks lost every lease whose confirmed instant
 * has passed. A lease unregistered before its renewal is answered is simply not updated; the
 * renew script checks the request id, so a renewal can never revive a released or re-acquired
 * lock.
 */
final class Watchdog implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile.Watchdog");

  /** The most leases one renew.lua call renews: it stays well under a millisecond in Redis. */
  static final int MAX_PER_SCRIPT = 200;

  private final Engine engine;
  private final Set<Lease> leases = ConcurrentHashMap.newKeySet();
  private final AtomicBoolean inFlight = new AtomicBoolean();
  private final long renewIntervalNanos;
  private final ScheduledFuture<?> task;
  private volatile long nextRenewalNanos;
  private final ScheduledExecutorService scheduler;

  Watchdog(Engine engine, ScheduledExecutorService scheduler, long renewIntervalMillis) {
    this.engine = engine;
    this.scheduler = scheduler;
    this.renewIntervalNanos = TimeUnit.MILLISECONDS.toNanos(renewIntervalMillis);
    this.nextRenewalNanos = System.nanoTime() + renewIntervalNanos;
    long scan = Math.max(10, Math.min(renewIntervalMillis, 250));
    this.task = scheduler.scheduleWithFixedDelay(this::tick, scan, scan, TimeUnit.MILLISECONDS);
  }

  void register(Lease lease) {
    leases.add(lease);
  }

  void unregister(Lease lease) {
    leases.remove(lease);
  }

  int size() {
    return leases.size();
  }

  /** Reads the engine's lease clock ({@link Lease#grantedAtNanos} is on it). */
  long engineTicks() {
    return engine.ticker.read();
  }

  /** The leases this client holds now (a live view, for {@link Turnstile#activity()}). */
  java.util.Collection<Lease> leases() {
    return java.util.Collections.unmodifiableSet(leases);
  }

  /**
   * Renews every lease now rather than at the next tick (after a reconnect: a Redis that
   * restarted without its data answers the renewal with "gone", and the holders learn of the
   * loss at once instead of up to a renew interval later), and rewrites the identity record.
   */
  void renewNow() {
    nextRenewalNanos = engine.ticker.read();
    engine.identity.rewriteSoon(); // the same Redis may have lost the identity record too
    try {
      scheduler.execute(this::tick);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closed
    }
  }

  private void tick() {
    try {
      long now = engine.ticker.read();
      for (Lease lease : leases) {
        if (!lease.alive(now)) {
          leases.remove(lease);
        }
      }
      if (now - nextRenewalNanos >= 0 && !leases.isEmpty() && inFlight.compareAndSet(false, true)) {
        nextRenewalNanos = now + renewIntervalNanos;
        renew(now);
      }
      engine.identity.tick(now, leases);
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "watchdog tick failed", e);
    }
  }

  /**
   * Sends one renewal per batch (one batch on a single server; one per hash slot on a Cluster,
   * where a script may only touch one slot's keys). The batches go out together, so a tick costs
   * one round trip per Redis node.
   */
  private void renew(long sentAt) {
    Map<Integer, List<Lease>> batches = new HashMap<>();
    for (Lease l : leases) {
      batches.computeIfAbsent(engine.batchOf(l.key), b -> new ArrayList<>()).add(l);
    }
    List<CompletableFuture<?>> replies = new ArrayList<>(batches.size());
    for (List<Lease> batch : batches.values()) {
      // bounded work per script: a client holding many leases sends several scripts, pipelined
      for (int from = 0; from < batch.size(); from += MAX_PER_SCRIPT) {
        replies.add(renew(batch.subList(from, Math.min(batch.size(), from + MAX_PER_SCRIPT)), sentAt));
      }
    }
    // A renewal stuck on a dead node (a Cluster master that failed over) must not stop the next
    // ticks: after one interval (or the command timeout, if shorter) the next tick sends again,
    // and the topology is re-read so that it goes to the new master.
    long patience = Math.min(engine.options.commandTimeout().toNanos(), renewIntervalNanos);
    CompletableFuture.allOf(replies.toArray(new CompletableFuture<?>[0]))
        .orTimeout(patience, TimeUnit.NANOSECONDS)
        .whenComplete((v, e) -> {
          if (e != null) {
            engine.suspectTopology();
          }
          inFlight.set(false);
        });
  }

  private CompletableFuture<?> renew(List<Lease> batch, long sentAt) {
    List<String> keys = new ArrayList<>(batch.size());
    String[] args = new String[batch.size() * 2];
    Lease.Registration[] registrations = new Lease.Registration[batch.size()];
    for (int i = 0; i < batch.size(); i++) {
      Lease l = batch.get(i);
      keys.add(l.key);
      Lease.Registration reg = l.registration;
      LockCache cache = l.cache;
      if (reg != null) {
        keys.add(reg.stateKey());
        registrations[i] = reg;
      } else if (cache != null) {
        keys.add(cache.fenceKey);
      }
      args[2 * i] = cache != null && reg == null ? "~" + l.requestId : l.requestId;
      args[2 * i + 1] = Long.toString(l.leaseMillis);
    }
    return engine.<List<Object>>eval(Script.RENEW, ScriptOutputType.MULTI, keys.toArray(new String[0]), args)
        .whenComplete((result, error) -> {
          if (error != null) {
            LOG.log(Level.DEBUG, "lease renewal failed, will retry next tick: {0}", error.toString());
            batch.forEach(Lease::renewalFailed);
            return;
          }
          for (int i = 0; i < batch.size(); i++) {
            Lease l = batch.get(i);
            if (result.get(i) instanceof String refusal) {
              // the ACL refuses this lease's renewal (renew.lua asked before writing): the lease
              // runs on in Redis until it ends, and the next tick asks again
              LOG.log(Level.WARNING, "Redis refused to renew the lease {0} (request {1}) to this user (ACL): {2}"
                  + " (see docs/ACL.md, \"Least privilege\")", l.key, l.requestId, refusal);
              l.renewalFailed();
              continue;
            }
            if (result.get(i) instanceof List<?> cached) {
              // a cached lock grant, still held: {1, server µs, waiting}
              l.renewed(sentAt);
              LockCache cache = l.cache;
              if (cache != null) {
                cache.confirmed(l, cached, sentAt);
              }
              continue;
            }
            long reply = (Long) result.get(i);
            Lease.Registration reg = registrations[i];
            if (reg == null ? reply == 1L : reg.intact(reply, l)) {
              l.renewed(sentAt);
            } else if (leases.remove(l)) {
              l.renewalFailed();
              l.lose(reg == null || reply < 0
                  ? "Redis refused the renewal: the lease key expired, was deleted or was taken over"
                  : SemaphoreBooks.grantLost(reply, "at a renewal"));
            }
          }
        });
  }

  @Override
  public void close() {
    task.cancel(false);
    leases.clear();
  }
}
