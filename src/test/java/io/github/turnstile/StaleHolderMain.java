package io.github.turnstile;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A lock holder for the "paused past its lease" scenario. Args: redis-uri, lock name, lease ms,
 * control file. Prints {@code LOCKED <token> <nanoTime>}, then every 20 ms {@code VALID <nanoTime>}
 * while {@code isHeldByCurrentThread()} (nanoTime read before the check). Once the control file
 * exists it acts as a stale process would, without checking first: {@code WRITE <token>} (the test
 * applies it to its fenced store), then reports {@code HELD <true|false>} and
 * {@code UNLOCK ok|lost|<exception>}, and exits.
 */
public final class StaleHolderMain {
  private StaleHolderMain() {}

  public static void main(String[] args) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder()
        .leaseTime(Duration.ofMillis(Long.parseLong(args[2])))
        .build();
    Path control = Path.of(args[3]);
    try (Turnstile turnstile = Turnstile.connect(args[0], options)) {
      DistributedLock lock = turnstile.lock(args[1]);
      lock.lock();
      long token = lock.fencingToken();
      System.out.println("LOCKED " + token + " " + System.nanoTime());
      System.out.flush();
      while (!Files.exists(control)) {
        long t = System.nanoTime();
        if (lock.isHeldByCurrentThread()) {
          System.out.println("VALID " + t);
          System.out.flush();
        }
        Thread.sleep(20);
      }
      System.out.println("WRITE " + token);
      System.out.println("HELD " + lock.isHeldByCurrentThread());
      String outcome;
      try {
        lock.unlock();
        outcome = "ok";
      } catch (LockLostException e) {
        outcome = "lost";
      } catch (RuntimeException e) {
        outcome = e.toString();
      }
      System.out.println("UNLOCK " + outcome);
      System.out.flush();
    }
  }
}
