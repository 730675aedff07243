package io.github.turnstile;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The releases a client sends again after a recovery (DESIGN §5, <i>After a failover</i>): a
 * failover can lose writes the old primary acknowledged but had not replicated, a release among
 * them, and the hold would then stay in Redis until its lease ran out, with every waiter behind it.
 * Releases are idempotent by request id, so sending a kept one again is safe.
 *
 * <p>What is kept: each release until the lease of its hold would have run out anyway; at most
 * {@value #PER_KEY} per hold key (on a hot lock the lost writes can be a run of local hand-offs,
 * whose first hold's release lies that many releases back: {@code LostWritesTest}); and at most
 * {@value #MAX} in all, the oldest dropped first (the writes a failover loses are the latest
 * ones, within the replication lag).
 *
 * <p>What it costs: {@link #add} is O(1) amortized, whatever the number of keys and entries kept:
 * every read hold has a key of its own, so a client may keep thousands of keys within one lease,
 * and no release scans them.
 *
 * <p>Times are {@link System#nanoTime()} values, passed in (tests use their own).
 */
final class ReplayLog {
  /** Releases kept per hold key. */
  static final int PER_KEY = 64;
  /** Releases kept in all (entries, including those dropped by the per-key limit not yet purged). */
  static final int MAX = 16_384;

  private static final class Entry {
    final String key;
    final long until;
    /** null once dropped (expired, or pushed out by a newer release of the same key). */
    Runnable resend;

    Entry(String key, long until, Runnable resend) {
      this.key = key;
      this.until = until;
      this.resend = resend;
    }
  }

  /** No {@code synchronized} in Turnstile: it would pin virtual threads. */
  private final ReentrantLock lock = new ReentrantLock();
  /** Every entry not yet purged, in the order added (so each key's entries in its own order too). */
  private final ArrayDeque<Entry> order = new ArrayDeque<>();
  /** Each key's live entries, oldest first: the head of a key's queue is its oldest in {@link #order}. */
  private final HashMap<String, ArrayDeque<Entry>> byKey = new HashMap<>();
  /** Entries of {@link #order} dropped by the per-key limit (purged when they reach the head). */
  private int dead;
  /** Entries looked at by {@link #add} beyond the one it adds, in all (tests: amortized O(1)). */
  private long work;

  /** Keeps {@code resend}, the release of a hold at {@code key}, until {@code untilNanos}. */
  void add(String key, long untilNanos, Runnable resend, long nowNanos) {
    lock.lock();
    try {
      // most releases expire in the order they were added: purge from the head
      for (Entry h = order.peekFirst(); h != null && (h.resend == null || nowNanos - h.until >= 0);
          h = order.peekFirst()) {
        popHead();
      }
      ArrayDeque<Entry> mine = byKey.computeIfAbsent(key, k -> new ArrayDeque<>(2));
      if (mine.size() == PER_KEY) {
        mine.pollFirst().resend = null;
        dead++;
      }
      Entry e = new Entry(key, untilNanos, resend);
      mine.addLast(e);
      order.addLast(e);
      if (dead > 64 && dead > order.size() / 2) {
        // a hot key leaves one dropped entry per release: compact once they are half (amortized O(1))
        work += order.size();
        order.removeIf(x -> x.resend == null);
        dead = 0;
      }
      while (order.size() > MAX) {
        popHead();
      }
    } finally {
      lock.unlock();
    }
  }

  /** Removes the head of {@link #order}; if live, it is the oldest live entry of its key. */
  private void popHead() {
    Entry h = order.pollFirst();
    work++;
    if (h.resend == null) {
      dead--;
      return;
    }
    h.resend = null;
    ArrayDeque<Entry> q = byKey.get(h.key);
    q.pollFirst();
    if (q.isEmpty()) {
      byKey.remove(h.key);
    }
  }

  /** The kept releases whose lease has not run out, oldest first. */
  List<Runnable> live(long nowNanos) {
    return Locks.locked(lock, () -> {
      List<Runnable> out = new ArrayList<>();
      for (Entry e : order) {
        if (e.resend != null && nowNanos - e.until < 0) {
          out.add(e.resend);
        }
      }
      return out;
    });
  }

  /** Entries held, live or not yet purged (tests). */
  int size() {
    return Locks.locked(lock, order::size);
  }

  /** Keys with a live entry (tests). */
  int keys() {
    return Locks.locked(lock, byKey::size);
  }

  /** Entries looked at by {@link #add} besides the ones added, in all (tests). */
  long work() {
    return Locks.locked(lock, () -> work);
  }
}
