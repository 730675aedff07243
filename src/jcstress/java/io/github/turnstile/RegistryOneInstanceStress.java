package io.github.turnstile;

import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.Expect;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

/**
 * Scenario 2, registry: two threads call {@code turnstile.lock("orders")} at the same time on an
 * empty registry ({@link Registry}, the weak-valued Caffeine cache behind Turnstile.lock,
 * readWriteLock and semaphore). Both must get the same instance, made once: two instances of
 * one lock in one JVM would each let a local thread in (two gates, two owners).
 */
@JCStressTest
@Description("Registry.get: concurrent lock(name) on an empty registry returns one instance, created once")
@Outcome(id = "1, 1", expect = Expect.ACCEPTABLE, desc = "same instance, one creation")
@Outcome(id = "0, .*", expect = Expect.FORBIDDEN, desc = "two instances for one name")
@Outcome(id = "1, [02-9]", expect = Expect.FORBIDDEN, desc = "factory ran other than once")
@State
public class RegistryOneInstanceStress {
  private final Registry<Object> registry = new Registry<>();
  private final AtomicInteger created = new AtomicInteger();
  private Object first;
  private Object second;

  private Object make(String name) {
    created.incrementAndGet();
    return new Object();
  }

  @Actor
  public void caller1() {
    first = registry.get("orders", this::make);
  }

  @Actor
  public void caller2() {
    second = registry.get("orders", this::make);
  }

  @Arbiter
  public void arbiter(II_Result r) {
    r.r1 = first == second && first != null ? 1 : 0;
    r.r2 = created.get();
  }
}
