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
 * {@code jdk.VirtualThreadPinned} with no threshold. A warm-up of a few hundred tasks runs first.
 * A class loaded, linked or initialized on a virtual thread pins it while it does, once per class:
 * JDK behaviour, told apart by {@link #jdkOwnPin} and reported as
 * {@code warmupOrClassLoadPinned}. On JDK 21 to 23, whose events give no reason, every pin of the
 * warm-up is set aside; on JDK 24+ the warm-up's are judged like the measured run's. Every counted
 * event is printed in full (its reason fields and every frame). A canary then pins one virtual
 * thread on purpose (a park in a class initializer), which must be counted ({@code canaryPinned}):
 * the check can fail.
 * Compiled for release 17, so virtual threads are reached by reflection. Prints one
 * {@code RESULT ...} line, or {@code DEADLOCK} with a thread dump if the tasks do not finish within
 * the time limit.
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
    Instant canaryFrom = Instant.now();
    ExecutorService canary = (ExecutorService) factory.invoke(null);
    canary.execute(PinCanary::touch);
    canary.shutdown();
    if (!canary.awaitTermination(limitSeconds, TimeUnit.SECONDS)) {
      dumpAndExit("canary", limitSeconds);
    }
    recording.stop();
    Path jfr = Files.createTempFile("turnstile-vt-", ".jfr");
    recording.dump(jfr);
    recording.close();
    List<RecordedEvent> pinned = new ArrayList<>();
    int warmupPinned = 0;
    int canaryPinned = 0;
    Map<String, Integer> warmupReasons = new java.util.TreeMap<>();
    for (RecordedEvent e : RecordingFile.readAllEvents(jfr)) {
      if (e.getEventType().getName().equals("jdk.VirtualThreadPinned")) {
        if (!e.getStartTime().isBefore(canaryFrom)) {
          if (jdkOwnPin(e) == null) {
            canaryPinned++;
          }
          System.out.println("CANARY PINNED " + describe(e));
          continue;
        }
        boolean warm = e.getStartTime().isBefore(measuredFrom);
        // JDK 24+ says why it pinned, so the warm-up's events are judged too (a Turnstile class
        // initializer that parks pins once, most likely in the warm-up); before, its frames tell
        // too little and the warm-up's are all set aside
        String excuse = warm && !e.hasField("pinnedReason") ? "warm-up" : jdkOwnPin(e);
        if (excuse != null) {
          warmupPinned++;
          if (Boolean.getBoolean("turnstile.test.vtPrintAll")) {
            System.out.println("EXCUSED (" + (warm ? "warm-up, " : "") + excuse + ") PINNED " + describe(e));
          }
          warmupReasons.merge((warm ? "warm-up, " : "measured run, ") + excuse + ": " + field(e, "pinnedReason")
              + " / " + field(e, "blockingOperation") + " at " + firstFrames(e, 4), 1, Integer::sum);
        } else {
          pinned.add(e);
        }
      }
    }
    Files.deleteIfExists(jfr);
    for (RecordedEvent e : pinned.subList(0, Math.min(5, pinned.size()))) {
      System.out.println("PINNED " + describe(e));
    }
    for (Map.Entry<String, Integer> w : warmupReasons.entrySet()) {
      System.out.println("WARMUP-OR-CLASS-LOAD PINNED x" + w.getValue() + ": " + w.getKey());
    }
    int total = 0;
    for (int i = 0; i < locks; i++) {
      total += unguarded[i];
    }
    // release() waits at most 250 ms for Redis's answer, then leaves the release to the background:
    // on a loaded machine the last releases may still be on their way
    DistributedSemaphore sem = clients[0].semaphore(semName, permits);
    TestSupport.awaitOrFalse(Duration.ofSeconds(30), () -> sem.availablePermits() == permits);
    int left = sem.availablePermits();
    for (Turnstile c : clients) {
      c.close();
    }
    System.out.println("RESULT java=" + Runtime.version().feature() + " tasks=" + threads + " counted=" + total
        + " exclusionViolations=" + exclusionViolations.sum() + " permitViolations=" + permitViolations.sum()
        + " maxPermits=" + maxPermitsInUse.get() + " permitsLeft=" + left + " errors=" + errors.sum()
        + " notVirtual=" + notVirtual.sum() + " pinned=" + pinned.size() + " warmupOrClassLoadPinned=" + warmupPinned
        + " canaryPinned=" + canaryPinned + " millis=" + millis);
    System.exit(0);
  }

  /**
   * Why a pinned event is the JDK's own doing (class loading, linking or initialization, once per
   * class, or a JDK critical section) and not Turnstile's, or null if it counts against the test.
   *
   * <p>On JDK 24+ the event says why ({@code pinnedReason}, {@code blockingOperation}; the strings
   * are HotSpot's, {@code JavaThread::post_vthread_pinned_event}), and only these are excused:
   * <ul>
   *   <li>"Waited for initialization of C by another thread": a class initializer running in
   *       another thread;
   *   <li>"VM call to C.&lt;clinit&gt; on stack" for a class C that is not Turnstile's (main or
   *       test code), or for any C while the thread waits for a monitor (class loading inside the
   *       initializer). A Turnstile initializer that parks or waits counts;
   *   <li>a contended monitor enter that could not unmount ("Freeze or preempt failed (2)"): since
   *       JEP 491 a {@code synchronized} of Java code unmounts when contended, unless the JVM
   *       called it (a class loader) or a JDK critical section holds the thread, so this is a
   *       monitor of the JVM's class loading or linking (HotSpot's {@code ObjectLocker}), or a JDK
   *       critical section. Example (reproduced on JDK 25; the likely event of the CI failure of
   *       2026-11-26): a virtual thread at {@code new} in {@code CompletableFuture.timedGet}
   *       (bci 75 {@code Signaller}, 216 {@code TimeoutException}) while another thread links
   *       that class: no loader or {@code <clinit>} frame on the stack.
   * </ul>
   * Every park ({@code LockSupport.park}) and every {@code Object.wait} outside class
   * initialization counts, whatever its reason: that is what pinning costs a carrier.
   *
   * <p>Before JDK 24 the event has no reason: a class loader frame, or the initializer of a class
   * that is not Turnstile's, on the stack is the sign.
   */
  static String jdkOwnPin(RecordedEvent e) {
    List<String> frames = new ArrayList<>();
    if (e.getStackTrace() != null) {
      for (RecordedFrame f : e.getStackTrace().getFrames()) {
        frames.add(f.getMethod().getType().getName() + "." + f.getMethod().getName());
      }
    }
    return e.hasField("pinnedReason")
        ? jdkOwnPin(String.valueOf(e.getString("pinnedReason")), String.valueOf(e.getString("blockingOperation")), frames)
        : jdkOwnPin(null, null, frames);
  }

  /**
   * {@link #jdkOwnPin(RecordedEvent)} on an event's fields: {@code reason} and {@code op} null
   * before JDK 24, {@code frames} as "type.method", top first.
   */
  static String jdkOwnPin(String reason, String op, List<String> frames) {
    if (reason != null) {
      boolean monitor = "Contended monitor enter".equals(op);
      if (reason.startsWith("Waited for initialization of ") && reason.endsWith(" by another thread")) {
        return "class initialization in another thread";
      }
      if (reason.startsWith("VM call to ") && reason.endsWith(".<clinit> on stack")) {
        String type = reason.substring("VM call to ".length(), reason.length() - ".<clinit> on stack".length());
        if (monitor || !isMainCode(type)) {
          return "class initializer of " + type;
        }
        return null;
      }
      if (monitor && reason.equals("Freeze or preempt failed (2)")) {
        return "a monitor that could not unmount: the JVM's class loading or linking, or a JDK critical section";
      }
      return null;
    }
    for (String frame : frames) {
      int dot = frame.lastIndexOf('.');
      String type = frame.substring(0, Math.max(dot, 0));
      String method = frame.substring(dot + 1);
      if ((method.equals("<clinit>") && !isMainCode(type))
          || (type.equals("java.lang.ClassLoader") && method.equals("loadClass"))
          || type.startsWith("jdk.internal.loader.")) {
        return "class loading or initialization (frame " + frame + ")";
      }
    }
    return null;
  }


  /** Whether a class is Turnstile's (main or test code), not the JDK's or a dependency's. */
  private static boolean isMainCode(String type) {
    return type.startsWith("io.github.turnstile.");
  }

  /**
   * A pin Turnstile code could cause on any JDK: a virtual thread that parks in a class
   * initializer. Run once after the measured run, it proves the recording sees such a pin and
   * {@link #jdkOwnPin} does not excuse it.
   */
  static final class PinCanary {
    static {
      java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }

    private PinCanary() {}

    static void touch() {}
  }

  /**
   * One pinned event in full: its duration, the fields JDK 24+ gives it (why it pinned, which
   * operation blocked, on which carrier) and every frame of its stack with the frame's type
   * (interpreted, compiled, inlined, native), so the next failure explains itself.
   */
  private static String describe(RecordedEvent e) {
    StringBuilder b = new StringBuilder();
    b.append("for ").append(e.getDuration().toNanos()).append(" ns: pinnedReason=").append(field(e, "pinnedReason"))
        .append(" blockingOperation=").append(field(e, "blockingOperation"))
        .append(" carrierThread=").append(carrier(e))
        .append(" eventThread=").append(e.getThread() == null ? "?" : e.getThread().getJavaName());
    if (e.getStackTrace() == null) {
      return b.append(" (no stack trace)").toString();
    }
    for (RecordedFrame f : e.getStackTrace().getFrames()) {
      b.append("\n    at ").append(f.getMethod().getType().getName()).append('.').append(f.getMethod().getName())
          .append(f.getMethod().getDescriptor()).append(" line ").append(f.getLineNumber())
          .append(" bci ").append(f.getBytecodeIndex())
          .append(" [").append(f.getType()).append(f.getMethod().isHidden() ? ", hidden" : "").append(']');
    }
    if (e.getStackTrace().isTruncated()) {
      b.append("\n    ... (truncated by JFR)");
    }
    return b.toString();
  }

  private static String firstFrames(RecordedEvent e, int n) {
    if (e.getStackTrace() == null) {
      return "(no stack)";
    }
    List<String> names = new ArrayList<>();
    for (RecordedFrame f : e.getStackTrace().getFrames()) {
      if (names.size() == n) {
        break;
      }
      names.add(f.getMethod().getType().getName() + "." + f.getMethod().getName());
    }
    return String.join(" < ", names);
  }

  private static String field(RecordedEvent e, String name) {
    return e.hasField(name) ? String.valueOf(e.getString(name)) : "(none)";
  }

  private static String carrier(RecordedEvent e) {
    if (!e.hasField("carrierThread")) {
      return "(none)";
    }
    jdk.jfr.consumer.RecordedThread t = e.getValue("carrierThread");
    return t == null ? "null" : t.getJavaName();
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
