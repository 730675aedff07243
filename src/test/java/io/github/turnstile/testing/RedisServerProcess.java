package io.github.turnstile.testing;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code redis-server} child process listening on a free loopback port, for tests.
 *
 * <p>Persistence is disabled, so {@link #restart()} loses all data. Every started server is
 * killed by a JVM shutdown hook at the latest. The binary comes from {@code REDIS_SERVER_BIN},
 * the {@code PATH}, or the binaries bundled in the embedded-redis test dependency (see
 * {@link #binary()}).
 */
public final class RedisServerProcess implements AutoCloseable {

    /** Loopback address every server binds to. */
    public static final String HOST = "127.0.0.1";

    private static final Duration STARTUP_TIMEOUT = Duration.ofSeconds(10);
    private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(10);
    private static final int MAX_PORT_ATTEMPTS = 5;

    private static final Set<RedisServerProcess> LIVE = ConcurrentHashMap.newKeySet();
    private static final Object BINARY_LOCK = new Object();
    private static volatile Path cachedBinary;
    private static boolean hookInstalled;

    private final Path binary;
    private final String configText; // null: no config file
    private final List<String> extraArgs;
    private final int port;
    private final Path dir;
    private final Path log;
    private volatile Process process;
    private volatile boolean paused;
    private volatile boolean closed;

    private RedisServerProcess(Path binary, String configText, List<String> extraArgs, int port, Path dir) {
        this.binary = binary;
        this.configText = configText;
        this.extraArgs = extraArgs;
        this.port = port;
        this.dir = dir;
        this.log = dir.resolve("redis.log");
    }

    /**
     * Starts a new server on a free loopback port and waits (up to 10 s) until it answers PING.
     *
     * @param extraArgs additional {@code redis-server} arguments, one argv element each
     *                  (e.g. {@code "--maxmemory", "10mb"})
     * @return the running server
     */
    public static RedisServerProcess start(String... extraArgs) {
        return startWithConfig(null, extraArgs);
    }

    /**
     * Like {@link #start}, with a configuration file written to the server's directory and passed
     * as the first argument (a Sentinel needs one: {@code startWithConfig("sentinel monitor ...",
     * "--sentinel")}).
     *
     * @param configText the configuration file's content, or {@code null} for none
     * @param extraArgs additional arguments, one argv element each
     * @return the running server
     */
    public static RedisServerProcess startWithConfig(String configText, String... extraArgs) {
        Path bin = binary();
        List<String> args = List.of(extraArgs);
        IllegalStateException last = null;
        for (int attempt = 0; attempt < MAX_PORT_ATTEMPTS; attempt++) {
            int port = Ports.next();
            Path dir;
            try {
                dir = Files.createTempDirectory("turnstile-redis-" + port + "-");
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create temp dir for redis-server", e);
            }
            RedisServerProcess server = new RedisServerProcess(bin, configText, args, port, dir);
            installHook();
            LIVE.add(server);
            try {
                server.launch(STARTUP_TIMEOUT);
                return server;
            } catch (PortTakenException e) {
                last = e;
                server.close();
            } catch (RuntimeException | Error e) {
                server.close();
                throw e;
            }
        }
        throw new IllegalStateException("redis-server could not bind a free port after "
                + MAX_PORT_ATTEMPTS + " attempts", last);
    }

    /**
     * The {@code redis-server} executable used by {@link #start}, resolved once per JVM: the
     * {@code REDIS_SERVER_BIN} system property or environment variable, else {@code redis-server}
     * on the {@code PATH}, else the binary for this OS/architecture extracted from the
     * embedded-redis jar to a temporary file.
     *
     * @return path of an executable redis-server
     */
    public static Path binary() {
        Path b = cachedBinary;
        if (b != null) {
            return b;
        }
        synchronized (BINARY_LOCK) {
            if (cachedBinary == null) {
                cachedBinary = resolveBinary();
            }
            return cachedBinary;
        }
    }

    /** @return the TCP port the server listens on (stable across {@link #restart()}) */
    public int port() {
        return port;
    }

    /** @return {@code "127.0.0.1"} */
    public String host() {
        return HOST;
    }

    /** @return {@code redis://127.0.0.1:PORT} */
    public String uri() {
        return "redis://" + HOST + ":" + port;
    }

    /** @return the OS process id of the current server process */
    public long pid() {
        return requireProcess().pid();
    }

    /** @return whether the server process is running (a paused process counts as alive) */
    public boolean isAlive() {
        Process p = process;
        return p != null && p.isAlive();
    }

    /** @return whether {@link #pause()} was called without a following {@link #resume()} */
    public boolean isPaused() {
        return paused;
    }

    /** Freezes the server with {@code SIGSTOP}: connections stay open, nothing is answered. */
    public void pause() {
        signal(pid(), "STOP");
        paused = true;
    }

    /** Unfreezes a server frozen by {@link #pause()} ({@code SIGCONT}). */
    public void resume() {
        signal(pid(), "CONT");
        paused = false;
    }

    /** Kills the server with {@code SIGKILL} and waits until it is gone. */
    public void kill9() {
        Process p = process;
        if (p == null) {
            return;
        }
        p.destroyForcibly();
        awaitExit(p, Duration.ofSeconds(10));
        paused = false;
    }

    /**
     * Kills the server (SIGKILL) and starts it again on the same port with the same arguments,
     * waiting until it answers PING. All data is lost.
     */
    public void restart() {
        if (closed) {
            throw new IllegalStateException("server is closed");
        }
        kill9();
        long deadline = System.nanoTime() + STARTUP_TIMEOUT.toNanos();
        while (true) {
            try {
                launch(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
                return;
            } catch (PortTakenException e) {
                // e.g. a client connection still lingers on the old socket; try again shortly
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("redis-server could not re-bind port " + port, e);
                }
                sleep(100);
            }
        }
    }

    /** @return the server's {@code redis_version} from {@code INFO server} */
    public String version() {
        return versionOf(HOST, port);
    }

    /**
     * Sends one command to this server over a fresh socket; see {@link #command(String, int, String...)}.
     *
     * @param args command name and arguments
     * @return the decoded reply
     */
    public String command(String... args) {
        return command(HOST, port, args);
    }

    /** @return the server's log file (stdout and stderr of the process) */
    public Path logFile() {
        return log;
    }

    /** Terminates the server (SIGTERM, then SIGKILL after 5 s) and deletes its temp directory. */
    @Override
    public void close() {
        closed = true;
        LIVE.remove(this);
        Process p = process;
        if (p != null && p.isAlive()) {
            if (paused) {
                try {
                    signal(p.pid(), "CONT");
                } catch (RuntimeException ignored) {
                    // SIGKILL below still works on a stopped process
                }
            }
            p.destroy();
            if (!awaitExit(p, Duration.ofSeconds(5))) {
                p.destroyForcibly();
                awaitExit(p, Duration.ofSeconds(5));
            }
        }
        deleteRecursively(dir);
    }

    @Override
    public String toString() {
        return "RedisServerProcess[" + uri() + ", binary=" + binary + "]";
    }

    // ------------------------------------------------------------------ raw RESP helper

    /**
     * Sends one command over a fresh raw socket and returns the decoded reply.
     *
     * <p>Decoding: simple strings without the {@code +}; errors keep their leading {@code -}
     * (e.g. {@code "-ERR unknown command"}); integers as decimal text; bulk strings as UTF-8
     * text; nil as {@code null} (or {@code "(nil)"} inside arrays); arrays as their elements
     * joined with {@code '\n'} (nested arrays flattened).
     *
     * @param host server host
     * @param port server port
     * @param args command name and arguments, e.g. {@code "CLIENT", "LIST"}
     * @return the decoded reply
     * @throws UncheckedIOException on connection problems or timeout (10 s)
     */
    public static String command(String host, int port, String... args) {
        return command(host, port, COMMAND_TIMEOUT, args);
    }

    /**
     * Like {@link #command(String, int, String...)} with an explicit connect/read timeout.
     *
     * @param host    server host
     * @param port    server port
     * @param timeout connect and read timeout
     * @param args    command name and arguments
     * @return the decoded reply
     */
    public static String command(String host, int port, Duration timeout, String... args) {
        return pipeline(host, port, timeout, List.of(), args);
    }

    /**
     * Sends {@code prelude} commands (e.g. AUTH, SELECT) then {@code args} on one connection;
     * an error reply to a prelude command raises an exception.
     */
    static String pipeline(String host, int port, Duration timeout, List<String[]> prelude, String... args) {
        if (args.length == 0) {
            throw new IllegalArgumentException("no command given");
        }
        int millis = (int) Math.min(Integer.MAX_VALUE, Math.max(1, timeout.toMillis()));
        try (Socket socket = new Socket()) {
            socket.setTcpNoDelay(true);
            socket.setSoTimeout(millis);
            socket.connect(new InetSocketAddress(host, port), millis);
            OutputStream out = socket.getOutputStream();
            InputStream in = new BufferedInputStream(socket.getInputStream());
            for (String[] pre : prelude) {
                out.write(encode(pre));
                out.flush();
                String reply = readReply(in, false);
                if (reply != null && reply.startsWith("-")) {
                    throw new IllegalStateException(pre[0] + " failed: " + reply);
                }
            }
            out.write(encode(args));
            out.flush();
            return readReply(in, false);
        } catch (IOException e) {
            throw new UncheckedIOException("redis command " + args[0] + " to " + host + ":" + port
                    + " failed: " + e, e);
        }
    }

    static String versionOf(String host, int port) {
        String info = command(host, port, "INFO", "server");
        if (info != null) {
            for (String line : info.split("\r?\n")) {
                if (line.startsWith("redis_version:")) {
                    return line.substring("redis_version:".length()).trim();
                }
            }
        }
        return "unknown";
    }

    private static byte[] encode(String... args) {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        writeAscii(buf, "*" + args.length + "\r\n");
        for (String a : args) {
            byte[] b = a.getBytes(StandardCharsets.UTF_8);
            writeAscii(buf, "$" + b.length + "\r\n");
            buf.write(b, 0, b.length);
            writeAscii(buf, "\r\n");
        }
        return buf.toByteArray();
    }

    private static void writeAscii(ByteArrayOutputStream buf, String s) {
        byte[] b = s.getBytes(StandardCharsets.US_ASCII);
        buf.write(b, 0, b.length);
    }

    private static String readReply(InputStream in, boolean nested) throws IOException {
        int type = in.read();
        if (type < 0) {
            throw new EOFException("connection closed before reply");
        }
        String line = readLine(in);
        switch (type) {
            case '+':
                return line;
            case '-':
                return "-" + line;
            case ':':
                return line;
            case '$': {
                int len = Integer.parseInt(line);
                if (len < 0) {
                    return nested ? "(nil)" : null;
                }
                byte[] data = in.readNBytes(len);
                if (data.length < len) {
                    throw new EOFException("truncated bulk reply");
                }
                readLine(in); // trailing CRLF
                return new String(data, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) {
                    return nested ? "(nil)" : null;
                }
                List<String> parts = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    parts.add(readReply(in, true));
                }
                return String.join("\n", parts);
            }
            default:
                throw new IOException("unexpected RESP type '" + (char) type + "': " + line);
        }
    }

    private static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int prev = -1;
        while (true) {
            int c = in.read();
            if (c < 0) {
                throw new EOFException("connection closed inside reply");
            }
            if (prev == '\r' && c == '\n') {
                byte[] b = buf.toByteArray();
                return new String(b, 0, b.length - 1, StandardCharsets.UTF_8);
            }
            buf.write(c);
            prev = c;
        }
    }

    // ------------------------------------------------------------------ process management

    private void launch(Duration timeout) {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary.toString());
        if (configText != null) {
            Path conf = dir.resolve("redis.conf");
            try {
                if (!Files.exists(conf)) { // a Sentinel rewrites its file: keep it across restarts
                    Files.writeString(conf, configText);
                }
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write " + conf, e);
            }
            cmd.add(conf.toString());
        }
        cmd.add("--port");
        cmd.add(Integer.toString(port));
        cmd.add("--bind");
        cmd.add(HOST);
        cmd.add("--save");
        cmd.add("");
        cmd.add("--appendonly");
        cmd.add("no");
        cmd.add("--protected-mode");
        cmd.add("no");
        cmd.add("--daemonize");
        cmd.add("no");
        cmd.add("--dir");
        cmd.add(dir.toString());
        cmd.addAll(extraArgs);
        ProcessBuilder pb = new ProcessBuilder(cmd)
                .directory(dir.toFile())
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        long logStart = logSize();
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + binary, e);
        }
        process = p;
        paused = false;
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (!p.isAlive()) {
                awaitExit(p, Duration.ofSeconds(1));
                String output = readLog(logStart);
                if (output.contains("Address already in use") || output.contains("Could not create server TCP")) {
                    throw new PortTakenException("port " + port + " is taken:\n" + output);
                }
                throw new IllegalStateException("redis-server exited with code " + p.exitValue()
                        + " during startup; command " + cmd + "; log:\n" + output);
            }
            if (pingOk(port)) {
                if (answeredBy(p, port)) {
                    return;
                }
                // Another process took the port between Ports.next() and our bind (a server of another
                // test JVM, a Sentinel): it answered the PING. Ours cannot bind and exits.
                p.destroyForcibly();
                awaitExit(p, Duration.ofSeconds(5));
                throw new PortTakenException("port " + port + " is taken by another process that answers PING");
            }
            if (System.nanoTime() > deadline) {
                p.destroyForcibly();
                awaitExit(p, Duration.ofSeconds(5));
                throw new IllegalStateException("redis-server on port " + port + " did not answer PING within "
                        + timeout.toMillis() + " ms; log:\n" + readLog(logStart));
            }
            sleep(20);
        }
    }

    /**
     * Whether the server answering on the port is {@code p}: its INFO process_id. Where INFO is
     * refused or renamed, whether {@code p} is still alive a moment later (a redis-server that could
     * not bind exits at once).
     */
    private static boolean answeredBy(Process p, int port) {
        try {
            String info = command(HOST, port, Duration.ofSeconds(5), "INFO", "server");
            if (info != null) {
                for (String line : info.split("\r?\n")) {
                    if (line.startsWith("process_id:")) {
                        return Long.parseLong(line.substring("process_id:".length()).trim()) == p.pid();
                    }
                }
            }
        } catch (RuntimeException e) {
            // fall through
        }
        sleep(300);
        return p.isAlive();
    }

    private static boolean pingOk(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(HOST, port), 200);
            s.setSoTimeout(500);
            s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            byte[] buf = new byte[5];
            int n = s.getInputStream().readNBytes(buf, 0, 5);
            return n == 5 && "+PONG".equals(new String(buf, StandardCharsets.US_ASCII));
        } catch (IOException e) {
            return false;
        }
    }

    private long logSize() {
        try {
            return Files.exists(log) ? Files.size(log) : 0L;
        } catch (IOException e) {
            return 0L;
        }
    }

    private String readLog(long from) {
        try {
            if (!Files.exists(log)) {
                return "<no log>";
            }
            byte[] all = Files.readAllBytes(log);
            int start = (int) Math.min(all.length, Math.max(0L, from));
            return new String(all, start, all.length - start, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "<cannot read log: " + e + ">";
        }
    }

    private Process requireProcess() {
        Process p = process;
        if (p == null) {
            throw new IllegalStateException("server not started");
        }
        return p;
    }

    /** Sends a signal ({@code "STOP"}, {@code "CONT"}, ...) with the {@code kill} command. */
    static void signal(long pid, String signal) {
        try {
            Process k = new ProcessBuilder("kill", "-" + signal, Long.toString(pid))
                    .redirectErrorStream(true)
                    .start();
            String out = new String(k.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!k.waitFor(10, TimeUnit.SECONDS)) {
                k.destroyForcibly();
                throw new IllegalStateException("kill -" + signal + " " + pid + " timed out");
            }
            if (k.exitValue() != 0) {
                throw new IllegalStateException("kill -" + signal + " " + pid + " failed: " + out.trim());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run kill -" + signal + " " + pid, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while signalling " + pid, e);
        }
    }

    static boolean awaitExit(Process p, Duration timeout) {
        try {
            return p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return !p.isAlive();
        }
    }

    static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** @return a currently free TCP port on the loopback interface */
    private static synchronized void installHook() {
        if (hookInstalled) {
            return;
        }
        hookInstalled = true;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (RedisServerProcess s : LIVE.toArray(new RedisServerProcess[0])) {
                Process p = s.process;
                if (p != null) {
                    p.destroyForcibly();
                }
                deleteRecursively(s.dir);
            }
        }, "turnstile-redis-server-reaper"));
    }

    static void deleteRecursively(Path root) {
        if (root == null || !Files.exists(root)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort
                }
            });
        } catch (IOException | UncheckedIOException ignored) {
            // best effort
        }
    }

    // ------------------------------------------------------------------ binary resolution

    private static Path resolveBinary() {
        String configured = System.getProperty("REDIS_SERVER_BIN");
        if (configured == null || configured.isBlank()) {
            configured = System.getenv("REDIS_SERVER_BIN");
        }
        if (configured != null && !configured.isBlank()) {
            Path p = Paths.get(configured.trim());
            if (!Files.isExecutable(p)) {
                throw new IllegalStateException("REDIS_SERVER_BIN=" + configured + " is not an executable file");
            }
            return p;
        }
        String path = System.getenv("PATH");
        if (path != null) {
            for (String entry : path.split(java.io.File.pathSeparator)) {
                if (entry.isEmpty()) {
                    continue;
                }
                try {
                    Path candidate = Paths.get(entry, "redis-server");
                    if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
                        return candidate;
                    }
                } catch (RuntimeException ignored) {
                    // malformed PATH entry
                }
            }
        }
        return extractBundledBinary();
    }

    private static Path extractBundledBinary() {
        String resource = bundledResourceName();
        try (InputStream in = RedisServerProcess.class.getClassLoader().getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("no redis-server found: set REDIS_SERVER_BIN, put redis-server on "
                        + "the PATH, or add embedded-redis (resource " + resource + ") to the test classpath");
            }
            Path dir = Files.createTempDirectory("turnstile-redis-bin-");
            dir.toFile().deleteOnExit(); // registered first, so deleted after the file inside
            Path tmp = dir.resolve(resource + ".part");
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            if (!tmp.toFile().setExecutable(true, true)) {
                throw new IllegalStateException("cannot make " + tmp + " executable");
            }
            // rename after the write handle is closed, so no exec sees a file open for writing
            Path target = dir.resolve(resource);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
            target.toFile().deleteOnExit();
            return target;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot extract " + resource, e);
        }
    }

    private static String bundledResourceName() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        boolean x64 = arch.equals("amd64") || arch.equals("x86_64");
        boolean arm64 = arch.equals("aarch64") || arch.equals("arm64");
        boolean x86 = arch.equals("x86") || arch.equals("i386") || arch.equals("i686");
        if (os.contains("linux")) {
            if (x64) {
                return "redis-server-6.2.6-v5-linux-amd64";
            }
            if (arm64) {
                return "redis-server-6.2.7-linux-arm64";
            }
            if (x86) {
                return "redis-server-6.2.7-linux-386";
            }
        } else if (os.contains("mac") || os.contains("darwin")) {
            if (x64) {
                return "redis-server-6.2.6-v5-darwin-amd64";
            }
            if (arm64) {
                return "redis-server-6.2.6-v5-darwin-arm64";
            }
        }
        throw new IllegalStateException("no bundled redis-server for os.name=" + os + " os.arch=" + arch
                + "; set REDIS_SERVER_BIN or put redis-server on the PATH");
    }

    /** Startup failed because the port was already bound by someone else. */
    private static final class PortTakenException extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        PortTakenException(String message) {
            super(message);
        }
    }
}
