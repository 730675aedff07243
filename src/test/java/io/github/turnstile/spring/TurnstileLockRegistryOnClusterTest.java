package io.github.turnstile.spring;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/**
 * The registry's checks on a Redis Cluster (3 masters, 3 replicas) from redis-server processes:
 * no pub/sub channel to route (spring-integration #10471), every key of a lock in one slot.
 */
@RedisTopology(RedisTopology.Kind.CLUSTER)
class TurnstileLockRegistryOnClusterTest extends TurnstileLockRegistryTest {
  TurnstileLockRegistryOnClusterTest(TestRedis redis) {
    super(redis);
  }
}
