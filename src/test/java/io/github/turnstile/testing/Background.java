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
 * <p>Where {@code /usr/bin/nice} exists the command runs at niceness 10, below the tests: it gets
 * the cores they leave idle. The token (the build's start time) tells this build's result from an earlier build's. The
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

    private static int start(Path dir, String token, List<String> command) throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Path exit = dir.resolve("exit");
        Files.deleteIfExists(exit);
        Files.writeString(dir.resolve("pid"), ProcessHandle.current().pid() + "\n");
        List<String> niced = command;
        Path nice = Path.of("/usr/bin/nice");
        if (Files.isExecutable(nice)) {
            // below the tests: it takes the cores they leave idle, and they hardly wait for it
            niced = new java.util.ArrayList<>(List.of(nice.toString(), "-n", "10"));
            niced.addAll(command);
        }
        Process process = new ProcessBuilder(niced).directory(dir.toFile()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("output.txt").toFile()).start();
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
        Path tmp = dir.resolve("exit.tmp");
        Files.writeString(tmp, token + " " + code + "\n");
        Files.move(tmp, exit, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        return 0;
    }

    private static void stop(Process process) {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }

    private static int await(Path dir, String token, long minutes) throws IOException, InterruptedException {
        Path exit = dir.resolve("exit");
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MINUTES.toNanos(minutes);
        String result = null;
        while (result == null) {
            if (Files.exists(exit)) {
                String[] parts = Files.readString(exit, StandardCharsets.UTF_8).trim().split(" ");
                if (parts.length == 2 && parts[0].equals(token)) {
                    result = parts[1];
                    break;
                }
            }
            if (System.nanoTime() - deadline > 0) {
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
            Path pid = dir.resolve("pid");
            if (Files.exists(pid)) {
                ProcessHandle.of(Long.parseLong(Files.readString(pid).trim())).ifPresent(ProcessHandle::destroy);
            }
            System.out.println("[turnstile-testing] " + dir + ": no result after " + minutes + " min; stopped");
            return 1;
        }
        System.out.println("[turnstile-testing] " + dir + ": exit code " + result + " (waited " + waited
                + " s for it after the tests)");
        return Integer.parseInt(result);
    }
}
