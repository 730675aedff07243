package io.github.turnstile.testing;

/**
 * The test suite's two time bounds, both generous enough for a starved machine (load 10 on 2
 * cores; docs/DEVELOPMENT.md, "Time in tests"). A test never bounds an elapsed time tighter than
 * these: speed belongs in the benchmark. Each check that uses them catches a failure that takes
 * far longer (a 30 s lease, a 10 s timeout, forever), or compares with a ratio.
 */
public final class Bounds {

    /**
     * How long something that should happen promptly may take: a waiter woken by a release (and
     * not by its holder's lease running out), a failover noticed, a grant undone. Default 5 s;
     * {@code -Dturnstile.test.promptMillis=N} changes it. Checks that use it wait with a lease of
     * at least 20 s, so a lost wake-up still fails them.
     */
    public static final long PROMPT_MS = Long.getLong("turnstile.test.promptMillis", 5_000);

    /**
     * How much a step that runs locally, or a timed call past its timeout, may overrun: a timed
     * tryLock returning after its timeout, an interrupt answered, an unlock that does not wait for
     * Redis. Default 2 s (the issue that introduced it saw 460 ms at load 7 to 11);
     * {@code -Dturnstile.test.overrunMillis=N} changes it.
     */
    public static final long OVERRUN_MS = Long.getLong("turnstile.test.overrunMillis", 2_000);

    private Bounds() {
    }
}
