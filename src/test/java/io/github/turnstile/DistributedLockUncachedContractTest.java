package io.github.turnstile;

import io.github.turnstile.testing.TestRedis;

/** {@link DistributedLockContractTest} with lock caching off: every hold is taken from and given back to Redis. */
class DistributedLockUncachedContractTest extends DistributedLockContractTest {
  DistributedLockUncachedContractTest(TestRedis redis) {
    super(redis);
  }

  @Override
  TurnstileOptions options() {
    return TurnstileOptions.builder().lockCaching(false).build();
  }
}
