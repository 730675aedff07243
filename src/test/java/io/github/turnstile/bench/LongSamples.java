package io.github.turnstile.bench;

import java.util.Arrays;

/** A growable array of long samples (nanoseconds), with nearest-rank percentiles. Not thread-safe. */
final class LongSamples {
  private long[] values = new long[1024];
  private int size;
  private boolean sorted = true;

  void add(long v) {
    if (size == values.length) {
      values = Arrays.copyOf(values, size * 2);
    }
    values[size++] = v;
    sorted = false;
  }

  void addAll(LongSamples other) {
    for (int i = 0; i < other.size; i++) {
      add(other.values[i]);
    }
  }

  long get(int i) {
    return values[i];
  }

  int size() {
    return size;
  }

  /** @return the nearest-rank percentile, q in [0, 1]; 0 if empty */
  long percentile(double q) {
    if (size == 0) {
      return 0;
    }
    if (!sorted) {
      Arrays.sort(values, 0, size);
      sorted = true;
    }
    int rank = (int) Math.ceil(q * size);
    return values[Math.min(size - 1, Math.max(0, rank - 1))];
  }

  long max() {
    return percentile(1.0);
  }

  /** @return how many samples exceed the threshold */
  long countAbove(long threshold) {
    long n = 0;
    for (int i = 0; i < size; i++) {
      if (values[i] > threshold) {
        n++;
      }
    }
    return n;
  }
}
