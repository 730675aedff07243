package io.github.turnstile.demo;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.RedisServerProcess;
import org.junit.jupiter.api.Test;

/** docs/FAILURE-MODEL.md's runnable fencing example does what the doc says. */
class FencingExampleTest {
  @Test
  void theStaleHoldersWriteIsRefused() throws Exception {
    try (RedisServerProcess server = RedisServerProcess.start()) {
      assertTrue(FencingExample.run(server.uri()));
    }
  }
}
