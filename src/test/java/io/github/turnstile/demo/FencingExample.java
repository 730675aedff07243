package io.github.turnstile.demo;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.github.turnstile.testing.RedisServerProcess;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Kleppmann's scenario, runnable: client A takes the lock and stalls (a GC pause, a frozen VM) past
 * its lease; client B takes the lock and writes; A wakes up and writes too. The downstream store
 * checks the fencing token of every write and refuses A's, because B's token is larger.
 *
 * <pre>
 * mvn -B -q test-compile exec:java@fencing
 * </pre>
 *
 * The stall is simulated by cutting A's lease short in Redis ({@code PEXPIRE} on the lock key),
 * which is what Redis sees when A's watchdog cannot renew: the key expires while A still runs.
 */
public final class FencingExample {

  /**
   * The downstream store: it remembers the largest token it accepted and refuses any write that
   * carries a smaller one (an equal one is the same acquisition writing again). In SQL:
   * {@code UPDATE t SET v = ?, fence = ? WHERE id = ? AND fence <= ?}.
   */
  static final class FencedStore {
    private long fence = Long.MIN_VALUE;
    private String value;

    synchronized boolean write(String newValue, long token) {
      if (token < fence) {
        return false;
      }
      fence = token;
      value = newValue;
      return true;
    }

    synchronized String value() {
      return value;
    }
  }

  private FencingExample() {}

  /**
   * Runs the scenario against {@code REDIS_URI}, or a throwaway redis-server.
   *
   * @param args ignored
   * @throws Exception if the scenario cannot run
   */
  public static void main(String[] args) throws Exception {
    String uri = System.getenv("REDIS_URI");
    RedisServerProcess server = null;
    if (uri == null || uri.isBlank()) {
      server = RedisServerProcess.start();
      uri = server.uri();
    }
    boolean ok;
    try {
      ok = run(uri);
    } catch (io.github.turnstile.TurnstileException | IllegalArgumentException e) {
      System.out.println("Redis: cannot use REDIS_URI " + uri + ": " + e.getMessage()
          + " (unset REDIS_URI and the example starts its own Redis)");
      ok = false;
    } finally {
      if (server != null) {
        server.close();
      }
    }
    System.exit(ok ? 0 : 1);
  }

  /** @return whether the store refused the stale write and kept the new holder's */
  static boolean run(String uri) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(Duration.ofSeconds(2)).build();
    FencedStore store = new FencedStore();
    String name = "fencing-example:" + System.nanoTime();
    try (Turnstile a = Turnstile.connect(uri, options); Turnstile b = Turnstile.connect(uri, options)) {
      DistributedLock lockA = a.lock(name);
      lockA.lock();
      long tokenA = lockA.fencingToken();
      System.out.println("A holds the lock, fencing token " + tokenA + "; A stalls...");

      // A's stall outlives its lease: in Redis the lock expires while A is frozen.
      io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(uri);
      try (var c = client.connect()) {
        c.sync().pexpire("{turnstile:" + name + "}:lock", 1);
      } finally {
        client.shutdown();
      }

      DistributedLock lockB = b.lock(name);
      if (!lockB.tryLock(5, TimeUnit.SECONDS)) {
        System.out.println("B did not get the lock");
        return false;
      }
      long tokenB = lockB.fencingToken();
      boolean bWrote = store.write("written by B", tokenB);
      System.out.println("B holds the lock, fencing token " + tokenB + "; B writes: "
          + (bWrote ? "accepted" : "REFUSED"));
      lockB.unlock();

      // A wakes up, unaware, and writes with its old token.
      boolean aWrote = store.write("written by A", tokenA);
      System.out.println("A wakes up and writes with token " + tokenA + ": " + (aWrote ? "ACCEPTED" : "refused"));
      try {
        lockA.unlock();
      } catch (IllegalMonitorStateException e) {
        System.out.println("A's unlock: " + e.getClass().getSimpleName() + ": " + e.getMessage());
      }
      System.out.println("store holds: " + store.value());
      return bWrote && !aWrote && "written by B".equals(store.value());
    }
  }
}
