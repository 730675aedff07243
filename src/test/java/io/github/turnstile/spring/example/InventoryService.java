package io.github.turnstile.spring.example;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.integration.support.locks.LockRegistry;
import org.springframework.stereotype.Service;

/**
 * Sells stock with a read-check-write that would oversell without a lock: several threads on
 * several nodes run it at once, and Spring Integration's {@link LockRegistry} (here Turnstile's,
 * auto-configured) makes it one at a time per SKU across all of them.
 */
@Service
@SuppressWarnings("rawtypes") // raw LockRegistry in signatures: the class also runs on Spring Integration 6.5,
                              // whose LockRegistry is not generic (with 7.x alone, write LockRegistry<?>)
public class InventoryService {
  /** Stands in for the database every node writes to (the nodes of the example share this JVM). */
  private static final Map<String, Integer> STORE = new ConcurrentHashMap<>();

  private final LockRegistry locks;

  /**
   * Creates the service.
   *
   * @param locks the lock registry (Turnstile's)
   */
  public InventoryService(LockRegistry locks) {
    this.locks = locks;
  }

  /**
   * Sets the stock of a SKU.
   *
   * @param sku the SKU
   * @param units the units in stock
   */
  public void restock(String sku, int units) {
    STORE.put(sku, units);
  }

  /**
   * Returns the units in stock.
   *
   * @param sku the SKU
   * @return the units in stock
   */
  public int stock(String sku) {
    return STORE.getOrDefault(sku, 0);
  }

  /**
   * Reserves units if that many are in stock: read, check, think, write, under the SKU's lock.
   *
   * @param sku the SKU
   * @param units the units wanted
   * @return whether they were reserved
   * @throws InterruptedException if interrupted while waiting for the lock
   */
  public boolean reserve(String sku, int units) throws InterruptedException {
    LockRegistry<?> registry = locks;
    return registry.executeLocked("sku:" + sku, () -> {
      int inStock = stock(sku);
      if (inStock < units) {
        return false;
      }
      Thread.sleep(1); // a round trip to the database: without the lock, others would read the same stock
      STORE.put(sku, inStock - units);
      return true;
    });
  }
}
