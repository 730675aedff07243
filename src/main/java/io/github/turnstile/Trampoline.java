package io.github.turnstile;

import java.util.ArrayDeque;

/**
 * Runs callbacks that would otherwise recurse, one after the other on the calling thread: an
 * acquisition that ends makes the next one of its gate the head, which may end at once too (it
 * was cancelled, the client is closed), and so on. Run nested, each callback is queued and run
 * when the outermost one returns, so a long queue of waiters cannot overflow the stack.
 */
final class Trampoline {
  private static final System.Logger LOG = System.getLogger("io.github.turnstile");
  private static final ThreadLocal<ArrayDeque<Runnable>> QUEUE = new ThreadLocal<>();

  private Trampoline() {}

  static void run(Runnable r) {
    ArrayDeque<Runnable> q = QUEUE.get();
    if (q != null) {
      q.add(r);
      return;
    }
    q = new ArrayDeque<>();
    QUEUE.set(q);
    try {
      for (Runnable next = r; next != null; next = q.poll()) {
        try {
          next.run();
        } catch (RuntimeException e) {
          LOG.log(System.Logger.Level.WARNING, "async callback failed", e);
        }
      }
    } finally {
      QUEUE.remove();
    }
  }
}
