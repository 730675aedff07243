package io.github.turnstile;

import java.time.Duration;

/**
 * A permit holder for crash tests: acquires permits, prints {@code HELD <n> <client id>}, then holds them
 * (watchdog renewing) until killed; prints {@code LOST ...} if its lease is lost. Args: redis-uri, semaphore name, capacity, permits, lease ms.
 */
public final class SemaphoreHolderMain {
  private SemaphoreHolderMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[4])))
        .build();
    Turnstile turnstile = Turnstile.connect(args[0], options);
    DistributedSemaphore semaphore = turnstile.semaphore(args[1], Integer.parseInt(args[2]));
    semaphore.addLeaseLossListener(event -> {
      System.out.println("LOST " + event);
      System.out.flush();
    });
    int permits = Integer.parseInt(args[3]);
    semaphore.acquire(permits);
    System.out.println("HELD " + permits + " " + turnstile.clientId());
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }
}
