package io.github.turnstile;

import io.github.turnstile.testing.TestRedis;

/** {@link AsyncLockContractTest} with lock caching off: every hold is taken from and given back to Redis. */
class AsyncLockUncachedContractTest extends AsyncLockContractTest {
  AsyncLockUncachedContractTest(TestRedis redis) {
    super(redis);
  }

  @Override
  TurnstileOptions options() {
    return TurnstileOptions.builder().lockCaching(false).build();
  }
}
