package io.github.turnstile;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import java.util.function.Function;

/**
 * The registry of one kind of primitive: name to instance, with weak values, so that an instance
 * lives as long as the application (or a lease in the watchdog, or a waiting thread) references it.
 * Concurrent {@link #get}s of one name create one instance and all return it (Caffeine computes a
 * missing entry atomically). Maintenance runs on the caller's thread.
 */
final class Registry<T> {
  private final Cache<String, T> cache = Caffeine.newBuilder().weakValues().executor(Runnable::run).build();

  /** Returns the instance of this name, made by {@code factory} if there is none. */
  T get(String name, Function<String, T> factory) {
    return cache.get(name, factory);
  }

  /** Returns instances in the registry after draining collected ones (Caffeine drains 1000 a pass). */
  long size() {
    long size;
    long previous = Long.MAX_VALUE;
    while ((size = cache.estimatedSize()) < previous) {
      previous = size;
      cache.cleanUp();
    }
    return size;
  }

  /** Removes the instance of this name if it is {@code value} (one that failed to initialize). */
  void remove(String name, T value) {
    cache.asMap().remove(name, value);
  }
}
