package io.github.turnstile;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assertions;

/**
 * The whole contract suite of the asynchronous lock ({@link AsyncLockContractTest}), with Turnstile connected as the
 * least-privilege user of the README's {@code ACL SETUSER} line (the suite's own raw commands run as
 * the default user); afterwards Redis must have refused nothing ({@code ACL LOG} empty).
 */
@RedisTopology(RedisTopology.Kind.ACL_USER)
class AsyncLockAsAclUserTest extends AsyncLockContractTest {
  private final TestRedis redis;

  AsyncLockAsAclUserTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  @AfterAll
  void redisRefusedNothing() {
    Assertions.assertEquals(java.util.List.of(), LeastPrivilege.refusals(redis.command("ACL", "LOG")),
        "ACL LOG: commands Redis refused to the README's user");
  }
}
