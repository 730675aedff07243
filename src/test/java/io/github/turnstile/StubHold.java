package io.github.turnstile;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/** A lock hold that holds nothing in Redis: what a stand-in side grants in the engine's unit tests. */
final class StubHold implements LockHold {
  private final long token;

  StubHold(long token) {
    this.token = token;
  }

  @Override public String name() { return "n"; }
  @Override public boolean isValid() { return true; }
  @Override public CompletionStage<LeaseLostEvent> lost() { return new CompletableFuture<>(); }
  @Override public CompletionStage<Void> release() { return CompletableFuture.completedFuture(null); }
  @Override public void close() { }
  @Override public long fencingToken() { return token; }
}
