package io.github.turnstile.spring;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedReadWriteLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Turnstile;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Run by {@link CoreWithoutIntegrationsTest} on a classpath of Turnstile, Lettuce and Caffeine
 * only: proves that no Spring, ShedLock or Micrometer class is there, then uses every primitive.
 */
public final class CoreOnlyMain {
  private CoreOnlyMain() {}

  public static void main(String[] args) throws Exception {
    for (String absent : List.of("org.springframework.core.SpringVersion",
        "org.springframework.integration.support.locks.LockRegistry",
        "org.springframework.boot.SpringApplication",
        "net.javacrumbs.shedlock.core.LockProvider",
        "io.micrometer.core.instrument.MeterRegistry")) {
      try {
        Class.forName(absent);
        System.out.println("PRESENT " + absent);
        System.exit(2);
      } catch (ClassNotFoundException expected) {
        System.out.println("ABSENT " + absent);
      }
    }
    try (Turnstile turnstile = Turnstile.connect(args[0])) {
      String base = "core-only-" + System.nanoTime();
      DistributedLock lock = turnstile.lock(base);
      lock.lock();
      long token = lock.fencingToken();
      lock.unlock();
      DistributedSemaphore semaphore = turnstile.semaphore(base + "-sem", 2);
      if (!semaphore.tryAcquire(2, 1, TimeUnit.SECONDS)) {
        throw new AssertionError("semaphore");
      }
      semaphore.release(2);
      DistributedReadWriteLock rw = turnstile.readWriteLock(base + "-rw");
      rw.readLock().lock();
      rw.readLock().unlock();
      rw.writeLock().lock();
      rw.writeLock().unlock();
      System.out.println("USED lock (token " + token + "), semaphore, read/write lock");
    }
    System.out.println("OK");
  }
}
