package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import io.micrometer.observation.Observation;
import io.micrometer.observation.tck.TestObservationRegistry;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Micrometer Observations of waits and holds: a request (an observation of the application's)
 * that waits for a lock another client holds gets a {@code turnstile.acquire} observation under it,
 * with the primitive, the outcome and the tier as low-cardinality keys and the lock's name as a
 * high-cardinality key; the hold that follows is a {@code turnstile.hold} observation under the
 * same request. A timed-out wait says so; an async acquisition too.
 */
@ExtendWith(RedisExtension.class)
class ObservationsTest {
  private final TestRedis redis;

  ObservationsTest(TestRedis redis) {
    this.redis = redis;
  }

  @Test
  void aRequestThatWaitedForALock() throws Exception {
    String name = unique("obs-wait");
    TestObservationRegistry registry = TestObservationRegistry.create();
    try (Turnstile holder = Turnstile.connect(redis.uri());
        Turnstile t = Turnstile.connect(redis.uri(), TurnstileOptions.builder().observationRegistry(registry).build())) {
      DistributedLock held = holder.lock(name);
      held.lock();
      CountDownLatch waiting = new CountDownLatch(1);
      Thread request = TestSupport.start("request", () -> Observation.createNotStarted("http.request", registry)
          .observeChecked(() -> {
            waiting.countDown();
            DistributedLock lock = t.lock(name);
            lock.lock();
            lock.unlock();
            assertTrue(lock.tryLock(100, TimeUnit.MILLISECONDS)); // free now: an acquisition without a wait
            lock.unlock();
          }));
      assertTrue(waiting.await(30, TimeUnit.SECONDS));
      Thread.sleep(300);
      held.unlock();
      request.join(60_000);
      assertFalse(request.isAlive());
      assertThat(registry)
          .hasObservationWithNameEqualTo(Observations.ACQUIRE)
          .that()
          .hasLowCardinalityKeyValue("primitive", "lock")
          .hasLowCardinalityKeyValue("outcome", "acquired")
          .hasHighCardinalityKeyValue("name", name)
          .hasParentObservationContextMatching(c -> "http.request".equals(c.getName()))
          .hasBeenStopped();
      assertThat(registry)
          .hasObservationWithNameEqualTo(Observations.HOLD)
          .that()
          .hasLowCardinalityKeyValue("outcome", "released")
          .hasParentObservationContextMatching(c -> "http.request".equals(c.getName()))
          .hasBeenStopped();
      assertThat(registry).hasNumberOfObservationsWithNameEqualTo(Observations.ACQUIRE, 2); // lock() and tryLock(t)
      assertThat(registry).hasNumberOfObservationsWithNameEqualTo(Observations.HOLD, 2);
    }
  }

  @Test
  void aTimedOutWaitAndAnAsyncOne() throws Exception {
    String name = unique("obs-timeout");
    TestObservationRegistry registry = TestObservationRegistry.create();
    try (Turnstile holder = Turnstile.connect(redis.uri());
        Turnstile t = Turnstile.connect(redis.uri(), TurnstileOptions.builder().observationRegistry(registry).build())) {
      DistributedLock held = holder.lock(name);
      held.lock();
      assertFalse(t.lock(name).tryLock(200, TimeUnit.MILLISECONDS));
      assertThat(registry)
          .hasObservationWithNameEqualTo(Observations.ACQUIRE)
          .that()
          .hasLowCardinalityKeyValue("outcome", "timed out")
          .hasBeenStopped();
      CompletableFuture<LockHold> f = t.lock(name).lockAsync().toCompletableFuture();
      held.unlock();
      f.get(30, TimeUnit.SECONDS).release().toCompletableFuture().get(30, TimeUnit.SECONDS);
      assertThat(registry).hasNumberOfObservationsWithNameEqualTo(Observations.ACQUIRE, 2);
      assertThat(registry).hasAnObservation(o -> o.hasNameEqualTo(Observations.ACQUIRE)
          .hasLowCardinalityKeyValue("outcome", "acquired").hasLowCardinalityKeyValue("primitive", "lock"));
      assertThat(registry).doesNotHaveAnyRemainingCurrentObservation();
    }
  }
}
