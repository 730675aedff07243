package io.github.turnstile.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Pure-Java TCP proxy on a loopback port for injecting network faults between a client and a
 * server (typically Redis): pausing traffic, adding latency, dropping replies, cutting
 * connections, refusing new ones, and stalling new ones while the existing ones keep working.
 * Uses daemon threads, two per proxied connection.
 */
public final class TcpProxy implements AutoCloseable {

    private static final AtomicInteger IDS = new AtomicInteger();

    /** Connections accepted and closed at once because {@link #setRefuseNew refuseNew} was set. */
    private final AtomicInteger refused = new AtomicInteger();
    /** Bytes forwarded from the server to clients (not dropped). */
    private final java.util.concurrent.atomic.AtomicLong toClients = new java.util.concurrent.atomic.AtomicLong();

    private final String targetHost;
    private final int targetPort;
    private final ServerSocket listener;
    private final Set<Link> links = ConcurrentHashMap.newKeySet();
    /** Accepted connections held back while {@link #setStallNew stallNew} is set. */
    private final Set<Socket> stalled = ConcurrentHashMap.newKeySet();
    private final Object pauseLock = new Object();
    private final Object stallLock = new Object();

    private volatile boolean paused;
    private volatile long delayMillis;
    private volatile boolean dropReplies;
    private volatile boolean refuseNew;
    private volatile boolean stallNew;
    private volatile boolean holdCloses;
    private volatile boolean closed;

    private TcpProxy(String targetHost, int targetPort, ServerSocket listener) {
        this.targetHost = targetHost;
        this.targetPort = targetPort;
        this.listener = listener;
    }

    /**
     * Starts a proxy on a free {@code 127.0.0.1} port that forwards to {@code targetHost:targetPort}.
     *
     * @param targetHost host to forward to
     * @param targetPort port to forward to
     * @return the running proxy
     */
    public static TcpProxy start(String targetHost, int targetPort) {
        ServerSocket ss = null;
        for (int attempt = 0; ss == null; attempt++) {
            try {
                ss = new ServerSocket(Ports.next(), 128, InetAddress.getByName("127.0.0.1"));
            } catch (IOException e) { // taken since Ports.next() looked
                if (attempt == 4) {
                    throw new UncheckedIOException("cannot open proxy listener", e);
                }
            }
        }
        TcpProxy proxy = new TcpProxy(targetHost, targetPort, ss);
        Thread acceptor = new Thread(proxy::acceptLoop,
                "tcp-proxy-" + IDS.incrementAndGet() + "-accept-" + ss.getLocalPort());
        acceptor.setDaemon(true);
        acceptor.start();
        return proxy;
    }

    /** @return the local port clients should connect to */
    public int port() {
        return listener.getLocalPort();
    }

    /** @return {@code redis://127.0.0.1:PORT} for this proxy */
    public String uri() {
        return "redis://127.0.0.1:" + port();
    }

    /**
     * Pauses or resumes forwarding in both directions. While paused, connections stay open and
     * any bytes read are held back; they are delivered, in order, after resuming.
     *
     * @param paused whether to pause
     */
    public void setPaused(boolean paused) {
        synchronized (pauseLock) {
            this.paused = paused;
            pauseLock.notifyAll();
        }
    }

    /**
     * Delays every forwarded chunk (both directions) by this many milliseconds.
     *
     * @param delayMillis delay, {@code 0} for none
     */
    public void setDelayMillis(long delayMillis) {
        if (delayMillis < 0) {
            throw new IllegalArgumentException("negative delay");
        }
        this.delayMillis = delayMillis;
    }

    /**
     * While set, bytes from the server towards the client are read and discarded, as if replies
     * were lost after the request reached the server.
     *
     * @param dropReplies whether to drop replies
     */
    public void setDropReplies(boolean dropReplies) {
        this.dropReplies = dropReplies;
    }

    /**
     * While set, new incoming connections are accepted and immediately closed.
     *
     * @param refuseNew whether to refuse new connections
     */
    public void setRefuseNew(boolean refuseNew) {
        this.refuseNew = refuseNew;
    }

    /**
     * While set, new incoming connections are accepted (the client's connect succeeds) but not
     * forwarded: nothing they send reaches the server and nothing comes back, as when the network
     * or the server is too slow to serve a new connection. Connections proxied before keep working.
     * When cleared, the held-back connections are connected to the server and forwarded; what their
     * clients sent meanwhile is delivered then, in order.
     *
     * @param stallNew whether to stall new connections
     */
    public void setStallNew(boolean stallNew) {
        synchronized (stallLock) {
            this.stallNew = stallNew;
            if (stallNew) {
                return;
            }
            for (Socket client : stalled.toArray(new Socket[0])) {
                stalled.remove(client);
                forward(client);
            }
        }
    }

    /**
     * @return how many connections were refused so far (see {@link #setRefuseNew}); a client that
     *     tries to reconnect has noticed that its connection is gone
     */
    public int refusedCount() {
        return refused.get();
    }

    /**
     * While set, a connection that its client closes stays open towards the server (what the
     * server sends on it is discarded) until this is cleared: the server goes on seeing the client
     * connected, as a busy server does until it reads the close. Clearing it closes them.
     *
     * @param holdCloses whether to hold the server side of connections closed by their client
     */
    public void setHoldCloses(boolean holdCloses) {
        this.holdCloses = holdCloses;
    }

    /** @return the number of accepted connections currently held back by {@link #setStallNew} */
    public int stalledCount() {
        return stalled.size();
    }

    /**
     * Closes all currently proxied connections (client and server side), and the connections held
     * back by {@link #setStallNew}; new ones are still accepted.
     */
    public void cutAll() {
        for (Link link : links.toArray(new Link[0])) {
            link.close();
        }
        for (Socket client : stalled.toArray(new Socket[0])) {
            stalled.remove(client);
            closeQuietly(client);
        }
    }

    /**
     * While set, replies on the one proxied connection whose server-side socket has local port
     * {@code serverSidePort} are read and discarded (as {@link #setDropReplies(boolean)}, for one
     * connection). Redis shows that port as the client's {@code addr} in {@code CLIENT LIST}, so
     * a test can pick one connection of a client (say its blocking connection) by name.
     *
     * @param serverSidePort the port Redis sees the proxied connection come from
     * @param dropReplies whether to drop that connection's replies
     * @return false if no such connection is open
     */
    public boolean setDropReplies(int serverSidePort, boolean dropReplies) {
        Link link = link(serverSidePort);
        if (link == null) {
            return false;
        }
        link.dropReplies = dropReplies;
        return true;
    }

    /**
     * Holds back, or lets through again, the traffic of one proxied connection (both directions),
     * as {@link #setPaused(boolean)} does for every connection. The connection stays open.
     *
     * @param serverSidePort the port Redis sees the proxied connection come from
     * @param paused whether to hold its traffic back
     * @return false if no such connection is open
     */
    public boolean setPaused(int serverSidePort, boolean paused) {
        Link link = link(serverSidePort);
        if (link == null) {
            return false;
        }
        synchronized (pauseLock) {
            link.paused = paused;
            pauseLock.notifyAll();
        }
        return true;
    }

    /**
     * Closes the one proxied connection whose server-side socket has local port
     * {@code serverSidePort} (client and server side).
     *
     * @param serverSidePort the port Redis sees the proxied connection come from
     * @return false if no such connection is open
     */
    public boolean cut(int serverSidePort) {
        Link link = link(serverSidePort);
        if (link == null) {
            return false;
        }
        link.close();
        return true;
    }

    /**
     * @return the ports Redis sees the currently open proxied connections come from (see
     *     {@link #setDropReplies(int, boolean)})
     */
    public int[] serverSidePorts() {
        return links.stream().mapToInt(l -> l.server.getLocalPort()).toArray();
    }

    private Link link(int serverSidePort) {
        for (Link link : links) {
            if (link.server.getLocalPort() == serverSidePort) {
                return link;
            }
        }
        return null;
    }

    /**
     * @return how many bytes were forwarded from the server to clients so far (replies dropped by
     *     {@link #setDropReplies} not counted)
     */
    public long bytesToClients() {
        return toClients.get();
    }

    /** @return the number of currently open proxied connections */
    public int connectionCount() {
        return links.size();
    }

    /** Stops listening and closes every proxied connection. */
    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        cutAll();
        synchronized (pauseLock) {
            pauseLock.notifyAll();
        }
    }

    @Override
    public String toString() {
        return "TcpProxy[127.0.0.1:" + port() + " -> " + targetHost + ":" + targetPort + "]";
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                if (closed || listener.isClosed()) {
                    return;
                }
                continue;
            }
            if (refuseNew || closed) {
                if (!closed) {
                    refused.incrementAndGet();
                }
                closeQuietly(client);
                continue;
            }
            synchronized (stallLock) {
                if (stallNew) {
                    stalled.add(client); // accepted, never read: the client waits for a reply
                    continue;
                }
            }
            forward(client);
        }
    }

    /** Connects an accepted client to the server and starts forwarding between them. */
    private void forward(Socket client) {
        Socket server = new Socket();
        try {
            client.setTcpNoDelay(true);
            server.setTcpNoDelay(true);
            server.connect(new InetSocketAddress(targetHost, targetPort), 5_000);
        } catch (IOException e) {
            closeQuietly(server);
            closeQuietly(client);
            return;
        }
        Link link = new Link(client, server);
        links.add(link);
        if (closed) {
            link.close();
            return;
        }
        link.start();
    }

    /** Waits while paused; returns false if the link or proxy closed meanwhile. */
    private boolean awaitUnpaused(Link link) {
        synchronized (pauseLock) {
            while ((paused || link.paused) && !link.linkClosed && !closed) {
                try {
                    pauseLock.wait(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        return !link.linkClosed && !closed;
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // best effort
        }
    }

    /** One proxied connection: client socket, server socket and a pump thread per direction. */
    private final class Link {
        final Socket client;
        final Socket server;
        volatile boolean linkClosed;
        /** The client closed its side while {@link #holdCloses} was set: the server side stays open. */
        volatile boolean clientGone;
        volatile boolean dropReplies;
        volatile boolean paused;

        Link(Socket client, Socket server) {
            this.client = client;
            this.server = server;
        }

        void start() {
            String name = "tcp-proxy-" + port() + "-" + client.getPort();
            Thread up = new Thread(() -> pump(client, server, false), name + "-c2s");
            Thread down = new Thread(() -> pump(server, client, true), name + "-s2c");
            up.setDaemon(true);
            down.setDaemon(true);
            up.start();
            down.start();
        }

        private void pump(Socket from, Socket to, boolean towardsClient) {
            byte[] buf = new byte[16 * 1024];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                while (!linkClosed) {
                    if (!awaitUnpaused(this)) {
                        break;
                    }
                    int n;
                    try {
                        n = in.read(buf);
                    } catch (IOException e) {
                        if (towardsClient || !holdCloses) {
                            throw e;
                        }
                        n = -1; // the client reset its side
                    }
                    if (n < 0) {
                        if (!towardsClient && holdCloses) {
                            holdServerSide();
                        }
                        break;
                    }
                    // data may have arrived after setPaused(true): hold it until resumed
                    if (!awaitUnpaused(this)) {
                        break;
                    }
                    long delay = delayMillis;
                    if (delay > 0) {
                        Thread.sleep(delay);
                    }
                    if (towardsClient && (TcpProxy.this.dropReplies || dropReplies || clientGone)) {
                        continue;
                    }
                    try {
                        out.write(buf, 0, n);
                        out.flush();
                        if (towardsClient) {
                            toClients.addAndGet(n);
                        }
                    } catch (IOException e) {
                        if (towardsClient && clientGone) {
                            continue; // the client went while its close is held: discard
                        }
                        throw e;
                    }
                }
            } catch (IOException e) {
                // connection broken or cut
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                close();
            }
        }

        /** The client closed its side: keep the server side open while {@link #holdCloses} is set. */
        private void holdServerSide() throws InterruptedException {
            clientGone = true;
            closeQuietly(client);
            while (holdCloses && !closed && !linkClosed) {
                Thread.sleep(20);
            }
        }

        void close() {
            linkClosed = true;
            links.remove(this);
            closeQuietly(client);
            closeQuietly(server);
        }
    }
}
