package io.github.turnstile;

import java.time.Duration;

/**
 * A client process for the inspection tests. Args: redis-uri, lock name, lease ms, client name,
 * role. Role {@code hold}: a thread named {@code <client name>-worker} locks, prints
 * {@code LOCKED <token> <thread id>} and holds until killed. Role {@code wait}: the same thread
 * prints {@code WAITING <thread id>}, waits for the lock, then prints {@code LOCKED <token>} and
 * holds until killed.
 */
public final class InspectedMain {
  private InspectedMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[2])))
        .clientName(args[3])
        .build();
    Turnstile turnstile = Turnstile.connect(args[0], options);
    DistributedLock lock = turnstile.lock(args[1]);
    Thread worker = new Thread(() -> {
      if (args[4].equals("wait")) {
        System.out.println("WAITING " + Thread.currentThread().getId());
        System.out.flush();
      }
      lock.lock();
      System.out.println("LOCKED " + lock.fencingToken() + " " + Thread.currentThread().getId());
      System.out.flush();
    }, args[3] + "-worker");
    worker.start();
    worker.join();
    Thread.sleep(Long.MAX_VALUE);
  }
}
