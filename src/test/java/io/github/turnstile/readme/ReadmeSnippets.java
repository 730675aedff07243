package io.github.turnstile.readme;

import io.github.turnstile.DistributedReadWriteLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.Inspection;
import io.github.turnstile.Turnstile;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The README's fragments, compiled: each between {@code // README:} markers, with what the
 * fragment takes for granted (a {@code turnstile}, the work it guards) around it.
 * {@link ReadmeSnippetsTest} checks that the README shows exactly this text, and runs it.
 */
final class ReadmeSnippets {
  private ReadmeSnippets() {}

  /** Calls made to the partner, and catalog reads, by the fragments (for the test). */
  static final AtomicInteger CALLS = new AtomicInteger();
  static final AtomicInteger READS = new AtomicInteger();

  static void semaphore(Turnstile turnstile) throws InterruptedException {
    // README: semaphore
    DistributedSemaphore quota = turnstile.semaphore("partner-api", 4); // capacity stored on first use
    if (quota.tryAcquire(500, TimeUnit.MILLISECONDS)) {
      try {
        callPartner();
      } finally {
        quota.release();
      }
    }
    // README: end
  }

  static void readWriteLock(Turnstile turnstile) {
    // README: read-write-lock
    DistributedReadWriteLock catalog = turnstile.readWriteLock("catalog");
    catalog.readLock().lock();
    try {
      readCatalog();
    } finally {
      catalog.readLock().unlock();
    }
    // README: end
  }

  static Inspection whoHoldsIt(Turnstile turnstile) {
    // README: who-holds-it
    Inspection i = turnstile.lock("orders:42").inspect();  // or turnstile.inspect(Inspection.Kind.LOCK, "orders:42")
    // lock 'orders:42': held by [billing@web-3 pid 4242 thread 'payroll-worker', token 1795706201837075,
    //   since 2026-11-26T15:16:41.837Z, lease left 2944 ms], 1 waiting
    // README: end
    return i;
  }

  private static void callPartner() {
    CALLS.incrementAndGet();
  }

  private static void readCatalog() {
    READS.incrementAndGet();
  }
}
