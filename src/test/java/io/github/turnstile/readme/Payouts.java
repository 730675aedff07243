package io.github.turnstile.readme;

import io.github.turnstile.DistributedLock;
import io.github.turnstile.Turnstile;
import org.springframework.stereotype.Service;

// The README's Spring Boot service, compiled (ReadmeSnippetsTest runs it in a context made from
// the README's properties).
// README: spring-service
@Service
class Payouts {
  private final DistributedLock lock;

  Payouts(Turnstile turnstile) {
    this.lock = turnstile.lock("payouts");
  }

  void run() {
    lock.lock();
    try {
      pay(lock.fencingToken());
    } finally {
      lock.unlock();
    }
  }

  private void pay(long fencingToken) {
    // the payment service refuses tokens lower than the highest it has seen
  }
}
// README: end
