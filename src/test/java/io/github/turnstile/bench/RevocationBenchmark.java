package io.github.turnstile.bench;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A waiter from another client on a lock cached idle (lock caching, docs/DESIGN.md §17): client A
 * takes and releases a lock, keeping its grant; client B then calls {@code lock()}, which asks A to
 * give it up. Measures B's {@code lock()}, one fresh name per sample (a revoked lock is not cached
 * again for a second). Beside it, B's {@code lock()} of a lock A released outright (caching off).
 * {@code bench.revocation.samples} [300]; {@code bench.revocation} [true] turns it off.
 */
final class RevocationBenchmark {
  private static final int SAMPLES = Integer.getInteger("bench.revocation.samples", 300);

  private RevocationBenchmark() {}

  static void run(String uri) {
    if (SAMPLES <= 0) {
      return;
    }
    String runId = Long.toHexString(ThreadLocalRandom.current().nextLong());
    LongSamples cached = new LongSamples();
    LongSamples released = new LongSamples();
    TurnstileOptions uncached = TurnstileOptions.builder().lockCaching(false).build();
    try (Turnstile a = Turnstile.connect(uri, TurnstileOptions.builder().lockCaching(true).build());
        Turnstile plain = Turnstile.connect(uri, uncached);
        Turnstile b = Turnstile.connect(uri, uncached)) {
      for (int i = -20; i < SAMPLES; i++) {
        for (int kind = 0; kind < 2; kind++) {
          String name = "bench:" + runId + ":revocation:" + kind + ":" + i;
          DistributedLock holder = (kind == 0 ? a : plain).lock(name);
          holder.lock();
          holder.unlock(); // cached (a), or released (plain)
          DistributedLock other = b.lock(name);
          long start = System.nanoTime();
          other.lock();
          long took = System.nanoTime() - start;
          other.unlock();
          if (i >= 0) {
            (kind == 0 ? cached : released).add(took);
          }
        }
      }
    }
    System.out.println();
    System.out.printf(Locale.ROOT, "Another client's lock() of a lock cached idle (%d samples, one name each):%n", SAMPLES);
    System.out.printf(Locale.ROOT, "  cached idle by another client: p50 %.2f ms, p99 %.2f ms, max %.2f ms  [target: p99 <= 5 ms]%n",
        cached.percentile(0.5) / 1e6, cached.percentile(0.99) / 1e6, cached.percentile(1.0) / 1e6);
    System.out.printf(Locale.ROOT, "  released by another client:    p50 %.2f ms, p99 %.2f ms, max %.2f ms%n",
        released.percentile(0.5) / 1e6, released.percentile(0.99) / 1e6, released.percentile(1.0) / 1e6);
  }
}
