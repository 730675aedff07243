package io.github.turnstile;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * {@link Metrics} on a Micrometer {@link MeterRegistry}. Loaded only when the application
 * configured a registry (see {@link Metrics#create}).
 *
 * <p>Meters are tagged {@code primitive} (lock, read, write, semaphore) and {@code name}. The
 * first {@code nameLimit} distinct names this client sees get a tag value of their own; every
 * later name is recorded under {@value #OTHER}, so the number of time series is bounded whatever
 * the application names its primitives. Meters are shared by every Turnstile that uses the same
 * registry; the gauges of one client carry a {@code client} tag and are removed when it closes.
 */
final class MicrometerMetrics implements Metrics {
  /** The tag value of the names beyond the limit. */
  static final String OTHER = "other";
  private static final double[] PERCENTILES = {0.5, 0.9, 0.99};

  private final MeterRegistry registry;
  private final int nameLimit;
  private final Set<String> names = ConcurrentHashMap.newKeySet();
  private final ReentrantLock admit = new ReentrantLock();
  private final ConcurrentHashMap<String, Primitive> recorders = new ConcurrentHashMap<>();
  private final List<Meter> gauges;
  /** The longest-hold gauges, one per recorder (bounded like the names), removed at close. */
  private final List<Meter> holdGauges = new java.util.concurrent.CopyOnWriteArrayList<>();
  private final Tags client;
  private final Watchdog watchdog;
  /** The longest current hold per recorder, taken from the watchdog's leases at most once a second. */
  private volatile java.util.Map<Primitive, Long> longest = java.util.Map.of();
  private volatile long longestAtNanos = System.nanoTime() - TimeUnit.SECONDS.toNanos(2);

  private MicrometerMetrics(MeterRegistry registry, int nameLimit, String clientId, BlockingPool pool,
      Watchdog watchdog) {
    this.registry = registry;
    this.nameLimit = nameLimit;
    this.watchdog = watchdog;
    this.client = Tags.of("client", clientId);
    this.gauges = List.of(
        gauge("turnstile.pool.connections.active", pool, BlockingPool::inUse, "blocking connections lent out to waiters now"),
        gauge("turnstile.pool.connections.open", pool, BlockingPool::openConnections,
            "blocking connections open (idle or lent out)"),
        gauge("turnstile.pool.connections.max", pool, BlockingPool::size,
            "the bound on blocking connections (blockingPoolSize)"),
        gauge("turnstile.pool.waiting", pool, BlockingPool::waiting, "waiters queued for a blocking connection"),
        gauge("turnstile.leases.active", watchdog, Watchdog::size, "leases this client's watchdog renews"));
  }

  private <T> Gauge gauge(String name, T obj, java.util.function.ToDoubleFunction<T> value, String description) {
    return Gauge.builder(name, obj, value).description(description).tags(client).register(registry);
  }

  /** @param registry a {@link MeterRegistry} (typed Object so that callers never name the type) */
  static Metrics create(Object registry, int nameLimit, String clientId, BlockingPool pool, Watchdog watchdog) {
    return new MicrometerMetrics((MeterRegistry) registry, nameLimit, clientId, pool, watchdog);
  }

  @Override
  public Primitive primitive(String kind, String name) {
    String tag = tagFor(name);
    return recorders.computeIfAbsent(kind + '\u0000' + tag, k -> new Recorder(kind, tag));
  }

  /** The tag value of a name: itself for the first {@code nameLimit} names, else {@value #OTHER}. */
  String tagFor(String name) {
    if (names.contains(name)) {
      return name;
    }
    return Locks.locked(admit, () -> { // only on a name's first sighting by this client
      if (names.contains(name)) {
        return name;
      }
      if (names.size() < nameLimit) {
        names.add(name);
        return name;
      }
      return OTHER;
    });
  }

  @Override
  public void close() {
    gauges.forEach(registry::remove);
    holdGauges.forEach(registry::remove);
  }

  /**
   * The longest current hold of the primitives recorded by {@code r}, in seconds (0 when none is
   * held). One pass over the watchdog's leases serves every gauge of a scrape: it is repeated at
   * most once a second, off the acquisition path (acquisitions do nothing for this gauge).
   */
  double longestHoldSeconds(Primitive r) {
    long now = System.nanoTime();
    if (now - longestAtNanos > TimeUnit.SECONDS.toNanos(1)) {
      long ticks = watchdog.engineTicks();
      java.util.Map<Primitive, Long> m = new java.util.HashMap<>();
      for (Lease l : watchdog.leases()) {
        if (!l.idle) {
          m.merge(l.metrics, Math.max(0, ticks - l.grantedAtNanos), Math::max);
        }
      }
      longest = m;
      longestAtNanos = now;
    }
    Long nanos = longest.get(r);
    return nanos == null ? 0 : nanos / 1e9;
  }

  /** The meters of one (kind, name tag). */
  private final class Recorder implements Primitive {
    private final Counter acquisitions;
    private final Timer wait;
    private final Timer hold;
    private final Counter timeouts;
    private final Counter interrupts;
    private final Counter renewals;
    private final Counter renewalFailures;
    private final Counter losses;
    private final Counter reclaims;

    Recorder(String kind, String name) {
      Tags tags = Tags.of("primitive", kind, "name", name);
      acquisitions = counter("turnstile.acquisitions", "new holds granted (re-entries not counted)", tags);
      wait = Timer.builder("turnstile.wait").description("time from the acquire call to the grant")
          .tags(tags).publishPercentiles(PERCENTILES).register(registry);
      hold = Timer.builder("turnstile.hold").description("time from the grant to the final unlock")
          .tags(tags).publishPercentiles(PERCENTILES).register(registry);
      timeouts = counter("turnstile.timeouts", "acquisitions that gave up when their time ran out", tags);
      interrupts = counter("turnstile.interrupts", "acquisitions ended by InterruptedException", tags);
      renewals = counter("turnstile.lease.renewals", "leases renewed by the watchdog", tags);
      renewalFailures = counter("turnstile.lease.renewal.failures",
          "lease renewals refused by Redis or not answered", tags);
      losses = counter("turnstile.lease.losses", "leases lost while held", tags);
      reclaims = counter("turnstile.reclaims", "crashed holders whose holds a script reclaimed", tags);
      holdGauges.add(Gauge.builder("turnstile.hold.longest", this, MicrometerMetrics.this::longestHoldSeconds)
          .description("the longest hold of this primitive that this client holds now (0: none); a stuck"
              + " holder shows as a line that keeps rising")
          .baseUnit("seconds").tags(tags.and(client)).register(registry));
    }

    private Counter counter(String meter, String description, Tags tags) {
      return Counter.builder(meter).description(description).tags(tags).register(registry);
    }

    @Override
    public void acquired(long waitNanos) {
      acquisitions.increment();
      wait.record(waitNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void timedOut() {
      timeouts.increment();
    }

    @Override
    public void interrupted() {
      interrupts.increment();
    }

    @Override
    public void released(long holdNanos) {
      hold.record(holdNanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void renewed() {
      renewals.increment();
    }

    @Override
    public void renewalFailed() {
      renewalFailures.increment();
    }

    @Override
    public void leaseLost() {
      losses.increment();
    }

    @Override
    public void reclaimed(long holders) {
      reclaims.increment(holders);
    }
  }
}
