package io.github.turnstile.testing;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;

/**
 * A TLS endpoint in front of a plain Redis, for tests of TLS settings when the Redis binaries at
 * hand are built without TLS: it accepts TLS connections on a loopback port with a self-signed
 * certificate for {@code 127.0.0.1} and {@code localhost} (made once per JVM with the JDK's
 * {@code keytool}) and forwards the plain bytes to Redis. A client connects only if it trusts
 * {@link #trustStore()}, which the JDK's default trust store does not contain.
 */
public final class TlsTerminator implements AutoCloseable {
  private static final AtomicInteger IDS = new AtomicInteger();
  private static final char[] PASSWORD = "turnstile".toCharArray();
  private static KeyStore keyStore; // guarded by TlsTerminator.class

  private final String targetHost;
  private final int targetPort;
  private final ServerSocket listener;
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private final AtomicInteger handshakes = new AtomicInteger();
  private volatile boolean closed;

  private TlsTerminator(String targetHost, int targetPort, ServerSocket listener) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    this.listener = listener;
  }

  /**
   * Starts a TLS endpoint on a free {@code 127.0.0.1} port that forwards to {@code host:port}.
   *
   * @param host the plain Redis host
   * @param port the plain Redis port
   * @return the running endpoint
   */
  public static TlsTerminator start(String host, int port) {
    try {
      KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(keyStore(), PASSWORD);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(kmf.getKeyManagers(), null, null);
      ServerSocket ss = context.getServerSocketFactory().createServerSocket(0, 128, InetAddress.getByName("127.0.0.1"));
      TlsTerminator t = new TlsTerminator(host, port, ss);
      Thread acceptor = new Thread(t::acceptLoop, "tls-terminator-" + IDS.incrementAndGet());
      acceptor.setDaemon(true);
      acceptor.start();
      return t;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Returns a trust store holding only this endpoint's certificate.
   *
   * @return a trust store holding only this endpoint's certificate
   */
  public static KeyStore trustStore() {
    try {
      Certificate cert = keyStore().getCertificate("redis");
      KeyStore trust = KeyStore.getInstance("PKCS12");
      trust.load(null, null);
      trust.setCertificateEntry("redis", cert);
      return trust;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The self-signed key pair, made by keytool on first use. */
  private static synchronized KeyStore keyStore() throws IOException, java.security.GeneralSecurityException {
    if (keyStore == null) {
      Path dir = Files.createTempDirectory("turnstile-tls");
      Path file = dir.resolve("redis.p12");
      String keytool = Paths.get(System.getProperty("java.home"), "bin", "keytool").toString();
      Process p = new ProcessBuilder(List.of(keytool, "-genkeypair", "-alias", "redis", "-keyalg", "EC",
          "-groupname", "secp256r1", "-dname", "CN=localhost", "-ext", "SAN=dns:localhost,ip:127.0.0.1",
          "-validity", "2", "-storetype", "PKCS12", "-keystore", file.toString(),
          "-storepass", new String(PASSWORD), "-keypass", new String(PASSWORD)))
          .redirectErrorStream(true).start();
      byte[] out = p.getInputStream().readAllBytes();
      try {
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
          throw new IllegalStateException("keytool failed: " + new String(out, java.nio.charset.StandardCharsets.UTF_8));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
      KeyStore ks = KeyStore.getInstance("PKCS12");
      try (InputStream in = new ByteArrayInputStream(Files.readAllBytes(file))) {
        ks.load(in, PASSWORD);
      }
      Files.delete(file);
      Files.delete(dir);
      keyStore = ks;
    }
    return keyStore;
  }

  /**
   * Returns the port clients connect to with TLS.
   *
   * @return the port clients connect to with TLS
   */
  public int port() {
    return listener.getLocalPort();
  }

  /**
   * Returns how many TLS handshakes completed so far.
   *
   * @return how many TLS handshakes completed so far
   */
  public int handshakes() {
    return handshakes.get();
  }

  private void acceptLoop() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        return; // closed
      }
      Thread t = new Thread(() -> serve(client), "tls-terminator-conn");
      t.setDaemon(true);
      t.start();
    }
  }

  private void serve(Socket client) {
    open.add(client);
    try (Socket c = client; Socket server = new Socket(targetHost, targetPort)) {
      open.add(server);
      ((SSLSocket) c).startHandshake();
      handshakes.incrementAndGet();
      Thread up = new Thread(() -> pump(c, server), "tls-terminator-up");
      up.setDaemon(true);
      up.start();
      pump(server, c);
      up.join(1000);
    } catch (IOException | InterruptedException e) {
      // a client that does not trust the certificate, or a closed connection
    } finally {
      open.remove(client);
    }
  }

  private static void pump(Socket from, Socket to) {
    byte[] buf = new byte[16384];
    try {
      InputStream in = from.getInputStream();
      OutputStream out = to.getOutputStream();
      int n;
      while ((n = in.read(buf)) >= 0) {
        out.write(buf, 0, n);
        out.flush();
      }
    } catch (IOException e) {
      // either side closed
    } finally {
      try {
        from.close();
        to.close();
      } catch (IOException ignored) {
        // closing anyway
      }
    }
  }

  @Override
  public void close() {
    closed = true;
    try {
      listener.close();
    } catch (IOException ignored) {
      // closing anyway
    }
    for (Socket s : open) {
      try {
        s.close();
      } catch (IOException ignored) {
        // closing anyway
      }
    }
  }
}
