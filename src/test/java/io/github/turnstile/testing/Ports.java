package io.github.turnstile.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Listening ports for the test servers ({@link RedisServerProcess}, Sentinels, Cluster nodes) and
 * proxies ({@link TcpProxy}): never a port another test JVM may also use, and never one this JVM
 * used before.
 *
 * <p>Why not port 0: the operating system hands out ports from its ephemeral range, and a port a
 * test's killed server just gave up can go to a server that another surefire fork starts a moment
 * later. The first test's client, still reconnecting, then lands on the second test's server: it
 * connects as that server's default user and re-sends its queued commands there (a Cluster test
 * that checks every connection is its restricted user saw such a stranger). So each JVM takes its
 * ports, in turn, from a block of its own below the ephemeral range (Linux: 32768 and up); a
 * Cluster node's bus port (port + 10000) stays below it too. The block is the surefire fork's
 * ({@code turnstile.test.fork}, {@code "fork ${surefire.forkNumber}"}); a JVM without one (an IDE,
 * a child JVM, a benchmark) takes one of the other blocks by its process id.
 */
final class Ports {
  /** Servers and proxies listen in [FIRST, FIRST + BLOCKS * BLOCK); bus ports are 10000 higher. */
  private static final int FIRST = 12_000;
  private static final int BLOCK = 625;
  private static final int BLOCKS = 16;
  private static final int BUS_OFFSET = 10_000;
  private static final int BASE = FIRST + BLOCK * block();
  private static final AtomicInteger NEXT = new AtomicInteger();

  private Ports() {
  }

  /**
   * A port of this JVM's block that nothing listens on now, nor on its bus port; each call gives
   * the next one (after the whole block, it starts over).
   *
   * @return a port that can be bound on the loopback address
   */
  static int next() {
    for (int i = 0; i < BLOCK; i++) {
      int port = BASE + Math.floorMod(NEXT.getAndIncrement(), BLOCK);
      if (bindable(port) && bindable(port + BUS_OFFSET)) {
        return port;
      }
    }
    throw new IllegalStateException("no free port in " + BASE + ".." + (BASE + BLOCK - 1));
  }

  private static int block() {
    String fork = System.getProperty("turnstile.test.fork", "").replaceFirst("^fork ", "");
    if (fork.matches("\\d+") && Integer.parseInt(fork) > 0) {
      return (Integer.parseInt(fork) - 1) % (BLOCKS / 2);
    }
    return BLOCKS / 2 + (int) (ProcessHandle.current().pid() % (BLOCKS / 2));
  }

  private static boolean bindable(int port) {
    try (ServerSocket ss = new ServerSocket(port, 1, InetAddress.getByName(RedisServerProcess.HOST))) {
      return ss.isBound();
    } catch (IOException e) {
      return false;
    }
  }
}
