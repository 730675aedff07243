package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The state of one {@link AsyncAcquisition}, and how it waits and ends: its fields, guarded by
 * {@link #mu}; its endings (abandoned by the caller or at the deadline, failed, timed out); and the
 * timers its waits and its deadline run on. {@link AcquisitionDelivery} adds how a grant reaches
 * the caller, and {@link AsyncAcquisition} the loop that steps it. Who finishes, and why one
 * continuation runs at a time, is told in {@link AsyncAcquisition}.
 */
abstract sealed class AcquisitionState<H extends Hold> permits AcquisitionDelivery {
  static final System.Logger LOG = System.getLogger("io.github.turnstile");

  final AcquisitionEnv env;
  final AcquisitionSide<H> side;
  final AsyncGate<H> gate;
  /** Permits asked for (1 for locks). */
  final int permits;
  /**
   * The thread that parks on this acquisition's future (a blocking call), or null (an async
   * call): its owner id in Redis is the thread's, and so is its hold's name.
   */
  final Thread thread;
  /** Deadline and outage bookkeeping; touched only by the loop (one continuation at a time). */
  final Call call;
  final long startNanos = System.nanoTime();
  final CompletableFuture<H> result = new CompletableFuture<>();
  /** This acquisition's wait as JFR and the Observations record it (null: nothing records it). */
  Telemetry.Wait telemetry;
  private final CompletableFuture<Void> left = new CompletableFuture<>();
  /** Guards the fields below: who finishes, and what is in flight. */
  final ReentrantLock mu = new ReentrantLock();
  boolean head;
  /** A head that attempts beside the gate's head, not in line (a reader while nobody waits: {@link AsyncGate#enter}). */
  boolean runner;
  boolean abandoned;
  boolean finished;
  boolean attempted;
  /** What {@link AcquisitionEnv#waitStarted} returned while this head waits in Redis (null: not waiting). */
  private Object waitMark;
  /** A copy of an attempt may have run without its reply being seen. */
  boolean uncertain;
  /** The deadline passed before the head's first attempt was sent: it is sent all the same. */
  boolean deadlinePassed;
  /**
   * Where the head is in its waits before an attempt (see {@link AsyncAcquisition#waitLocally}): 0
   * none yet, 1 it waited for a local hold's hand-off, 2 it stood back after this JVM's yield (it
   * attempts next).
   */
  int localPhase;
  CompletableFuture<Attempt> inFlight;
  long inFlightSentNanos;
  CompletableFuture<Boolean> waitTimer;
  /** The current wait on the wake list (the token-list tier), if any. */
  Wake listWait;
  /**
   * The recovery events' future that {@link #listWait} is watched with ({@link AcquisitionEnv#faults}):
   * the one taken before the attempt whose refusal the wait follows, so that an event any time
   * since that attempt ends the wait. Handed over with the wait ({@link AcquisitionDelivery#passWaitTo}).
   * Guarded by mu.
   */
  CompletableFuture<Void> listFault;
  /**
   * No pooled connection was free (or could be opened) for a wait on the wake list: this
   * acquisition waits by pub/sub from now on. Touched by the loop only.
   */
  boolean pubsubOnly;
  private CompletableFuture<Boolean> deadlineTimer;
  /** The hold completed into {@link #result} by this acquisition (null until then). */
  volatile H delivered;

  /** This acquisition's request id and owner id in Redis; set when it becomes head, before its first attempt. */
  String request;
  String owner;
  /** Side state: the previous attempt was refused (lock: report a reclaimed holder). */
  boolean refused;
  /** Side state (lock): an attempt was sent that marks this client as waiting when refused. */
  boolean marked;
  /** Side state: what the side keeps for this acquisition (the semaphore: its request). */
  Object sideState;
  /**
   * A wait on the wake list handed over from the head before it ({@link AsyncAcquisition#passWaitTo}):
   * this acquisition resumes it, in {@link #listWait}, when it becomes head, instead of attempting
   * first. Guarded by mu.
   */
  boolean adoptedWait;
  /** A wait on the wake list this acquisition handed to the next one: its end is no longer this one's. Guarded by mu. */
  Wake givenAway;
  /** The grant being delivered came by a local hand-off of permits ({@link AcquisitionDelivery#handedPermits}), not from Redis. */
  volatile boolean handedLocally;
  /**
   * Side state (read side): the server time since which this reader counts as waiting (0: not
   * known); set from its gate when it enqueues and by refusals (guarded by the gate's lock).
   */
  volatile long readSince;

  AcquisitionState(AcquisitionEnv env, AcquisitionSide<H> side, AsyncGate<H> gate, int permits, Call call, Thread thread) {
    this.env = env;
    this.side = side;
    this.gate = gate;
    this.permits = permits;
    this.call = call;
    this.thread = thread;
  }

  /** The wait went on to {@code tier}. */
  void tier(String tier) {
    Telemetry.Wait w = telemetry;
    if (w != null) {
      w.tier = tier;
    }
  }

  /** Steps the loop again ({@link AsyncAcquisition}): a wait ended, or a pause is over. */
  abstract void step();

  /** Returns this acquisition, as its side, its gate and its environment take it. */
  abstract AsyncAcquisition<H> self();

  /** This acquisition's state, for diagnostics (a stuck drain in AsyncScaleTest). */
  String describe() {
    mu.lock();
    try {
      return "{request=" + request + " head=" + head + " attempted=" + attempted + " minReplyMs=" + call.minReplyNanos() / 1_000_000
          + " inFlight=" + (inFlight == null ? "none" : inFlight.isDone() ? "done" : "pending")
          + " waitTimer=" + (waitTimer == null ? "none" : waitTimer.isDone() ? "done" : "armed")
          + " uncertain=" + uncertain + " abandoned=" + abandoned + " finished=" + finished
          + " result=" + (result.isDone() ? "done" : "pending")
          + " deadlineTimer=" + (deadlineTimer == null ? "none" : deadlineTimer.isDone() ? "done" : "armed")
          + " listWait=" + (listWait == null ? "none" : "set") + " adopted=" + adoptedWait + " local=" + handedLocally
          + " deadlinePassed=" + deadlinePassed + " localPhase=" + localPhase
          + (waitsOnNothing() ? " STRANDED" : "") + "}";
    } finally {
      mu.unlock();
    }
  }

  /**
   * Whether this acquisition is a head that is waiting on nothing: no attempt in flight, no timer
   * armed, not over. Between two continuations that is momentary; at rest it is a stall (nothing
   * will ever step it again), which the tests assert never happens.
   */
  boolean stranded() {
    return locked(this::waitsOnNothing);
  }

  /** {@link #stranded}'s state; mu held. */
  private boolean waitsOnNothing() {
    return head && request != null && !finished && !abandoned && inFlight == null && waitTimer == null;
  }

  /** Returns whether this acquisition may still be handed permits (it has not ended). */
  boolean open() {
    return locked(() -> !finished && !abandoned);
  }

  boolean isOver() {
    return locked(() -> finished);
  }

  /** Returns {@code read}'s value, read under {@link #mu}. */
  <T> T locked(java.util.function.Supplier<T> read) {
    return AsyncGate.locked(mu, read);
  }

  /**
   * Runs a continuation. Whatever it throws (an {@link Error} too) ends the acquisition with it,
   * logged: a {@link CompletableFuture} callback's throw is otherwise swallowed, and the
   * acquisition would be left with nothing armed to wake it, and its gate with it.
   */
  void guarded(Runnable continuation) {
    try {
      continuation.run();
    } catch (Throwable e) {
      LOG.log(System.Logger.Level.WARNING, side.describe + ": async acquisition failed unexpectedly", e);
      fail(e);
    }
  }

  void setLocalPhase(int phase) {
    mu.lock();
    try {
      localPhase = phase;
    } finally {
      mu.unlock();
    }
  }

  /** A refused runner queued behind others (called by the gate under its lock, before any promotion). */
  void inLine() {
    mu.lock();
    try {
      head = false;
    } finally {
      mu.unlock();
    }
  }

  /** Whether this acquisition runs beside the head; clears it (a refused runner is in line from now on). */
  boolean isRunner() {
    return locked(() -> {
      boolean was = runner;
      runner = false;
      return was;
    });
  }

  /** Lists this head in the client's activity once its attempt was refused (and until it leaves the gate). */
  void waitsInRedis() {
    mu.lock();
    try {
      if (waitMark != null || finished) {
        return;
      }
      waitMark = env.waitStarted(self(), side, () -> Math.max(0, gate.size() - 1));
    } finally {
      mu.unlock();
    }
  }

  /**
   * Returns a future completed once this acquisition has left its gate: a thread that returns from
   * an acquisition that ended waits for it too, so that its next call finds the gate as it left it.
   */
  CompletableFuture<Void> left() {
    return left;
  }

  /** Called by the gate when this acquisition leaves it: its wait, if listed, is over. */
  void leftGate() {
    left.complete(null);
    Object mark;
    mu.lock();
    try {
      mark = waitMark;
      waitMark = null;
    } finally {
      mu.unlock();
    }
    if (mark != null) {
      env.waitEnded(mark);
    }
  }

  /**
   * Steps after a random pause of up to {@link AsyncAcquisition#JITTER_NANOS}. A release's message reaches the
   * heads of every client with a waiter, in the order they subscribed, and they race for the
   * release: without the pause the earliest subscriber won nearly every race (Jain 0.71 over 16
   * acquirers of 4 clients on a hot lock). The pause makes the winner random.
   */
  void stepAfterJitter() {
    long jitter = env.jitterNanos();
    if (jitter <= 0) {
      step();
      return;
    }
    stepAfter(java.util.concurrent.ThreadLocalRandom.current().nextLong(jitter));
  }

  // ---------------------------------------------------------------- endings

  /** The caller completed (cancelled) the future, or the deadline passed. */
  void abandon() {
    end(true, null);
  }

  /** Ends the acquisition with {@code error} (no attempt in flight). */
  void fail(Throwable error) {
    end(false, error);
  }

  /**
   * Ends the acquisition, abandoned or failed with {@code error}: its waiting marks are withdrawn
   * and it leaves the gate. An abandoned one with an attempt in flight only leaves the gate: the
   * reply decides what to undo (see onReply); the next acquisition need not wait for it, as the
   * next thread at a blocking gate does not wait for a holder's abandoned attempt.
   */
  private void end(boolean abandon, Throwable error) {
    boolean withdraw;
    boolean unsure;
    mu.lock();
    try {
      if (finished) {
        return;
      }
      abandoned |= abandon;
      finished = !abandon || inFlight == null;
      withdraw = finished && attempted;
      unsure = uncertain;
    } finally {
      mu.unlock();
    }
    cancelTimers();
    if (withdraw) {
      quietly(() -> side.withdraw(self(), unsure));
    }
    gate.leave(self());
    if (error != null) {
      result.completeExceptionally(error);
    }
  }

  /**
   * Runs an undo or a withdrawal on an ending path. A throw from it is logged, never propagated:
   * what follows it (leaving the gate, which promotes the next acquisition, and completing the
   * future) must happen whatever, or every acquisition queued behind this one would hang.
   */
  void quietly(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.WARNING, side.describe + ": withdrawing an async acquisition failed", e);
    }
  }

  /**
   * Counts an outage against the call ({@link Outages#unreachable}).
   *
   * @return false if the call failed (its outage tolerance is used up)
   */
  boolean outage(long sinceNanos, String what, Throwable cause) {
    try {
      env.unreachable(call, sinceNanos, side.describe + what, cause);
      return true;
    } catch (TurnstileException e) {
      fail(e);
      return false;
    }
  }

  /** Returns true (and times the acquisition out) if a timed call's deadline has passed. */
  boolean deadlineUp() {
    if (!call.expired()) {
      return false;
    }
    timeout();
    return true;
  }

  /**
   * Times the acquisition out: it leaves the gate first, and then its future completes, so that
   * whoever sees the timeout (a callback registered on the future runs before the future's own,
   * {@link AsyncAcquisition#start}) finds the gate without it, as a thread finds it when its
   * {@code tryLock(t)} returns false. A call made then is not queued behind it.
   */
  void timeout() {
    if (result.isDone()) {
      return;
    }
    abandon();
    if (result.completeExceptionally(new TimeoutException(side.describe + " was not acquired in time"))) {
      side.metrics.timedOut();
    }
  }

  // ---------------------------------------------------------------- timers

  /** Waits for a recovery event or {@code nanos}, then steps again. */
  void pause(long nanos) {
    stepAfter(nanos, env.faults());
  }

  /** Steps again once {@code nanos} have passed or any of {@code wakes} completes, unless the acquisition is over. */
  void stepAfter(long nanos, CompletableFuture<?>... wakes) {
    CompletableFuture<Boolean> t = Timer.after(nanos);
    if (!arm(t)) {
      return;
    }
    CompletableFuture<?>[] any = java.util.Arrays.copyOf(wakes, wakes.length + 1);
    any[wakes.length] = t;
    CompletableFuture.anyOf(any).whenComplete((v, e) -> {
      if (wake(t)) {
        step();
      }
    });
  }

  /** Records {@code t} as the current wait's timer, unless the acquisition is over (then cancels it). */
  boolean arm(CompletableFuture<Boolean> t) {
    mu.lock();
    try {
      if (!finished) {
        waitTimer = t;
        return true;
      }
    } finally {
      mu.unlock();
    }
    Timer.cancel(t);
    return false;
  }

  /** A wait ended: true if the loop goes on (the acquisition is not over). */
  boolean wake(CompletableFuture<Boolean> t) {
    Timer.cancel(t);
    mu.lock();
    try {
      if (waitTimer == t) {
        waitTimer = null;
      }
      return !finished;
    } finally {
      mu.unlock();
    }
  }

  void armDeadline(long nanos) {
    CompletableFuture<Boolean> t = Timer.after(nanos);
    mu.lock();
    try {
      if (finished) {
        Timer.cancel(t);
        return;
      }
      deadlineTimer = t;
    } finally {
      mu.unlock();
    }
    t.thenAccept(fired -> {
      if (fired) {
        guarded(this::onDeadline);
      }
    });
  }

  private void onDeadline() {
    long rearm = 0;
    mu.lock();
    try {
      if (finished) {
        return;
      }
      if (inFlight != null) {
        long since = System.nanoTime() - inFlightSentNanos;
        long min = call.minReplyNanos(); // read under mu, where onReply records an answer
        if (since < min) {
          rearm = min - since;
        }
      } else if (head && !attempted) {
        deadlinePassed = true; // the head's first attempt is sent all the same (tryLock(0): one attempt)
        return;
      }
    } finally {
      mu.unlock();
    }
    if (rearm > 0) {
      armDeadline(rearm);
    } else {
      timeout();
    }
  }

  void cancelTimers() {
    CompletableFuture<Boolean> w;
    CompletableFuture<Boolean> d;
    Wake l;
    mu.lock();
    try {
      w = waitTimer;
      d = deadlineTimer;
      l = listWait;
      waitTimer = null;
      deadlineTimer = null;
      listWait = null;
    } finally {
      mu.unlock();
    }
    Timer.cancel(w);
    Timer.cancel(d);
    if (l != null) {
      l.abandon();
    }
  }
}
