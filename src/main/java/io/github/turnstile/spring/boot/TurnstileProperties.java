package io.github.turnstile.spring.boot;

import io.github.turnstile.TurnstileOptions;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code turnstile.*} properties of the auto-configured {@link io.github.turnstile.Turnstile}.
 * Each one maps to the {@link TurnstileOptions.Builder} method of the same name, with the same
 * default and the same checks (a wrong value fails the application's start with the builder's
 * message).
 *
 * <pre>
 * turnstile.uri=redis://localhost:6379
 * turnstile.lease-time=10s
 * </pre>
 */
@ConfigurationProperties(prefix = "turnstile")
public class TurnstileProperties {

  /** Whether to auto-configure Turnstile. */
  private boolean enabled = true;

  /**
   * Redis to connect to: redis://, rediss://, redis-socket://, redis-sentinel://...#master or
   * redis-cluster://host:port,host:port. When not set, Turnstile connects where Spring Data Redis's
   * spring.data.redis.* properties point (one server, Sentinel or Cluster).
   */
  private String uri;

  /**
   * How long a hold survives in Redis without renewal; it bounds how long a crashed holder blocks
   * others. At least 100 ms.
   */
  private Duration leaseTime = Duration.ofSeconds(30);

  /** The watchdog's renewal interval: shorter than the lease time. Default: lease time / 3. */
  private Duration renewInterval;

  /** First part of every Redis key: {prefix:name}:... No braces. */
  private String keyPrefix = "turnstile";

  /** Most connections used for blocking waits (one per contended primitive at a time). */
  private int blockingPoolSize = 16;

  /** How long a command may go unanswered before Redis counts as unreachable. */
  private Duration commandTimeout = Duration.ofSeconds(5);

  /**
   * How many grants in a row a lock may pass straight between threads of this JVM before other
   * JVMs get their turn; 0 turns local hand-off off.
   */
  private int localHandoffLimit = 8;

  /**
   * How long untimed acquisitions (lock(), acquire()) keep waiting while Redis is continuously
   * unreachable before they throw; 0 fails them as soon as Redis is found unreachable.
   */
  private Duration outageTolerance = Duration.ofSeconds(60);

  /**
   * How many distinct primitive names get a metrics tag of their own; later names are recorded as
   * name=other.
   */
  private int metricsNameLimit = 100;

  /**
   * The application's name in this client's identity (with host and process id), which
   * inspections of locks, read/write locks and semaphores report for their holders. Defaults to
   * spring.application.name.
   */
  private String clientName;

  /** Replica acknowledgement of every acquisition (WAIT). */
  private final ReplicaAcks replicaAcks = new ReplicaAcks();

  private final LockCaching lockCaching = new LockCaching();

  /** Creates the properties, holding the defaults. */
  public TurnstileProperties() {}

  /** {@return whether to auto-configure Turnstile} */
  public boolean isEnabled() {
    return enabled;
  }

  /** @param enabled whether to auto-configure Turnstile */
  public void setEnabled(boolean enabled) {
    this.enabled = enabled;
  }

  /** {@return the Redis URI, or null to use Spring Data Redis's settings} */
  public String getUri() {
    return uri;
  }

  /** @param uri the Redis URI, or null to use Spring Data Redis's settings */
  public void setUri(String uri) {
    this.uri = uri;
  }

  /** {@return the lease time} */
  public Duration getLeaseTime() {
    return leaseTime;
  }

  /** @param leaseTime the lease time */
  public void setLeaseTime(Duration leaseTime) {
    this.leaseTime = leaseTime;
  }

  /** {@return the renewal interval, or null for lease time / 3} */
  public Duration getRenewInterval() {
    return renewInterval;
  }

  /** @param renewInterval the renewal interval, or null for lease time / 3 */
  public void setRenewInterval(Duration renewInterval) {
    this.renewInterval = renewInterval;
  }

  /** {@return the key prefix} */
  public String getKeyPrefix() {
    return keyPrefix;
  }

  /** @param keyPrefix the key prefix */
  public void setKeyPrefix(String keyPrefix) {
    this.keyPrefix = keyPrefix;
  }

  /** {@return the bound on blocking connections} */
  public int getBlockingPoolSize() {
    return blockingPoolSize;
  }

  /** @param blockingPoolSize the bound on blocking connections */
  public void setBlockingPoolSize(int blockingPoolSize) {
    this.blockingPoolSize = blockingPoolSize;
  }

  /** {@return the command timeout} */
  public Duration getCommandTimeout() {
    return commandTimeout;
  }

  /** @param commandTimeout the command timeout */
  public void setCommandTimeout(Duration commandTimeout) {
    this.commandTimeout = commandTimeout;
  }

  /** {@return the local hand-off limit} */
  public int getLocalHandoffLimit() {
    return localHandoffLimit;
  }

  /** @param localHandoffLimit the local hand-off limit */
  public void setLocalHandoffLimit(int localHandoffLimit) {
    this.localHandoffLimit = localHandoffLimit;
  }

  /** {@return the outage tolerance of untimed acquisitions} */
  public Duration getOutageTolerance() {
    return outageTolerance;
  }

  /** @param outageTolerance the outage tolerance of untimed acquisitions */
  public void setOutageTolerance(Duration outageTolerance) {
    this.outageTolerance = outageTolerance;
  }

  /** {@return how many names get a metrics tag of their own} */
  public int getMetricsNameLimit() {
    return metricsNameLimit;
  }

  /** @param metricsNameLimit how many names get a metrics tag of their own */
  public void setMetricsNameLimit(int metricsNameLimit) {
    this.metricsNameLimit = metricsNameLimit;
  }

  /**
   * {@return the application name in this client's identity, or null for spring.application.name}
   */
  public String getClientName() {
    return clientName;
  }

  /** @param clientName the application name in this client's identity */
  public void setClientName(String clientName) {
    this.clientName = clientName;
  }

  /** {@return the replica acknowledgement settings} */
  public ReplicaAcks getReplicaAcks() {
    return replicaAcks;
  }

  /** {@return the lock caching settings} */
  public LockCaching getLockCaching() {
    return lockCaching;
  }

  /**
   * Applies these properties to an options builder.
   *
   * @param builder the builder
   * @return the builder
   * @throws IllegalArgumentException if a value is out of range (the message names it)
   */
  TurnstileOptions.Builder applyTo(TurnstileOptions.Builder builder) {
    builder.leaseTime(leaseTime)
        .keyPrefix(keyPrefix)
        .blockingPoolSize(blockingPoolSize)
        .commandTimeout(commandTimeout)
        .localHandoffLimit(localHandoffLimit)
        .outageTolerance(outageTolerance)
        .metricsNameLimit(metricsNameLimit);
    if (renewInterval != null) {
      builder.renewInterval(renewInterval);
    }
    if (replicaAcks.getReplicas() > 0) {
      if (replicaAcks.getTimeout() == null) {
        throw new IllegalArgumentException("turnstile.replica-acks.timeout must be set when turnstile.replica-acks.replicas"
            + " is " + replicaAcks.getReplicas());
      }
      builder.replicaAcks(replicaAcks.getReplicas(), replicaAcks.getTimeout());
    }
    Boolean caching = lockCaching.getEnabled();
    if (Boolean.FALSE.equals(caching)) {
      builder.lockCaching(false);
    } else if (caching != null || replicaAcks.getReplicas() == 0) {
      builder.lockCaching(lockCaching.getMaxIdle(), lockCaching.getIdleTime());
    }
    return builder;
  }

  /** Lock caching: {@link TurnstileOptions.Builder#lockCaching(int, Duration)}. */
  public static class LockCaching {

    /**
     * Whether a lock's grant stays with this JVM after its last unlock until another client asks
     * for it (no round trip for the next lock() of this JVM). Unset: on, unless replica
     * acknowledgement is configured.
     */
    private Boolean enabled;

    /** Most lock grants this JVM keeps cached. */
    private int maxIdle = 1024;

    /** How long a cached grant is kept unused before it is released. */
    private Duration idleTime = Duration.ofSeconds(10);

    /** Creates the settings: the library's default (on, unless replica acknowledgement is set). */
    public LockCaching() {}

    /** {@return whether lock grants are cached, or null for the library's default} */
    public Boolean getEnabled() {
      return enabled;
    }

    /** @param enabled whether lock grants are cached; null for the library's default */
    public void setEnabled(Boolean enabled) {
      this.enabled = enabled;
    }

    /** {@return the most grants kept cached} */
    public int getMaxIdle() {
      return maxIdle;
    }

    /** @param maxIdle the most grants kept cached, at least 1 */
    public void setMaxIdle(int maxIdle) {
      this.maxIdle = maxIdle;
    }

    /** {@return how long a cached grant is kept unused} */
    public Duration getIdleTime() {
      return idleTime;
    }

    /** @param idleTime how long a cached grant is kept unused, positive */
    public void setIdleTime(Duration idleTime) {
      this.idleTime = idleTime;
    }
  }

  /** Replica acknowledgement: {@link TurnstileOptions.Builder#replicaAcks}. */
  public static class ReplicaAcks {

    /**
     * Replicas that must acknowledge each acquisition (WAIT) before it is returned; 0 turns
     * acknowledgement off.
     */
    private int replicas;

    /** How long an acquisition waits for the acknowledgements; required when replicas > 0. */
    private Duration timeout;

    /** Creates the settings: off. */
    public ReplicaAcks() {}

    /** {@return the replicas that must acknowledge (0: off)} */
    public int getReplicas() {
      return replicas;
    }

    /** @param replicas the replicas that must acknowledge (0: off) */
    public void setReplicas(int replicas) {
      this.replicas = replicas;
    }

    /** {@return how long an acquisition waits for acknowledgements} */
    public Duration getTimeout() {
      return timeout;
    }

    /** @param timeout how long an acquisition waits for acknowledgements */
    public void setTimeout(Duration timeout) {
      this.timeout = timeout;
    }
  }
}
