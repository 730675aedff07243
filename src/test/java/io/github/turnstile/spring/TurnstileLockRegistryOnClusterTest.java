package io.github.turnstile.spring;

import io.github.turnstile.Turnstile;
import io.github.turnstile.spring.boot.TurnstileAutoConfiguration;
import io.github.turnstile.spring.boot.RedisDetails;
import io.github.turnstile.spring.boot.TurnstileAutoConfigurationTest;
import io.github.turnstile.testing.RedisTopology;
import io.github.turnstile.testing.TestRedis;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The registry's checks on a Redis Cluster (3 masters, 3 replicas) from redis-server processes:
 * no pub/sub channel to route (spring-integration #10471), every key of a lock in one slot. Plus
 * the Spring Boot auto-configuration reaching the Cluster through spring.data.redis.cluster.nodes.
 */
@RedisTopology(RedisTopology.Kind.CLUSTER)
class TurnstileLockRegistryOnClusterTest extends TurnstileLockRegistryTest {
  private final TestRedis redis;

  TurnstileLockRegistryOnClusterTest(TestRedis redis) {
    super(redis);
    this.redis = redis;
  }

  @Test
  void autoConfigurationUsesSpringDataRedisClusterNodes() {
    try (Turnstile other = Turnstile.connect(redis.uri())) {
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class))
          .withPropertyValues("spring.data.redis.cluster.nodes=" + String.join(",", Support.nodes(redis.uri())))
          .run(context -> {
            TurnstileLockRegistry registry = context.getBean(TurnstileLockRegistry.class);
            for (int i = 0; i < 12; i++) { // names in slots on every master
              TurnstileAutoConfigurationTest.assertSharedWith(other, context.getBean(Turnstile.class),
                  registry.nameOf(Support.unique("boot-cluster")));
            }
          });
    }
  }

  /** A connection details bean naming the Cluster's nodes wins over spring.data.redis.*. */
  @Test
  void autoConfigurationUsesRedisConnectionDetailsForCluster() {
    try (Turnstile other = Turnstile.connect(redis.uri())) {
      RedisDetails.withBean(new ApplicationContextRunner()
              .withConfiguration(AutoConfigurations.of(TurnstileAutoConfiguration.class)),
              RedisDetails.cluster(Support.nodes(redis.uri()), null, null))
          .withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=1")
          .run(context -> {
            for (int i = 0; i < 12; i++) { // names in slots on every master
              TurnstileAutoConfigurationTest.assertSharedWith(other, context.getBean(Turnstile.class),
                  Support.unique("details-cluster"));
            }
          });
    }
  }
}
