package io.github.turnstile;

import java.io.PrintStream;
import java.time.Duration;

/**
 * Who holds it, from the command line, without the application:
 * {@code java -cp <turnstile and its dependencies> io.github.turnstile.InspectMain <redis uri> [lock|rwlock|semaphore] <name>}.
 * Prints the {@link Inspection} (one line, then one line per holder) and exits 0; 2 on bad
 * arguments, 1 if Redis cannot be reached. Read-only: it acquires nothing and creates no key.
 * Package-private: a tool, not part of the API.
 */
final class InspectMain {
  private InspectMain() {}

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  static int run(String[] args, PrintStream out, PrintStream err) {
    if (args.length < 2 || args.length > 3) {
      err.println("usage: InspectMain <redis uri> [lock|rwlock|semaphore] <name>   (default kind: lock)");
      return 2;
    }
    Inspection.Kind kind;
    try {
      kind = args.length == 3 ? Inspection.Kind.of(args[1]) : Inspection.Kind.LOCK;
      Turnstile.checkName(args[args.length - 1]);
    } catch (IllegalArgumentException e) {
      err.println(e.getMessage());
      return 2;
    }
    TurnstileOptions options = TurnstileOptions.builder().commandTimeout(Duration.ofSeconds(5))
        .clientName("turnstile-inspect").build();
    try (Turnstile turnstile = Turnstile.connect(args[0], options)) {
      Inspection i = turnstile.inspect(kind, args[args.length - 1]);
      out.println(i.kind().label() + " '" + i.name() + "' at " + i.inspectedAt() + ": "
          + (i.isHeld() ? i.holderCount() + " holder(s)" : "not held") + ", " + i.waiting() + " waiting"
          + (kind == Inspection.Kind.SEMAPHORE && i.exists() ? ", " + i.availablePermits() + " free" : ""));
      for (Inspection.Holder h : i.holders()) {
        out.println("  " + h + " [client " + h.clientId() + "]");
      }
      return 0;
    } catch (IllegalArgumentException e) {
      err.println(e.getMessage());
      return 2;
    } catch (TurnstileException e) {
      err.println("cannot inspect: " + e.getMessage());
      return 1;
    }
  }
}
