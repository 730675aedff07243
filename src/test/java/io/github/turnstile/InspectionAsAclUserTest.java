package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The identity record and every kind of inspection as the least-privilege user of the README's
 * {@code ACL SETUSER} line: the holder is named (so its identity record was written under the
 * user's {@code ~{turnstile:*} pattern), and Redis refused nothing ({@code ACL LOG} empty).
 */
@ExtendWith(RedisExtension.class)
@RedisTopology(RedisTopology.Kind.ACL_USER)
class InspectionAsAclUserTest {

  @Test
  void identityAndInspectionNeedNoMoreThanTheReadmeLine(TestRedis redis) throws Exception {
    String name = unique("acl-inspect");
    try (Turnstile holder = Turnstile.connect(redis.uri(), TurnstileOptions.builder().clientName("acl-app").build());
        Turnstile inspector = Turnstile.connect(redis.uri())) {
      DistributedLock lock = holder.lock(name);
      lock.lock();
      try {
        // written at connect, under the user's key pattern: named at the first inspection
        Inspection first = inspector.inspect(Inspection.Kind.LOCK, name);
        assertEquals("acl-app", first.holders().get(0).clientName(), first.toString());
        TestSupport.await("the holder named by its identity", Duration.ofSeconds(30), () -> {
          Inspection i = inspector.inspect(Inspection.Kind.LOCK, name);
          return i.isHeld() && "acl-app".equals(i.holders().get(0).clientName())
              && i.holders().get(0).threadName() != null;
        });
        assertEquals(lock.fencingToken(), inspector.inspect(Inspection.Kind.LOCK, name).holders().get(0).fencingToken());
      } finally {
        lock.unlock();
      }
      holder.readWriteLock(name).readLock().lock();
      assertEquals(1, inspector.inspect(Inspection.Kind.READ_WRITE_LOCK, name).holderCount());
      holder.readWriteLock(name).readLock().unlock();
      DistributedSemaphore s = holder.semaphore(name, 3);
      s.acquire(2);
      assertEquals(1, inspector.inspect(Inspection.Kind.SEMAPHORE, name).holderCount());
      assertEquals(1, inspector.inspect(Inspection.Kind.SEMAPHORE, name).availablePermits());
      s.release(2);
      assertTrue(inspector.activity().isEmpty());
    }
    assertEquals(List.of(), LeastPrivilege.refusals(redis.command("ACL", "LOG")),
        "ACL LOG: commands Redis refused to the README's user");
  }
}
