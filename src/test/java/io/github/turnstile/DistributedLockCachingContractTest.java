package io.github.turnstile;

import io.github.turnstile.testing.TestRedis;

/** {@link DistributedLockContractTest} with lock caching on: every client keeps its idle grants (docs/DESIGN.md §17). */
class DistributedLockCachingContractTest extends DistributedLockContractTest {
  DistributedLockCachingContractTest(TestRedis redis) {
    super(redis);
  }

  @Override
  TurnstileOptions options() {
    return TurnstileOptions.builder().lockCaching(true).build();
  }
}
