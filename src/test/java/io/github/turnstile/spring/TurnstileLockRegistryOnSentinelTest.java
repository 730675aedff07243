package io.github.turnstile.spring;

import io.github.turnstile.Turnstile;
import io.github.turnstile.spring.boot.TurnstileAutoConfiguration;
import io.github.turnstile.spring.boot.RedisDetails;
import io.github.turnstile.spring.boot.TurnstileAutoConfigurationTest;
import io.github.turnstile.testing.RedisSentinelProcesses;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The registry's checks on a Sentinel-managed primary with a replica (spring-integration #3805:
 * RedisLockRegistry's pub/sub mode hangs on master/replica setups). Plus the Spring Boot
 * auto-configuration reaching the primary through spring.data.redis.sentinel.*.
 */
@RedisTopology(RedisTopology.Kind.SENTINEL)
class TurnstileLockRegistryOnSentinelTest extends TurnstileLockRegistryTest {
  private final TestRedis redis;

  TurnstileLockRegistryOnSentinelTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  @Test
  void autoConfigurationUsesSpringDataRedisSentinel() {
    try (Turnstile other = Turnstile.connect(redis.uri())) {
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class))
          .withPropertyValues("spring.data.redis.sentinel.master=" + RedisSentinelProcesses.MASTER_NAME,
              "spring.data.redis.sentinel.nodes=" + String.join(",", Support.nodes(redis.uri())))
          .run(context -> TurnstileAutoConfigurationTest.assertSharedWith(other, context.getBean(Turnstile.class),
              Support.unique("boot-sentinel")));
    }
  }

  /** A connection details bean naming the Sentinels wins over spring.data.redis.*. */
  @Test
  void autoConfigurationUsesRedisConnectionDetailsForSentinel() {
    try (Turnstile other = Turnstile.connect(redis.uri())) {
      RedisDetails.withBean(new ApplicationContextRunner()
              .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class)),
              RedisDetails.sentinel(RedisSentinelProcesses.MASTER_NAME, Support.nodes(redis.uri()), null, null))
          .withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=1")
          .run(context -> TurnstileAutoConfigurationTest.assertSharedWith(other, context.getBean(Turnstile.class),
              Support.unique("details-sentinel")));
    }
  }
}
