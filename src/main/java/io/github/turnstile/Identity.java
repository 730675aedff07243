package io.github.turnstile;

import io.lettuce.core.ScriptOutputType;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * This client's identity record in Redis: {@code {prefix:}:client:<client id>}, a hash with its
 * id, host, process id, start time, application name ({@link TurnstileOptions#clientName()}) and
 * the names of the threads that hold something ({@code t:<thread id>}, at most
 * {@value #MAX_THREADS}). Stored once per client, never per acquisition: written when the client
 * connects (before {@code connect} returns, so that the first hold is named as soon as it is
 * granted), then kept by the watchdog (identity.lua) once per lease for as long as the client is
 * open, whether it holds anything or not, and sooner only when a holding thread is not named in it
 * yet (at most once per watchdog scan) or after a reconnect (a Redis that restarted or failed over
 * may have lost it). It lives three leases, so it outlives every hold its client took; a client
 * that is gone (closed or crashed) stops rewriting it and it expires. The hash tag
 * {@code {prefix:}} (an empty name, which no primitive can have) keeps every client record in one
 * slot, apart from every primitive.
 */
final class Identity {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile.Identity");
  /** The most thread names one record carries (bounded work and memory); others are reported by id. */
  static final int MAX_THREADS = 64;

  private final Engine engine;
  final String key;
  private final long leaseNanos;
  /** The write in flight (its reply, completed once the retry bookkeeping is done); null if none. */
  private final AtomicReference<CompletableFuture<Long>> inFlight = new AtomicReference<>();
  private volatile boolean disabled;
  private volatile long nextWriteNanos;
  /** The threads named in the record as last written (written by one write at a time). */
  private volatile Map<Long, String> named = Map.of();
  /**
   * This process's host name, looked up once per JVM (the first connect pays a slow name lookup,
   * if any; no acquisition does).
   */
  private static volatile String host;

  Identity(Engine engine) {
    this.engine = engine;
    this.key = key(engine.options.keyPrefix(), engine.clientId);
    this.leaseNanos = TimeUnit.MILLISECONDS.toNanos(engine.leaseMillis);
    this.nextWriteNanos = engine.ticker.read();
  }

  static String key(String prefix, String clientId) {
    return "{" + prefix + ":}:client:" + clientId;
  }

  /**
   * Writes the record now (its fixed fields, no thread name) and waits for Redis's answer, at most
   * the command timeout: called once, when the client connects, so that the record is in Redis
   * before the first acquisition's result is returned. Never fails the connection: a refusal by
   * ACL disables the record (as in {@link #tick}); any other failure (or no answer in time) leaves
   * the write to the watchdog's next scan. If the watchdog's first scan has already sent the
   * record (a connect slower than a scan), that write is the one waited for.
   */
  void writeAtConnect() {
    CompletableFuture<Long> sent = write(engine.ticker.read(), true, new LinkedHashMap<>());
    if (sent == null) {
      sent = inFlight.get();
      if (sent == null) {
        return; // disabled, or the scan's write has been answered already
      }
    }
    try {
      sent.get(engine.options.commandTimeout().toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // logged (and the retry scheduled) by write's own completion
    }
  }

  /**
   * Makes the record due at the next watchdog scan (after a reconnect: a Redis that restarted
   * without its data, or a replica promoted before the record reached it, no longer has it).
   */
  void rewriteSoon() {
    nextWriteNanos = engine.ticker.read();
  }

  /**
   * Called on every watchdog scan (the watchdog's thread): writes the record when it is due (once
   * per lease, whether the client holds anything or not, so that it never expires while the client
   * is open), or when it names no holding thread that holds now.
   */
  void tick(long now, Collection<Lease> leases) {
    if (disabled || inFlight.get() != null) {
      return;
    }
    boolean periodic = now - nextWriteNanos >= 0;
    Map<Long, String> threads;
    if (periodic) {
      // the whole record again, naming the threads that hold now (older names are dropped)
      threads = new LinkedHashMap<>();
    } else {
      // a thread not named yet holds something: name it too, keeping the names written since the
      // last periodic write (threads taking turns on a hot lock then cost one write each, once)
      threads = null;
      for (Lease l : leases) {
        if (l.threadId >= 0 && !named.containsKey(l.threadId) && named.size() < MAX_THREADS) {
          threads = new LinkedHashMap<>(named);
          break;
        }
      }
      if (threads == null) {
        return;
      }
    }
    for (Lease l : leases) {
      if (l.threadId >= 0 && threads.size() < MAX_THREADS) {
        threads.putIfAbsent(l.threadId, l.holder);
      }
    }
    write(now, periodic, threads);
  }

  /** Sends identity.lua with these thread names; null if a write is already in flight. */
  private CompletableFuture<Long> write(long now, boolean periodic, Map<Long, String> threads) {
    CompletableFuture<Long> done = new CompletableFuture<>();
    if (disabled || !inFlight.compareAndSet(null, done)) {
      return null;
    }
    if (host == null) {
      host = hostName();
    }
    // the fixed fields: id, host, pid, started (ms since the epoch, this client's clock), name
    List<String> args = new ArrayList<>(List.of(Long.toString(3 * engine.leaseMillis), "id", engine.clientId,
        "host", host, "pid", Long.toString(ProcessHandle.current().pid()),
        "started", Long.toString(engine.startedAtMillis)));
    if (engine.options.clientName() != null) {
      args.add("name");
      args.add(engine.options.clientName());
    }
    for (Map.Entry<Long, String> t : threads.entrySet()) {
      args.add("t:" + t.getKey());
      args.add(t.getValue());
    }
    if (periodic) {
      nextWriteNanos = now + leaseNanos;
    }
    named = threads;
    // Engine.eval never throws: a failure to send fails its future
    engine.<Long>eval(Script.IDENTITY, ScriptOutputType.INTEGER, new String[] {key}, args.toArray(new String[0]))
        .whenComplete((v, e) -> {
          if (e != null) {
            Throwable cause = Engine.unwrap(e);
            if (cause instanceof AclRefusal) {
              // a user whose keys exclude the record: inspections name this client by its id only
              disabled = true;
              LOG.log(Level.INFO, "not storing this client''s identity in Redis: {0}", cause.getMessage());
            } else {
              LOG.log(Level.DEBUG, "identity record not written, will retry: {0}", cause.toString());
              nextWriteNanos = engine.ticker.read();
              named = Map.of();
            }
          }
          inFlight.set(null);
          if (e != null) {
            done.completeExceptionally(e);
          } else {
            done.complete(v);
          }
        });
    return done;
  }

  static String hostName() {
    String env = System.getenv("HOSTNAME");
    if (env != null && !env.isBlank()) {
      return env;
    }
    try {
      return java.net.InetAddress.getLocalHost().getHostName();
    } catch (java.io.IOException | RuntimeException e) {
      return "unknown";
    }
  }
}
