package io.github.turnstile.spring;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/**
 * The registry's checks on a Sentinel-managed primary with a replica (spring-integration #3805:
 * RedisLockRegistry's pub/sub mode hangs on master/replica setups).
 */
@RedisTopology(RedisTopology.Kind.SENTINEL)
class TurnstileLockRegistryOnSentinelTest extends TurnstileLockRegistryTest {
  TurnstileLockRegistryOnSentinelTest(TestRedis redis) {
    super(redis);
  }
}
