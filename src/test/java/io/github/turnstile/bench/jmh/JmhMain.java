package io.github.turnstile.bench.jmh;

import io.github.turnstile.testing.RedisServerProcess;
import java.io.File;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * Runs {@link SingleOpBenchmarks} with the JMH Runner API against one Redis and prints a
 * side-by-side table.
 *
 * <pre>
 * mvn -B -q test-compile exec:java@jmh
 * mvn -B -q test-compile exec:java@jmh -Djmh.include=pair_ -Djmh.time=2s
 * REDIS_URI=redis://localhost:6379 mvn -B -q test-compile exec:java@jmh
 * </pre>
 *
 * <p>Redis: {@code REDIS_URI} (or {@code -Dredis.uri}); otherwise one {@code redis-server}
 * process is started here, before the first fork, and stopped after the last. Its URI goes to
 * every fork as {@code -D}{@value #URI_PROPERTY}, so all benchmarks of one run hit the same server.
 *
 * <p>System properties (defaults in brackets): {@code jmh.include} regex on benchmark names
 * [all of SingleOpBenchmarks], {@code jmh.forks} [1], {@code jmh.warmupIterations} [2],
 * {@code jmh.warmupTime} [1s], {@code jmh.iterations} [3], {@code jmh.time} [1s],
 * {@code jmh.jvmArgs} for the forks, space-separated [-Xms256m -Xmx256m], {@code jmh.verbosity}
 * SILENT|NORMAL|EXTRA [NORMAL], {@code jmh.result} a JSON result file [none], {@code jmh.prof}
 * JMH profilers, comma-separated [none]: {@code -Djmh.prof=gc} adds each benchmark's bytes
 * allocated per operation.
 */
public final class JmhMain {
  /** The system property that carries the Redis URI to the forked benchmark JVMs. */
  public static final String URI_PROPERTY = "turnstile.jmh.uri";

  private static final String[] IMPLS = {"turnstile", "redisson", "setnx"};
  private static final String[] LABELS = {"Turnstile", "Redisson", "SETNX"};

  private JmhMain() {}

  /**
   * Runs the benchmarks.
   *
   * @param args ignored; see the class comment for the system properties
   */
  public static void main(String[] args) {
    int code = 0;
    try {
      run();
    } catch (Throwable t) {
      System.out.println("jmh run failed: " + t);
      t.printStackTrace(System.out);
      code = 2;
    }
    System.out.flush();
    System.exit(code);
  }

  private static void run() throws Exception {
    exposeClasspathToForks();
    RedisServerProcess embedded = null;
    try {
      String uri = configuredUri();
      if (uri == null) {
        embedded = RedisServerProcess.start();
        uri = embedded.uri();
        System.out.println("Redis: started redis-server " + embedded.version() + " at " + uri
            + " for every fork (set REDIS_URI to use your own)");
      } else {
        System.out.println("Redis: using REDIS_URI " + uri);
      }
      List<String> jvmArgs = new ArrayList<>();
      for (String a : System.getProperty("jmh.jvmArgs", "-Xms256m -Xmx256m").trim().split("\\s+")) {
        if (!a.isEmpty()) {
          jvmArgs.add(a);
        }
      }
      jvmArgs.add("-D" + URI_PROPERTY + "=" + uri);
      ChainedOptionsBuilder options = new OptionsBuilder()
          .include(SingleOpBenchmarks.class.getName() + ".*" + System.getProperty("jmh.include", ""))
          .forks(Integer.getInteger("jmh.forks", 1))
          .warmupIterations(Integer.getInteger("jmh.warmupIterations", 2))
          .warmupTime(TimeValue.fromString(System.getProperty("jmh.warmupTime", "1s")))
          .measurementIterations(Integer.getInteger("jmh.iterations", 3))
          .measurementTime(TimeValue.fromString(System.getProperty("jmh.time", "1s")))
          .jvmArgs(jvmArgs.toArray(new String[0]))
          .verbosity(VerboseMode.valueOf(System.getProperty("jmh.verbosity", "NORMAL").toUpperCase(Locale.ROOT)))
          .shouldFailOnError(true);
      for (String profiler : System.getProperty("jmh.prof", "").split(",")) {
        if (!profiler.isBlank()) {
          options.addProfiler(profiler.trim()); // e.g. -Djmh.prof=gc: allocation per operation
        }
      }
      String resultFile = System.getProperty("jmh.result");
      if (resultFile != null && !resultFile.isBlank()) {
        options.result(resultFile).resultFormat(ResultFormatType.JSON);
      }
      Collection<RunResult> results = new Runner(options.build()).run();
      printTable(results, uri, embedded);
    } finally {
      if (embedded != null) {
        embedded.close();
      }
    }
  }

  /**
   * JMH starts each fork with {@code java.class.path}. Under {@code exec:java} that is Maven's
   * launcher, not the test classpath, so it is replaced by the URLs of the class loader that
   * loaded this class (the project's test classpath).
   */
  private static void exposeClasspathToForks() throws URISyntaxException {
    Set<String> entries = new LinkedHashSet<>();
    for (ClassLoader cl = JmhMain.class.getClassLoader(); cl != null; cl = cl.getParent()) {
      if (cl instanceof URLClassLoader) {
        for (URL url : ((URLClassLoader) cl).getURLs()) {
          if ("file".equals(url.getProtocol())) {
            entries.add(Paths.get(url.toURI()).toString());
          }
        }
      }
    }
    if (!entries.isEmpty()) {
      System.setProperty("java.class.path", String.join(File.pathSeparator, entries));
    }
  }

  private static void printTable(Collection<RunResult> results, String uri, RedisServerProcess embedded) {
    // operation -> impl -> result
    Map<String, Map<String, Result<?>>> table = new LinkedHashMap<>();
    Result<?> ping = null;
    for (String op : new String[] {"pair", "reentrant", "tryLockHeld", "semaphore"}) {
      table.put(op, new LinkedHashMap<>());
    }
    for (RunResult rr : results) {
      String bench = rr.getParams().getBenchmark();
      String method = bench.substring(bench.lastIndexOf('.') + 1);
      int us = method.indexOf('_');
      String op = method.substring(0, us);
      String impl = method.substring(us + 1);
      if (op.equals("ping")) {
        ping = rr.getPrimaryResult();
      } else {
        table.computeIfAbsent(op, k -> new LinkedHashMap<>()).put(impl, rr.getPrimaryResult());
      }
    }
    System.out.println();
    System.out.println("JMH single-operation costs, 1 thread, no contention; Redis " + uri
        + (embedded != null ? " (redis-server " + embedded.version() + ")" : "") + "; "
        + Runtime.getRuntime().availableProcessors() + " cores");
    System.out.println("us/op = mean time per operation (± 99.9% CI half-width); lower is better.");
    double pingUs = ping == null ? Double.NaN : ping.getScore();
    if (ping != null) {
      System.out.printf(Locale.ROOT, "PING round trip (Lettuce sync): %s us/op, %.0f ops/s (the floor)%n",
          cell(ping), 1e6 / pingUs);
    }
    StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "%-34s", "operation (us/op)"));
    for (String label : LABELS) {
      header.append(String.format(Locale.ROOT, " | %16s", label));
    }
    header.append(String.format(Locale.ROOT, " | %9s | %9s | %9s", "Redisson/", "Turnstile", "Redisson"));
    System.out.println(header);
    System.out.println(String.format(Locale.ROOT, "%-34s", "") + " | " + " ".repeat(16) + " | " + " ".repeat(16)
        + " | " + " ".repeat(16) + String.format(Locale.ROOT, " | %9s | %9s | %9s", "Turnstile", "in PINGs",
        "in PINGs"));
    System.out.println("-".repeat(header.length()));
    Map<String, String> titles = Map.of(
        "pair", "uncontended lock+unlock",
        "reentrant", "re-entry lock+unlock (held)",
        "tryLockHeld", "tryLock() on a lock held elsewhere",
        "semaphore", "semaphore tryAcquire+release");
    table.forEach((op, byImpl) -> {
      if (byImpl.isEmpty()) {
        return;
      }
      StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "%-34s", titles.getOrDefault(op, op)));
      for (String impl : IMPLS) {
        Result<?> r = byImpl.get(impl);
        row.append(String.format(Locale.ROOT, " | %16s", r == null ? "-" : cell(r)));
      }
      Result<?> ts = byImpl.get("turnstile");
      Result<?> rd = byImpl.get("redisson");
      row.append(String.format(Locale.ROOT, " | %9s | %9s | %9s",
          ts != null && rd != null ? String.format(Locale.ROOT, "%.2fx", rd.getScore() / ts.getScore()) : "-",
          ts != null ? inPings(ts.getScore(), pingUs) : "-",
          rd != null ? inPings(rd.getScore(), pingUs) : "-"));
      System.out.println(row);
    });
    System.out.println("Redisson/Turnstile > 1 means Turnstile is faster (ratio of mean times = ratio of ops/s).");
    for (RunResult rr : results) {
      Result<?> alloc = rr.getSecondaryResults().get("gc.alloc.rate.norm");
      if (alloc != null) {
        String bench = rr.getParams().getBenchmark();
        System.out.printf(Locale.ROOT, "  %-40s allocates %s B/op%n", bench.substring(bench.lastIndexOf('.') + 1),
            cell(alloc));
      }
    }
  }

  private static String cell(Result<?> r) {
    double err = r.getScoreError();
    if (Double.isNaN(err)) {
      return fmt(r.getScore());
    }
    return fmt(r.getScore()) + " ± " + fmt(err);
  }

  private static String fmt(double v) {
    if (v >= 100) {
      return String.format(Locale.ROOT, "%.0f", v);
    }
    if (v >= 1) {
      return String.format(Locale.ROOT, "%.1f", v);
    }
    return String.format(Locale.ROOT, "%.3f", v);
  }

  private static String inPings(double us, double pingUs) {
    return Double.isNaN(pingUs) ? "-" : String.format(Locale.ROOT, "%.2f", us / pingUs);
  }

  private static String configuredUri() {
    String uri = System.getenv("REDIS_URI");
    if (uri == null || uri.isBlank()) {
      uri = System.getProperty("redis.uri");
    }
    return uri == null || uri.isBlank() ? null : uri.trim();
  }
}
