package io.github.turnstile.bench;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.LockSupport;

/**
 * The naive baseline: {@code SET key token NX PX lease} to acquire, polling every few
 * milliseconds while someone else holds it; release with an owner-checked Lua delete. Not
 * reentrant, no fencing, no renewal, no fairness. One instance per (connection, name); threads of
 * one client share the connection (Lettuce connections are thread-safe).
 */
public final class SetNxPollLock implements Lock {
  public static final String RELEASE =
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

  private final RedisCommands<String, String> redis;
  private final String key;
  private final String releaseSha;
  private final long leaseMillis;
  private final long pollNanos;
  private final ThreadLocal<String> token = new ThreadLocal<>();

  public SetNxPollLock(RedisCommands<String, String> redis, String name, String releaseSha, long leaseMillis,
      long pollMillis) {
    this.redis = redis;
    this.key = "setnx:" + name;
    this.releaseSha = releaseSha;
    this.leaseMillis = leaseMillis;
    this.pollNanos = TimeUnit.MILLISECONDS.toNanos(pollMillis);
  }

  @Override
  public void lock() {
    if (token.get() != null) {
      throw new IllegalStateException("SetNxPollLock is not reentrant");
    }
    String t = UUID.randomUUID().toString();
    SetArgs args = SetArgs.Builder.nx().px(leaseMillis);
    while (!"OK".equals(redis.set(key, t, args))) {
      LockSupport.parkNanos(pollNanos);
    }
    token.set(t);
  }

  @Override
  public boolean tryLock() {
    String t = UUID.randomUUID().toString();
    if ("OK".equals(redis.set(key, t, SetArgs.Builder.nx().px(leaseMillis)))) {
      token.set(t);
      return true;
    }
    return false;
  }

  @Override
  public void unlock() {
    String t = token.get();
    if (t == null) {
      throw new IllegalMonitorStateException("not held by this thread");
    }
    token.remove();
    Long released = redis.evalsha(releaseSha, ScriptOutputType.INTEGER, new String[] {key}, t);
    if (released == null || released == 0L) {
      throw new IllegalMonitorStateException("lock " + key + " was no longer ours at release");
    }
  }

  @Override
  public void lockInterruptibly() {
    throw new UnsupportedOperationException();
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) {
    throw new UnsupportedOperationException();
  }

  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException();
  }
}
