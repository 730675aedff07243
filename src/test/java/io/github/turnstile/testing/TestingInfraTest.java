package io.github.turnstile.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Quick self-test of the test infrastructure in this package. */
@ExtendWith(RedisExtension.class)
@Timeout(30)
class TestingInfraTest {

    private static RedisServerProcess redis;

    @BeforeAll
    static void startRedis() {
        redis = RedisServerProcess.start();
    }

    @AfterAll
    static void stopRedis() {
        if (redis != null) {
            redis.close();
        }
    }

    @Test
    void redisServerProcessLifecycle() {
        assertEquals("PONG", redis.command("PING"));
        assertEquals("PONG", RedisServerProcess.command(redis.host(), redis.port(), "PING"));
        assertEquals("redis://127.0.0.1:" + redis.port(), redis.uri());
        assertTrue(redis.isAlive());
        assertTrue(redis.pid() > 0);
        assertFalse(redis.version().isEmpty());
        assertNotEquals("unknown", redis.version());

        assertEquals("OK", redis.command("SET", "k", "v"));
        assertEquals("v", redis.command("GET", "k"));
        assertEquals("1", redis.command("EXISTS", "k"));
        assertNull(redis.command("GET", "missing"));
        assertTrue(redis.command("NO-SUCH-COMMAND").startsWith("-ERR"));
        assertEquals("a\nb", redis.command("EVAL", "return {'a','b'}", "0"));

        redis.pause();
        assertThrows(UncheckedIOException.class,
                () -> RedisServerProcess.command(redis.host(), redis.port(), Duration.ofMillis(300), "PING"));
        redis.resume();
        assertEquals("PONG", redis.command("PING"));

        int port = redis.port();
        long oldPid = redis.pid();
        redis.restart();
        assertEquals(port, redis.port());
        assertNotEquals(oldPid, redis.pid());
        assertEquals("PONG", redis.command("PING"));
        assertNull(redis.command("GET", "k"), "data must be gone after restart");

        redis.kill9();
        assertFalse(redis.isAlive());
        redis.restart();
        assertEquals("PONG", redis.command("PING"));
    }

    /**
     * A server started after another was stopped gets another port, and no port is one the system
     * hands out on its own (its ephemeral range, from 32768 on Linux): a client of the first server,
     * still reconnecting, must not reach the second (see {@link Ports}).
     */
    @Test
    void aStoppedServersPortGoesToNoLaterServer() throws IOException {
        int first;
        try (RedisServerProcess a = RedisServerProcess.start()) {
            first = a.port();
        }
        try (RedisServerProcess b = RedisServerProcess.start()) {
            assertNotEquals(first, b.port());
            assertTrue(first < 32_768 - 10_000 && b.port() < 32_768 - 10_000,
                    "ports and Cluster bus ports below the ephemeral range: " + first + ", " + b.port());
            int next = Ports.next();
            try (ServerSocket inUse = new ServerSocket(next + 1, 1, InetAddress.getByName(RedisServerProcess.HOST))) {
                int after = Ports.next();
                assertNotEquals(next + 1, after, "a port something listens on is skipped");
                assertTrue(inUse.isBound());
            }
        }
    }

    @Test
    void proxyForwardsPausesAndCuts() throws Exception {
        try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port())) {
            assertEquals("PONG", RedisServerProcess.command("127.0.0.1", proxy.port(), "PING"));
            assertEquals("redis://127.0.0.1:" + proxy.port(), proxy.uri());

            try (Socket s = new Socket("127.0.0.1", proxy.port())) {
                s.setSoTimeout(2_000);
                assertEquals("+PONG", ping(s));
                awaitConnections(proxy, 1);

                proxy.setPaused(true);
                s.setSoTimeout(300);
                send(s, "PING\r\n");
                assertThrows(SocketTimeoutException.class, () -> s.getInputStream().read());
                proxy.setPaused(false);
                s.setSoTimeout(2_000);
                assertEquals("+PONG", readLine(s.getInputStream()));

                proxy.setDropReplies(true);
                s.setSoTimeout(300);
                send(s, "INCR dropped\r\n");
                assertThrows(SocketTimeoutException.class, () -> s.getInputStream().read());
                proxy.setDropReplies(false);
                assertEquals("1", redis.command("GET", "dropped"), "request must reach Redis");

                proxy.setDelayMillis(200);
                s.setSoTimeout(2_000);
                long t0 = System.nanoTime();
                assertEquals("+PONG", ping(s));
                assertTrue(System.nanoTime() - t0 >= Duration.ofMillis(350).toNanos(), "delay applies both ways");
                proxy.setDelayMillis(0);

                proxy.cutAll();
                assertClosed(s);
                awaitConnections(proxy, 0);
            }

            proxy.setRefuseNew(true);
            try (Socket s = new Socket("127.0.0.1", proxy.port())) {
                s.setSoTimeout(2_000);
                send(s, "PING\r\n");
                assertClosed(s);
            }
            assertEquals(1, proxy.refusedCount());
            proxy.setRefuseNew(false);
            assertEquals("PONG", RedisServerProcess.command("127.0.0.1", proxy.port(), "PING"));
        }
    }

    @Test
    void proxyStallsNewConnectionsWhileExistingOnesWork() throws Exception {
        try (TcpProxy proxy = TcpProxy.start(redis.host(), redis.port());
                Socket existing = new Socket("127.0.0.1", proxy.port())) {
            existing.setSoTimeout(2_000);
            assertEquals("+PONG", ping(existing));
            proxy.setStallNew(true);
            try (Socket fresh = new Socket("127.0.0.1", proxy.port())) { // the connect itself succeeds
                fresh.setSoTimeout(300);
                send(fresh, "PING\r\n");
                assertThrows(SocketTimeoutException.class, () -> fresh.getInputStream().read());
                assertEquals("+PONG", ping(existing), "existing connections keep working");
                long deadline = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                while (proxy.stalledCount() != 1 && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertEquals(1, proxy.stalledCount());
                proxy.setStallNew(false); // forwarded now: the PING sent meanwhile is answered
                fresh.setSoTimeout(2_000);
                assertEquals("+PONG", readLine(fresh.getInputStream()));
                assertEquals(0, proxy.stalledCount());
            }
            proxy.setStallNew(true);
            try (Socket fresh = new Socket("127.0.0.1", proxy.port())) {
                fresh.setSoTimeout(2_000);
                long deadline = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                while (proxy.stalledCount() != 1 && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                proxy.cutAll(); // cuts the stalled ones too
                assertClosed(fresh);
            }
        }
    }

    @Test
    void extensionInjectsSharedRedis(TestRedis shared) {
        assertEquals("PONG", shared.command("PING"));
        assertTrue(shared.port() > 0);
        assertTrue(TestRedis.SOURCE_PROCESS.equals(shared.source())
                || TestRedis.SOURCE_TESTCONTAINERS.equals(shared.source())
                || TestRedis.SOURCE_REDIS_URI.equals(shared.source()));
        assertEquals(shared, RedisExtension.shared(), "one shared Redis per JVM");
    }

    @Test
    void childJvm() {
        try (JvmProcess child = JvmProcess.start(Child.class, "hello")) {
            assertEquals("READY hello", child.awaitLine("READY", Duration.ofSeconds(20)));
            child.stop();
            child.cont();
            assertTrue(child.isAlive());
            child.kill9();
            assertFalse(child.isAlive());
        }
    }

    /** Main class for {@link #childJvm()}. */
    static final class Child {
        public static void main(String[] args) throws InterruptedException {
            System.out.println("noise");
            System.out.println("READY " + args[0]);
            System.out.flush();
            Thread.sleep(60_000);
        }
    }

    private static String ping(Socket s) throws IOException {
        send(s, "PING\r\n");
        return readLine(s.getInputStream());
    }

    private static void send(Socket s, String text) throws IOException {
        OutputStream out = s.getOutputStream();
        out.write(text.getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    private static String readLine(InputStream in) throws IOException {
        StringBuilder sb = new StringBuilder();
        int c;
        while ((c = in.read()) != '\n') {
            if (c < 0) {
                throw new IOException("EOF after '" + sb + "'");
            }
            if (c != '\r') {
                sb.append((char) c);
            }
        }
        return sb.toString();
    }

    private static void assertClosed(Socket s) {
        try {
            assertEquals(-1, s.getInputStream().read(), "expected EOF");
        } catch (SocketTimeoutException e) {
            throw new AssertionError("connection was not closed", e);
        } catch (IOException e) {
            // connection reset: closed as well
        }
    }

    private static void awaitConnections(TcpProxy proxy, int expected) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(2).toNanos();
        while (proxy.connectionCount() != expected && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(expected, proxy.connectionCount());
    }
}
