package io.github.turnstile;

import io.github.turnstile.testing.TestRedis;

/** {@link AsyncLockContractTest} with lock caching on: every client keeps its idle grants (docs/DESIGN.md §17). */
class AsyncLockCachingContractTest extends AsyncLockContractTest {
  AsyncLockCachingContractTest(TestRedis redis) {
    super(redis);
  }

  @Override
  TurnstileOptions options() {
    return TurnstileOptions.builder().lockCaching(true).build();
  }
}
