// The README's first example, as the README shows it (so in the default package): ReadmeSnippetsTest
// checks that the README's block is the text between the markers, and runs it.
// README: quick-start
import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;

public class QuickStart {
  public static void main(String[] args) {
    try (Turnstile turnstile = Turnstile.connect(args.length > 0 ? args[0] : "redis://localhost:6379")) {
      DistributedLock lock = turnstile.lock("orders:42"); // one per name, shared by every JVM
      lock.lock();
      try {
        long token = lock.fencingToken(); // strictly increasing: pass it with every write
        System.out.println("orders:42 is ours, fencing token " + token);
      } finally {
        lock.unlock();
      }
    }
  }
}
// README: end
