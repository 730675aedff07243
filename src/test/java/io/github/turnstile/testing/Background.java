package io.github.turnstile.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Runs a command of the build beside the tests, and lets a later step of the same build wait for
 * its result (pom.xml, profile {@code jcstress}: the jcstress scenarios run while surefire runs
 * the JUnit tests, on the cores those leave idle, instead of after them).
 *
 * <pre>
 * Background start &lt;dir&gt; &lt;token&gt; &lt;command...&gt;   runs the command; its output goes to dir/output.txt,
 *                                           then "token exit-code" to dir/exit
 * Background await &lt;dir&gt; &lt;token&gt; &lt;minutes&gt;       waits for dir/exit with this token, prints the output,
 *                                           exits with the command's exit code
 * </pre>
 *
 * <p>The command runs at the tests' priority: at a lower one (niceness 10, tried) it got almost no
 * CPU beside the load mode's burners, and the build waited for it long after the tests. The token
 * (the build's start time) tells this build's result from an earlier build's. The
 * command never outlives the build: {@code start} stops it when the process that started it (Maven)
 * is gone or stops this JVM, and {@code await} stops it when its time is up.
 */
public final class Background {

    private Background() {
    }

    /**
     * See the class comment.
     *
     * @param args {@code start dir token command...} or {@code await dir token minutes}
     * @throws Exception if the files cannot be written or read
     */
    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("start")) {
            System.exit(start(Path.of(args[1]), args[2], Arrays.asList(args).subList(3, args.length)));
        } else if (args.length == 4 && args[0].equals("await")) {
            System.exit(await(Path.of(args[1]), args[2], Long.parseLong(args[3])));
        } else {
            System.err.println("usage: Background start <dir> <token> <command...> | await <dir> <token> <minutes>");
            System.exit(2);
        }
    }

    static int start(Path dir, String token, List<String> command) throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Files.deleteIfExists(dir.resolve("exit"));
        Files.writeString(dir.resolve("pid"), token + " " + ProcessHandle.current().pid() + "\n");
        Process process;
        try {
            process = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("output.txt").toFile()).start();
        } catch (IOException e) {
            Files.writeString(dir.resolve("output.txt"), "cannot start " + command + ": " + e + "\n");
            finish(dir, token, 127);
            return 0;
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(process)));
        Optional<ProcessHandle> parent = ProcessHandle.current().parent();
        int code;
        while (true) {
            if (process.waitFor(500, TimeUnit.MILLISECONDS)) {
                code = process.exitValue();
                break;
            }
            if (!parent.map(ProcessHandle::isAlive).orElse(false)) {
                stop(process);
                code = 130;
                break;
            }
        }
        finish(dir, token, code);
        return 0;
    }

    private static void finish(Path dir, String token, int code) throws IOException {
        Path tmp = dir.resolve("exit.tmp");
        Files.writeString(tmp, token + " " + code + "\n");
        Files.move(tmp, dir.resolve("exit"), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private static void stop(Process process) {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }

    /** What {@code dir/name} ("token value") holds for this token: empty if absent or another build's. */
    private static Optional<String> valueFor(Path dir, String name, String token) throws IOException {
        Path file = dir.resolve(name);
        if (!Files.exists(file)) {
            return Optional.empty();
        }
        String[] parts = Files.readString(file, StandardCharsets.UTF_8).trim().split(" ");
        return parts.length == 2 && parts[0].equals(token) ? Optional.of(parts[1]) : Optional.empty();
    }

    /** The live process of {@code start} for this token, if any. */
    private static Optional<ProcessHandle> starter(Path dir, String token) throws IOException {
        return valueFor(dir, "pid", token).flatMap(pid -> ProcessHandle.of(Long.parseLong(pid)))
                .filter(ProcessHandle::isAlive);
    }

    /**
     * Whether {@code start} for this token is gone without a result: it never started within a
     * minute, or its process died (killed) before writing one. The result is read once more
     * first: it may have been written just before the process exited.
     */
    private static boolean starterGone(Path dir, String token, long since) throws IOException {
        if (starter(dir, token).isPresent()) {
            return false;
        }
        boolean started = valueFor(dir, "pid", token).isPresent();
        if (!started && System.nanoTime() - since < TimeUnit.MINUTES.toNanos(1)) {
            return false;
        }
        return valueFor(dir, "exit", token).isEmpty();
    }

    static int await(Path dir, String token, long minutes) throws IOException, InterruptedException {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MINUTES.toNanos(minutes);
        String result = null;
        while (result == null) {
            result = valueFor(dir, "exit", token).orElse(null);
            if (result != null || System.nanoTime() - deadline > 0 || starterGone(dir, token, start)) {
                break;
            }
            Thread.sleep(200);
        }
        Path output = dir.resolve("output.txt");
        if (Files.exists(output)) {
            System.out.print(Files.readString(output, StandardCharsets.UTF_8));
        }
        long waited = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
        if (result == null) {
            Optional<ProcessHandle> running = starter(dir, token);
            running.ifPresent(ProcessHandle::destroy);
            System.out.println("[turnstile-testing] " + dir + ": no result after " + waited + " s (the command "
                    + (running.isPresent() ? "ran too long: stopped" : "is not running") + ")");
            return 1;
        }
        System.out.println("[turnstile-testing] " + dir + ": exit code " + result + " (waited " + waited
                + " s for it after the tests)");
        return Integer.parseInt(result);
    }
}
