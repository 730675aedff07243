package io.github.turnstile;

import java.time.Duration;

/**
 * A holder process for crash tests: acquires a lock, prints {@code LOCKED <token>}, then holds it
 * (watchdog renewing) until killed. Args: redis-uri, lock name, lease ms.
 */
public final class HolderMain {
  private HolderMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[2])))
        .build();
    Turnstile turnstile = Turnstile.connect(args[0], options);
    DistributedLock lock = turnstile.lock(args[1]);
    lock.lock();
    System.out.println("LOCKED " + lock.fencingToken());
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }
}
