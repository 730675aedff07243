package io.github.turnstile;

import java.util.concurrent.CompletableFuture;

/** What the state machine ({@link AsyncAcquisition}) needs from the engine. */
interface AcquisitionEnv {
  boolean closed();

  boolean connected();

  /** See {@link Engine#faults()}. */
  CompletableFuture<Void> faults();

  /**
   * Subscribes to {@code channel} where it lives now (unconfirmed).
   *
   * @throws Engine.Unavailable if no node serves it right now
   * @throws TurnstileException if the client is closed
   */
  WakeChannel subscribe(String channel);

  /** Whether {@code c} can no longer be waited on (dropped by the server, failed, slot moved). */
  boolean stale(WakeChannel c);

  /** The subscription was not confirmed in time: replace its node's subscriber connection. */
  void reset(WakeChannel c);

  /** See {@link Outages#unreachable}. */
  void unreachable(Call call, long sinceNanos, String what, Throwable cause);

  /** A command failed or went unanswered (see {@link Engine#suspectTopology}). */
  void suspect();

  long commandTimeoutNanos();

  /** The longest random pause after a release's message ({@link AsyncAcquisition#JITTER_NANOS}; 0: none). */
  default long jitterNanos() {
    return AsyncAcquisition.JITTER_NANOS;
  }

  /** How often an attempt in flight re-checks the connection ({@link AsyncAcquisition#RECHECK_NANOS}). */
  default long recheckNanos() {
    return AsyncAcquisition.RECHECK_NANOS;
  }

  long leaseMillis();

  /** The lease clock ({@link Engine#ticker}). */
  long ticker();

  String newRequestId();

  int replicaAcks();

  /** Blocks until the replicas acknowledged (see {@link Replicas#awaitReplicas}). */
  void awaitReplicas(String leaseKey, String request);

  /**
   * A head began to wait on the wake list before its attempt, after its JVM yielded: {@code woken}
   * completes true if a token ended the wait, false if it ran out (for the tests' figures).
   */
  default void queuedFirst(CompletableFuture<Boolean> woken) {}

  /** The JFR events and Observations of waits and holds ({@link Telemetry}). */
  default Telemetry telemetry() {
    return Telemetry.JFR;
  }

  /**
   * Starts a wait of up to {@code sliceNanos} on the wake list {@code key} (the token-list
   * tier, {@link ListWait}).
   *
   * @param passWakeup hands on a wake token the wait took, or may have taken, and will not use
   * @return the wait, or null if no pooled connection is free (wait by pub/sub)
   * @throws TurnstileException if no node serves the key right now
   */
  default Wake waitOnList(String key, long sliceNanos, Runnable passWakeup) {
    return null;
  }

  /**
   * The head {@code a} waits in Redis from now on (its first attempt was refused): list it in
   * {@link Turnstile#activity()} until {@link #waitEnded}.
   *
   * @return what to hand to {@link #waitEnded}
   */
  default Object waitStarted(AsyncAcquisition<?> a, AcquisitionSide<?> side, java.util.function.IntSupplier queued) {
    return null;
  }

  /** The wait {@code mark} ({@link #waitStarted}) ended. */
  default void waitEnded(Object mark) {}

  /** See {@link Engine#losses()}. */
  default CompletableFuture<Void> losses() {
    return new CompletableFuture<>();
  }
}
