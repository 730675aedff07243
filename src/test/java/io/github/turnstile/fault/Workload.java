package io.github.turnstile.fault;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.DistributedReadWriteLock;
import io.github.turnstile.DistributedSemaphore;
import io.github.turnstile.LockLostException;
import io.github.turnstile.Turnstile;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

/**
 * A steady load on one lock, one semaphore and one read/write lock of the same name, from every
 * given client, with <b>untimed</b> acquisitions only: per client, {@code lockThreads} threads
 * looping {@code lock()} (even threads) or {@code lockInterruptibly()} (odd) / hold 1-3 ms /
 * {@code unlock()}; {@code semThreads} threads looping {@code acquire()} or
 * {@code acquireUninterruptibly()} / hold / {@code release()} on a semaphore of
 * {@value #CAPACITY} permits; and {@code readers} + {@code writers} threads looping
 * {@code readLock().lock()} or {@code writeLock().lock()} / hold / unlock.
 *
 * <p>Every hold goes into a {@link History} (the lock's with its fencing token, also written to a
 * {@link FencedStore}), every exception into an {@link ErrorTally}: acquisitions, and releases
 * other than {@link LockLostException} (a lost lease is reported, as it should be, and counted
 * apart). The workers can be brought to a stop between two holds ({@link #quiesce}), so that a
 * test can check that nothing is held or leaked, and then go on ({@link #resume}).
 *
 * <p>All three primitives share the name, hence the hash tag and, on a Cluster, the node.
 */
public final class Workload implements AutoCloseable {
  /** The semaphore's capacity. */
  public static final int CAPACITY = 2;

  /** The three primitives under load. */
  public enum Primitive {
    /** The lock. */
    LOCK("lock"),
    /** The semaphore of {@value Workload#CAPACITY} permits. */
    SEMAPHORE("semaphore"),
    /** Both sides of the read/write lock. */
    READ_WRITE("rwlock");

    private final String label;

    Primitive(String label) {
      this.label = label;
    }

    /** @return "lock", "semaphore" or "rwlock", as in the RELIABILITY lines */
    public String label() {
      return label;
    }
  }

  private final String name;
  private final DistributedLock probeLock;
  private final DistributedSemaphore probeSemaphore;
  private final DistributedReadWriteLock probeReadWrite;
  private final History lockHistory = new History();
  private final History semaphoreHistory = new History();
  private final History readWriteHistory = new History();
  private final FencedStore store = new FencedStore();
  private final ErrorTally lockAcquire = new ErrorTally("lock acquire");
  private final ErrorTally lockRelease = new ErrorTally("lock unlock");
  private final ErrorTally semaphoreAcquire = new ErrorTally("semaphore acquire");
  private final ErrorTally semaphoreRelease = new ErrorTally("semaphore release");
  private final ErrorTally readWriteAcquire = new ErrorTally("rwlock acquire");
  private final ErrorTally readWriteRelease = new ErrorTally("rwlock unlock");
  private final ErrorTally died = new ErrorTally("worker died");
  private final AtomicLong lockLost = new AtomicLong();
  private final AtomicLong semaphoreLost = new AtomicLong();
  private final AtomicLong readWriteLost = new AtomicLong();
  private final AtomicLong lockMaxRelease = new AtomicLong();
  private final AtomicLong semaphoreMaxRelease = new AtomicLong();
  private final AtomicLong readWriteMaxRelease = new AtomicLong();
  private final AtomicLong lockLatest = new AtomicLong();
  private final AtomicLong semaphoreLatest = new AtomicLong();
  private final AtomicLong readWriteLatest = new AtomicLong();
  private final AtomicLong lockCount = new AtomicLong();
  private final AtomicLong semaphoreCount = new AtomicLong();
  private final AtomicLong readWriteCount = new AtomicLong();
  private final List<Thread> threads = new ArrayList<>();
  private final Object monitor = new Object();
  private volatile boolean pauseRequested; // written under monitor
  private int parked; // guarded by monitor
  private volatile boolean stop;

  private Workload(String name, Turnstile probe) {
    this.name = name;
    this.probeLock = probe.lock(name);
    this.probeSemaphore = probe.semaphore(name, CAPACITY);
    this.probeReadWrite = probe.readWriteLock(name);
  }

  /**
   * Starts the workers.
   *
   * @param clients the clients, each with its own workers; the first also answers {@link #leaks}
   * @param name the name of the three primitives
   * @param lockThreads lock workers per client
   * @param semaphoreThreads semaphore workers per client
   * @param readers read-lock workers per client
   * @param writers write-lock workers per client
   * @return the running workload
   */
  public static Workload start(List<Turnstile> clients, String name, int lockThreads, int semaphoreThreads,
      int readers, int writers) {
    Workload w = new Workload(name, clients.get(0));
    for (int c = 0; c < clients.size(); c++) {
      Turnstile t = clients.get(c);
      String client = "c" + c;
      DistributedLock lock = t.lock(name);
      DistributedSemaphore semaphore = t.semaphore(name, CAPACITY);
      java.util.Queue<Long> losses = new java.util.concurrent.ConcurrentLinkedQueue<>();
      semaphore.addLeaseLossListener(e -> losses.add(System.nanoTime()));
      DistributedReadWriteLock rw = t.readWriteLock(name);
      for (int i = 0; i < lockThreads; i++) {
        boolean interruptibly = i % 2 == 1;
        w.spawn(client + "-lock-" + i, () -> w.lockWorker(lock, client, interruptibly));
      }
      for (int i = 0; i < semaphoreThreads; i++) {
        boolean uninterruptibly = i % 2 == 1;
        w.spawn(client + "-sem-" + i, () -> w.semaphoreWorker(semaphore, client, uninterruptibly, losses));
      }
      for (int i = 0; i < readers; i++) {
        w.spawn(client + "-read-" + i, () -> w.readWriteWorker(rw.readLock(), client, false));
      }
      for (int i = 0; i < writers; i++) {
        w.spawn(client + "-write-" + i, () -> w.readWriteWorker(rw.writeLock(), client, true));
      }
    }
    return w;
  }

  /** A worker body; returns when the workload stops or its thread is interrupted. */
  private interface Body {
    void run() throws InterruptedException;
  }

  private void spawn(String threadName, Body body) {
    Thread t = new Thread(() -> {
      try {
        body.run();
      } catch (InterruptedException e) {
        // closing
      } catch (Throwable e) {
        died.record(e, Thread.currentThread().getName());
      }
    }, threadName);
    t.setDaemon(true);
    threads.add(t);
    t.start();
  }

  // ------------------------------------------------------------------ workers

  private void lockWorker(DistributedLock lock, String client, boolean interruptibly) throws InterruptedException {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    while (awaitTurn()) {
      try {
        if (interruptibly) {
          lock.lockInterruptibly();
        } else {
          lock.lock();
        }
      } catch (RuntimeException e) {
        lockAcquire.record(e, Thread.currentThread().getName());
        Thread.sleep(20);
        continue;
      }
      long start = System.nanoTime();
      lockLatest.set(start);
      lockCount.incrementAndGet();
      long end = start;
      long token = 0;
      try {
        token = lock.fencingToken();
        store.write(token, client);
        Thread.sleep(rnd.nextInt(1, 4));
        long t = System.nanoTime();
        if (lock.isHeldByCurrentThread()) {
          end = t;
        }
      } catch (LockLostException e) {
        // lost before the token was read: nothing was done under it
      } finally {
        release(lock::unlock, lockRelease, lockLost, lockMaxRelease);
        if (token != 0) {
          lockHistory.add(client, token, 1, start, end);
        }
      }
    }
  }

  private void semaphoreWorker(DistributedSemaphore semaphore, String client, boolean uninterruptibly,
      java.util.Queue<Long> losses) throws InterruptedException {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    while (awaitTurn()) {
      try {
        if (uninterruptibly) {
          semaphore.acquireUninterruptibly();
        } else {
          semaphore.acquire();
        }
      } catch (RuntimeException e) {
        semaphoreAcquire.record(e, Thread.currentThread().getName());
        Thread.sleep(20);
        continue;
      }
      long start = System.nanoTime();
      semaphoreLatest.set(start);
      semaphoreCount.incrementAndGet();
      long end = start;
      try {
        Thread.sleep(rnd.nextInt(1, 4));
        end = System.nanoTime();
      } finally {
        release(semaphore::release, semaphoreRelease, semaphoreLost, semaphoreMaxRelease);
        // Valid, by the client's own account, until it learned of a loss: a loss of the client's
        // liveness lease voids every permit it held then (DESIGN §9, the client's books). Which thread's
        // release throws LockLostException is not which permit was lost (permits belong to no
        // thread: a holder that acquired after the loss may release first and be the one told),
        // so every hold that spans a loss ends at it, whether or not its own release threw.
        for (long lost : losses) {
          if (lost - start > 0 && lost - end < 0) {
            end = lost;
          }
        }
        semaphoreHistory.add(client, 0, 1, start, end);
      }
    }
  }

  private void readWriteWorker(DistributedLock side, String client, boolean write) throws InterruptedException {
    ThreadLocalRandom rnd = ThreadLocalRandom.current();
    while (awaitTurn()) {
      try {
        side.lock();
      } catch (RuntimeException e) {
        readWriteAcquire.record(e, Thread.currentThread().getName());
        Thread.sleep(20);
        continue;
      }
      long start = System.nanoTime();
      readWriteLatest.set(start);
      readWriteCount.incrementAndGet();
      long end = start;
      long token = 0;
      try {
        token = side.fencingToken();
        Thread.sleep(rnd.nextInt(1, 4));
        long t = System.nanoTime();
        if (side.isHeldByCurrentThread()) {
          end = t;
        }
      } catch (LockLostException e) {
        // lost before the token was read
      } finally {
        release(side::unlock, readWriteRelease, readWriteLost, readWriteMaxRelease);
        if (token != 0) {
          if (write) {
            readWriteHistory.addWrite(client, token, start, end);
          } else {
            readWriteHistory.addRead(client, token, start, end);
          }
        }
      }
    }
  }

  /** Runs a release; returns false if it reported a lost lease (counted in {@code lost}). */
  private static boolean release(Runnable release, ErrorTally errors, AtomicLong lost, AtomicLong maxNanos) {
    long t0 = System.nanoTime();
    try {
      release.run();
      return true;
    } catch (LockLostException e) {
      lost.incrementAndGet();
      return false;
    } catch (RuntimeException e) {
      errors.record(e, Thread.currentThread().getName());
      return true;
    } finally {
      long took = System.nanoTime() - t0;
      maxNanos.accumulateAndGet(took, Math::max);
    }
  }

  /** Between two holds: parks while a quiescence is requested; returns false once stopped. */
  private boolean awaitTurn() throws InterruptedException {
    if (pauseRequested) {
      synchronized (monitor) {
        parked++;
        monitor.notifyAll();
        try {
          while (pauseRequested && !stop) {
            monitor.wait();
          }
        } finally {
          parked--;
        }
      }
    }
    return !stop;
  }

  // ------------------------------------------------------------------ control

  /**
   * Asks every worker to stop before its next acquisition, and waits until all have: then nothing
   * is held or awaited by this workload.
   *
   * @param timeout the longest wait
   * @return true if every live worker stopped in time (see {@link #busyWorkers} otherwise)
   * @throws InterruptedException if interrupted
   */
  public boolean quiesce(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (monitor) {
      pauseRequested = true;
      while (parked < alive()) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        monitor.wait(Math.max(1, Math.min(50, TimeUnit.NANOSECONDS.toMillis(left))));
      }
      return true;
    }
  }

  /** Lets the workers go on after {@link #quiesce}. */
  public void resume() {
    synchronized (monitor) {
      pauseRequested = false;
      monitor.notifyAll();
    }
  }

  private int alive() {
    int n = 0;
    for (Thread t : threads) {
      if (t.isAlive()) {
        n++;
      }
    }
    return n;
  }

  /**
   * @return the workers that did not stop at a quiescence, with where they are (their top frames
   *     in Turnstile's code)
   */
  public List<String> busyWorkers() {
    List<String> busy = new ArrayList<>();
    for (Thread t : threads) {
      if (!t.isAlive() || t.getState() == Thread.State.WAITING && isParkedHere(t)) {
        continue;
      }
      String where = java.util.Arrays.stream(t.getStackTrace())
          .filter(f -> f.getClassName().startsWith("io.github.turnstile."))
          .limit(3).map(f -> f.getClassName().substring("io.github.turnstile.".length()) + "." + f.getMethodName())
          .collect(Collectors.joining("<"));
      busy.add(t.getName() + "@" + where);
    }
    return busy;
  }

  private static boolean isParkedHere(Thread t) {
    for (StackTraceElement f : t.getStackTrace()) {
      if (f.getClassName().equals(Workload.class.getName()) && f.getMethodName().equals("awaitTurn")) {
        return true;
      }
    }
    return false;
  }

  /** What is still held or missing at a quiescence, as seen through the first client. */
  public record Leaks(int permitsMissing, boolean lockHeld, boolean writeHeld, int readers, String error) {
    /** @return whether nothing is held and no permit is missing */
    public boolean none() {
      return permitsMissing == 0 && !lockHeld && !writeHeld && readers == 0 && error == null;
    }

    /** @return how many holds or permits are unaccounted for */
    public int total() {
      return permitsMissing + (lockHeld ? 1 : 0) + (writeHeld ? 1 : 0) + readers;
    }
  }

  /**
   * At a quiescence: waits up to {@code settle} (releases may complete in Redis after the call
   * returned) for every permit to be free and both locks unheld, and returns what is still missing.
   *
   * @param settle the longest wait; keep it below the lease, after which a dead client's permits
   *     come back anyway and a leak would no longer be seen
   * @return the leaks
   * @throws InterruptedException if interrupted
   */
  public Leaks leaks(Duration settle) throws InterruptedException {
    long deadline = System.nanoTime() + settle.toNanos();
    Leaks last;
    while (true) {
      try {
        last = new Leaks(CAPACITY - probeSemaphore.availablePermits(), probeLock.isLocked(),
            probeReadWrite.isWriteLocked(), probeReadWrite.getReadLockCount(), null);
      } catch (RuntimeException e) {
        last = new Leaks(0, false, false, 0, e.toString());
      }
      if (last.none() || System.nanoTime() - deadline > 0) {
        return last;
      }
      Thread.sleep(20);
    }
  }

  /** Stops the workers (those blocked in an uninterruptible call are left to the closing of their client). */
  @Override
  public void close() {
    stop = true;
    resume();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    try {
      for (Thread t : threads) {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
      }
      for (Thread t : threads) {
        if (t.isAlive()) {
          t.interrupt(); // lockInterruptibly(), acquire(): they give up; lock() is left to its client's close
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  // ------------------------------------------------------------------ results

  /** @return the name of the three primitives */
  public String name() {
    return name;
  }

  /** @return the holds of {@code p} (the lock's with fencing tokens) */
  public History history(Primitive p) {
    return switch (p) {
      case LOCK -> lockHistory;
      case SEMAPHORE -> semaphoreHistory;
      case READ_WRITE -> readWriteHistory;
    };
  }

  /** @return the store the lock's holders write their tokens to */
  public FencedStore store() {
    return store;
  }

  /** @return exceptions from the untimed acquisitions of {@code p} */
  public ErrorTally acquireErrors(Primitive p) {
    return switch (p) {
      case LOCK -> lockAcquire;
      case SEMAPHORE -> semaphoreAcquire;
      case READ_WRITE -> readWriteAcquire;
    };
  }

  /** @return exceptions other than LockLostException from the unlocks or releases of {@code p} */
  public ErrorTally releaseErrors(Primitive p) {
    return switch (p) {
      case LOCK -> lockRelease;
      case SEMAPHORE -> semaphoreRelease;
      case READ_WRITE -> readWriteRelease;
    };
  }

  /** @return LockLostExceptions from the unlocks or releases of {@code p}: leases lost and reported */
  public long leasesLost(Primitive p) {
    return switch (p) {
      case LOCK -> lockLost.get();
      case SEMAPHORE -> semaphoreLost.get();
      case READ_WRITE -> readWriteLost.get();
    };
  }

  /** @return when the latest acquisition of {@code p} returned ({@link System#nanoTime()}), 0 if none yet */
  public long latestAcquisitionNanos(Primitive p) {
    return switch (p) {
      case LOCK -> lockLatest.get();
      case SEMAPHORE -> semaphoreLatest.get();
      case READ_WRITE -> readWriteLatest.get();
    };
  }

  /** @return how many acquisitions of {@code p} returned so far */
  public long acquisitions(Primitive p) {
    return switch (p) {
      case LOCK -> lockCount.get();
      case SEMAPHORE -> semaphoreCount.get();
      case READ_WRITE -> readWriteCount.get();
    };
  }

  /** @return workers that ended with an unexpected throwable */
  public ErrorTally deaths() {
    return died;
  }

  /** @return the longest an unlock or release of {@code p} took since the last call of this method, in ms */
  public long takeMaxReleaseMillis(Primitive p) {
    AtomicLong max = switch (p) {
      case LOCK -> lockMaxRelease;
      case SEMAPHORE -> semaphoreMaxRelease;
      case READ_WRITE -> readWriteMaxRelease;
    };
    return TimeUnit.NANOSECONDS.toMillis(max.getAndSet(0));
  }
}
