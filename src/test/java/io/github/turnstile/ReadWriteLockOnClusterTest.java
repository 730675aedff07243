package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;

/** The whole contract suite of the read/write lock, on a Redis Cluster started from redis-server processes. */
@RedisTopology(RedisTopology.Kind.CLUSTER)
class ReadWriteLockOnClusterTest extends DistributedReadWriteLockContractTest {
  ReadWriteLockOnClusterTest(TestRedis redis) {
    super(redis);
  }
}
