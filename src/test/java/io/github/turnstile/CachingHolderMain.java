package io.github.turnstile;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A client of {@link LockCachingHistoryTest} in a JVM of its own, to be killed with kill -9 while it
 * caches the lock. Args: redis-uri, lock name, lease ms, client index, clients. Prints
 * {@code CLIENT <id>} once connected, then per hold {@code A <thread> <token> <startNanos>} when
 * acquired, {@code E <thread> <endNanos>} (the last instant the thread saw it held) just before its
 * unlock, and {@code L <thread>} if that unlock threw {@link LockLostException}; and every 200 ms
 * {@code T <takes>}, the grants taken from its cache so far. Both JVMs read
 * {@link System#nanoTime()} from the same monotonic clock (Linux's {@code CLOCK_MONOTONIC}).
 */
public final class CachingHolderMain {
  private CachingHolderMain() {}

  public static void main(String[] args) throws Exception {
    Turnstile turnstile = Turnstile.connect(args[0], TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[2]))).lockCaching(true).build());
    RedisLock lock = (RedisLock) turnstile.lock(args[1]);
    int me = Integer.parseInt(args[3]);
    int clients = Integer.parseInt(args[4]);
    System.out.println("CLIENT " + lock.engine.clientId);
    AtomicBoolean stop = new AtomicBoolean();
    for (int t = 0; t < 4; t++) {
      String thread = "t" + t;
      TestSupport.start("child-" + t, () -> LockCachingHistoryTest.work(lock, me, clients, stop,
          new LockCachingHistoryTest.Events() {
            @Override public void acquired(long token, long startNanos) {
              System.out.println("A " + thread + " " + token + " " + startNanos);
            }
            @Override public void releasing(long endNanos) {
              System.out.println("E " + thread + " " + endNanos);
            }
            @Override public void released(long token, long startNanos, long endNanos) { }
            @Override public void lost() {
              System.out.println("L " + thread);
            }
            @Override public void unreachable() { }
          }));
    }
    while (true) { // until killed
      Thread.sleep(200);
      System.out.println("T " + lock.cache.takes.get());
    }
  }
}
