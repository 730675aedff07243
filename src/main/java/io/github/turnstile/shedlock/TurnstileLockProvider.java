package io.github.turnstile.shedlock;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.LockLostException;
import io.github.turnstile.Turnstile;
import io.github.turnstile.TurnstileException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link ExtensibleLockProvider} on Turnstile locks: each job name is a
 * {@link DistributedLock}, held with a lease that the client's watchdog renews.
 *
 * <pre>{@code
 * @Bean
 * LockProvider lockProvider(Turnstile turnstile) {
 *   return new TurnstileLockProvider(turnstile);
 * }
 * }</pre>
 *
 * <p><b>What changes against a storage-based provider.</b> ShedLock's Redis and JDBC providers
 * store "locked until {@code lockAtMostFor}" and nothing else, so a node that crashes mid-job
 * blocks the job everywhere until that guess runs out. Here the lock is a lease: a node that dies
 * releases it within the Turnstile lease time
 * ({@link io.github.turnstile.TurnstileOptions.Builder#leaseTime leaseTime}, 30 s by default),
 * whatever {@code lockAtMostFor} says. Keep the lease time at or below your shortest
 * {@code lockAtMostFor}, or a crashed node's lock outlives that {@code lockAtMostFor}.
 *
 * <p><b>ShedLock's settings.</b>
 * <ul>
 *   <li>{@code lockAtMostFor}: a live node releases the lock when it runs out, even if the job is
 *       still running (as ShedLock specifies), and logs a WARNING; the job's later unlock does
 *       nothing.</li>
 *   <li>{@code lockAtLeastFor}: an unlock before it has run out keeps the lock held until then; the
 *       lock is released at that moment by this provider. Should the node die in that window, the
 *       lock is free within the lease instead.</li>
 *   <li>{@code extend} (ShedLock's {@code LockExtender}): moves both deadlines, counted from now,
 *       and answers empty if the lock is no longer held (released, run past {@code lockAtMostFor},
 *       or its lease lost). A lock that is held never needs extending to survive: extending only
 *       moves the deadlines.</li>
 *   <li>Unlock always checks the owner: Redis releases only the acquisition that this node holds,
 *       never a later holder's, and a {@link SimpleLock} that was unlocked or extended is spent
 *       (ShedLock throws {@link IllegalStateException} on a second use).</li>
 * </ul>
 *
 * <p><b>Threads.</b> Turnstile locks belong to threads, and ShedLock may release a lock from
 * another thread (a deferred release, a keep-alive, a job that hops threads). So every acquisition
 * and release runs on one daemon thread of this provider, which holds all its locks; callers wait
 * for it. Acquiring does not wait for the lock: one round trip, as ShedLock expects. A job name
 * locked by this node is refused to this node as to any other, until it is released.
 *
 * <p><b>Names.</b> The lock of job {@code name} is {@code turnstile.lock(prefix + name)}; the prefix
 * is empty unless given. Its Redis keys are Turnstile's ({@code {keyPrefix:name}:lock}, ...), not
 * ShedLock's {@code job-lock:...} keys: the two providers do not exclude each other, so switch
 * every node of an application at once.
 *
 * <p>{@link #close()} releases every lock this provider holds and stops its thread; it does not
 * close the {@link Turnstile}. This class is thread-safe.
 */
public final class TurnstileLockProvider implements ExtensibleLockProvider, AutoCloseable {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile.shedlock");

  private final Turnstile turnstile;
  private final String prefix;
  /** The one thread that acquires, holds and releases every lock of this provider. */
  private final ScheduledThreadPoolExecutor owner;
  private volatile Thread ownerThread;
  /** Job lock name → its current hold. Touched only on the owner thread. */
  private final Map<String, Hold> holds = new HashMap<>();
  private volatile boolean closed;

  /**
   * Creates a provider whose lock for job {@code name} is {@code turnstile.lock(name)}.
   *
   * @param turnstile the Turnstile the locks come from; not closed by this provider
   * @throws NullPointerException if turnstile is null
   */
  public TurnstileLockProvider(Turnstile turnstile) {
    this(turnstile, "");
  }

  /**
   * Creates a provider whose lock for job {@code name} is {@code turnstile.lock(prefix + name)}.
   *
   * @param turnstile the Turnstile the locks come from; not closed by this provider
   * @param prefix prepended to every job name (for example {@code "shedlock:"}); may be empty
   * @throws NullPointerException if an argument is null
   */
  public TurnstileLockProvider(Turnstile turnstile, String prefix) {
    this.turnstile = Objects.requireNonNull(turnstile, "turnstile");
    this.prefix = Objects.requireNonNull(prefix, "prefix");
    this.owner = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "turnstile-shedlock");
      t.setDaemon(true);
      ownerThread = t;
      return t;
    });
    owner.setRemoveOnCancelPolicy(true);
    owner.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
  }

  /**
   * Acquires the lock of this job if no node (this one included) holds it: one round trip, no
   * waiting. The lock is released when the returned lock is unlocked (or, if
   * {@code lockAtLeastFor} has not run out yet, when it does), when {@code lockAtMostFor} runs
   * out, or within the lease if this node dies.
   *
   * @param lockConfiguration the job's name and deadlines
   * @return the held lock, or empty if the job is locked
   * @throws TurnstileException if Redis cannot be reached
   * @throws IllegalStateException if this provider is closed
   */
  @Override
  public Optional<SimpleLock> lock(LockConfiguration lockConfiguration) {
    Objects.requireNonNull(lockConfiguration, "lockConfiguration");
    if (closed) {
      throw new IllegalStateException("this TurnstileLockProvider is closed");
    }
    return onOwner(() -> acquire(lockConfiguration));
  }

  /** Releases every lock this provider holds, now, and stops its thread. Idempotent. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      onOwner(() -> {
        for (Hold h : new ArrayList<>(holds.values())) {
          release(h, "the lock provider closed");
        }
        return null;
      });
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.WARNING, "releasing the ShedLock locks at close failed: " + e);
    } finally {
      owner.shutdownNow();
    }
  }

  @Override
  public String toString() {
    return "TurnstileLockProvider[" + (prefix.isEmpty() ? "" : "prefix='" + prefix + "', ") + turnstile + "]";
  }

  // ---- on the owner thread ----

  private Optional<SimpleLock> acquire(LockConfiguration config) {
    String name = prefix + config.getName();
    Hold existing = holds.get(name);
    if (existing != null) {
      if (existing.lock.isHeldByCurrentThread()) {
        return Optional.empty(); // this node holds it: a run in progress, or its lockAtLeastFor
      }
      release(existing, "its lease was lost"); // clears the lost hold; the lock may be free again
    }
    DistributedLock lock = turnstile.lock(name);
    if (!lock.tryLock()) {
      return Optional.empty();
    }
    Hold hold = new Hold(name, lock);
    holds.put(name, hold);
    scheduleAtMost(hold, config);
    return Optional.of(new JobLock(config, hold));
  }

  private void scheduleAtMost(Hold hold, LockConfiguration config) {
    cancelPending(hold);
    long delay = millisUntil(config.getLockAtMostUntil());
    hold.pending = owner.schedule(() -> {
      if (!hold.released) {
        // Release first, then log: the first log call of a JVM can take a while (the logging
        // framework starting), and other nodes must not wait for it
        release(hold, "lockAtMostFor ran out");
        LOG.log(System.Logger.Level.WARNING, "ShedLock job '" + hold.name + "' still held its lock after lockAtMostFor ("
            + config.getLockAtMostFor() + "): released, so other nodes may run the job now");
      }
    }, delay, TimeUnit.MILLISECONDS);
  }

  private void unlockHold(Hold hold, LockConfiguration config) {
    if (hold.released) {
      return; // released at lockAtMostFor, or lost: nothing of this acquisition is left to release
    }
    cancelPending(hold);
    hold.unlocked = true;
    long delay = millisUntil(config.getLockAtLeastUntil());
    if (delay > 0) {
      hold.pending = owner.schedule(() -> release(hold, "lockAtLeastFor ran out"), delay, TimeUnit.MILLISECONDS);
    } else {
      release(hold, "unlocked");
    }
  }

  private Optional<SimpleLock> extendHold(Hold hold, LockConfiguration newConfig) {
    if (hold.released || hold.unlocked) {
      return Optional.empty();
    }
    if (!hold.lock.isHeldByCurrentThread()) {
      release(hold, "its lease was lost");
      return Optional.empty();
    }
    scheduleAtMost(hold, newConfig);
    return Optional.of(new JobLock(newConfig, hold));
  }

  /** Ends the hold in Redis, at most once; the lock's owner check makes a stale hold harmless. */
  private void release(Hold hold, String why) {
    if (hold.released) {
      return;
    }
    hold.released = true;
    cancelPending(hold);
    holds.remove(hold.name, hold);
    try {
      hold.lock.unlock();
    } catch (LockLostException e) {
      LOG.log(System.Logger.Level.WARNING, "ShedLock job '" + hold.name + "' had lost its lock before it was released ("
          + why + "): " + e.getMessage());
    } catch (TurnstileException e) {
      LOG.log(System.Logger.Level.WARNING, "could not release the lock of ShedLock job '" + hold.name + "' (" + why
          + "); it frees itself within the lease: " + e.getMessage());
    }
  }

  private static void cancelPending(Hold hold) {
    ScheduledFuture<?> pending = hold.pending;
    hold.pending = null;
    if (pending != null) {
      pending.cancel(false);
    }
  }

  private static long millisUntil(Instant instant) {
    return Math.max(0, Duration.between(ClockProvider.now(), instant).toMillis());
  }

  // ---- calling the owner thread ----

  /**
   * Runs a task on the owner thread and waits for it, uninterruptibly (a lock acquired for a caller
   * that stopped waiting would stay held until lockAtMostFor); the interrupt status is kept.
   */
  private <T> T onOwner(Callable<T> task) {
    if (Thread.currentThread() == ownerThread) {
      try {
        return task.call();
      } catch (RuntimeException | Error e) {
        throw e;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }
    Future<T> future;
    try {
      future = owner.submit(task);
    } catch (RejectedExecutionException e) {
      throw new IllegalStateException("this TurnstileLockProvider is closed", e);
    }
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return future.get();
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          if (cause instanceof RuntimeException) {
            throw (RuntimeException) cause;
          }
          if (cause instanceof Error) {
            throw (Error) cause;
          }
          throw new IllegalStateException(cause);
        } catch (java.util.concurrent.CancellationException e) {
          throw new IllegalStateException("this TurnstileLockProvider is closed", e);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** One acquisition of a job lock; fields are touched only on the owner thread. */
  private static final class Hold {
    final String name;
    final DistributedLock lock;
    /** The release scheduled at lockAtMostUntil (running) or lockAtLeastUntil (unlocked). */
    ScheduledFuture<?> pending;
    /** The job unlocked; the hold lasts until lockAtLeastUntil. */
    boolean unlocked;
    /** Released in Redis (or found lost): final. */
    boolean released;

    Hold(String name, DistributedLock lock) {
      this.name = name;
      this.lock = lock;
    }
  }

  /** The lock ShedLock sees; spent after unlock or extend (checked by AbstractSimpleLock). */
  private final class JobLock extends AbstractSimpleLock {
    private final Hold hold;

    JobLock(LockConfiguration config, Hold hold) {
      super(config);
      this.hold = hold;
    }

    @Override
    protected void doUnlock() {
      try {
        onOwner(() -> {
          unlockHold(hold, lockConfiguration);
          return null;
        });
      } catch (IllegalStateException e) {
        if (!closed) {
          throw e;
        }
        // closed: close() released every hold already
      }
    }

    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration newConfiguration) {
      if (closed) {
        return Optional.empty();
      }
      return onOwner(() -> extendHold(hold, newConfiguration));
    }

    @Override
    public String toString() {
      return "TurnstileLockProvider.JobLock[" + lockConfiguration + "]";
    }
  }
}
