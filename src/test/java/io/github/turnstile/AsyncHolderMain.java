package io.github.turnstile;

import java.time.Duration;

/**
 * A holder process for crash tests of async holds: acquires a lock with {@code lockAsync()},
 * prints {@code LOCKED <token>}, then holds it (watchdog renewing) until killed. Args: redis-uri,
 * lock name, lease ms.
 */
public final class AsyncHolderMain {
  private AsyncHolderMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[2])))
        .build();
    Turnstile turnstile = Turnstile.connect(args[0], options);
    LockHold hold = turnstile.lock(args[1]).lockAsync().join();
    System.out.println("LOCKED " + hold.fencingToken());
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }
}
