package io.github.turnstile;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The whole contract suite of the asynchronous lock ({@link AsyncLockContractTest}), with Turnstile connected to a
 * Redis Cluster (every node) as the restricted user ({@code LeastPrivilege.restrictedUser}: no
 * {@code client|unblock}, {@code client|id}, {@code client|setname}, {@code info} or
 * {@code wait}); after each test every connection is that user's, and afterwards {@code ACL LOG}
 * holds no other refusal, and each of those at most once per client ({@link NoAdmin}).
 */
@RedisTopology(RedisTopology.Kind.NO_ADMIN_CLUSTER)
class NoAdminAsyncLockOnClusterTest extends AsyncLockContractTest {
  private final TestRedis redis;

  NoAdminAsyncLockOnClusterTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  /**
   * Not on a Cluster: the test delays replies with a proxy in front of one server and stalls that
   * server with a busy script, while a Cluster client learns every node's own address from the
   * topology and reaches the lock's master around the proxy. Covered as this user on one server
   * ({@code NoAdminAsyncLockTest}).
   */
  @Override
  @Test
  void cancelledGrantUndoIsResentAfterTransientFailure() {
    Assumptions.assumeTrue(false, "needs a proxy in front of the lock's only server");
  }

  @AfterEach
  void everyConnectionIsTheRestrictedUser() {
    NoAdmin.assertAllConnectionsAre(redis.allNodes(), LeastPrivilege.USER);
  }

  @AfterAll
  void eachRefusalOncePerClient() {
    NoAdmin.assertDetectedOnce(redis.allNodes(), true);
  }
}
