package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.fault.History;
import io.github.turnstile.testing.JvmProcess;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import io.github.turnstile.testing.Bounds;

/** A holder in another JVM killed with kill -9: the next acquirer gets the lock within lease + 1 s. */
@ExtendWith(RedisExtension.class)
class CrashRecoveryTest {
  private static final long LEASE_MS = 2000;

  @Test
  void holderKilledWithSigkill(TestRedis redis) throws Exception {
    String name = unique("crash");
    try (JvmProcess holder = JvmProcess.start(HolderMain.class, redis.uri(), name, Long.toString(LEASE_MS));
        Turnstile turnstile = Turnstile.connect(redis.uri())) {
      long holderToken = Long.parseLong(holder.awaitLine("LOCKED ", Duration.ofSeconds(30)).substring(7));
      long holderStart = System.nanoTime();
      DistributedLock lock = turnstile.lock(name);
      // The holder's watchdog keeps it alive well past its lease while it runs.
      assertTrue(!lock.tryLock(LEASE_MS + 500, TimeUnit.MILLISECONDS), "holder alive keeps the lock");

      AtomicLong acquiredAt = new AtomicLong();
      AtomicLong token = new AtomicLong();
      AtomicLong validUntil = new AtomicLong();
      Thread waiter = TestSupport.start("waiter", () -> {
        lock.lock(); // waits inside Redis for the dead holder's lease to run out
        acquiredAt.set(System.nanoTime());
        token.set(lock.fencingToken());
        long t = System.nanoTime();
        if (lock.isHeldByCurrentThread()) {
          validUntil.set(t);
        }
        lock.unlock();
      });
      TestSupport.awaitWaiting(waiter);
      Thread.sleep(200);
      long killedAt = System.nanoTime();
      holder.kill9();
      waiter.join(LEASE_MS + 5000);
      long recoveryMs = TimeUnit.NANOSECONDS.toMillis(acquiredAt.get() - killedAt);
      System.out.println("recovery after kill -9: " + recoveryMs + " ms (lease " + LEASE_MS + " ms)");
      assertTrue(acquiredAt.get() != 0, "waiter acquired");
      History history = new History();
      history.add("killed-jvm", holderToken, 1, holderStart, killedAt); // it can do nothing after its death
      history.add("waiter", token.get(), 1, acquiredAt.get(), validUntil.get());
      history.recovery(recoveryMs);
      History.Report report = history.checkAndPrint("holder-jvm-kill9", "lock", 1);
      assertEquals(0, report.overlaps(), report.summaryLine());
      assertEquals(0, report.tokenViolations(), report.summaryLine());
      assertTrue(recoveryMs <= LEASE_MS + Bounds.OVERRUN_MS, "recovered in " + recoveryMs + " ms");
      assertTrue(token.get() > holderToken, "new token " + token + " > crashed holder's " + holderToken);
    }
  }
}
