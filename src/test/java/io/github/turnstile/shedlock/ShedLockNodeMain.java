package io.github.turnstile.shedlock;

import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import java.time.Duration;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;

/**
 * A node for the crash test: runs job {@code args[1]} through ShedLock's executor with
 * lockAtMostFor = 10 minutes and a Turnstile lease of {@code args[2]} ms, prints {@code LOCKED}
 * from inside the job, and runs it until killed.
 */
public final class ShedLockNodeMain {
  private ShedLockNodeMain() {}

  public static void main(String[] args) throws Throwable {
    Turnstile turnstile = Turnstile.connect(args[0],
        TurnstileOptions.builder().leaseTime(Duration.ofMillis(Long.parseLong(args[2]))).build());
    DefaultLockingTaskExecutor executor = new DefaultLockingTaskExecutor(new TurnstileLockProvider(turnstile));
    executor.executeWithLock((Runnable) () -> {
      System.out.println("LOCKED");
      System.out.flush();
      try {
        Thread.sleep(Long.MAX_VALUE);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }, new LockConfiguration(ClockProvider.now(), args[1], Duration.ofMinutes(10), Duration.ZERO));
    System.out.println("NOT-LOCKED"); // reached only if the job was locked elsewhere
  }
}
