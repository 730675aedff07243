package io.github.turnstile;

import io.lettuce.core.KeyValue;
import io.lettuce.core.ScriptOutputType;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * Takes {@link Inspection}s: one inspect.lua call on the primitive's keys, then one pipelined read
 * of the identity records of the clients it names that are not cached yet. An identity never
 * changes for a client id, so records are cached (at most {@value #CACHE} clients); a thread name
 * missing from a cached record is read again.
 */
final class Inspector {
  static final int CACHE = 1024;
  private static final String[] FIXED = {"name", "host", "pid"};

  private final Engine engine;
  private final String prefix;
  /** Guards {@link #cache} (a lock, not {@code synchronized}: no virtual thread is pinned). */
  private final java.util.concurrent.locks.ReentrantLock cacheLock = new java.util.concurrent.locks.ReentrantLock();
  private final Map<String, Map<String, String>> cache = new LinkedHashMap<>(64, 0.75f, true) {
    private static final long serialVersionUID = 1L;

    @Override
    protected boolean removeEldestEntry(Map.Entry<String, Map<String, String>> eldest) {
      return size() > CACHE;
    }
  };

  Inspector(Engine engine) {
    this.engine = engine;
    this.prefix = engine.options.keyPrefix();
  }

  /**
   * One part of a holder found in Redis, before the identity is known; {@code cached}: a lock grant
   * that its client caches (field c), idle or used by a thread that only that client knows.
   */
  private record Found(String client, String owner, boolean writer, int permits, long token, Instant since,
      Duration left, boolean cached) {}

  Inspection inspect(Inspection.Kind kind, String name) {
    java.util.Objects.requireNonNull(kind, "kind must not be null");
    Turnstile.checkName(name);
    String what = "inspecting " + kind.label() + " '" + name + "'";
    engine.checkConnected(what);
    String tag = "{" + prefix + ":" + name + "}";
    String[] keys = switch (kind) {
      case LOCK -> new String[] {tag + ":lock"};
      case READ_WRITE_LOCK -> new String[] {tag + ":rw:w", tag + ":rw:readers", tag + ":rw:wwait", tag + ":rw:rwait"};
      default -> new String[] {tag + ":s", tag + ":s:l", tag + ":s:w"};
    };
    List<Object> r = engine.awaitQuietly(
        engine.<List<Object>>eval(Script.INSPECT, ScriptOutputType.MULTI, keys, kind.label(), engine.leaseArg), what);
    long now = num(r.get(0));
    Instant at = Instant.ofEpochMilli(now);
    List<Found> found = new ArrayList<>();
    int count;
    int waiting;
    int free = -1;
    boolean exists;
    switch (kind) {
      case LOCK -> {
        String owner = str(r.get(1));
        long token = str(r.get(2)).isEmpty() ? 0 : Long.parseLong(str(r.get(2)));
        long pttl = num(r.get(3));
        exists = pttl != -2;
        if (!owner.isEmpty()) {
          Found f = holder(owner, false, token, pttl);
          if (r.size() > 5 && !str(r.get(5)).isEmpty()) {
            // which thread, if any, only that client knows
            f = new Found(f.client(), null, false, 1, token, f.since(), f.left(), true);
          }
          found.add(f);
        }
        count = found.size();
        waiting = (int) Math.max(0, num(r.get(4)));
      }
      case READ_WRITE_LOCK -> {
        String owner = str(r.get(1));
        long token = str(r.get(2)).isEmpty() ? 0 : Long.parseLong(str(r.get(2)));
        long pttl = num(r.get(3));
        long readers = num(r.get(4));
        exists = pttl != -2 || readers > 0;
        if (!owner.isEmpty()) {
          found.add(holder(owner, true, token, pttl));
        }
        for (int i = 7; i + 1 < r.size(); i += 2) {
          String request = str(r.get(i));
          int colon = request.indexOf(':');
          found.add(new Found(colon < 0 ? request : request.substring(0, colon), null, false, 1, 0, null, null, false));
        }
        count = (int) Math.min(Integer.MAX_VALUE, found.size() - (r.size() - 7) / 2 + readers);
        waiting = (int) Math.min(Integer.MAX_VALUE, num(r.get(5)) + num(r.get(6)));
      }
      default -> {
        exists = num(r.get(1)) == 1;
        if (!exists) {
          count = 0;
          waiting = 0;
          break;
        }
        free = (int) Long.parseLong(str(r.get(3)));
        long registrations = num(r.get(5));
        long marks = num(r.get(6));
        waiting = (int) Math.min(Integer.MAX_VALUE, marks > 0 ? marks : num(r.get(7)));
        long notHolding = 0;
        for (int i = 8; i + 3 < r.size(); i += 4) {
          String member = str(r.get(i));
          long until = (long) Double.parseDouble(str(r.get(i + 1)));
          int permits = (int) Long.parseLong(str(r.get(i + 2)));
          String epoch = str(r.get(i + 3));
          int colon = member.lastIndexOf(':');
          String client = colon < 0 ? member : member.substring(0, colon);
          if (until <= now || permits <= 0 || !member.substring(colon + 1).equals(epoch)) {
            notHolding++; // run out (not reclaimed yet), replaced, or holding nothing now
            continue;
          }
          long micros = epoch.isEmpty() ? 0 : Long.parseLong(epoch);
          found.add(new Found(client, null, false, permits, 0,
              micros > 0 ? Instant.EPOCH.plus(micros, ChronoUnit.MICROS) : null, Duration.ofMillis(until - now), false));
        }
        count = (int) Math.min(Integer.MAX_VALUE, registrations - notHolding);
      }
    }
    Map<String, Map<String, String>> ids = identities(found);
    List<Inspection.Holder> holders = new ArrayList<>(found.size());
    for (Found f : found) {
      Map<String, String> id = ids.getOrDefault(f.client(), Map.of());
      String pid = id.get("pid");
      holders.add(new Inspection.Holder(f.client(), id.get("name"), id.get("host"),
          pid == null ? -1 : Long.parseLong(pid), f.owner(), f.owner() == null ? null : id.get("t:" + f.owner()),
          f.writer(), f.permits(), f.token(), f.since(), f.left(), f.cached()));
    }
    return new Inspection(kind, name, at, exists, holders, count, waiting, free);
  }

  private static Found holder(String owner, boolean writer, long token, long pttl) {
    int colon = owner.indexOf(':');
    String client = colon < 0 ? owner : owner.substring(0, colon);
    String who = colon < 0 ? null : owner.substring(colon + 1);
    // the token is the server's time in µs at the grant (DESIGN §3), unless grants come faster
    Instant since = token > 1_000_000_000_000_000L ? Instant.EPOCH.plus(token, ChronoUnit.MICROS) : null;
    return new Found(client, who, writer, 1, token, since, pttl >= 0 ? Duration.ofMillis(pttl) : null, false);
  }

  /** The identity records of the clients named, from the cache or one pipelined read of those missing. */
  private Map<String, Map<String, String>> identities(List<Found> found) {
    Map<String, Set<String>> wanted = new LinkedHashMap<>();
    for (Found f : found) {
      Set<String> fields = wanted.computeIfAbsent(f.client(), c -> new LinkedHashSet<>(List.of(FIXED)));
      if (f.owner() != null && !f.owner().startsWith("h")) {
        fields.add("t:" + f.owner());
      }
    }
    Map<String, Map<String, String>> out = new HashMap<>();
    Map<String, CompletableFuture<List<KeyValue<String, String>>>> reads = new LinkedHashMap<>();
    Locks.withLock(cacheLock, () -> {
      for (Map.Entry<String, Set<String>> w : wanted.entrySet()) {
        Map<String, String> cached = cache.get(w.getKey());
        if (cached != null && cached.keySet().containsAll(w.getValue().stream().filter(f -> f.startsWith("t:")).toList())) {
          out.put(w.getKey(), cached);
        }
      }
    });
    for (Map.Entry<String, Set<String>> w : wanted.entrySet()) {
      if (!out.containsKey(w.getKey())) {
        reads.put(w.getKey(), engine.async().hmget(Identity.key(prefix, w.getKey()),
            w.getValue().toArray(new String[0])).toCompletableFuture());
      }
    }
    if (reads.isEmpty()) {
      return out;
    }
    engine.awaitQuietly(CompletableFuture.allOf(reads.values().toArray(new CompletableFuture<?>[0])),
        "reading client identities");
    for (Map.Entry<String, CompletableFuture<List<KeyValue<String, String>>>> e : reads.entrySet()) {
      Map<String, String> record = new HashMap<>();
      for (KeyValue<String, String> kv : e.getValue().join()) {
        if (kv.hasValue()) {
          record.put(kv.getKey(), kv.getValue());
        }
      }
      if (record.containsKey("host")) {
        Locks.withLock(cacheLock, () -> {
          Map<String, String> merged = new HashMap<>(cache.getOrDefault(e.getKey(), Map.of()));
          merged.putAll(record);
          cache.put(e.getKey(), Map.copyOf(merged));
          out.put(e.getKey(), cache.get(e.getKey()));
        });
      } else {
        out.put(e.getKey(), record);
      }
    }
    return out;
  }

  private static long num(Object o) {
    return o instanceof Long ? (Long) o : Long.parseLong(String.valueOf(o));
  }

  private static String str(Object o) {
    return o == null ? "" : String.valueOf(o);
  }
}
