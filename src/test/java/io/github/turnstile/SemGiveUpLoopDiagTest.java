package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Diagnostic, run only on request ({@code -Ddiag.iterations=N}): the scenario of
 * {@link SemaphoreWaitingTest#anAcquireGivenUpWhileItsReplyIsLostLeavesNothingHeld} N times in one
 * JVM, each with a {@code MONITOR} trace of the semaphore's keys and its Redis state printed when
 * it fails. {@code -Ddiag.oldEnding=true} ends the dropped replies the first way (drop off, then
 * cut). docs/RELIABILITY.md has the runs.
 */
@EnabledIfSystemProperty(named = "diag.iterations", matches = "\\d+")
@ExtendWith(RedisExtension.class)
class SemGiveUpLoopDiagTest {

  @Test
  void loop(TestRedis redis) throws Exception {
    int n = Integer.getInteger("diag.iterations", 30);
    int failures = 0;
    for (int i = 0; i < n; i++) {
      if (!once(redis, i)) {
        failures++;
      }
    }
    System.out.println("DIAG: " + failures + " failures of " + n);
    assertEquals(0, failures);
  }

  private boolean once(TestRedis redis, int i) throws Exception {
    String name = unique("sem-lost-reply");
    List<String> trace = new CopyOnWriteArrayList<>();
    Socket mon = new Socket(redis.host(), redis.port());
    OutputStream out = mon.getOutputStream();
    out.write("MONITOR\r\n".getBytes(StandardCharsets.US_ASCII));
    out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(mon.getInputStream(), StandardCharsets.UTF_8));
    Thread reader = new Thread(() -> {
      try {
        String line;
        while ((line = in.readLine()) != null) {
          if (line.contains(name)) {
            trace.add(line);
          }
        }
      } catch (Exception e) {
        // closed
      }
    });
    in.readLine(); // +OK
    reader.setDaemon(true);
    reader.start();
    long t0 = System.nanoTime();
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile viaProxy = Turnstile.connect(proxy.uri());
        Turnstile direct = Turnstile.connect(redis.uri())) {
      DistributedSemaphore s = viaProxy.semaphore(name, 2);
      DistributedSemaphore observer = direct.semaphore(name, 2);
      trace.add("CLIENT " + viaProxy.engine().clientId + " via proxy; direct " + direct.engine().clientId);
      proxy.setDropReplies(true);
      trace.add("T+" + TestSupport.millisSince(t0) + " drop on");
      assertFalse(s.tryAcquire(300, TimeUnit.MILLISECONDS), "no reply: not acquired");
      trace.add("T+" + TestSupport.millisSince(t0) + " tryAcquire returned");
      int avail = observer.availablePermits();
      trace.add("T+" + TestSupport.millisSince(t0) + " available " + avail);
      if (Boolean.getBoolean("diag.oldEnding")) {
        proxy.setDropReplies(false);
        proxy.cutAll();
      } else {
        proxy.setStallNew(true);
        proxy.cutAll();
        proxy.setDropReplies(false);
        proxy.setStallNew(false);
      }
      trace.add("T+" + TestSupport.millisSince(t0) + " cut");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (observer.availablePermits() != 2) {
        if (System.nanoTime() - deadline > 0) {
          dump(redis, name, viaProxy, trace, i);
          return false;
        }
        Thread.sleep(50);
      }
      trace.add("T+" + TestSupport.millisSince(t0) + " back");
      assertEquals(0, s.heldPermits());
      long t1 = System.nanoTime();
      boolean both = s.tryAcquire(2, 10, TimeUnit.SECONDS);
      trace.add("T+" + TestSupport.millisSince(t0) + " tryAcquire(2) " + both + " after " + TestSupport.millisSince(t1)
          + " ms; available " + observer.availablePermits() + " held " + s.heldPermits() + " stalled " + proxy.stalledCount()
          + " links " + proxy.connectionCount());
      if (!both) {
        dump(redis, name, viaProxy, trace, i);
        return false;
      }
      s.release(2);
      assertEquals(2, observer.availablePermits());
      return true;
    } finally {
      mon.close();
    }
  }

  private static void dump(TestRedis redis, String name, Turnstile t, List<String> trace, int i) {
    String tag = "{turnstile:" + name + "}";
    StringBuilder b = new StringBuilder("DIAG FAILURE iteration " + i + "\n");
    b.append("HGETALL ").append(redis.command("HGETALL", tag + ":s")).append('\n');
    b.append("ZRANGE l ").append(redis.command("ZRANGE", tag + ":s:l", "0", "-1", "WITHSCORES")).append('\n');
    b.append("ZRANGE w ").append(redis.command("ZRANGE", tag + ":s:w", "0", "-1", "WITHSCORES")).append('\n');
    String keys = redis.command("KEYS", tag + "*");
    b.append("KEYS ").append(keys).append('\n');
    for (String k : keys.lines().filter(l -> l.contains(":q:")).toList()) {
      b.append(k.trim()).append(" = ").append(redis.command("GET", k.trim())).append('\n');
    }
    b.append("TIME ").append(redis.command("TIME")).append('\n');
    for (String l : trace) {
      b.append(l.length() > 600 ? l.substring(0, 600) : l).append('\n');
    }
    System.out.println(b);
  }
}
