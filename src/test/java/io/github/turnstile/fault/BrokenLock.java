package io.github.turnstile.fault;

import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;

/**
 * A deliberately broken lock, used only to check the checker: SET NX PX with no renewal, and an
 * unlock that deletes the key without checking who owns it. A holder that outlives its TTL thus
 * deletes the next holder's lock, and a third client gets in while the second still believes it
 * holds a valid lease.
 */
public final class BrokenLock {
  private final RedisCommands<String, String> redis;
  private final String key;
  private final long ttlMillis;

  public BrokenLock(RedisCommands<String, String> redis, String key, long ttlMillis) {
    this.redis = redis;
    this.key = key;
    this.ttlMillis = ttlMillis;
  }

  /** Polls until acquired. */
  public void lock(String me) throws InterruptedException {
    while (!"OK".equals(redis.set(key, me, SetArgs.Builder.nx().px(ttlMillis)))) {
      Thread.sleep(2);
    }
  }

  /** The bug: no owner check. */
  public void unlock() {
    redis.del(key);
  }
}
