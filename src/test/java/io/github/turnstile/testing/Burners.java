package io.github.turnstile.testing;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The test suite's load mode: a separate JVM that keeps N threads busy, so that the tests run on
 * a machine that is doing other work (docs/DEVELOPMENT.md, "Load mode").
 * {@code mvn -B verify -Dturnstile.test.burners=4} starts it (pom.xml, profile {@code burners})
 * before the tests and stops it when Maven exits.
 *
 * <p>It never outlives the build: it exits when the process that started it (Maven) is gone, and
 * in any case after {@code -Dturnstile.test.burnerMinutes} (default 120) minutes.
 */
public final class Burners {

    private static final AtomicLong SINK = new AtomicLong();

    private Burners() {
    }

    /**
     * Starts the burner threads and waits for the parent process to end.
     *
     * @param args the number of threads (default: {@code turnstile.test.burners}, else 0)
     * @throws InterruptedException never in practice
     */
    public static void main(String[] args) throws InterruptedException {
        int n = args.length > 0 ? Integer.parseInt(args[0].trim())
                : Integer.getInteger("turnstile.test.burners", 0);
        long maxMinutes = Long.getLong("turnstile.test.burnerMinutes", 120);
        Optional<ProcessHandle> parent = ProcessHandle.current().parent();
        System.out.println("[turnstile-testing] load mode: " + n + " busy thread(s) in pid " + ProcessHandle.current().pid()
                + " until pid " + parent.map(p -> Long.toString(p.pid())).orElse("?") + " ends (at most " + maxMinutes
                + " min)");
        if (n <= 0) {
            return;
        }
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(Burners::spin, "burner-" + i);
            t.setDaemon(true);
            t.start();
        }
        long deadline = System.nanoTime() + maxMinutes * 60_000_000_000L;
        while (parent.map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() - deadline < 0) {
            Thread.sleep(500);
        }
        System.exit(0);
    }

    /** Busy work the JIT cannot remove: an xorshift whose result is published now and then. */
    private static void spin() {
        long x = System.nanoTime() | 1;
        while (true) {
            for (int i = 0; i < 1_000_000; i++) {
                x ^= x << 13;
                x ^= x >>> 7;
                x ^= x << 17;
            }
            SINK.lazySet(x);
        }
    }
}
