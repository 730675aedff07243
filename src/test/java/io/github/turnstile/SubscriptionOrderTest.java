package io.github.turnstile;

import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisExtension;
import io.github.turnstile.testing.TestRedis;
import io.lettuce.core.RedisClient;
import io.lettuce.core.codec.StringCodec;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * SUBSCRIBE and UNSUBSCRIBE reach the server in the order the waiters asked for them, also while
 * the subscriber connection is still opening. (A waiter that gave up before the connection was
 * open used to leave its channel subscribed for good: its UNSUBSCRIBE, chained on the opening
 * connection after the SUBSCRIBE, ran first. The contract suite run as an ACL user, whose
 * connections take a little longer to open, showed it as waiters that never left.)
 */
@ExtendWith(RedisExtension.class)
class SubscriptionOrderTest {
  private final TestRedis redis;

  SubscriptionOrderTest(TestRedis redis) {
    this.redis = redis;
  }

  @Test
  void unsubscribeWhileTheConnectionOpensIsSentAfterTheSubscribe() throws Exception {
    RedisClient client = RedisClient.create(redis.uri());
    ExecutorService connector = Executors.newCachedThreadPool();
    Subscriptions subs = new Subscriptions(node -> {
      try {
        Thread.sleep(300); // a connection that takes a while to open
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
      return client.connectPubSub(StringCodec.UTF8);
    }, false, connector);
    try {
      String left = unique("left");
      String kept = unique("kept");
      String back = unique("back");
      Subscriptions.Sub a = subs.subscribe(left, "");
      a.close(); // the waiter gave up before the connection opened
      Subscriptions.Sub b = subs.subscribe(kept, "");
      Subscriptions.Sub c1 = subs.subscribe(back, "");
      c1.close();
      Subscriptions.Sub c2 = subs.subscribe(back, ""); // and another waiter came back
      b.ready.get(5, TimeUnit.SECONDS);
      c2.ready.get(5, TimeUnit.SECONDS);
      TestSupport.await("the left channel unsubscribed", Duration.ofSeconds(5), () -> numsub(left) == 0);
      Thread.sleep(200); // an UNSUBSCRIBE sent out of order would show by now
      assertEquals(0, numsub(left), "subscribers of a channel every waiter left");
      assertEquals(1, numsub(kept));
      assertEquals(1, numsub(back), "subscribed again after a waiter came back");
      b.close();
      c2.close();
      TestSupport.await("every channel left", Duration.ofSeconds(5), () -> numsub(kept) + numsub(back) == 0);
    } finally {
      subs.close();
      connector.shutdownNow();
      client.shutdown();
    }
  }

  /**
   * A subscription nobody waits on any more lingers (Subscriptions.LINGER_NANOS): a waiter that
   * comes back meanwhile takes it up again, confirmed, without a SUBSCRIBE, and only a subscription
   * left idle for the whole linger is unsubscribed. (A read-mostly read/write lock's readers paid a
   * SUBSCRIBE and an UNSUBSCRIBE per wait: 1.8 of 31 Redis commands per operation.)
   */
  @Test
  void aChannelWaitedOnAgainSoonKeepsItsSubscription() throws Exception {
    RedisClient client = RedisClient.create(redis.uri());
    ExecutorService connector = Executors.newCachedThreadPool();
    Subscriptions subs = new Subscriptions(node -> client.connectPubSub(StringCodec.UTF8), false, connector);
    try {
      String channel = unique("again");
      Subscriptions.Sub first = subs.subscribe(channel, "");
      first.ready.get(5, TimeUnit.SECONDS);
      first.close(); // the last waiter leaves
      Subscriptions.Sub again = subs.subscribe(channel, ""); // and one comes back within the linger
      assertSame(first, again, "the lingering subscription is taken up again");
      assertTrue(again.ready.isDone() && !again.ready.isCompletedExceptionally(), "confirmed already");
      Thread.sleep(2 * TimeUnit.NANOSECONDS.toMillis(Subscriptions.LINGER_NANOS));
      assertEquals(1, numsub(channel), "still subscribed while a waiter uses it, past the linger");
      again.close();
      assertEquals(1, subs.channels(), "lingers after its last waiter left");
      TestSupport.await("unsubscribed after the linger", Duration.ofSeconds(5), () -> numsub(channel) == 0);
      assertEquals(0, subs.channels());
      Subscriptions.Sub later = subs.subscribe(channel, ""); // a waiter after that subscribes anew
      assertNotSame(first, later);
      later.ready.get(5, TimeUnit.SECONDS);
      assertEquals(1, numsub(channel));
      later.close();
    } finally {
      subs.close();
      connector.shutdownNow();
      client.shutdown();
    }
  }

  private long numsub(String channel) {
    String reply = redis.command("PUBSUB", "NUMSUB", channel);
    return Long.parseLong(reply.substring(reply.lastIndexOf('\n') + 1));
  }
}
