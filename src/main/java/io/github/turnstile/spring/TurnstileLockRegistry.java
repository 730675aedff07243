package io.github.turnstile.spring;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.github.turnstile.DistributedLock;
import io.github.turnstile.LockLostException;
import io.github.turnstile.Turnstile;
import java.time.Duration;
import java.util.Objects;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

/**
 * A Spring Integration lock registry whose locks are Turnstile {@link DistributedLock}s: the
 * drop-in for {@code RedisLockRegistry} wherever Spring Integration takes a
 * {@link org.springframework.integration.support.locks.LockRegistry LockRegistry} (aggregators,
 * resequencers, the {@code LockRegistryLeaderInitiator}, idempotent receivers, file and FTP
 * filters) or where application code calls {@code executeLocked}.
 *
 * <pre>{@code
 * TurnstileLockRegistry registry = new TurnstileLockRegistry(turnstile);
 * registry.executeLocked("orders:42", () -> process(order));
 * }</pre>
 *
 * <p><b>Keys.</b> {@link #obtain(Object)} accepts any key; the lock's name is the key's
 * {@code toString()}, after an optional registry key and a colon. Spring Integration's own
 * message stores pass non-String keys (UUIDs), which work as is. Use keys whose string form is the
 * same in every JVM (strings, numbers, UUIDs, enums), since that string is what makes two JVMs
 * share a lock. Without a registry key, {@code registry.obtain("orders:42")} is a view of the lock
 * {@code turnstile.lock("orders:42")} returns: the same holds, in this JVM and in Redis, so Spring
 * and plain code can guard the same data.
 *
 * <p><b>Like {@code RedisLockRegistry}'s locks</b>, the locks it returns throw
 * {@link IllegalStateException} ("You do not own lock at ...") when a thread that does not hold
 * one calls {@code unlock()}, where a {@link DistributedLock} (like a {@code ReentrantLock})
 * throws {@link IllegalMonitorStateException}; Spring Integration's own components and code
 * migrated from {@code RedisLockRegistry} expect the former. Everything else is
 * {@link DistributedLock}'s contract.
 *
 * <p><b>How it differs from {@code RedisLockRegistry}.</b>
 * <ul>
 *   <li>A hold never expires while its holder lives: the client's watchdog renews every lease, so
 *       {@code unlock()} after a long critical section succeeds, with no "lock was released in
 *       the store due to expiration" surprise. A holder that dies releases within the lease
 *       ({@link io.github.turnstile.TurnstileOptions.Builder#leaseTime leaseTime}). If a lease is
 *       really lost (a partition or pause longer than the lease), {@code unlock()} says so with
 *       {@link LockLostException}, an {@link IllegalMonitorStateException}.</li>
 *   <li>Nothing is cached that could be evicted: Turnstile holds lock instances weakly, and a held
 *       or awaited lock is reachable from its lease or its waiter, so it is never dropped;
 *       {@link #expireUnusedOlderThan(long)} has nothing to do. As with {@code RedisLockRegistry},
 *       {@link #obtain(Object)} returns the same instance for a key while it is referenced.
 *       Distinct keys never share a local lock.</li>
 *   <li>Waiters block inside Redis on a token list that the releasing client pushes to: no
 *       spinning, no pub/sub, so nothing to choose between, and it works on one server, on a
 *       primary with replicas, on Sentinel and on Redis Cluster (every key of a lock shares one
 *       hash slot).</li>
 *   <li>Every acquisition carries a {@linkplain DistributedLock#fencingToken() fencing token}.</li>
 * </ul>
 *
 * <p><b>Spring Integration versions.</b> Works with Spring Integration 6.5 and 7.x. Their
 * interfaces differ (7.x made them generic in the lock type), so this class implements them as
 * raw types: a 6.5 class file would reject a generic signature. {@link #obtain(Object)} returns
 * Turnstile's {@link DistributedLock}, not Spring Integration 7's {@code DistributedLock}:
 * Turnstile leases are set per client and renewed while held, so there is no per-call time to live
 * ({@code lock(Duration ttl)}).
 *
 * <p>This class is thread-safe. Besides its {@link Turnstile}, which it does not close, it holds
 * only weak references to the locks it returned, so that {@link #obtain(Object)} returns the same
 * instance for a key while that instance is referenced.
 */
@SuppressWarnings("rawtypes") // one class file for Spring Integration 6.5 (plain interfaces) and 7.x (generic)
public final class TurnstileLockRegistry implements ExpirableLockRegistry, RenewableLockRegistry {

  private final Turnstile turnstile;
  private final String prefix;
  /**
   * Name to view, with weak values: the same mechanism (and settings) as the Turnstile's own
   * registry of lock instances. A view lives while the application references it; one nobody
   * references cannot be told from a new one, so dropping it loses nothing.
   */
  private final Cache<String, RegistryLock> views = Caffeine.newBuilder().weakValues().executor(Runnable::run).build();

  /**
   * Creates a registry whose lock names are the keys' string forms.
   *
   * @param turnstile the Turnstile the locks come from
   * @throws NullPointerException if turnstile is null
   */
  public TurnstileLockRegistry(Turnstile turnstile) {
    this.turnstile = Objects.requireNonNull(turnstile, "turnstile");
    this.prefix = "";
  }

  /**
   * Creates a registry whose lock names are {@code registryKey + ":" + key}, as the keys of a
   * {@code RedisLockRegistry} with that registry key are named (the Redis keys themselves differ:
   * see the class documentation).
   *
   * @param turnstile the Turnstile the locks come from
   * @param registryKey the namespace of this registry's locks; non-blank
   * @throws NullPointerException if an argument is null
   * @throws IllegalArgumentException if registryKey is blank
   */
  public TurnstileLockRegistry(Turnstile turnstile, String registryKey) {
    this.turnstile = Objects.requireNonNull(turnstile, "turnstile");
    Objects.requireNonNull(registryKey, "registryKey");
    if (registryKey.isBlank()) {
      throw new IllegalArgumentException("registryKey must not be blank");
    }
    this.prefix = registryKey + ":";
  }

  /**
   * Returns the distributed lock for this key: a view of {@code turnstile.lock(nameOf(lockKey))}
   * that throws {@link IllegalStateException}, as {@code RedisLockRegistry}'s locks do, when a
   * thread that does not hold it calls {@code unlock()} (see the class documentation). Costs no
   * round trip.
   *
   * <p>While the returned instance is referenced, every call with this key (or a key with the same
   * string form) returns that same instance, as {@code RedisLockRegistry} does: code that obtains
   * the key again while holding it (Spring Integration's own registry tests assert
   * {@code isSameAs}) gets the lock it holds. Like Turnstile's own locks, the instances are held
   * weakly, so an instance nobody references is reclaimed; a later call then returns a new one,
   * equal to it and a view of the same Turnstile lock. Another registry (on the same or another
   * Turnstile) returns its own instance, equal to this one when on the same Turnstile.
   *
   * @param lockKey the key; its {@code toString()} (after the registry key, if any) names the lock
   * @return the lock
   * @throws NullPointerException if lockKey is null
   * @throws IllegalArgumentException if the resulting name is blank
   */
  @Override
  public DistributedLock obtain(Object lockKey) {
    return views.get(nameOf(lockKey), name -> new RegistryLock(turnstile.lock(name)));
  }

  /**
   * Returns the name of the Turnstile lock that {@link #obtain(Object)} returns for this key.
   *
   * @param lockKey the key
   * @return the lock's name
   * @throws NullPointerException if lockKey is null
   */
  public String nameOf(Object lockKey) {
    Objects.requireNonNull(lockKey, "lockKey");
    return prefix + lockKey;
  }

  /**
   * Does nothing: Turnstile keeps lock instances weakly referenced, so an instance nobody
   * references is reclaimed by the garbage collector, while a held or awaited one stays reachable
   * from its lease or its waiting thread and is never dropped. Memory stays bounded without
   * calling this method, and calling it can never separate a holder from its lock.
   *
   * @param age ignored
   */
  @Override
  public void expireUnusedOlderThan(long age) {
    // nothing is cached strongly: see the javadoc
  }

  /**
   * Checks that the current thread holds the lock of this key with a live lease. No round trip is
   * needed: the client's watchdog renews every lease while it is held, so a hold never runs out
   * while its holder lives; there is nothing to extend.
   *
   * @param lockKey the key
   * @throws IllegalStateException if the current thread does not hold the lock, or its lease was
   *     lost (then the cause is the {@link LockLostException})
   * @throws NullPointerException if lockKey is null
   */
  @Override
  public void renewLock(Object lockKey) {
    DistributedLock lock = obtain(lockKey);
    try {
      lock.fencingToken(); // throws unless the current thread holds it with a live lease
    } catch (LockLostException e) {
      throw new IllegalStateException("the lease of '" + lock.name() + "' was lost: " + e.getMessage(), e);
    } catch (IllegalMonitorStateException e) {
      throw new IllegalStateException("the current thread does not hold the lock '" + lock.name() + "'", e);
    }
  }

  /**
   * As {@link #renewLock(Object)}. Turnstile's leases have the client's lease time and are renewed
   * for as long as the lock is held, so the hold outlasts any {@code ttl} while the holder lives;
   * {@code ttl} is checked, not used.
   *
   * @param lockKey the key
   * @param ttl the time to live asked for; positive
   * @throws IllegalStateException if the current thread does not hold the lock, or its lease was
   *     lost
   * @throws IllegalArgumentException if ttl is not positive
   * @throws NullPointerException if an argument is null
   */
  @Override
  public void renewLock(Object lockKey, Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.isNegative() || ttl.isZero()) {
      throw new IllegalArgumentException("ttl must be positive, was " + ttl);
    }
    renewLock(lockKey);
  }

  @Override
  public String toString() {
    return "TurnstileLockRegistry[" + (prefix.isEmpty() ? "" : "registryKey=" + prefix.substring(0, prefix.length() - 1)
        + ", ") + turnstile + "]";
  }
}
