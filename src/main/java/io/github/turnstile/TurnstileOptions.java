package io.github.turnstile;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * Settings of one {@link Turnstile}. Immutable; build with {@link #builder()}.
 *
 * <table>
 *   <caption>Options and defaults</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@link Builder#leaseTime leaseTime}</td><td>30 s</td>
 *       <td>how long Redis keeps a hold alive without renewal; bounds recovery from a crashed holder</td></tr>
 *   <tr><td>{@link Builder#renewInterval renewInterval}</td><td>leaseTime / 3</td>
 *       <td>the watchdog's tick: one batched renewal round trip per tick</td></tr>
 *   <tr><td>{@link Builder#keyPrefix keyPrefix}</td><td>{@code turnstile}</td>
 *       <td>first part of every key: {@code {prefix:name}:...}</td></tr>
 *   <tr><td>{@link Builder#blockingPoolSize blockingPoolSize}</td><td>16</td>
 *       <td>most connections used for blocking waits (one per contended primitive at a time)</td></tr>
 *   <tr><td>{@link Builder#commandTimeout commandTimeout}</td><td>5 s</td>
 *       <td>how long a command may go unanswered before Redis counts as unreachable</td></tr>
 *   <tr><td>{@link Builder#outageTolerance outageTolerance}</td><td>60 s</td>
 *       <td>how long an untimed acquisition ({@code lock()}, {@code acquire()}) keeps waiting
 *       through continuous Redis unavailability before it throws {@link TurnstileException}</td></tr>
 *   <tr><td>{@link Builder#localHandoffLimit localHandoffLimit}</td><td>8</td>
 *       <td>grants in a row a lock may pass straight between threads of this JVM</td></tr>
 *   <tr><td>{@link Builder#lockCaching lockCaching}</td><td>on (off with {@code replicaAcks})</td>
 *       <td>a lock's grant stays with this JVM between its holds, until another client asks for
 *       it; at most {@code lockCacheSize} idle grants (1,024), each for at most
 *       {@code lockCacheIdle} (10 s) unused</td></tr>
 *   <tr><td>{@link Builder#replicaAcks replicaAcks}</td><td>0 (off)</td>
 *       <td>replicas that must acknowledge each acquisition ({@code WAIT}), and for how long</td></tr>
 *   <tr><td>{@link Builder#leaseLossListener leaseLossListener}</td><td>none</td>
 *       <td>told of every lease lost by any primitive of this Turnstile</td></tr>
 *   <tr><td>{@link Builder#meterRegistry meterRegistry}</td><td>none</td>
 *       <td>a Micrometer {@code MeterRegistry} to record metrics in; none: nothing is recorded,
 *       and Micrometer need not be on the classpath</td></tr>
 *   <tr><td>{@link Builder#observationRegistry observationRegistry}</td><td>none</td>
 *       <td>a Micrometer {@code ObservationRegistry} to observe each wait ({@code turnstile.acquire})
 *       and hold ({@code turnstile.hold}) in: a tracer shows them as spans under the request</td></tr>
 *   <tr><td>{@link Builder#metricsNameLimit metricsNameLimit}</td><td>100</td>
 *       <td>distinct primitive names that get a {@code name} tag of their own; later names are
 *       recorded as {@code name=other}</td></tr>
 *   <tr><td>{@link Builder#clientName clientName}</td><td>none</td>
 *       <td>the application's name in this client's identity (with host and process id), which
 *       {@link DistributedLock#inspect() inspections} report for the holders</td></tr>
 * </table>
 */
public final class TurnstileOptions {
  private final Duration leaseTime;
  private final Duration renewInterval;
  private final String keyPrefix;
  private final int blockingPoolSize;
  private final Duration commandTimeout;
  private final Duration outageTolerance;
  private final List<LeaseLossListener> leaseLossListeners;
  private final int replicaAcks;
  private final Duration replicaAckTimeout;
  private final int localHandoffLimit;
  private final boolean lockCaching;
  private final int lockCacheSize;
  private final Duration lockCacheIdle;
  /** A Micrometer MeterRegistry, or null; typed Object so that Micrometer stays optional. */
  private final Object meterRegistry;
  /** A Micrometer ObservationRegistry, or null; typed Object so that Micrometer stays optional. */
  private final Object observationRegistry;
  private final int metricsNameLimit;
  private final String clientName;

  private TurnstileOptions(Builder b) {
    this.replicaAcks = b.replicaAcks;
    this.localHandoffLimit = b.localHandoffLimit;
    this.lockCaching = b.lockCaching != null ? b.lockCaching : replicaAcks == 0;
    this.lockCacheSize = b.lockCacheSize;
    this.lockCacheIdle = b.lockCacheIdle;
    if (lockCaching && replicaAcks > 0) {
      throw new IllegalArgumentException("lockCaching cannot be combined with replicaAcks: a take from the"
          + " cache writes nothing that replicas could acknowledge");
    }
    this.replicaAckTimeout = b.replicaAckTimeout;
    this.leaseTime = b.leaseTime;
    this.renewInterval = b.renewInterval != null ? b.renewInterval : b.leaseTime.dividedBy(3);
    if (renewInterval.multipliedBy(2).compareTo(leaseTime) > 0) {
      throw new IllegalArgumentException("renewInterval (" + renewInterval + ") must be at most half the"
          + " leaseTime (" + leaseTime + "): a lease must survive one lost renewal (the default is a third)");
    }
    this.keyPrefix = b.keyPrefix;
    this.blockingPoolSize = b.blockingPoolSize;
    this.commandTimeout = b.commandTimeout;
    this.outageTolerance = b.outageTolerance;
    this.leaseLossListeners = List.copyOf(b.listeners);
    this.meterRegistry = b.meterRegistry;
    this.observationRegistry = b.observationRegistry;
    this.metricsNameLimit = b.metricsNameLimit;
    this.clientName = b.clientName;
  }

  /** {@return the defaults} */
  public static TurnstileOptions defaults() {
    return builder().build();
  }

  /** {@return a builder holding the defaults} */
  public static Builder builder() {
    return new Builder();
  }

  /** {@return the lease time} */
  public Duration leaseTime() {
    return leaseTime;
  }

  /** {@return the watchdog's renewal interval} */
  public Duration renewInterval() {
    return renewInterval;
  }

  /** {@return the key prefix} */
  public String keyPrefix() {
    return keyPrefix;
  }

  /** {@return the bound on blocking connections} */
  public int blockingPoolSize() {
    return blockingPoolSize;
  }

  /** {@return the command timeout} */
  public Duration commandTimeout() {
    return commandTimeout;
  }

  /** {@return how long an untimed acquisition waits through continuous Redis unavailability} */
  public Duration outageTolerance() {
    return outageTolerance;
  }

  /** {@return how many grants in a row a lock may pass between threads of this JVM (0: never)} */
  public int localHandoffLimit() {
    return localHandoffLimit;
  }

  /**
   * {@return whether a {@link DistributedLock}'s grant stays with this JVM between its holds (see
   * {@link Builder#lockCaching})}
   */
  public boolean lockCaching() {
    return lockCaching;
  }

  /** {@return the most idle lock grants this JVM keeps (see {@link Builder#lockCaching})} */
  public int lockCacheSize() {
    return lockCacheSize;
  }

  /** {@return how long an idle lock grant is kept unused (see {@link Builder#lockCaching})} */
  public Duration lockCacheIdle() {
    return lockCacheIdle;
  }

  /** {@return replicas that must acknowledge each acquisition (0: no acknowledgement awaited)} */
  public int replicaAcks() {
    return replicaAcks;
  }

  /** {@return how long an acquisition waits for {@link #replicaAcks()} acknowledgements} */
  public Duration replicaAckTimeout() {
    return replicaAckTimeout;
  }

  /** {@return the listeners told of every lease loss} */
  public List<LeaseLossListener> leaseLossListeners() {
    return leaseLossListeners;
  }

  /** Returns the Micrometer registry, or null (package-private: Object, so no Micrometer type is named). */
  Object meterRegistry() {
    return meterRegistry;
  }

  /**
   * Returns the Micrometer Observation registry, or null (package-private: Object, so no Micrometer type is named).
   */
  Object observationRegistry() {
    return observationRegistry;
  }

  /** {@return how many distinct names get a metrics tag of their own} */
  public int metricsNameLimit() {
    return metricsNameLimit;
  }

  /**
   * {@return the application name that is part of this client's identity, or null if none was set}
   */
  public String clientName() {
    return clientName;
  }

  @Override
  public String toString() {
    return "TurnstileOptions{leaseTime=" + leaseTime + ", renewInterval=" + renewInterval
        + ", keyPrefix='" + keyPrefix + "', blockingPoolSize=" + blockingPoolSize
        + ", commandTimeout=" + commandTimeout + ", outageTolerance=" + outageTolerance
        + ", localHandoffLimit=" + localHandoffLimit
        + (lockCaching ? ", lockCaching=" + lockCacheSize + " for " + lockCacheIdle : "")
        + ", replicaAcks=" + replicaAcks
        + (replicaAcks > 0 ? " within " + replicaAckTimeout : "")
        + ", listeners=" + leaseLossListeners.size()
        + ", metrics=" + (meterRegistry == null ? "off" : "on, nameLimit=" + metricsNameLimit)
        + ", observations=" + (observationRegistry == null ? "off" : "on")
        + (clientName == null ? "" : ", clientName='" + clientName + "'") + '}';
  }

  /** Builds {@link TurnstileOptions}. Not thread-safe. */
  public static final class Builder {
    private Duration leaseTime = Duration.ofSeconds(30);
    private Duration renewInterval;
    private String keyPrefix = "turnstile";
    private int blockingPoolSize = 16;
    private Duration commandTimeout = Duration.ofSeconds(5);
    private Duration outageTolerance = Duration.ofSeconds(60);
    private final java.util.ArrayList<LeaseLossListener> listeners = new java.util.ArrayList<>();
    private int replicaAcks;
    private Duration replicaAckTimeout = Duration.ZERO;
    private int localHandoffLimit = 8;
    /** null: the default, on unless replicaAcks is set. */
    private Boolean lockCaching;
    private int lockCacheSize = 1024;
    private Duration lockCacheIdle = Duration.ofSeconds(10);
    private Object meterRegistry;
    private Object observationRegistry;
    private int metricsNameLimit = 100;
    private String clientName;

    private Builder() {}

    /** The longest {@link #clientName}: it is stored in Redis once per client. */
    static final int MAX_CLIENT_NAME_LENGTH = 256;

    /**
     * Sets the application's name, part of this client's identity together with the host name and
     * the process id. The identity is stored in Redis once per client (not per acquisition) while
     * the client holds anything, and {@link DistributedLock#inspect() inspections} name holders by
     * it. Default none: the identity is the host and the process id alone.
     *
     * @param name non-blank, at most 256 characters, or null for none
     * @return this builder
     * @throws IllegalArgumentException if name is blank or longer than 256 characters
     */
    public Builder clientName(String name) {
      if (name != null && (name.isBlank() || name.length() > MAX_CLIENT_NAME_LENGTH)) {
        throw new IllegalArgumentException("clientName must be non-blank and at most " + MAX_CLIENT_NAME_LENGTH
            + " characters, was " + (name.isBlank() ? "blank" : name.length() + " characters"));
      }
      this.clientName = name;
      return this;
    }

    /**
     * Sets the lease: how long a hold survives in Redis without renewal. It bounds how long a
     * crashed holder blocks others. At least 100 ms; default 30 s.
     *
     * @param leaseTime the lease
     * @return this builder
     */
    public Builder leaseTime(Duration leaseTime) {
      Objects.requireNonNull(leaseTime, "leaseTime");
      if (leaseTime.toMillis() < 100) {
        throw new IllegalArgumentException("leaseTime must be at least 100 ms, was " + leaseTime);
      }
      this.leaseTime = leaseTime;
      return this;
    }

    /**
     * Sets the watchdog's renewal interval. At most half the lease, so that a lease survives one
     * lost renewal (checked by {@link #build()}); default lease / 3.
     *
     * @param renewInterval the interval
     * @return this builder
     */
    public Builder renewInterval(Duration renewInterval) {
      Objects.requireNonNull(renewInterval, "renewInterval");
      if (renewInterval.toMillis() < 10) {
        throw new IllegalArgumentException("renewInterval must be at least 10 ms, was " + renewInterval);
      }
      this.renewInterval = renewInterval;
      return this;
    }

    /**
     * Sets the prefix of every key. Must be non-blank, at most 64 characters, and contain no '{'
     * or '}', since keys are hash-tagged as {@code {prefix:name}}. Default {@code turnstile}.
     *
     * @param keyPrefix the prefix
     * @return this builder
     */
    public Builder keyPrefix(String keyPrefix) {
      Objects.requireNonNull(keyPrefix, "keyPrefix");
      if (keyPrefix.isBlank() || keyPrefix.indexOf('{') >= 0 || keyPrefix.indexOf('}') >= 0) {
        throw new IllegalArgumentException(
            "keyPrefix must be non-blank and contain no '{' or '}', was '" + keyPrefix + "'");
      }
      if (keyPrefix.length() > 64) {
        throw new IllegalArgumentException("keyPrefix must be at most 64 characters, was " + keyPrefix.length());
      }
      this.keyPrefix = keyPrefix;
      return this;
    }

    /**
     * Sets the most connections this Turnstile opens for blocking waits ({@code BLPOP} on a
     * primitive's wake list: one hop, FIFO across clients). Within one JVM only one acquisition per
     * primitive waits in Redis, so this bounds the number of primitives waited on that way at the
     * same time; waiters beyond it wait by pub/sub, on one subscriber connection per node. Default 16.
     *
     * @param size at least 1
     * @return this builder
     */
    public Builder blockingPoolSize(int size) {
      this.blockingPoolSize = atLeast(size, 1, "blockingPoolSize");
      return this;
    }

    /**
     * Sets the longest wait for the reply to a non-blocking command. Default 5 s.
     *
     * @param timeout the timeout
     * @return this builder
     */
    public Builder commandTimeout(Duration timeout) {
      this.commandTimeout = positive(Objects.requireNonNull(timeout, "commandTimeout"), "commandTimeout");
      return this;
    }

    /**
     * Sets how long an untimed acquisition ({@code lock()}, {@code lockInterruptibly()},
     * {@code acquire()}, {@code acquireUninterruptibly()}, on every primitive) keeps waiting while
     * Redis is continuously unreachable: disconnected, not answering within the
     * {@link #commandTimeout command timeout}, restarting, or failing over. Shorter outages are
     * ridden through: the call goes on waiting and succeeds once Redis answers again. After this
     * long without an answer, the call throws {@link TurnstileException}, saying for how long
     * Redis was unreachable, and holds nothing. Timed calls ({@code tryLock(t)},
     * {@code tryAcquire(t)}) are bounded by their own timeout instead. {@link Duration#ZERO}
     * makes untimed calls fail as soon as Redis is found unreachable. Default 60 s.
     *
     * <p>The outage counts for each call from when this client lost Redis (the first command
     * that found it unreachable since its last answer), or from the call's start if later; a
     * call queued behind others of this JVM ({@code lockAsync()} behind an earlier one) does
     * not start a clock of its own when its turn comes, so a queue fails together.
     *
     * @param tolerance not negative
     * @return this builder
     */
    public Builder outageTolerance(Duration tolerance) {
      Objects.requireNonNull(tolerance, "outageTolerance");
      if (tolerance.isNegative()) {
        throw new IllegalArgumentException("outageTolerance must not be negative, was " + tolerance);
      }
      this.outageTolerance = tolerance;
      return this;
    }

    /**
     * Adds a listener told of every lease lost by any primitive of this Turnstile.
     *
     * @param listener the listener
     * @return this builder
     */
    public Builder leaseLossListener(LeaseLossListener listener) {
      listeners.add(Objects.requireNonNull(listener, "listener"));
      return this;
    }

    /**
     * Sets how many grants in a row a {@link DistributedLock} may pass straight from one holder of
     * this Turnstile (a thread, or an async hold) to the next acquisition waiting for it (a thread
     * or a future): the release moves the hold in Redis to the waiter with one script (a new
     * fencing token included), which saves the round trips of a release, a wake-up and an attempt.
     * The count runs only while another client waits; after that many, the lock is released in
     * Redis, and this JVM's next waiter stands back briefly so that those of other JVMs go first.
     * This bounds how long other JVMs can be passed over; 0 turns local hand-off off (every release
     * goes through Redis, and this JVM's waiters wait there in line with others). The write lock
     * of a read/write lock never hands off locally. Default 8.
     *
     * @param limit at least 0
     * @return this builder
     */
    public Builder localHandoffLimit(int limit) {
      this.localHandoffLimit = atLeast(limit, 0, "localHandoffLimit");
      return this;
    }

    /**
     * Keeps a {@link DistributedLock}'s grant in this JVM after its last unlock, while no other
     * client wants it: the next {@code lock()} or {@code tryLock()} of any thread (or future) of
     * this JVM takes it with no round trip to Redis, with a fencing token above every earlier one
     * (docs/DESIGN.md §17). Redis keeps the grant held by this client, its lease renewed as any
     * hold's. Another client that finds it so asks this JVM to give it up (one pub/sub message,
     * about one round trip): at once when no thread of this JVM holds it, else at the end of the
     * current hold; after that the lock is not cached again until it has stayed uncontended for
     * 1 s. A lock that another JVM caches idle is free by {@link DistributedLock#isLocked()};
     * {@code tryLock()} from another client waits for that JVM's answer (the lock given up, or
     * "a thread uses it": false), up to 1 s when none comes.
     *
     * <p>At most {@code maxIdle} idle grants are kept (the least recently used goes first), each
     * for at most {@code idleTime}; {@link Turnstile#close()} releases them all. Not with
     * {@link #replicaAcks} (a take from the cache writes nothing a replica could acknowledge);
     * the write lock of a read/write lock is never cached.
     *
     * <p>On by default (1,024 grants, 10 s each), unless {@link #replicaAcks} is set. The cost: a
     * JVM that crashes while it caches a lock idle leaves that lock unavailable to others until its
     * lease runs out ({@link #leaseTime}), as a lock held at the crash is; turn caching off
     * ({@code lockCaching(false)}) where locks must be free the moment their last holder is gone.
     *
     * @param maxIdle at least 1
     * @param idleTime positive
     * @return this builder
     */
    public Builder lockCaching(int maxIdle, Duration idleTime) {
      atLeast(maxIdle, 1, "lockCaching: maxIdle");
      this.lockCacheIdle = positive(Objects.requireNonNull(idleTime, "idleTime"), "lockCaching: idleTime");
      this.lockCacheSize = maxIdle;
      this.lockCaching = true;
      return this;
    }

    /**
     * Turns lock caching on with its defaults (1,024 idle grants, 10 s each) or off; see
     * {@link #lockCaching(int, Duration)}. On by default, unless {@link #replicaAcks} is set.
     *
     * @param on whether lock grants are cached
     * @return this builder
     */
    public Builder lockCaching(boolean on) {
      this.lockCaching = on;
      return this;
    }

    /**
     * Makes every acquisition wait until {@code replicas} replicas of the Redis primary that
     * holds it acknowledged it ({@code WAIT}), for at most {@code timeout}. If fewer acknowledge
     * in time, the acquisition is given back and the acquiring method throws
     * {@link TurnstileException}. Releases and renewals do not wait: losing one in a failover
     * costs at most a lease of delay, never an overlap. This narrows the window in which a
     * failover to a replica that had not yet received the acquisition lets a second client in;
     * it does not close it (see docs/FAILURE-MODEL.md). Each acknowledged acquisition costs one
     * more round trip and holds a pooled connection meanwhile. With fewer than {@code replicas}
     * live replicas, every acquisition fails. Default: 0 (no acknowledgement awaited).
     *
     * @param replicas replicas that must acknowledge; 0 turns acknowledgement off
     * @param timeout how long to wait for them; positive when {@code replicas > 0}
     * @return this builder
     */
    public Builder replicaAcks(int replicas, Duration timeout) {
      Objects.requireNonNull(timeout, "timeout");
      atLeast(replicas, 0, "replicas");
      if (replicas > 0) {
        positive(timeout, "the replica acknowledgement timeout");
      }
      this.replicaAcks = replicas;
      this.replicaAckTimeout = timeout;
      return this;
    }

    /**
     * Records metrics in this Micrometer registry: per primitive (tags {@code primitive} and
     * {@code name}), acquisitions, wait and hold times (timers with percentiles), timeouts,
     * interrupts, lease renewals and renewal failures, lease losses and reclaimed crashed holders;
     * per client (tag {@code client}), gauges of the blocking-connection pool and of the leases
     * renewed. Default: none, and then no Micrometer class is ever loaded, so Micrometer (an
     * optional dependency) may be absent from the classpath.
     *
     * @param registry the registry, or {@code null} for none
     * @return this builder
     */
    public Builder meterRegistry(io.micrometer.core.instrument.MeterRegistry registry) {
      this.meterRegistry = registry;
      return this;
    }

    /**
     * Observes each acquisition ({@code turnstile.acquire}, from the call to its outcome) and each
     * hold ({@code turnstile.hold}, from the grant to its release or loss) in this Micrometer
     * Observation registry, so that a tracer (Micrometer Tracing) shows a lock wait as a span under
     * the request that waited. Low-cardinality keys: {@code primitive} (lock, read lock, write
     * lock, semaphore), {@code outcome} (acquired, timed out, interrupted, cancelled, failed; for
     * holds released or lost) and {@code tier} (none, local hand-off, list, pub/sub); the
     * primitive's name is the high-cardinality key {@code name}. An acquisition's observation is
     * started on the calling thread, so the current observation is its parent. Default: none, and
     * then no Micrometer class is loaded for it.
     *
     * @param registry the registry, or {@code null} for none
     * @return this builder
     */
    public Builder observationRegistry(io.micrometer.observation.ObservationRegistry registry) {
      this.observationRegistry = registry;
      return this;
    }

    /**
     * Sets how many distinct primitive names get a {@code name} tag of their own: the first
     * {@code limit} names this client uses. Later names are recorded under {@code name=other},
     * which bounds the number of time series however many names the application uses. Default 100.
     *
     * @param limit at least 0 (0: every name is recorded as {@code other})
     * @return this builder
     */
    public Builder metricsNameLimit(int limit) {
      this.metricsNameLimit = atLeast(limit, 0, "metricsNameLimit");
      return this;
    }

    /** {@return the options} */
    public TurnstileOptions build() {
      return new TurnstileOptions(this);
    }

    /** {@code value}, or an IllegalArgumentException naming {@code what} if it is below {@code min}. */
    private static int atLeast(int value, int min, String what) {
      if (value < min) {
        throw new IllegalArgumentException(what + (min == 0 ? " must not be negative" : " must be at least " + min)
            + ", was " + value);
      }
      return value;
    }

    /** {@code d}, or an IllegalArgumentException naming {@code what} if it is not positive. */
    private static Duration positive(Duration d, String what) {
      if (d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + " must be positive, was " + d);
      }
      return d;
    }
  }
}
