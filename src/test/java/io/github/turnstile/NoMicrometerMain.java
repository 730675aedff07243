package io.github.turnstile;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Child JVM for {@link OptionalMicrometerTest}: runs every primitive, including a crashed-holder
 * reclaim (the code path that reports metrics and logs), on a classpath without Micrometer.
 * Prints {@code NO-MICROMETER} once it has checked Micrometer is absent, then {@code OK}.
 */
public final class NoMicrometerMain {
  private NoMicrometerMain() {}

  public static void main(String[] args) throws Exception {
    try {
      Class.forName("io.micrometer.core.instrument.MeterRegistry");
      System.out.println("MICROMETER-PRESENT");
      System.exit(2);
    } catch (ClassNotFoundException expected) {
      System.out.println("NO-MICROMETER");
    }
    String uri = args[0];
    TurnstileOptions options = TurnstileOptions.builder().metricsNameLimit(10).build();
    try (Turnstile t = Turnstile.connect(uri, options)) {
      String name = "no-micrometer:" + System.nanoTime();
      DistributedLock lock = t.lock(name);
      lock.lock();
      lock.unlock();
      check(lock.tryLock(1, TimeUnit.SECONDS), "tryLock");
      lock.unlock();

      DistributedSemaphore s = t.semaphore(name, 2);
      s.acquire(2);
      check(!s.tryAcquire(), "semaphore exhausted");
      s.release(2);

      DistributedReadWriteLock rw = t.readWriteLock(name);
      rw.readLock().lock();
      rw.readLock().unlock();
      rw.writeLock().lock();
      rw.writeLock().unlock();

      // a crashed holder, reclaimed: the reclaim report runs with the no-op recorder
      Turnstile crasher = Turnstile.connect(uri, TurnstileOptions.builder().leaseTime(Duration.ofMillis(300)).build());
      crasher.lock(name + ":crash").lock();
      crasher.close();
      DistributedLock after = t.lock(name + ":crash");
      after.lock();
      after.unlock();
      System.out.println("OPTIONS " + t.options());
    }
    System.out.println("OK");
    System.exit(0);
  }

  private static void check(boolean condition, String what) {
    if (!condition) {
      System.out.println("FAILED " + what);
      System.exit(1);
    }
  }
}
