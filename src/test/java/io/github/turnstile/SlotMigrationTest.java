package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisClusterProcesses;
import io.github.turnstile.testing.RedisServerProcess;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A lock's slot migrating to another Cluster node (resharding): a script must be refused before it
 * runs, never fail half-way. Redis checks a script's declared keys before running it (a key of a
 * migrating slot that is missing locally: {@code TRYAGAIN} or {@code ASK}), but checks a key the
 * script only computes when the script calls it: a missing one then fails the script with "non
 * local key" after its earlier writes were made. A release that derived the wake list from the
 * lock key (tried once, and reverted) released the lock and then failed before waking anyone; declared,
 * the release is refused whole (transient: re-sent) and runs once the slot is stable.
 */
class SlotMigrationTest {

  @Test
  void aReleaseInAMigratingSlotIsRefusedWholeNotHalfDone() throws Exception {
    try (RedisClusterProcesses cluster = RedisClusterProcesses.start(2, 0);
        Turnstile t = Turnstile.connect(cluster.uri())) {
      String name = unique("migrating");
      RedisLock lock = (RedisLock) t.lock(name);
      lock.lock();
      RedisServerProcess owner = cluster.masterOf(lock.lockKey);
      RedisServerProcess other = cluster.masters().stream().filter(m -> m.port() != owner.port()).findFirst()
          .orElseThrow();
      String[] rt = owner.command("HMGET", lock.lockKey, "r", "t").trim().split("\\s+");
      String request = rt[0];
      long token = Long.parseLong(rt[1]);
      // a waiter of another client is marked: the release will wake (the wake list does not exist)
      owner.command("HSET", lock.lockKey, "w:elsewhere", "1", "q", "1");
      String slot = owner.command("CLUSTER", "KEYSLOT", lock.lockKey).trim();
      String ownerId = owner.command("CLUSTER", "MYID").trim();
      String otherId = other.command("CLUSTER", "MYID").trim();
      other.command("CLUSTER", "SETSLOT", slot, "IMPORTING", ownerId);
      owner.command("CLUSTER", "SETSLOT", slot, "MIGRATING", otherId);
      try {
        ExecutionException refused = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
            () -> lock.release(request, token).get(30, TimeUnit.SECONDS));
        String why = String.valueOf(refused.getCause().getMessage());
        assertTrue(why.startsWith("TRYAGAIN"), "refused before running: " + why);
        assertTrue(Engine.isTransient(refused.getCause()), "a refusal to re-send: " + why);
        assertEquals(lock.engine.ownerId(Thread.currentThread()), owner.command("HGET", lock.lockKey, "o").trim(),
            "nothing of the release ran: the lock is still held");
      } finally {
        owner.command("CLUSTER", "SETSLOT", slot, "STABLE");
        other.command("CLUSTER", "SETSLOT", slot, "STABLE");
      }
      assertEquals(1L, lock.release(request, token).get(30, TimeUnit.SECONDS), "released once the slot is stable");
      assertEquals("1", owner.command("LLEN", lock.wakeKey).trim(), "and the marked waiter's client woken");
      lock.unlock(); // the local hold: its release in Redis is a copy now, answered "already released"
      assertTrue(!lock.isHeldByCurrentThread());
    }
  }
}
