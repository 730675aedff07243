package io.github.turnstile;

/**
 * Describes a lease that a client lost while one of its threads still believed it held the
 * primitive. Delivered to every {@link LeaseLossListener} registered on the primitive and in
 * {@link TurnstileOptions}.
 *
 * @param name the primitive's name (as passed to {@link Turnstile#lock(String)})
 * @param fencingToken the fencing token of the lost acquisition
 * @param holder the name of the thread that held it
 * @param reason why the lease is considered lost (expired without renewal, or the key was
 *     deleted or taken over)
 * @param lostAtMillis when the loss was detected, as {@link System#currentTimeMillis()}
 */
public record LeaseLostEvent(
    String name, long fencingToken, String holder, String reason, long lostAtMillis) {}
