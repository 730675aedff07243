package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/** The whole contract suite of the reentrant lock, on a Redis Sentinel started from redis-server processes. */
@RedisTopology(RedisTopology.Kind.SENTINEL)
class LockOnSentinelTest extends DistributedLockContractTest {
  LockOnSentinelTest(TestRedis redis) {
    super(redis);
  }
}
