package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/** The whole contract suite of the semaphore, on a Redis Sentinel started from redis-server processes. */
@RedisTopology(RedisTopology.Kind.SENTINEL)
class SemaphoreOnSentinelTest extends DistributedSemaphoreContractTest {
  SemaphoreOnSentinelTest(TestRedis redis) {
    super(redis);
  }
}
