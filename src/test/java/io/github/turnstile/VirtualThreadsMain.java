package io.github.turnstile;

import java.lang.reflect.Method;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordingFile;

/**
 * Child JVM (JDK 21+) for {@link VirtualThreadsTest}: N virtual threads, spread over two clients,
 * each take one of a few locks and then a permit of one semaphore, while JFR records
 * {@code jdk.VirtualThreadPinned} with no threshold. A warm-up of a few hundred tasks runs first;
 * pinning is counted in the measured run only (a class loaded on a virtual thread pins it while it
 * loads, once per class: JDK behaviour, reported as {@code warmupOrClassLoadPinned}, as is a class loaded
 * later). Compiled for release 17, so virtual threads
 * are reached by reflection. Prints one {@code RESULT ...} line, or {@code DEADLOCK} with a thread
 * dump if the tasks do not finish within the time limit.
 *
 * <p>Args: redis uri, threads, locks, permits, time limit in seconds.
 */
public final class VirtualThreadsMain {
  private VirtualThreadsMain() {}

  public static void main(String[] args) throws Exception {
    String uri = args[0];
    int threads = Integer.parseInt(args[1]);
    int locks = Integer.parseInt(args[2]);
    int permits = Integer.parseInt(args[3]);
    long limitSeconds = Long.parseLong(args[4]);
    String run = Long.toString(System.nanoTime());

    Recording recording = new Recording();
    recording.enable("jdk.VirtualThreadPinned").withThreshold(Duration.ZERO).withStackTrace();
    recording.start();

    Turnstile[] clients = {Turnstile.connect(uri), Turnstile.connect(uri)};
    String[] lockNames = new String[locks];
    AtomicInteger[] inside = new AtomicInteger[locks];
    int[] unguarded = new int[locks]; // plain ints: only ever touched under the lock
    for (int i = 0; i < locks; i++) {
      lockNames[i] = "vt-lock-" + i + ":" + run;
      inside[i] = new AtomicInteger();
    }
    String semName = "vt-sem:" + run;
    clients[0].semaphore(semName, permits); // creates it with this capacity
    AtomicInteger permitsInUse = new AtomicInteger();
    AtomicInteger maxPermitsInUse = new AtomicInteger();
    LongAdder exclusionViolations = new LongAdder();
    LongAdder permitViolations = new LongAdder();
    LongAdder errors = new LongAdder();
    LongAdder notVirtual = new LongAdder();
    Method isVirtual = Thread.class.getMethod("isVirtual");

    Method factory = Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
    // Warm-up: the same work on a few virtual threads first. A virtual thread that loads a class
    // is pinned while it does (JDK behaviour, once per class), which is not what this measures.
    int warmup = Math.min(500, threads / 10);
    Instant measuredFrom = null;
    long start = 0;
    ExecutorService executor = null;
    for (int t = -warmup; t < threads; t++) {
      if (t == -warmup || t == 0) {
        if (executor != null) {
          executor.shutdown();
          if (!executor.awaitTermination(limitSeconds, TimeUnit.SECONDS)) {
            dumpAndExit("warm-up", limitSeconds);
          }
        }
        executor = (ExecutorService) factory.invoke(null);
        if (t == 0) {
          measuredFrom = Instant.now();
          start = System.nanoTime();
        }
      }
      int task = Math.floorMod(t, threads);
      boolean counts = t >= 0;
      executor.execute(() -> {
        try {
          if (!(Boolean) isVirtual.invoke(Thread.currentThread())) {
            notVirtual.increment();
          }
          Turnstile client = clients[task % 2];
          int l = task % locks;
          DistributedLock lock = client.lock(lockNames[l]);
          lock.lock();
          try {
            if (inside[l].incrementAndGet() != 1) {
              exclusionViolations.increment();
            }
            if (counts) {
              unguarded[l]++;
            }
            inside[l].decrementAndGet();
          } finally {
            lock.unlock();
          }
          DistributedSemaphore sem = client.semaphore(semName, permits);
          sem.acquire();
          try {
            int now = permitsInUse.incrementAndGet();
            maxPermitsInUse.accumulateAndGet(now, Math::max);
            if (now > permits) {
              permitViolations.increment();
            }
            Thread.yield();
            permitsInUse.decrementAndGet();
          } finally {
            sem.release();
          }
        } catch (Throwable e) {
          errors.increment();
          if (errors.sum() <= 3) {
            e.printStackTrace();
          }
        }
      });
    }
    executor.shutdown();
    if (!executor.awaitTermination(limitSeconds, TimeUnit.SECONDS)) {
      dumpAndExit("measured run", limitSeconds);
    }
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    recording.stop();
    Path jfr = Files.createTempFile("turnstile-vt-", ".jfr");
    recording.dump(jfr);
    recording.close();
    List<RecordedEvent> pinned = new ArrayList<>();
    int warmupPinned = 0;
    for (RecordedEvent e : RecordingFile.readAllEvents(jfr)) {
      if (e.getEventType().getName().equals("jdk.VirtualThreadPinned")) {
        if (e.getStartTime().isBefore(measuredFrom) || loadsAClass(e)) {
          warmupPinned++;
        } else {
          pinned.add(e);
        }
      }
    }
    Files.deleteIfExists(jfr);
    for (RecordedEvent e : pinned.subList(0, Math.min(3, pinned.size()))) {
      System.out.println("PINNED for " + e.getDuration().toMillis() + " ms:");
      if (e.getStackTrace() != null) {
        for (RecordedFrame f : e.getStackTrace().getFrames()) {
          System.out.println("    at " + f.getMethod().getType().getName() + "." + f.getMethod().getName()
              + " line " + f.getLineNumber());
        }
      }
    }
    int total = 0;
    for (int i = 0; i < locks; i++) {
      total += unguarded[i];
    }
    int left = clients[0].semaphore(semName, permits).availablePermits();
    for (Turnstile c : clients) {
      c.close();
    }
    System.out.println("RESULT java=" + Runtime.version().feature() + " tasks=" + threads + " counted=" + total
        + " exclusionViolations=" + exclusionViolations.sum() + " permitViolations=" + permitViolations.sum()
        + " maxPermits=" + maxPermitsInUse.get() + " permitsLeft=" + left + " errors=" + errors.sum()
        + " notVirtual=" + notVirtual.sum() + " pinned=" + pinned.size() + " warmupOrClassLoadPinned=" + warmupPinned
        + " millis=" + millis);
    System.exit(0);
  }

  /**
   * Whether a pinned event happened while the virtual thread loaded or initialized a class: JDK
   * behaviour (a class's first use, in the measured run when load takes a path the warm-up did not),
   * not a monitor or native frame of Turnstile's. Counted with the warm-up's.
   */
  private static boolean loadsAClass(RecordedEvent e) {
    if (e.getStackTrace() == null) {
      return false;
    }
    for (RecordedFrame f : e.getStackTrace().getFrames()) {
      String type = f.getMethod().getType().getName();
      String method = f.getMethod().getName();
      if (method.equals("<clinit>") || (type.equals("java.lang.ClassLoader") && method.equals("loadClass"))
          || type.startsWith("jdk.internal.loader.")) {
        return true;
      }
    }
    return false;
  }

  private static void dumpAndExit(String phase, long limitSeconds) {
    System.out.println("DEADLOCK: " + phase + " tasks still running after " + limitSeconds + " s");
    for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
      System.out.println("thread " + e.getKey());
      for (StackTraceElement s : e.getValue()) {
        System.out.println("    at " + s);
      }
    }
    System.exit(3);
  }
}
