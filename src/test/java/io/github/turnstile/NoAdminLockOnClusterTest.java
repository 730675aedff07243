package io.github.turnstile;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;

/**
 * The whole contract suite of the LockContractTest, with Turnstile connected to a Redis Cluster (every node) as the
 * restricted user ({@code LeastPrivilege.restrictedUser}: no {@code client|unblock},
 * {@code client|id}, {@code client|setname}, {@code info} or {@code wait}); afterwards {@code ACL LOG}
 * holds no other refusal, and each of those at most once per client ({@link NoAdmin}).
 */
@RedisTopology(RedisTopology.Kind.NO_ADMIN_CLUSTER)
class NoAdminLockOnClusterTest extends DistributedLockContractTest {
  private final TestRedis redis;

  NoAdminLockOnClusterTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  /** Runs before the suite's own @AfterEach closes the clients: every connection they opened is the restricted user. */
  @AfterEach
  void everyConnectionIsTheRestrictedUser() {
    NoAdmin.assertAllConnectionsAre(redis.allNodes(), LeastPrivilege.USER);
  }

  @AfterAll
  void eachRefusalOncePerClient() {
    NoAdmin.assertDetectedOnce(redis.allNodes(), true);
  }
}
