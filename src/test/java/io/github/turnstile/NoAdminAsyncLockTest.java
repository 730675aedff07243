package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.AfterAll;

/**
 * The whole contract suite of the asynchronous lock ({@link AsyncLockContractTest}), with Turnstile connected to one
 * server as the restricted user ({@code LeastPrivilege.restrictedUser}: no {@code client|unblock},
 * {@code client|id}, {@code client|setname}, {@code info} or {@code wait}); afterwards
 * {@code ACL LOG} holds no other refusal, and each of those at most once per client
 * ({@link NoAdmin}).
 */
@RedisTopology(RedisTopology.Kind.NO_ADMIN)
class NoAdminAsyncLockTest extends AsyncLockContractTest {
  private final TestRedis redis;

  NoAdminAsyncLockTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  @AfterAll
  void eachRefusalOncePerClient() {
    NoAdmin.assertDetectedOnce(redis.allNodes(), false);
  }
}
