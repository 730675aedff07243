package io.github.turnstile;

import java.util.concurrent.CompletionStage;

/**
 * One asynchronous acquisition of a distributed primitive, as a value: what
 * {@link DistributedLock#lockAsync()} and {@link DistributedSemaphore#acquireAsync(int)} complete
 * with. A hold is owned by this object, not by a thread: any thread may release it, and the
 * thread that acquired it has no special rights. Holds are not reentrant: every acquisition is a
 * hold of its own, which excludes every other hold and every thread of every client, this one's
 * included.
 *
 * <p><b>Leases.</b> While the hold is held, the client's watchdog renews its lease in Redis (in the
 * same batched round trip as every other lease of the client). If the lease is lost (renewals did
 * not reach Redis in time, or the key was deleted or taken over), {@link #isValid()} turns false,
 * {@link #lost()} completes, every {@link LeaseLossListener} of the primitive and of the options is
 * told once, and the release fails with {@link LockLostException}.
 *
 * <p><b>Release.</b> {@link #release()} and {@link #close()} end the hold. Both are idempotent:
 * the first call releases, later calls return the same stage (or do nothing). Neither waits for
 * Redis on the calling thread, so both may be called from event-loop threads. A release while
 * Redis is unreachable finishes locally at once and is completed in Redis in the background as
 * soon as it answers (it is idempotent), or becomes moot when the lease runs out.
 *
 * <p><b>Memory consistency effects.</b> Within one JVM, actions prior to releasing a hold
 * <i>happen-before</i> the completion of an acquisition (of any hold or thread of this JVM) that
 * the release let in. Across JVMs the data the hold guards must live in a shared store.
 */
public interface Hold extends AutoCloseable {

  /** {@return the name of the primitive this hold was acquired on} */
  String name();

  /**
   * Queries whether this hold is still held with a live lease. Costs no round trip: the answer is
   * {@code false} once the hold was released, as soon as the watchdog learns of a loss, and as
   * soon as the lease has run past its last confirmed renewal by this client's monotonic clock.
   *
   * @return {@code true} if the hold is neither released nor lost
   */
  boolean isValid();

  /**
   * Returns a stage that completes when the lease of this hold is lost while held, with the same
   * event the {@link LeaseLossListener}s get. It completes at most once, and never for a hold
   * that is released without loss. A loss found only by the release (Redis no longer had the
   * hold when the release arrived) completes it too.
   *
   * @return the stage completed by a loss of this hold
   */
  CompletionStage<LeaseLostEvent> lost();

  /**
   * Releases this hold, without waiting on the calling thread. The lease is no longer renewed,
   * {@link #isValid()} is false from now on, and the release is sent to Redis, which wakes the
   * next waiter.
   *
   * <p>The returned stage completes normally when Redis confirmed the release, or when Redis did
   * not answer within a short patience (about 250 ms, or at once while the connection is down):
   * the release is then completed in the background. It completes exceptionally with
   * {@link LockLostException} if the lease had been lost (found locally, or by Redis's answer
   * within that patience), and with {@link TurnstileException} if Redis refused the release for
   * a reason that is not an outage. Later calls return the same stage.
   *
   * @return a stage completed when the release is done, as above
   */
  CompletionStage<Void> release();

  /**
   * Releases this hold as {@link #release()} does, without waiting for Redis. The first call
   * throws {@link LockLostException} if the lease is already known to be lost (the release is
   * sent all the same); a loss found later by Redis's answer is reported through {@link #lost()}
   * and the listeners. Later calls do nothing.
   *
   * @throws LockLostException on the first call, if the lease of this hold was already lost
   * @throws IllegalStateException on the first call, if the permits of this hold were already
   *     released through {@link DistributedSemaphore#release(int)}
   */
  @Override
  void close();
}
