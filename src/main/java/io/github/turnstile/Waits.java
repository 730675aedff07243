package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Timed waits that are interruptible or not, as the caller's contract requires. */
final class Waits {
  private Waits() {}

  /**
   * The deadline ({@link System#nanoTime()} based) of a wait of {@code time} in {@code unit}:
   * zero or negative times mean now, and huge ones are clamped so that deadline arithmetic
   * ({@code deadline - nanoTime()}) cannot overflow.
   */
  static long deadline(long time, TimeUnit unit) {
    return System.nanoTime() + Math.max(0, Math.min(unit.toNanos(time), Long.MAX_VALUE >> 2));
  }

  /**
   * Waits for a future, never interrupted: an interrupt is remembered and re-asserted on return,
   * as {@code Lock.lock()} requires.
   *
   * @return the value
   * @throws TimeoutException if it did not complete within {@code timeoutNanos}
   * @throws ExecutionException if it failed
   */
  static <T> T get(CompletableFuture<T> f, long timeoutNanos) throws TimeoutException, ExecutionException {
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Acquires a permit within the time, never interrupted (an interrupt is re-asserted on return):
   * tried first with a zero timeout (which, unlike an untimed {@code tryAcquire()}, keeps a fair
   * queue's order), then for the time given as a managed wait.
   */
  static boolean acquire(Semaphore s, long timeoutNanos) {
    return uninterruptible(() -> timed(s, 0) || managed(() -> timed(s, timeoutNanos)));
  }

  /** Runs {@code call}, which is never interrupted: an {@link InterruptedException} from it is a bug. */
  static <T> T uninterruptible(Parking<T> call) {
    try {
      return call.await();
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible call was interrupted", e);
    }
  }

  /** Takes a permit of {@code s} within {@code timeoutNanos}; an interrupt resumes the wait for the time left. */
  private static boolean timed(Semaphore s, long timeoutNanos) {
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          return s.tryAcquire(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * How long past its deadline a timed thread waits for its acquisition's outcome at most: the
   * engine completes the future by the deadline (stretched by at most a reply's least wait, and a
   * replica acknowledgement), so this bound is never reached unless the engine stalled; then the
   * acquisition is cancelled, the stall logged, and the call times out.
   */
  private static final long PARK_OVERRUN_NANOS = TimeUnit.SECONDS.toNanos(60);

  /**
   * Parks the calling thread on the future of its acquisition (the blocking API's wait on the one
   * engine), as {@code CompletableFuture.get} does, and as a managed wait on pool workers
   * ({@link #managed}). Untimed calls park untimed: the acquisition's future ends the wait.
   *
   * @return the hold, or null if the acquisition timed out
   * @throws InterruptedException if the call is interruptible and the thread was interrupted:
   *     the acquisition is cancelled first (a hold delivered just before is released)
   * @throws TurnstileException (or another unchecked exception) if the acquisition failed
   */
  static <H extends Hold> H park(AsyncAcquisition<H> a, Call call) throws InterruptedException {
    CompletableFuture<H> f = a.result;
    if (!f.isDone()) {
      Thread me = Thread.currentThread();
      f.whenComplete((v, e) -> java.util.concurrent.locks.LockSupport.unpark(me));
      boolean interrupted;
      try {
        interrupted = managed(() -> parkUntilDone(f, call));
      } catch (InterruptedException e) {
        giveUp(f);
        a.left().join();
        a.waitInterrupted();
        throw e;
      }
      if (interrupted) {
        Thread.currentThread().interrupt(); // an uninterruptible wait keeps the interrupt
      }
      if (!f.isDone()) {
        overran(a);
      }
    }
    // it left the gate as (or just after) its future completed: the caller's next call finds the
    // gate without it (a tryLock() right after a timed-out one would otherwise see it queued)
    a.left().join();
    try {
      H h = f.join();
      a.waitEnded(h, null); // the wait's JFR event, committed on this thread
      return h;
    } catch (java.util.concurrent.CancellationException e) {
      a.waitEnded(null, e);
      return null;
    } catch (java.util.concurrent.CompletionException e) {
      Throwable cause = Engine.unwrap(e);
      a.waitEnded(null, cause);
      if (cause instanceof TimeoutException) {
        return null;
      }
      throw rethrow(cause);
    }
  }

  /** Logs an acquisition that outlived {@link #PARK_OVERRUN_NANOS} past its deadline, and cancels it. */
  private static <H extends Hold> void overran(AsyncAcquisition<H> a) {
    System.getLogger("io.github.turnstile").log(System.Logger.Level.WARNING,
        "an acquisition did not end within " + TimeUnit.NANOSECONDS.toSeconds(PARK_OVERRUN_NANOS)
        + " s after its deadline; cancelled: " + a);
    giveUp(a.result);
  }

  /** Throws an acquisition's or a release's failure: unchecked as it is, a checked one wrapped. */
  private static RuntimeException rethrow(Throwable cause) {
    if (cause instanceof RuntimeException) {
      throw (RuntimeException) cause;
    }
    if (cause instanceof Error) {
      throw (Error) cause;
    }
    throw new TurnstileException(String.valueOf(cause), cause);
  }

  /**
   * A parking lot whose permits are tickets: a semaphore's superclass, a fair
   * {@code java.util.concurrent.Semaphore} of no permits, so that its final queue methods
   * ({@code hasQueuedThreads()}, {@code getQueueLength()}) count the threads parked here.
   */
  interface Tickets {
    /** Releases one ticket. */
    void release();

    /** Takes one ticket, waiting untimed and interruptibly. */
    void acquire() throws InterruptedException;

    /** Takes one ticket, waiting untimed; an interrupt is re-asserted on return. */
    void acquireUninterruptibly();

    /** Takes one ticket within {@code nanos}, interruptibly. */
    boolean tryAcquire(long nanos) throws InterruptedException;
  }

  /**
   * Parks the calling thread on its acquisition as {@link #park(AsyncAcquisition, Call)}
   * does, but in {@code lot}: the acquisition's end releases one ticket, and the thread takes
   * exactly one ticket before it returns or throws. A ticket it takes while its own acquisition
   * has not ended is another's (the lot and the gate can order two threads differently): it puts
   * it back and queues again, behind those parked (the lot is fair). So every ticket released
   * reaches a thread whose acquisition ended, and none is left over.
   *
   * @return the hold, or null if the acquisition timed out
   * @throws InterruptedException if the call is interruptible and the thread was interrupted:
   *     the acquisition is cancelled first (a hold delivered just before is released)
   */
  static <H extends Hold> H park(AsyncAcquisition<H> a, Call call, Tickets lot) throws InterruptedException {
    CompletableFuture<H> f = a.result;
    f.whenComplete((v, e) -> lot.release());
    boolean interrupted;
    try {
      interrupted = managed(() -> takeTicket(f, call, lot));
    } catch (InterruptedException e) {
      giveUp(f);
      lot.acquireUninterruptibly(); // the ticket of its end (the interrupt is reported by the exception)
      Thread.interrupted();
      a.left().join();
      a.waitInterrupted();
      throw e;
    }
    if (!f.isDone()) {
      overran(a);
      boolean was = Thread.interrupted();
      lot.acquireUninterruptibly();
      interrupted |= was | Thread.interrupted();
    }
    if (interrupted) {
      Thread.currentThread().interrupt(); // an uninterruptible wait keeps the interrupt
    }
    return park(a, call); // done: its outcome
  }

  /**
   * Takes a ticket once {@code f} is done; returns whether an uninterruptible call was interrupted
   * meanwhile, without a ticket only if a timed call's bound passed first.
   */
  private static boolean takeTicket(CompletableFuture<?> f, Call call, Tickets lot) throws InterruptedException {
    boolean interrupted = false;
    long bound = call.deadline + PARK_OVERRUN_NANOS;
    while (true) {
      if (!call.timed) {
        if (call.interruptible) {
          lot.acquire();
        } else {
          lot.acquireUninterruptibly();
          interrupted |= Thread.interrupted();
        }
      } else {
        long left = bound - System.nanoTime();
        if (left <= 0) {
          return interrupted;
        }
        try {
          if (!lot.tryAcquire(left)) {
            return interrupted;
          }
        } catch (InterruptedException e) {
          if (call.interruptible) {
            throw e;
          }
          interrupted = true;
          continue;
        }
      }
      if (f.isDone()) {
        return interrupted;
      }
      lot.release(); // another's: back, and queue again behind those parked
      Thread.yield();
    }
  }

  /** Parks until {@code f} is done; returns whether an uninterruptible call was interrupted meanwhile. */
  private static boolean parkUntilDone(CompletableFuture<?> f, Call call) throws InterruptedException {
    boolean interrupted = false;
    long bound = call.deadline + PARK_OVERRUN_NANOS;
    while (!f.isDone()) {
      if (Thread.interrupted()) {
        if (call.interruptible) {
          throw new InterruptedException();
        }
        interrupted = true;
      }
      if (call.timed) {
        long left = bound - System.nanoTime();
        if (left <= 0) {
          return interrupted;
        }
        java.util.concurrent.locks.LockSupport.parkNanos(f, left);
      } else {
        java.util.concurrent.locks.LockSupport.park(f);
      }
    }
    return interrupted;
  }

  /** Cancels an acquisition the caller no longer waits for; a hold it delivered first is released. */
  private static <H extends Hold> void giveUp(CompletableFuture<H> f) {
    if (f.cancel(false)) {
      return;
    }
    H h = f.handle((v, e) -> v).join();
    if (h != null) {
      try {
        h.close();
      } catch (RuntimeException e) {
        // lost meanwhile: nothing is left to give back
      }
    }
  }

  /**
   * Waits, never interrupted, for a release's stage (which completes within a short patience:
   * see {@link Hold#release()}); rethrows its failure.
   */
  static void settle(CompletableFuture<Void> done) {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          done.get();
          return;
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException e) {
          throw rethrow(Engine.unwrap(e.getCause()));
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A wait that may park the calling thread. */
  @FunctionalInterface
  interface Parking<T> {
    T await() throws InterruptedException;
  }

  /**
   * Runs a wait that may park the calling thread. On a {@link ForkJoinPool} worker it runs as a
   * {@link ForkJoinPool.ManagedBlocker}, as {@code CompletableFuture.get} does, so that the pool
   * may activate or start a spare worker while this one waits. Without that, a caller waiting on
   * the common pool's only worker (its parallelism is 1 on a 2-core machine) starves the tasks the
   * wait depends on: from JDK 25 {@code CompletableFuture}'s default async executor is the common
   * pool at any parallelism, and Lettuce's handshake of a new connection continues there when the
   * URI's credentials provider is not immediate. Such a wait for a new connection then lasted
   * until Lettuce's 10 s connect timeout (docs/RELIABILITY.md).
   */
  static <T> T managed(Parking<T> wait) throws InterruptedException {
    if (!(Thread.currentThread() instanceof ForkJoinWorkerThread)) {
      return wait.await();
    }
    Managed<T> m = new Managed<>(wait);
    try {
      ForkJoinPool.managedBlock(m);
    } catch (InterruptedException e) {
      if (m.entered) {
        throw e; // the wait's own: an interruptible wait was interrupted
      }
      // the pool's: from JDK 25 a stopping pool refuses to compensate with this exception, which
      // an uninterruptible wait must not throw; wait as on any other thread
      return wait.await();
    }
    return m.value;
  }

  private static final class Managed<T> implements ForkJoinPool.ManagedBlocker {
    private final Parking<T> wait;
    private boolean entered;
    private boolean done;
    T value;

    Managed(Parking<T> wait) {
      this.wait = wait;
    }

    @Override
    public boolean block() throws InterruptedException {
      entered = true;
      value = wait.await(); // runs once: the pool calls it from this thread only
      done = true;
      return true;
    }

    @Override
    public boolean isReleasable() {
      return done;
    }
  }
}
