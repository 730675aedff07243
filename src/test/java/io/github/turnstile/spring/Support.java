package io.github.turnstile.spring;

import static org.junit.jupiter.api.Assertions.fail;

import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/** Small helpers shared by the integration tests (Spring Integration, ShedLock, Spring Boot). */
public final class Support {
  private static final AtomicInteger SEQ = new AtomicInteger();

  private Support() {}

  /** A name no other test (or earlier run on the same Redis) uses. */
  public static String unique(String prefix) {
    return prefix + "-" + UUID.randomUUID().toString().substring(0, 8) + "-" + SEQ.incrementAndGet();
  }

  /** Polls {@code condition} every 5 ms until it holds, or fails after {@code timeout}. */
  public static void await(String what, Duration timeout, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("timed out after " + timeout.toMillis() + " ms waiting for " + what);
      }
      sleep(5);
    }
  }

  public static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  public static long millisSince(long startNanos) {
    return (System.nanoTime() - startNanos) / 1_000_000;
  }

  /** Deletes a key wherever it lives (every master of a cluster). */
  public static void delete(TestRedis redis, String key) {
    redis.commandOnEachMaster("DEL", key); // masters that do not own the slot answer -MOVED
  }

  /** The Redis key holding the lease of Turnstile lock {@code name} with the default key prefix. */
  public static String lockKey(String name) {
    return "{turnstile:" + name + "}:lock";
  }

  /** Host:port pairs of a redis-cluster:// or redis-sentinel:// URI. */
  public static List<String> nodes(String uri) {
    String rest = uri.substring(uri.indexOf("://") + 3);
    int hash = rest.indexOf('#');
    if (hash >= 0) {
      rest = rest.substring(0, hash);
    }
    int at = rest.lastIndexOf('@');
    if (at >= 0) {
      rest = rest.substring(at + 1);
    }
    int slash = rest.indexOf('/');
    if (slash >= 0) {
      rest = rest.substring(0, slash);
    }
    return List.of(rest.split(","));
  }
}
