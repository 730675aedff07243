package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/** The whole contract suite of the semaphore, on a Redis Cluster started from redis-server processes. */
@RedisTopology(RedisTopology.Kind.CLUSTER)
class SemaphoreOnClusterTest extends DistributedSemaphoreContractTest {
  SemaphoreOnClusterTest(TestRedis redis) {
    super(redis);
  }
}
