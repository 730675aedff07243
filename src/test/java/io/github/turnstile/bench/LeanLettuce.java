package io.github.turnstile.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.metrics.CommandLatencyRecorder;
import io.lettuce.core.resource.ClientResources;
import java.util.concurrent.TimeUnit;

/**
 * Plain Lettuce clients for the benchmarks' baselines (two PINGs, the {@code SET NX PX} recipe),
 * configured as Turnstile configures its own: without Lettuce's per-command latency histograms,
 * which Lettuce records whenever LatencyUtils and HdrHistogram are on the class path (they are
 * here, through Micrometer). A baseline must not carry a cost that Turnstile does not.
 */
public final class LeanLettuce {
  private LeanLettuce() {}

  /**
   * A client with its own resources.
   *
   * @param uri the Redis URI
   * @return the client; close it with {@link #shutdown}
   */
  public static RedisClient create(String uri) {
    ClientResources resources = ClientResources.builder()
        .commandLatencyRecorder(CommandLatencyRecorder.disabled())
        .build();
    return RedisClient.create(resources, uri);
  }

  /**
   * Shuts down a client made by {@link #create} and its resources.
   *
   * @param client the client
   */
  public static void shutdown(RedisClient client) {
    ClientResources resources = client.getResources(); // its own (a client does not shut them down)
    client.shutdown(0, 2, TimeUnit.SECONDS);
    resources.shutdown(0, 2, TimeUnit.SECONDS);
  }
}
