package io.github.turnstile.bench;

import io.lettuce.core.api.sync.RedisCommands;
import java.util.Map;
import java.util.TreeMap;

/**
 * A snapshot of {@code INFO commandstats}: calls per command. Redis counts commands run inside
 * Lua scripts too, so the totals are "work done by Redis", not round trips. The {@code info}
 * command itself is left out, so taking snapshots does not disturb the numbers.
 */
final class CommandStats {
  final Map<String, Long> calls;

  private CommandStats(Map<String, Long> calls) {
    this.calls = calls;
  }

  static CommandStats take(RedisCommands<String, String> redis) {
    Map<String, Long> m = new TreeMap<>();
    for (String line : redis.info("commandstats").split("\r?\n")) {
      if (!line.startsWith("cmdstat_")) {
        continue;
      }
      int colon = line.indexOf(':');
      String cmd = line.substring("cmdstat_".length(), colon);
      if (cmd.equals("info")) {
        continue;
      }
      for (String field : line.substring(colon + 1).split(",")) {
        if (field.startsWith("calls=")) {
          m.put(cmd, Long.parseLong(field.substring("calls=".length())));
        }
      }
    }
    return new CommandStats(m);
  }

  /** @return calls per command between {@code before} and this snapshot (only nonzero entries) */
  Map<String, Long> since(CommandStats before) {
    Map<String, Long> d = new TreeMap<>();
    calls.forEach((cmd, n) -> {
      long delta = n - before.calls.getOrDefault(cmd, 0L);
      if (delta != 0) {
        d.put(cmd, delta);
      }
    });
    return d;
  }

  /** @return {@code connected_clients} from {@code INFO clients} (this caller's connection included) */
  static long connectedClients(RedisCommands<String, String> redis) {
    for (String line : redis.info("clients").split("\r?\n")) {
      if (line.startsWith("connected_clients:")) {
        return Long.parseLong(line.substring("connected_clients:".length()).trim());
      }
    }
    throw new IllegalStateException("no connected_clients in INFO clients");
  }

  /**
   * @return {@code connected_clients} once it has stopped changing for 100 ms (at most 3 s), so
   *     that connections of clients closed just before are no longer counted in a baseline
   */
  static long settledConnectedClients(RedisCommands<String, String> redis) throws InterruptedException {
    long last = connectedClients(redis);
    for (int i = 0; i < 30; i++) {
      Thread.sleep(100);
      long now = connectedClients(redis);
      if (now == last) {
        return now;
      }
      last = now;
    }
    return last;
  }

  static long total(Map<String, Long> delta) {
    return delta.values().stream().mapToLong(Long::longValue).sum();
  }

  static long scripts(Map<String, Long> delta) {
    return delta.getOrDefault("eval", 0L) + delta.getOrDefault("evalsha", 0L)
        + delta.getOrDefault("evalsha_ro", 0L) + delta.getOrDefault("eval_ro", 0L)
        + delta.getOrDefault("fcall", 0L);
  }
}
