package io.github.turnstile.fault;

/**
 * The downstream store of the fencing-token argument (Kleppmann, 2016): it remembers the highest
 * token it has accepted and rejects any write carrying a lower one. Writes with the same token (one
 * holder writing several times) are accepted.
 */
public final class FencedStore {
  private long highest = Long.MIN_VALUE;
  private long accepted;
  private long rejected;
  private String value;

  /** @return true if written, false if rejected as stale */
  public synchronized boolean write(long token, String newValue) {
    if (token < highest) {
      rejected++;
      return false;
    }
    highest = token;
    accepted++;
    value = newValue;
    return true;
  }

  public synchronized long rejected() {
    return rejected;
  }

  public synchronized long accepted() {
    return accepted;
  }

  public synchronized String value() {
    return value;
  }
}
