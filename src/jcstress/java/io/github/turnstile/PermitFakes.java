package io.github.turnstile;

import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/** {@link Waits.Tickets} on a plain fair semaphore, for the scenarios that park threads without Redis. */
final class PermitFakes {
  private PermitFakes() {}

  static Waits.Tickets tickets(Semaphore s) {
    return new Waits.Tickets() {
      @Override
      public void release() {
        s.release();
      }

      @Override
      public void acquire() throws InterruptedException {
        s.acquire();
      }

      @Override
      public void acquireUninterruptibly() {
        s.acquireUninterruptibly();
      }

      @Override
      public boolean tryAcquire(long nanos) throws InterruptedException {
        return s.tryAcquire(1, nanos, TimeUnit.NANOSECONDS);
      }
    };
  }
}
