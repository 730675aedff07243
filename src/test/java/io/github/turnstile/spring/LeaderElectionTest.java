package io.github.turnstile.spring;

import static io.github.turnstile.spring.Support.await;
import static io.github.turnstile.spring.Support.millisSince;
import static io.github.turnstile.spring.Support.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileOptions;
import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TcpProxy;
import io.github.turnstile.testing.TestRedis;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.integration.leader.Context;
import org.springframework.integration.leader.DefaultCandidate;
import org.springframework.integration.support.leader.LockRegistryLeaderInitiator;

/**
 * Spring Integration's leader election ({@link LockRegistryLeaderInitiator}) on
 * {@link TurnstileLockRegistry}: one leader among two instances; when the leader's lease is lost
 * (its network to Redis is cut), its leadership is revoked, and the other instance is granted it
 * within a lease.
 */
@ExtendWith(RedisExtension.class)
class LeaderElectionTest {
  private static final Duration LEASE = Duration.ofSeconds(2);

  /** Records grants and revocations with the time they happened. */
  static final class Recorder extends DefaultCandidate {
    final List<String> events = new CopyOnWriteArrayList<>();
    volatile long grantedAt;
    volatile long revokedAt;

    Recorder(String id, String role) {
      super(id, role);
    }

    @Override
    public void onGranted(Context ctx) {
      grantedAt = System.nanoTime();
      events.add("granted");
    }

    @Override
    public void onRevoked(Context ctx) {
      revokedAt = System.nanoTime();
      events.add("revoked");
    }

    boolean leader() {
      return !events.isEmpty() && events.get(events.size() - 1).equals("granted");
    }
  }

  @Test
  void leadershipIsRevokedWhenTheLeaseIsLostAndPassesWithinALease(TestRedis redis) throws Exception {
    TurnstileOptions options = TurnstileOptions.builder().leaseTime(LEASE).commandTimeout(Duration.ofMillis(500)).build();
    String role = unique("leader");
    try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
        Turnstile a = Turnstile.connect(proxy.uri(), options);
        Turnstile b = Turnstile.connect(redis.uri(), options)) {
      Recorder candidateA = new Recorder("a", role);
      Recorder candidateB = new Recorder("b", role);
      LockRegistryLeaderInitiator initiatorA = new LockRegistryLeaderInitiator(new TurnstileLockRegistry(a), candidateA);
      LockRegistryLeaderInitiator initiatorB = new LockRegistryLeaderInitiator(new TurnstileLockRegistry(b), candidateB);
      for (LockRegistryLeaderInitiator i : List.of(initiatorA, initiatorB)) {
        i.setHeartBeatMillis(200);
        i.setBusyWaitMillis(50);
      }
      try {
        initiatorA.start();
        await("instance a to lead", Duration.ofSeconds(10), candidateA::leader);
        initiatorB.start();
        Thread.sleep(LEASE.toMillis()); // b tries for a whole lease: a keeps the lead
        assertTrue(candidateA.leader());
        assertFalse(candidateB.leader(), "only one leader");
        assertTrue(candidateB.events.isEmpty());

        long cut = System.nanoTime();
        proxy.setPaused(true); // a can no longer renew: its lease runs out in Redis
        await("instance b to lead", LEASE.plusSeconds(3), candidateB::leader);
        long bGranted = millisSince(cut);
        await("instance a's leadership to be revoked", LEASE.plusSeconds(3), () -> !candidateA.leader());
        long aRevoked = (candidateA.revokedAt - cut) / 1_000_000;
        System.out.printf("LEADER lease=%d ms: after the cut, a revoked at %d ms, b granted at %d ms%n",
            LEASE.toMillis(), aRevoked, bGranted);
        assertTrue(bGranted <= LEASE.toMillis() + 1_000, "b leads within a lease (+1 s): " + bGranted + " ms");
        assertTrue(aRevoked <= LEASE.toMillis() + 1_000, "a is revoked within a lease (+1 s): " + aRevoked + " ms");
        assertEquals(List.of("granted", "revoked"), candidateA.events.subList(0, 2));

        proxy.setPaused(false);
        Thread.sleep(LEASE.toMillis()); // a is back, but b holds the lock: a stays a follower
        assertTrue(candidateB.leader());
        assertFalse(candidateA.leader(), "one leader again");

        initiatorB.stop(); // b steps down: its unlock wakes a, which leads at once
        long stop = System.nanoTime();
        await("instance a to lead again", Duration.ofSeconds(5), candidateA::leader);
        System.out.printf("LEADER after b stopped, a granted at %d ms%n", millisSince(stop));
      } finally {
        initiatorA.stop();
        initiatorB.stop();
      }
    }
  }
}
