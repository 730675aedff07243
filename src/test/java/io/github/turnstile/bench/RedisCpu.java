package io.github.turnstile.bench;

import io.lettuce.core.api.sync.RedisCommands;

/**
 * A snapshot of the Redis server's CPU time ({@code INFO cpu}: {@code used_cpu_user} +
 * {@code used_cpu_sys}, the whole process, every thread). The difference of two snapshots divided
 * by the operations run between them is the Redis CPU per operation: what one operation costs the
 * server, whatever the network or the client did meanwhile. Only meaningful when nothing else uses
 * the server in the window (the harness's own {@code INFO} calls are negligible).
 *
 * <pre>
 * RedisCpu before = RedisCpu.take(redis);
 * ... n operations ...
 * double microsPerOp = RedisCpu.take(redis).microsPerOp(before, n);
 * </pre>
 */
final class RedisCpu {
  /** CPU seconds, user + system. */
  final double seconds;
  /** CPU seconds in user mode (the rest of {@link #seconds} is the kernel's: mostly network I/O). */
  final double user;
  /** Read events the server handled ({@code INFO stats total_reads_processed}; -1 if absent). */
  final long reads;

  private RedisCpu(double user, double sys, long reads) {
    this.seconds = user + sys;
    this.user = user;
    this.reads = reads;
  }

  /**
   * Returns the server's CPU time now.
   *
   * @param redis a connection to the measured server
   * @return the server's CPU time now
   */
  static RedisCpu take(RedisCommands<String, String> redis) {
    double user = Double.NaN;
    double sys = Double.NaN;
    for (String line : redis.info("cpu").split("\r?\n")) {
      if (line.startsWith("used_cpu_user:")) {
        user = Double.parseDouble(line.substring("used_cpu_user:".length()).trim());
      } else if (line.startsWith("used_cpu_sys:")) {
        sys = Double.parseDouble(line.substring("used_cpu_sys:".length()).trim());
      }
    }
    if (Double.isNaN(user) || Double.isNaN(sys)) {
      throw new IllegalStateException("no used_cpu_user/used_cpu_sys in INFO cpu");
    }
    long reads = -1;
    for (String line : redis.info("stats").split("\r?\n")) {
      if (line.startsWith("total_reads_processed:")) {
        reads = Long.parseLong(line.substring("total_reads_processed:".length()).trim());
      }
    }
    return new RedisCpu(user, sys, reads);
  }

  /**
   * Returns the server's CPU time between {@code before} and this snapshot, in microseconds.
   *
   * @param before the earlier snapshot
   * @return the server's CPU time between the snapshots, in microseconds
   */
  double micros(RedisCpu before) {
    return (seconds - before.seconds) * 1e6;
  }

  /**
   * Returns the server's CPU time per operation between {@code before} and this snapshot, in
   * microseconds; NaN when no operation ran.
   *
   * @param before the earlier snapshot
   * @param ops the operations run between the snapshots
   * @return microseconds of server CPU per operation
   */
  double microsPerOp(RedisCpu before, long ops) {
    return ops <= 0 ? Double.NaN : micros(before) / ops;
  }
}
