package io.github.turnstile;

import java.time.Duration;

/**
 * A read/write lock holder for crash tests: takes the read or the write lock, prints
 * {@code HELD <token>}, then holds it (watchdog renewing) until killed.
 * Args: redis-uri, lock name, read|write, lease ms.
 */
public final class RwHolderMain {
  private RwHolderMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[3])))
        .build();
    Turnstile turnstile = Turnstile.connect(args[0], options);
    DistributedReadWriteLock rw = turnstile.readWriteLock(args[1]);
    DistributedLock lock = "read".equals(args[2]) ? rw.readLock() : rw.writeLock();
    lock.lock();
    System.out.println("HELD " + lock.fencingToken());
    System.out.flush();
    Thread.sleep(Long.MAX_VALUE);
  }
}
