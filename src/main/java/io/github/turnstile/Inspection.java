package io.github.turnstile;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * A snapshot of who holds a distributed primitive and how many wait for it, as Redis saw it at one
 * instant: the answer to "which instance holds the lock, since when, and who is waiting?".
 * Returned by {@link DistributedLock#inspect()}, {@link DistributedReadWriteLock#inspect()},
 * {@link DistributedSemaphore#inspect()} and {@link Turnstile#inspect(Kind, String)}. Immutable and
 * thread-safe.
 *
 * <p><b>Cost.</b> Taking one is read-only and bounded: one script call on the primitive's keys
 * (at most {@value #MAX_LISTED} holders are listed; {@link #holderCount()} counts all), plus, only
 * when it names a client whose identity this Turnstile has not read before, one read of those
 * clients' identity records. It creates no key, so inspecting a name nobody uses leaves Redis as it
 * was. It is not an acquisition: the primitive may change hands the moment after.
 *
 * <p><b>Identity.</b> Each client stores its identity once ({@link TurnstileOptions.Builder#clientName
 * application name}, host, process id) in Redis while it holds anything, with the names of the
 * threads that hold something. A holder whose record is gone (its client crashed more than three
 * leases ago, or has not written it yet: within a watchdog scan of its first hold) is reported
 * with its client id only.
 *
 * <p><b>Failure model.</b> Throws {@link TurnstileException} if Redis cannot be reached (once, no
 * retry).
 */
public final class Inspection {
  /** The most holders an inspection lists; {@link #holderCount()} counts every one. */
  public static final int MAX_LISTED = 32;

  /** The kind of a primitive, as addressed by {@link Turnstile#inspect(Kind, String)}. */
  public enum Kind {
    /** A {@link DistributedLock} ({@link Turnstile#lock(String)}); label {@code lock}. */
    LOCK("lock"),
    /** A {@link DistributedReadWriteLock} ({@link Turnstile#readWriteLock(String)}); label {@code rwlock}. */
    READ_WRITE_LOCK("rwlock"),
    /** A {@link DistributedSemaphore} ({@link Turnstile#semaphore(String, int)}); label {@code semaphore}. */
    SEMAPHORE("semaphore");

    private final String label;

    Kind(String label) {
      this.label = label;
    }

    /** {@return the short label: {@code lock}, {@code rwlock} or {@code semaphore}} */
    public String label() {
      return label;
    }

    /**
     * Returns the kind with this label ({@code lock}, {@code rwlock}, {@code semaphore}; case
     * ignored).
     *
     * @param label the label
     * @return the kind
     * @throws IllegalArgumentException if no kind has this label (the message lists them)
     * @throws NullPointerException if label is null
     */
    public static Kind of(String label) {
      Objects.requireNonNull(label, "kind must not be null");
      for (Kind k : values()) {
        if (k.label.equals(label.toLowerCase(Locale.ROOT))) {
          return k;
        }
      }
      throw new IllegalArgumentException("unknown kind '" + label + "': expected lock, rwlock or semaphore");
    }
  }

  private final Kind kind;
  private final String name;
  private final Instant at;
  private final List<Holder> holders;
  private final int holderCount;
  private final int waiting;
  private final int availablePermits;
  private final boolean exists;

  Inspection(Kind kind, String name, Instant at, boolean exists, List<Holder> holders, int holderCount,
      int waiting, int availablePermits) {
    this.kind = kind;
    this.name = name;
    this.at = at;
    this.exists = exists;
    this.holders = List.copyOf(holders);
    this.holderCount = holderCount;
    this.waiting = waiting;
    this.availablePermits = availablePermits;
  }

  /** {@return the primitive's kind} */
  public Kind kind() {
    return kind;
  }

  /** {@return the primitive's name} */
  public String name() {
    return name;
  }

  /** {@return when the snapshot was taken, by the Redis server's clock} */
  public Instant inspectedAt() {
    return at;
  }

  /**
   * {@return whether anyone holds the primitive: a lock's holder, a read/write lock's writer or a
   * reader, or a semaphore's permits attributed to a client}
   */
  public boolean isHeld() {
    return holderCount > 0;
  }

  /**
   * Returns whether Redis keeps any state of this primitive that inspection reads (a semaphore:
   * whether it was created). A lock nobody holds or waits for has none; that is not an error.
   *
   * @return whether Redis keeps any state of it
   */
  public boolean exists() {
    return exists;
  }

  /**
   * Returns the holders, at most {@value #MAX_LISTED}: a lock's one holder; a read/write lock's
   * writer, or its readers; a leased semaphore's clients with their permits (the ones whose
   * registrations run out first). Empty when nobody holds it, and for a counting semaphore, whose
   * permits belong to nobody.
   *
   * @return the holders, an unmodifiable list
   */
  public List<Holder> holders() {
    return holders;
  }

  /**
   * {@return how many hold it: 0 or 1 for a lock; for a read/write lock 1 while written, else the
   * readers (whose leases may have run out but who were not reclaimed yet); for a leased semaphore
   * the clients with a registration}
   */
  public int holderCount() {
    return holderCount;
  }

  /**
   * Returns how many wait for it, where Redis knows: for a lock, the clients (JVMs) with a waiting
   * mark, each standing for one or more of its threads (a crashed waiter's mark is counted until the
   * lock's state expires); for a read/write lock, the waiting writers plus the clients whose readers
   * wait, within the last lease; for a semaphore, the single-permit requests waiting on its wake
   * list, or 1 when none does but a waiter asked for a message (waiters for several permits, and
   * waiters beyond the connection pool, wait by pub/sub and are not counted one by one). Threads
   * queued inside one JVM behind its waiting thread are known only to that JVM
   * ({@link Turnstile#activity()}).
   *
   * @return how many wait, as far as Redis knows
   */
  public int waiting() {
    return waiting;
  }

  /** {@return a semaphore's free permits (negative: a debt), or -1 for a lock} */
  public int availablePermits() {
    return availablePermits;
  }

  @Override
  public String toString() {
    StringBuilder b = new StringBuilder(kind.label).append(" '").append(name).append("': ");
    if (!isHeld()) {
      b.append("not held");
    } else {
      b.append("held by ").append(holders);
      if (holderCount > holders.size()) {
        b.append(" and ").append(holderCount - holders.size()).append(" more");
      }
    }
    b.append(", ").append(waiting).append(" waiting");
    if (kind == Kind.SEMAPHORE) {
      b.append(", ").append(availablePermits).append(" free");
    }
    return b.toString();
  }

  /**
   * One holder in an {@link Inspection}: which client (with its identity, when its record is still
   * in Redis), which thread, since when, until when, and with which fencing token. Immutable.
   */
  public static final class Holder {
    private final String clientId;
    private final String clientName;
    private final String host;
    private final long pid;
    private final String owner;
    private final String threadName;
    private final boolean writer;
    private final int permits;
    private final long fencingToken;
    private final Instant acquiredAt;
    private final Duration leaseRemaining;
    private final boolean cached;

    Holder(String clientId, String clientName, String host, long pid, String owner, String threadName,
        boolean writer, int permits, long fencingToken, Instant acquiredAt, Duration leaseRemaining, boolean cached) {
      this.cached = cached;
      this.clientId = clientId;
      this.clientName = clientName;
      this.host = host;
      this.pid = pid;
      this.owner = owner;
      this.threadName = threadName;
      this.writer = writer;
      this.permits = permits;
      this.fencingToken = fencingToken;
      this.acquiredAt = acquiredAt;
      this.leaseRemaining = leaseRemaining;
    }

    /**
     * {@return the holding client's id: 16 hex digits, also in its connections' names
     * ({@code turnstile:<id>}, see {@code CLIENT LIST})}
     */
    public String clientId() {
      return clientId;
    }

    /**
     * {@return the application name the holding client was configured with
     * ({@link TurnstileOptions.Builder#clientName}), or null if none, or if its identity record is
     * not in Redis}
     */
    public String clientName() {
      return clientName;
    }

    /** {@return the holding client's host name, or null if its identity record is not in Redis} */
    public String host() {
      return host;
    }

    /**
     * Returns whether this is a lock grant that its client caches
     * ({@link TurnstileOptions.Builder#lockCaching}): Redis holds it for that client, idle or used
     * by one of its threads, which only that client knows ({@link #owner()} is then null). Another
     * client's acquisition asks the client to give it up, and gets it about a round trip later when
     * it is idle. Always false for read/write locks and semaphores.
     *
     * @return whether the holding client caches this grant
     */
    public boolean cached() {
      return cached;
    }

    /** {@return the holding client's process id, or -1 if unknown} */
    public long pid() {
      return pid;
    }

    /**
     * {@return who holds it within the client: the thread id for a thread's hold ({@code "57"}),
     * {@code "h<n>"} for an asynchronous hold ({@code lockAsync()}), or null where Redis records
     * the client only (a read hold, semaphore permits)}
     */
    public String owner() {
      return owner;
    }

    /**
     * {@return the holding thread's name, or null if unknown: a read hold or permits (held by
     * requests or clients, not threads), or a thread the holder's client has not named in its
     * identity record yet (it does so within a watchdog scan, at most 250 ms, of the grant)}
     */
    public String threadName() {
      return threadName;
    }

    /**
     * {@return whether this is a read/write lock's writer (false for its readers and for other
     * kinds)}
     */
    public boolean isWriter() {
      return writer;
    }

    /** {@return the permits held: a semaphore client's permits, 1 otherwise} */
    public int permits() {
      return permits;
    }

    /**
     * {@return the hold's fencing token ({@link DistributedLock#fencingToken()}), or 0 where Redis
     * keeps none per hold (a read hold's token is in its own key, not read; semaphore permits)}
     */
    public long fencingToken() {
      return fencingToken;
    }

    /**
     * Returns when the hold began, by the Redis server's clock, or null if unknown (a read hold).
     * For a lock it is derived from the fencing token, which is the server time in microseconds at
     * the grant unless grants come faster than one a microsecond or the server clock stepped back
     * (then it is slightly later than the grant). For a semaphore client it is when its registration
     * began: since when it has held permits without a pause.
     *
     * @return when the hold began, or null
     */
    public Instant acquiredAt() {
      return acquiredAt;
    }

    /**
     * Returns how long the hold's lease still runs in Redis without a renewal (the holder's
     * watchdog renews it every renew interval while the holder's process lives): a value that
     * keeps shrinking across inspections means the holder stopped renewing (crashed, paused or cut
     * off). Null for a read hold (its lease key is not read; its lease is at least renewed).
     *
     * @return the lease time left, or null
     */
    public Duration leaseRemaining() {
      return leaseRemaining;
    }

    @Override
    public String toString() {
      StringBuilder b = new StringBuilder();
      b.append(clientName != null ? clientName + "@" : "").append(host != null ? host : "client " + clientId);
      if (cached) {
        b.append(" (cached)");
      }
      if (pid >= 0) {
        b.append(" pid ").append(pid);
      }
      if (threadName != null) {
        b.append(" thread '").append(threadName).append('\'');
      } else if (owner != null) {
        b.append(owner.startsWith("h") ? " async hold " : " thread #").append(owner);
      }
      if (writer) {
        b.append(" (writer)");
      }
      if (permits != 1) {
        b.append(", ").append(permits).append(" permits");
      }
      if (fencingToken != 0) {
        b.append(", token ").append(fencingToken);
      }
      if (acquiredAt != null) {
        b.append(", since ").append(acquiredAt);
      }
      if (leaseRemaining != null) {
        b.append(", lease left ").append(leaseRemaining.toMillis()).append(" ms");
      }
      return b.toString();
    }
  }
}
