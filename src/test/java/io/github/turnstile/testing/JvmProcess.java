package io.github.turnstile.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A child JVM running a {@code main} class with the current test classpath, for multi-process
 * tests (crashes via {@link #kill9()}, freezes via {@link #stop()}/{@link #cont()}).
 *
 * <p>Stdout lines are captured for {@link #awaitLine}; stderr goes to a temp file. Children are
 * force-killed by a JVM shutdown hook so they never outlive the test JVM.
 */
public final class JvmProcess implements AutoCloseable {

    private static final Set<JvmProcess> LIVE = ConcurrentHashMap.newKeySet();
    private static boolean hookInstalled; // guarded by JvmProcess.class

    private final String name;
    private final Process process;
    private final Path stderrFile;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> history = new ArrayList<>(); // guarded by itself
    private volatile boolean stdoutEnded;

    private JvmProcess(String name, Process process, Path stderrFile) {
        this.name = name;
        this.process = process;
        this.stderrFile = stderrFile;
    }

    /**
     * Child JVMs started by this JVM so far (each may be one more client of a server: {@code NoAdmin}
     * bounds the refusals in {@code ACL LOG} by the clients).
     */
    public static final java.util.concurrent.atomic.AtomicLong STARTED = new java.util.concurrent.atomic.AtomicLong();

    /**
     * Starts {@code java -Xmx256m -cp <test classpath> mainClass args...}.
     *
     * @param mainClass class with a {@code public static void main(String[])}
     * @param args      program arguments
     * @return the running child
     */
    public static JvmProcess start(Class<?> mainClass, String... args) {
        return start(List.of(), mainClass, args);
    }

    /**
     * Like {@link #start(Class, String...)} with extra JVM options (e.g. {@code -Dredis.uri=...}).
     *
     * @param jvmArgs   extra JVM options, placed before the main class
     * @param mainClass class with a {@code public static void main(String[])}
     * @param args      program arguments
     * @return the running child
     */
    public static JvmProcess start(List<String> jvmArgs, Class<?> mainClass, String... args) {
        return start(javaExecutable(), testClasspath(), jvmArgs, mainClass, args);
    }

    /**
     * Like {@link #start(List, Class, String...)} with a chosen {@code java} binary (e.g. a newer
     * JDK's) and classpath (e.g. the test classpath without an optional dependency).
     *
     * @param java      the {@code java} executable
     * @param classpath the classpath, entries separated by {@link java.io.File#pathSeparator}
     * @param jvmArgs   extra JVM options, placed before the main class
     * @param mainClass class with a {@code public static void main(String[])}
     * @param args      program arguments
     * @return the running child
     */
    public static JvmProcess start(String java, String classpath, List<String> jvmArgs, Class<?> mainClass,
            String... args) {
        STARTED.incrementAndGet();
        List<String> cmd = new ArrayList<>();
        cmd.add(java);
        cmd.add("-Xmx256m");
        boolean viaEnv = classpath.length() > 100_000; // beyond Linux's per-argument limit
        if (!viaEnv) {
            cmd.add("-cp");
            cmd.add(classpath);
        }
        cmd.addAll(jvmArgs);
        cmd.add(mainClass.getName());
        cmd.addAll(List.of(args));

        Path stderr;
        try {
            stderr = Files.createTempFile("turnstile-jvm-" + mainClass.getSimpleName() + "-", ".stderr");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create stderr file", e);
        }
        ProcessBuilder pb = new ProcessBuilder(cmd)
                .redirectInput(ProcessBuilder.Redirect.PIPE)
                .redirectOutput(ProcessBuilder.Redirect.PIPE)
                .redirectError(ProcessBuilder.Redirect.to(stderr.toFile()));
        if (viaEnv) {
            pb.environment().put("CLASSPATH", classpath);
        }
        installHook();
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start child JVM " + cmd.get(0), e);
        }
        JvmProcess child = new JvmProcess(mainClass.getSimpleName(), p, stderr);
        LIVE.add(child);
        Thread reader = new Thread(child::readStdout, "jvm-child-" + p.pid() + "-stdout");
        reader.setDaemon(true);
        reader.start();
        return child;
    }

    /**
     * Waits for the next stdout line starting with {@code prefix}; earlier non-matching lines
     * are consumed (but kept for diagnostics).
     *
     * @param prefix  expected line prefix
     * @param timeout how long to wait
     * @return the first matching line
     * @throws AssertionError on timeout or if the child's stdout ends first, with the output so far
     */
    public String awaitLine(String prefix, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            String line;
            try {
                line = lines.poll(50, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for '" + prefix + "' from " + this, e);
            }
            if (line != null) {
                if (line.startsWith(prefix)) {
                    return line;
                }
                continue;
            }
            if (stdoutEnded && lines.isEmpty()) {
                throw new AssertionError("child JVM " + name + " ended stdout without a line starting with '"
                        + prefix + "'" + diagnostics());
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no line starting with '" + prefix + "' from child JVM " + name
                        + " within " + timeout.toMillis() + " ms" + diagnostics());
            }
        }
    }

    /** @return all stdout lines received so far */
    public List<String> output() {
        synchronized (history) {
            return List.copyOf(history);
        }
    }

    /** @return the child's stderr so far */
    public String stderr() {
        try {
            return Files.readString(stderrFile, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "<cannot read " + stderrFile + ": " + e + ">";
        }
    }

    /** @return the child's process id */
    public long pid() {
        return process.pid();
    }

    /** @return whether the child is running (a stopped child counts as alive) */
    public boolean isAlive() {
        return process.isAlive();
    }

    /**
     * Waits for the child to exit.
     *
     * @param timeout how long to wait
     * @return the exit code
     * @throws AssertionError if it is still running after {@code timeout}
     */
    public int waitFor(Duration timeout) {
        if (!RedisServerProcess.awaitExit(process, timeout)) {
            throw new AssertionError("child JVM " + name + " still running after " + timeout.toMillis() + " ms"
                    + diagnostics());
        }
        return process.exitValue();
    }

    /** Kills the child with SIGKILL and waits until it is gone. */
    public void kill9() {
        process.destroyForcibly();
        RedisServerProcess.awaitExit(process, Duration.ofSeconds(10));
    }

    /** Freezes the child with {@code SIGSTOP}. */
    public void stop() {
        RedisServerProcess.signal(pid(), "STOP");
    }

    /** Unfreezes the child with {@code SIGCONT}. */
    public void cont() {
        RedisServerProcess.signal(pid(), "CONT");
    }

    /** Force-kills the child (if still running) and deletes its stderr file. */
    @Override
    public void close() {
        LIVE.remove(this);
        if (process.isAlive()) {
            kill9();
        }
        try {
            Files.deleteIfExists(stderrFile);
        } catch (IOException ignored) {
            // best effort
        }
    }

    @Override
    public String toString() {
        return "JvmProcess[" + name + ", pid=" + process.pid() + "]";
    }

    private void readStdout() {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                synchronized (history) {
                    history.add(line);
                }
                lines.add(line);
            }
        } catch (IOException ignored) {
            // process gone
        } finally {
            stdoutEnded = true;
        }
    }

    private String diagnostics() {
        StringBuilder sb = new StringBuilder();
        sb.append("\n--- alive=").append(process.isAlive());
        if (!process.isAlive()) {
            sb.append(", exit=").append(process.exitValue());
        }
        sb.append(" --- stdout:\n");
        for (String l : output()) {
            sb.append(l).append('\n');
        }
        sb.append("--- stderr:\n").append(stderr());
        return sb.toString();
    }

    private static String javaExecutable() {
        String fromHome = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        if (Files.isExecutable(Paths.get(fromHome))) {
            return fromHome;
        }
        return ProcessHandle.current().info().command().orElse("java");
    }

    /** @return the classpath of the running tests (what children get by default) */
    public static String testClasspath() {
        // surefire may run from a manifest-only jar; it exposes the real classpath here
        String cp = System.getProperty("surefire.test.class.path");
        if (cp == null || cp.isBlank()) {
            cp = System.getProperty("java.class.path");
        }
        return cp;
    }

    private static synchronized void installHook() {
        if (hookInstalled) {
            return;
        }
        hookInstalled = true;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (JvmProcess child : LIVE.toArray(new JvmProcess[0])) {
                child.process.destroyForcibly();
            }
        }, "turnstile-jvm-child-reaper"));
    }
}
