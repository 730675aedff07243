package io.github.turnstile;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One acquisition: a thread's ({@code lock()}, {@code tryLock(t)}: the thread parks on
 * {@link #result}, {@link Waits#park}) or a future's ({@code lockAsync()}, {@code tryLockAsync(t)},
 * {@code acquireAsync(n)}), as a state machine on {@link CompletableFuture} callbacks. It is the one
 * wait loop of the engine: a pending acquisition is a few objects, and no thread waits for it but
 * its caller's, if any. Its states and transitions, and who finishes, are DESIGN §5's.
 *
 * <p><b>One continuation at a time.</b> Every step ends by registering exactly one continuation
 * (the attempt's reply, or a wake-up: message, recovery event, timer), so the loop's own state is
 * touched by one thread at a time. What races it is the caller: cancelling (or otherwise
 * completing) the returned future, or the deadline timer completing it with a
 * {@link TimeoutException}. Both end in {@link #abandon}, and {@link #mu} decides who finishes:
 * while waiting, {@code abandon} finishes at once; with an attempt in flight the reply decides (a
 * grant is undone by {@link AcquisitionSide#cancelGrant}, a refusal withdraws); a grant the loop
 * has decided to deliver ({@link #finished} set first) is released at once if the caller completed
 * the future first. Exactly one of "the caller has the hold" and "the grant was undone" happens
 * (jcstress: {@code CancelVersusGrantStress}).
 *
 * <p>The engine is reached through {@link AcquisitionEnv}, and the primitive's Redis operations
 * through {@link AcquisitionSide}, so that the state machine runs without Redis in jcstress. This
 * class is the loop: what it sends, and what it does with each reply and wake-up. It extends
 * {@link AcquisitionDelivery} (how a grant reaches the caller, or a local hand-off), which extends
 * {@link AcquisitionState} (the fields, the endings and the timers).
 */
final class AsyncAcquisition<H extends Hold> extends AcquisitionDelivery<H> {
  /** How often an outage is re-checked while no recovery event arrives, and the pause after a transient failure. */
  static final long RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
  /**
   * How long the head of a JVM that just yielded (released in Redis at the local hand-off limit)
   * waits before its next attempt: long enough for another client's waiter, woken by that release
   * (a token or a message, then its attempt: about two round trips), to come first; short, because
   * nothing ends it early (the first message after the yield is, as a rule, this JVM's own), so
   * a primitive that nobody else takes stays free for up to this long.
   */
  static final long STAND_BACK_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  /** The longest random pause of a head woken by a release's message before its attempt (see {@link AcquisitionState#stepAfterJitter}). */
  static final long JITTER_NANOS = TimeUnit.MICROSECONDS.toNanos(500);
  /** Extra client-side wait beyond a wake-list wait's server-side timeout before it is abandoned (as {@link BlockingCommands}'s). */
  static final long LIST_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);

  AsyncAcquisition(AcquisitionEnv env, AcquisitionSide<H> side, AsyncGate<H> gate, int permits, Call call, Thread thread) {
    super(env, side, gate, permits, call, thread);
  }

  /** Queues the acquisition and returns its future. */
  CompletableFuture<H> start() {
    telemetry = env.telemetry().waitStarted(side.kind, side.describe, side.primitiveName, permits);
    result.whenComplete((v, e) -> {
      if (v == null || v != delivered) {
        abandon();
      }
      if (thread == null) {
        waitEnded(v, e); // a thread's is ended on the thread, when it returns (Waits.park)
      }
    });
    int entered = gate.enter(this, side.runMode(this));
    boolean first = entered != AsyncGate.QUEUED;
    if (first) {
      mu.lock();
      try {
        head = true; // before the deadline is armed: a head sends its first attempt whatever the time
        runner = entered == AsyncGate.RUNNER;
      } finally {
        mu.unlock();
      }
    }
    if (call.timed && !call.once) {
      armDeadline(call.deadline - System.nanoTime());
    }
    if (first) {
      Trampoline.run(this::becomeHead);
    }
    return result;
  }

  /**
   * Ends this acquisition's wait in JFR and the Observations, on the calling thread, with the
   * outcome its future completed with: acquired, timed out, cancelled, failed (interrupted: see
   * {@link #waitInterrupted}).
   */
  void waitEnded(Object hold, Throwable error) {
    Throwable cause = error == null ? null : Engine.unwrap(error);
    String outcome = hold != null ? "acquired"
        : cause instanceof TimeoutException || cause == null ? "timed out"
        : cause instanceof CancellationException ? "cancelled" : "failed";
    endWait(outcome, "failed".equals(outcome) ? cause : null);
  }

  /** A thread's wait ended by an interrupt. */
  void waitInterrupted() {
    endWait("interrupted", null);
  }

  private void endWait(String outcome, Throwable error) {
    Telemetry.Wait w = telemetry;
    if (w != null) {
      telemetry = null;
      env.telemetry().waitEnded(w, outcome, error);
    }
  }

  /** The gate made this acquisition its head: it contends in Redis from now on. */
  void becomeHead() {
    mu.lock();
    try {
      if (finished) {
        return;
      }
      head = true;
      // a refused runner, in line until now, goes on with its request (Redis counts it as waiting
      // under that request)
      if (request == null) {
        String id = env.newRequestId();
        request = id;
        int colon = id.lastIndexOf(':');
        owner = id.substring(0, colon) + ":" + (thread != null ? Long.toString(thread.getId())
            : "h" + id.substring(colon + 1)); // an async hold's: never a thread's owner id
      }
    } finally {
      mu.unlock();
    }
    step();
  }

  // ---------------------------------------------------------------- the loop

  @Override
  void step() {
    guarded(this::tryStep);
  }

  private void tryStep() {
    if (isOver()) {
      return;
    }
    if (env.closed()) {
      fail(new TurnstileException(side.describe + ": Turnstile is closed"));
      return;
    }
    if (!env.connected()) {
      if (call.once) {
        fail(new TurnstileException(side.describe + ": Redis is not reachable (connection down, reconnecting)"));
        return;
      }
      if (deadlineUp()) {
        return;
      }
      if (outage(System.nanoTime(), " (connection down, reconnecting)", null)) {
        pause(RECHECK_NANOS);
      }
      return;
    }
    if (resumeAdoptedWait() || waitLocally() || side.fromCache(this)) {
      return;
    }
    if (listTier() || locked(() -> runner)) {
      // tier 1: it waits on the wake list if refused; a runner: it takes its place in line if
      // refused, and subscribes only as the head (the gate's subscription is the head's)
      send(null, env.faults());
      return;
    }
    WakeChannel ch = gate.channel();
    if (!locked(() -> attempted) && (ch == null || !isReady(ch))) {
      // The first attempt does not subscribe: uncontended, an acquisition costs one round trip.
      send(null, env.faults());
      return;
    }
    if (ch != null && ch.ready().isCompletedExceptionally()) {
      // failed (refused, or the connection failed): tell which, rather than subscribing again at
      // once, which spun on a refused SUBSCRIBE (AclRefusalTest.withoutChannelPattern)
      subscriptionFailed(ch);
      return;
    }
    if (ch == null || env.stale(ch)) {
      if (ch != null) {
        gate.drop(ch);
      }
      try {
        ch = env.subscribe(side.channel);
      } catch (Engine.Unavailable e) {
        if (outage(System.nanoTime(), " (subscribing)", e)) {
          pause(RECHECK_NANOS);
        }
        return;
      } catch (RuntimeException e) {
        fail(e instanceof TurnstileException ? e : Engine.failure(side.describe, e));
        return;
      }
      if (!gate.install(this, ch)) {
        return; // it ended while it subscribed: the subscription went back
      }
    }
    if (!ch.ready().isDone()) {
      awaitReady(ch, System.nanoTime());
      return;
    }
    if (ch.ready().isCompletedExceptionally()) {
      subscriptionFailed(ch);
      return;
    }
    // Taken before the attempt: a release between the attempt and the wait completes them.
    tier("pub/sub");
    send(ch.next(), env.faults());
  }

  /**
   * Before attempting in Redis, where the attempt could only be refused: a head whose primitive a
   * hold of this JVM holds waits for that hold's hand-off (or its end, or at most a lease); a head
   * whose JVM just released in Redis to give other clients their turn stands back for
   * {@link #STAND_BACK_NANOS}. Each at most once before each attempt.
   *
   * @return true if a wait was armed (the loop steps again when it ends)
   */
  private boolean waitLocally() {
    int phase = locked(() -> localPhase);
    long wait = 0;
    CompletableFuture<Void> wake = null;
    if (phase == 0) {
      wake = side.localEnd(this);
      wait = TimeUnit.MILLISECONDS.toNanos(env.leaseMillis());
      phase = 1;
    }
    if (wake == null && phase == 1) {
      phase = 2;
      if (listTier()) {
        // This JVM just yielded: queue on the wake list, behind the other clients' waiters blocked
        // there (FIFO in Redis), for at most QUEUE_FIRST_NANOS; the yielding release marked this
        // client as waiting, so the release after theirs wakes this head. Then it attempts.
        long queueFirst = gate.standBack(Engine.QUEUE_FIRST_NANOS);
        if (queueFirst > 0) {
          setLocalPhase(phase);
          Wake w = waitOnList(queueFirst, env.faults());
          if (w != null) {
            env.queuedFirst(w.woken());
          }
          return true;
        }
      } else {
        wait = gate.standBack(STAND_BACK_NANOS);
        wake = wait > 0 ? new CompletableFuture<>() : null; // the time alone: see STAND_BACK_NANOS
      }
    }
    if (wake == null) {
      setLocalPhase(0); // the attempt follows; the next step checks again
      return false;
    }
    setLocalPhase(phase);
    if (call.timed) {
      wait = Math.min(wait, Math.max(0, call.remaining()));
    }
    stepAfter(wait, wake, env.faults());
    return true;
  }

  private static boolean isReady(WakeChannel ch) {
    return ch.ready().isDone() && !ch.ready().isCompletedExceptionally();
  }

  /**
   * Waits for the subscription's confirmation, at most the command timeout from {@code since},
   * re-checking the connection every {@link AcquisitionEnv#recheckNanos()}: an outage that begins
   * meanwhile is counted against the outage tolerance as it goes, not only once the command
   * timeout has passed.
   */
  private void awaitReady(WakeChannel ch, long since) {
    long left = env.commandTimeoutNanos() - (System.nanoTime() - since);
    CompletableFuture<Boolean> t = Timer.after(Math.max(0, Math.min(env.recheckNanos(), left)));
    if (!arm(t)) {
      return;
    }
    CompletableFuture.anyOf(ch.ready(), t).whenComplete((v, e) -> guarded(() -> {
      if (!wake(t)) {
        return;
      }
      // One read decides: the confirmation may land between two reads, and "not ready" then
      // "done" stranded the head (AsyncConfirmationRaceTest).
      if (ch.ready().isDone()) {
        if (ch.ready().isCompletedExceptionally()) {
          subscriptionFailed(ch); // refused (an ACL without the channel) or failed: never subscribe again at once
        } else {
          step(); // confirmed: attempt
        }
      } else if (System.nanoTime() - since < env.commandTimeoutNanos()) {
        if (deadlineUp()) {
          return;
        }
        if (!env.connected() && !outage(System.nanoTime(), " (connection down, reconnecting)", null)) {
          return; // the outage tolerance ran out: failed
        }
        awaitReady(ch, since); // still waiting for the confirmation
      } else {
        // no confirmation: the subscriber connection may be stuck (reconnecting to a node that is
        // gone); replace it, so that this and every other waiter on it subscribes anew
        env.reset(ch);
        gate.drop(ch);
        if (!deadlineUp() && outage(since, " (subscribing: no confirmation)", null)) {
          pause(RECHECK_NANOS);
        }
      }
    }));
  }

  private void subscriptionFailed(WakeChannel ch) {
    gate.drop(ch);
    Throwable cause = Engine.unwrap(ch.ready().handle((v, e) -> e).join());
    if (cause == null) {
      step(); // not failed after all: go on (never return with nothing armed)
      return;
    }
    if (!Engine.isTransient(cause)) {
      fail(Engine.failure(side.describe, cause)); // e.g. an ACL refusal of SUBSCRIBE
      return;
    }
    if (!deadlineUp() && outage(System.nanoTime(), " (subscribing)", cause)) {
      pause(RECHECK_NANOS);
    }
  }

  /** Sends an attempt; {@code event} is the channel's next message, taken before it (null: not subscribed). */
  private void send(CompletableFuture<Void> event, CompletableFuture<Void> fault) {
    CompletableFuture<Attempt> f;
    long sentNanos;
    long sentAt;
    boolean rearm;
    boolean late = false;
    mu.lock();
    try {
      if (finished || abandoned) {
        return;
      }
      // Past the deadline only the head's first attempt is sent; a later one
      // would also stretch the deadline by its reply's minimum wait.
      late = attempted && call.expired();
      if (late) {
        return;
      }
      sentNanos = System.nanoTime();
      sentAt = env.ticker();
      attempted = true; // before sending: whatever happens, a withdrawal follows if it gives up
      try {
        f = side.attempt(this, event != null);
      } catch (RuntimeException e) {
        f = CompletableFuture.failedFuture(e);
      }
      inFlight = f;
      inFlightSentNanos = sentNanos;
      rearm = deadlinePassed;
      deadlinePassed = false;
    } finally {
      mu.unlock();
      if (late) {
        timeout();
      }
    }
    if (rearm) {
      armDeadline(call.minReplyNanos()); // the first attempt gets its reply's minimum wait
    }
    awaitReply(f, event, fault, sentAt, sentNanos);
  }

  /**
   * Waits for the reply of {@code f}, re-checking the connection every {@link #RECHECK_NANOS}
   * (a connection that drops makes Redis count as unreachable at once) until the command timeout.
   */
  private void awaitReply(CompletableFuture<Attempt> f, CompletableFuture<Void> event,
      CompletableFuture<Void> fault, long sentAt, long sentNanos) {
    long left = env.commandTimeoutNanos() - (System.nanoTime() - sentNanos);
    CompletableFuture<Boolean> check = Timer.after(Math.max(0, Math.min(env.recheckNanos(), left)));
    CompletableFuture.anyOf(f, check, fault).whenComplete((v, e) -> guarded(() -> {
      Timer.cancel(check);
      if (!f.isDone() && fault.isDone() && !call.once) {
        // A recovery event (a reconnect, a new Cluster topology) while the attempt waits: it may
        // be queued for a connection that will not answer (a dead master's); send again
        recovered(f, event, fault, sentAt, sentNanos);
        return;
      }
      if (!f.isDone() && System.nanoTime() - sentNanos < env.commandTimeoutNanos()) {
        if (!env.connected() && !call.once) {
          try {
            env.unreachable(call, System.nanoTime(), side.describe + " (connection down, reconnecting)", null);
          } catch (TurnstileException x) {
            failInFlight(f, x); // the outage tolerance is used up; the reply, if any, is undone
            return;
          }
        }
        if (!locked(() -> finished || abandoned)) {
          // a recovery event that came meanwhile (a one-attempt call waits on for its reply) is
          // not waited on again: it is done, and would wake this wait at once, in a loop
          awaitReply(f, event, fault.isDone() ? env.faults() : fault, sentAt, sentNanos);
          return;
        }
        // abandoned meanwhile: keep listening, the reply must still be undone
        f.whenComplete((a, x) -> guarded(() -> onReply(f, event, fault, sentAt, sentNanos)));
        return;
      }
      onReply(f, event, fault, sentAt, sentNanos);
    }));
  }

  /** A recovery event came while {@code f} was in flight: its outcome is unknown; send again shortly. */
  private void recovered(CompletableFuture<Attempt> f, CompletableFuture<Void> event,
      CompletableFuture<Void> fault, long sentAt, long sentNanos) {
    boolean wasAbandoned;
    mu.lock();
    try {
      if (inFlight != f) {
        return;
      }
      wasAbandoned = abandoned;
      if (!wasAbandoned) {
        inFlight = null;
        uncertain = true; // it may still run: an idempotent copy follows (same request)
      }
    } finally {
      mu.unlock();
    }
    if (wasAbandoned) {
      f.whenComplete((a, x) -> guarded(() -> onReply(f, event, fault, sentAt, sentNanos))); // undo it then
      return;
    }
    side.failed(this, f);
    if (!deadlineUp()) {
      pause(RECHECK_NANOS);
    }
  }

  /** Fails the acquisition while {@code f} is in flight: its reply, when it comes, is undone. */
  private void failInFlight(CompletableFuture<Attempt> f, Throwable error) {
    mu.lock();
    try {
      if (finished || inFlight != f) {
        return;
      }
      abandoned = true;
    } finally {
      mu.unlock();
    }
    gate.leave(this);
    result.completeExceptionally(error);
    f.whenComplete((a, x) -> guarded(() -> onReply(f, null, null, 0, 0)));
  }

  private void onReply(CompletableFuture<Attempt> f, CompletableFuture<Void> event,
      CompletableFuture<Void> fault, long sentAt, long sentNanos) {
    boolean subscribed = event != null;
    boolean done = f.isDone(); // read once: the reply may land meanwhile
    Throwable error = done ? Engine.unwrap(f.handle((v, e) -> e).join()) : null;
    Attempt a = done && error == null ? f.join() : null;
    boolean wasAbandoned;
    boolean unsure;
    mu.lock();
    try {
      if (inFlight != f) {
        return;
      }
      inFlight = null;
      wasAbandoned = abandoned;
      if (a == null) {
        uncertain = true; // failed or unanswered: it may have run, or may still run
      } else {
        call.answered(); // under mu: onDeadline reads it there
      }
      unsure = uncertain;
      if (wasAbandoned) {
        finished = true; // abandon() left the finish to this reply
      } else if (a != null && a.acquired) {
        finished = true; // delivered below; a caller's cancel from now on releases the hold
      }
    } finally {
      mu.unlock();
    }
    if (wasAbandoned) {
      quietly(() -> {
        if (a != null && a.acquired) {
          side.cancelGrant(this, a);
        } else {
          if (a != null) {
            side.refused(this, a);
          } else {
            side.failed(this, f);
          }
          side.withdraw(this, unsure);
        }
      });
      cancelTimers();
      gate.leave(this);
      return;
    }
    if (a == null) {
      side.failed(this, f);
      if (call.once) {
        // one attempt, no wait: a failure is the caller's answer (the attempt is undone if it ran)
        fail(error != null ? Engine.failure(side.describe, error) : new TurnstileException(side.describe
            + ": Redis did not answer within " + TimeUnit.NANOSECONDS.toMillis(env.commandTimeoutNanos()) + " ms"));
        return;
      }
      if (error != null && !Engine.isTransient(error)) {
        fail(error instanceof IllegalArgumentException ? error : Engine.failure(side.describe, error));
        return;
      }
      env.suspect();
      String what = error == null
          ? " (no reply within " + TimeUnit.NANOSECONDS.toMillis(env.commandTimeoutNanos()) + " ms)" : "";
      if (!deadlineUp() && outage(error == null ? sentNanos : System.nanoTime(), what, error)) {
        pause(RECHECK_NANOS);
      }
      return;
    }
    call.reachable();
    if (a.acquired) {
      granted(a, sentAt);
      return;
    }
    side.refused(this, a);
    if (a.holder != null && telemetry != null) {
      telemetry.holder = a.holder;
    }
    if (call.once) {
      timeout(); // one attempt, refused: it never waits in line (the runner leaves the gate with it)
      return;
    }
    if (isRunner() && !gate.runnerRefused(this)) {
      return; // refused beside the head: in line now (it goes on when it becomes head), or it ended
    }
    waitsInRedis();
    if (a.retryMillis == -2 || (!subscribed && !listTier())) {
      // the holder vanished between checks, or the first attempt by pub/sub (not subscribed
      // yet): go on at once
      if (!deadlineUp()) {
        step();
      }
      return;
    }
    if (deadlineUp()) {
      return; // refused at or past the deadline: no further wait
    }
    long slice = a.retryMillis < 0 ? TimeUnit.MILLISECONDS.toNanos(env.leaseMillis())
        : TimeUnit.MILLISECONDS.toNanos(a.retryMillis + 1);
    if (call.timed) {
      slice = Math.max(TimeUnit.MILLISECONDS.toNanos(1), Math.min(slice, call.remaining()));
    }
    if (!subscribed) {
      waitOnList(slice, fault);
      return;
    }
    CompletableFuture<Boolean> t = Timer.after(slice);
    if (!arm(t)) {
      return;
    }
    CompletableFuture.anyOf(event, fault, t).whenComplete((v, e) -> {
      if (!wake(t)) {
        return;
      }
      if (event != null && event.isDone() && !fault.isDone()) {
        stepAfterJitter(); // a release's message: every client's head got it at once
      } else {
        step();
      }
    });
  }

  /** Whether this acquisition waits on its primitive's wake list (the token-list tier) rather than by pub/sub. */
  private boolean listTier() {
    return !pubsubOnly && side.wakeKey(this) != null;
  }

  /**
   * Waits on the wake list for a token (a release's wake-up), a recovery event, or the slice's
   * end, then steps again. Without a free pooled connection it waits by pub/sub from now on.
   */
  private Wake waitOnList(long slice, CompletableFuture<Void> fault) {
    if (!env.connected()) {
      step(); // counts the outage
      return null;
    }
    Wake w;
    try {
      w = env.waitOnList(side.wakeKey(this), slice, side::passWakeup);
    } catch (Engine.Unavailable e) {
      if (outage(System.nanoTime(), "", e)) {
        pause(RECHECK_NANOS);
      }
      return null;
    }
    if (w == null) {
      pubsubOnly = true; // every pooled connection is lent out
      step();
      return null;
    }
    return armWake(w, slice, fault) ? w : null;
  }

  /** Waits on {@code w} for at most {@code slice} (and a grace), then steps again; false if this acquisition ended meanwhile. */
  private boolean armWake(Wake w, long slice, CompletableFuture<Void> fault) {
    CompletableFuture<Boolean> t = Timer.after(slice + LIST_GRACE_NANOS);
    boolean armed = locked(() -> {
      if (finished) {
        return false;
      }
      waitTimer = t;
      listWait = w;
      listFault = fault;
      return true;
    });
    if (!armed) {
      Timer.cancel(t);
      w.abandon(); // ended meanwhile
      return false;
    }
    tier("list");
    CompletableFuture.anyOf(w.woken(), fault, env.losses(), t).whenComplete((v, e) -> guarded(() -> woken(w, t)));
    return true;
  }

  /**
   * A head that adopted a wait resumes it, watched with the recovery events' future it was handed
   * with it (see {@link #adopt}); false if it has none.
   */
  private boolean resumeAdoptedWait() {
    Wake w;
    CompletableFuture<Void> fault;
    mu.lock();
    try {
      if (!adoptedWait) {
        return false;
      }
      adoptedWait = false;
      w = listWait;
      fault = listFault;
      listWait = null;
    } finally {
      mu.unlock();
    }
    if (w == null) {
      return false;
    }
    waitsInRedis();
    armWake(w, TimeUnit.MILLISECONDS.toNanos(env.leaseMillis()), fault != null ? fault : env.faults());
    return true;
  }

  /** A wait on the wake list ended (a token, its timeout, a recovery event, or its client-side bound). */
  private void woken(Wake w, CompletableFuture<Boolean> t) {
    boolean goOn;
    Timer.cancel(t);
    mu.lock();
    try {
      if (waitTimer == t) {
        waitTimer = null;
      }
      if (givenAway == w) {
        return; // handed to the next head, which waits on it now
      }
      if (listWait == w) {
        listWait = null;
      }
      goOn = !finished;
    } finally {
      mu.unlock();
    }
    if (!goOn || !w.woken().isDone()) {
      w.abandon(); // over, or a recovery event or the bound came first: stop it, hand on a token
      if (goOn) {
        step();
      }
      return;
    }
    boolean token = false;
    try {
      token = w.woken().join();
    } catch (CompletionException | CancellationException e) {
      Throwable cause = Engine.unwrap(e);
      if (cause instanceof AclRefusal) {
        fail(((AclRefusal) cause).in(side.describe));
        return;
      }
      pubsubOnly = true; // no blocking connection could be opened: wait by pub/sub
    }
    if (token) {
      // a token: this head was in line in Redis (FIFO on the list) when it came, so it does not
      // stand back for a yield of its JVM, which would waste the token while the primitive is free
      gate.standBack(0);
    }
    w.used();
    step();
  }

  @Override
  AsyncAcquisition<H> self() {
    return this;
  }

  @Override
  public String toString() {
    return "AsyncAcquisition{" + side.describe + ", request=" + request + '}';
  }
}
