package io.github.turnstile;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import com.github.benmanes.caffeine.cache.RemovalCause;
import com.github.benmanes.caffeine.cache.Scheduler;
import io.lettuce.core.ScriptOutputType;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * A plain lock's grant that this JVM keeps between its holds ({@link TurnstileOptions#lockCaching()};
 * docs/DESIGN.md §17). Redis keeps the lock held by the grant's request, field {@code c} naming
 * this client, its lease renewed by the watchdog with renew.lua's {@code ~} kind; an acquisition of
 * this JVM takes it with no round trip ({@link #take}), with a fencing token from the local clock
 * ({@link #nextToken}); another client's attempt publishes {@code r} on the lock's channel, and the
 * grant is given up at once when idle, else at the end of the current hold ({@link #revoke}).
 *
 * <p>States: {@code NONE} (nothing cached) → {@code STARTING} (subscribed, renew.lua's first
 * {@code ~} call on its way) → {@code IDLE} ⇄ {@code TAKEN} (a hold of this JVM uses it) →
 * {@code NONE} when released in Redis (revoked, evicted, idle too long, unusable, closed) or lost.
 * All guarded by {@link #mu}.
 */
final class LockCache {
  /** How long a lock is not cached after a sign of contention (a revocation, a refusal by a cache). */
  static final long BACKOFF_MILLIS = 1000;
  /** How long {@code tryLock()} waits for another client's cache to give the lock up. */
  static final long REVOCATION_WAIT_MILLIS = 1000;

  /** The engine's bounds: the idle grants (LRU, idle time) and the locks contended lately. */
  static final class Registry {
    /**
     * The cached grants, registered once when cached (not at every take): an entry that expires
     * is released only if its grant has been idle that long ({@link #evicted}); one evicted for the
     * bound is released if idle.
     */
    private final Cache<LockCache, Boolean> idle;
    private final Cache<String, Boolean> contended;
    final long idleNanos;

    Registry(TurnstileOptions options) {
      this.idleNanos = options.lockCacheIdle().toNanos();
      this.idle = Caffeine.newBuilder()
          .maximumSize(options.lockCacheSize())
          .expireAfterWrite(options.lockCacheIdle())
          .scheduler(Scheduler.systemScheduler())
          .removalListener((LockCache c, Boolean v, RemovalCause cause) -> {
            if (c != null && cause.wasEvicted()) {
              c.evicted(cause);
            }
          })
          .build();
      this.contended = Caffeine.newBuilder()
          .maximumSize(Math.max(1024, 4L * options.lockCacheSize()))
          .expireAfterWrite(BACKOFF_MILLIS, TimeUnit.MILLISECONDS)
          .build();
    }

    /** Whether the lock at {@code key} showed contention in the last {@link #BACKOFF_MILLIS}. */
    boolean contended(String key) {
      return contended.getIfPresent(key) != null;
    }

    /** The lock at {@code key} is contended: it is not cached for {@link #BACKOFF_MILLIS} from now. */
    void contention(String key) {
      contended.put(key, Boolean.TRUE);
    }

    /** Gives up every idle grant (at close); completes when Redis answered or gave up. */
    CompletableFuture<Void> releaseAll() {
      List<CompletableFuture<Boolean>> sent = new ArrayList<>();
      for (LockCache c : new ArrayList<>(idle.asMap().keySet())) {
        CompletableFuture<Boolean> f = c.giveUpIfIdle();
        if (f != null) {
          sent.add(f);
        }
      }
      idle.invalidateAll();
      return CompletableFuture.allOf(sent.toArray(new CompletableFuture<?>[0]));
    }

    /** Idle grants kept now (tests). */
    long idleCount() {
      idle.cleanUp();
      return idle.estimatedSize();
    }
  }

  enum State { NONE, STARTING, IDLE, TAKEN }

  /** What a cache asks of the engine and of Redis: {@link LockCache#onRedis} in production, stand-ins in jcstress. */
  interface Io {
    /** The engine's ticker. */
    long now();

    /** Whether a grant may be kept (or kept on): the engine not closed, Redis connected. */
    boolean open();

    /** A lease of the lock for the cached grant of {@code request}, running from {@code sinceNanos}. */
    Lease lease(String request, long token, long sinceNanos, Lease.LossHandler handler);

    /** The watchdog starts ({@code on}) or stops renewing {@code lease}. */
    void renewing(Lease lease, boolean on);

    /** {@code hold} ended in the client's books: no longer renewed, its time held counted. */
    void ended(AsyncHold.Lock hold);

    /** The lock's channel; {@link WakeChannel#next} completes at a revocation ({@code r}) or the subscription's loss. */
    WakeChannel subscribe();

    /**
     * Whether the connection that would carry the lock's channel is open, so that caching costs
     * the release two round trips (SUBSCRIBE, then the mark), not a connection's set-up; if it is
     * not, it starts opening and the grant is released this time.
     */
    default boolean subscriberOpen() {
      return true;
    }

    /** renew.lua's first {@code ~} call: {@code {{1, server µs, waiting}}} once the grant is marked cached, else {@code {0}}. */
    CompletableFuture<List<Object>> markCached(String request);

    /**
     * lock_busy.lua: tells the clients that asked for the grant of {@code request} that a thread of
     * this JVM uses it (they stop waiting for a revocation, as the lock is held). Only an answer:
     * nothing depends on its reply.
     */
    default void markInUse(String request) {
    }

    /**
     * lock_release.lua for the grant of {@code request}, carrying {@code lastToken}: re-sent until
     * answered or {@code leaseEndNanos} ({@link System#nanoTime}), again after a recovery; true if released.
     */
    CompletableFuture<Boolean> release(String request, long grantToken, long lastToken, long leaseEndNanos);
  }

  /** The lock's key, whose contention the registry records, and its fence key (the watchdog's renewals). */
  private final String key;
  final String fenceKey;
  private final long leaseMillis;
  private final Io io;
  private final Registry registry;
  private final ReentrantLock mu = new ReentrantLock();
  /** A test's seam: runs when a take's release has decided to give the grant up, before it does. */
  transient volatile Runnable beforeReleaseAtEndOfTake;
  /** Grants taken from the cache so far (tests, metrics). */
  final java.util.concurrent.atomic.AtomicLong takes = new java.util.concurrent.atomic.AtomicLong();
  // ---- guarded by mu
  private State state = State.NONE;
  /** The grant's lease while cached: the idle one, or the current take's. */
  private Lease lease;
  /** The Redis request that holds the lock, and the token Redis granted it. */
  private String request;
  private long grantToken;
  /** The last fencing token issued: the grant's, or a take's. */
  private long lastToken;
  /** The server time (µs) of the last confirmation, and this JVM's ticker when its reply was read. */
  private long anchorUs;
  private long anchorNanos;
  private boolean anchored;
  /** Another client asked for the lock: give it up at the end of the current hold. */
  private boolean revoked;
  /** A revocation found the grant in use, and the other clients were told (lock_busy.lua). */
  private boolean toldInUse;
  /** When ({@link Engine#ticker}) the grant last became idle. */
  private long idleSince;
  /** Evicted for the bound while in use: released at the end of the current hold. */
  private boolean evicted;
  private WakeChannel sub;
  /** Completes when {@code STARTING} ends (a new head waits for it rather than attempting in Redis). */
  private CompletableFuture<Void> started;
  /**
   * The outcome of the release that started the cache, as the releasing caller sees it: true once
   * Redis marked the grant cached (another client that asks for it from then on revokes it), or
   * the outcome of its release in Redis if the cache gave it up at once.
   */
  private CompletableFuture<Boolean> kept;
  /** The hold that uses the grant now ({@code TAKEN}). */
  private AsyncHold.Lock taken;
  // ----

  LockCache(String key, String fenceKey, long leaseMillis, Io io, Registry registry) {
    this.key = key;
    this.fenceKey = fenceKey;
    this.leaseMillis = leaseMillis;
    this.io = io;
    this.registry = registry;
  }

  /** The cache's {@link Io} over {@code lock}: its engine's clock, watchdog and subscriptions, its scripts. */
  static Io onRedis(RedisLock lock) {
    Engine engine = lock.engine;
    return new Io() {
      @Override
      public long now() {
        return engine.ticker.read();
      }

      @Override
      public boolean open() {
        return !engine.isClosed() && engine.connected();
      }

      @Override
      public Lease lease(String request, long token, long sinceNanos, Lease.LossHandler handler) {
        return new Lease(lock.lockKey, request, engine.leaseMillis, token, "client " + engine.clientId + " (cached)",
            sinceNanos, handler, lock.metrics).on(Inspection.Kind.LOCK, lock.name(), -1);
      }

      @Override
      public void renewing(Lease l, boolean on) {
        if (on) {
          engine.watchdog.register(l);
        } else {
          engine.watchdog.unregister(l);
        }
      }

      @Override
      public void ended(AsyncHold.Lock hold) {
        engine.watchdog.unregister(hold.lease());
        lock.metrics.released(hold.heldNanos());
      }

      @Override
      public WakeChannel subscribe() {
        return new AsyncSides.SubChannel(engine.subscribe(lock.channel), true);
      }

      @Override
      public boolean subscriberOpen() {
        return engine.subscriberOpen(lock.channel);
      }

      @Override
      public CompletableFuture<List<Object>> markCached(String request) {
        return engine.eval(Script.RENEW, ScriptOutputType.MULTI, new String[] {lock.lockKey, lock.fenceKey},
            "~" + request, engine.leaseArg);
      }

      @Override
      public void markInUse(String request) {
        engine.eval(Script.LOCK_BUSY, ScriptOutputType.INTEGER, new String[] {lock.lockKey, lock.wakeKey},
            Engine.withoutDefaults(new String[] {request, engine.leaseArg, engine.publishCommand()}, "PUBLISH"));
      }

      @Override
      public CompletableFuture<Boolean> release(String request, long grantToken, long lastToken, long leaseEndNanos) {
        Supplier<CompletableFuture<Long>> send = () -> engine.eval(Script.LOCK_RELEASE, ScriptOutputType.INTEGER,
            new String[] {lock.lockKey, lock.wakeKey}, request, Long.toString(grantToken), engine.leaseArg,
            engine.publishCommand(), "", Long.toString(lastToken));
        CompletableFuture<Long> all = engine.releases.retrying(new RedisLock.First<>(send.get(), send), leaseEndNanos);
        engine.replayOnRecovery(lock.lockKey, leaseEndNanos, send::get);
        return all.thenApply(r -> r != 0L);
      }
    };
  }

  /** Whether {@code l} leaves a safe margin for a take: alive, more than half a lease confirmed ahead. */
  private boolean usable(Lease l, long now) {
    return l != null && l.alive(now) && l.remainingMillis(now) > leaseMillis / 2;
  }

  /** A lease for the cached grant, continuing (same request, same confirmed instant) from {@code sinceNanos}. */
  private Lease newLease(long token, long sinceNanos) {
    Lease l = io.lease(request, token, sinceNanos, this::leaseLost);
    l.cache = this;
    l.idle = true;
    return l;
  }

  /**
   * The next fencing token of a take at ticker time {@code now}, or -1 if none may be issued:
   * {@code max(last + 1, anchor + µs since the anchor's reply was read)}, while the anchor is
   * younger than half a lease and the token below {@code anchor + lease}, which the anchoring
   * renew.lua raised the fence to (DESIGN §17).
   */
  private long nextToken(long now) {
    if (!anchored) {
      return -1;
    }
    long age = now - anchorNanos;
    if (age < 0 || age >= TimeUnit.MILLISECONDS.toNanos(leaseMillis) / 2) {
      return -1;
    }
    long t = Math.max(lastToken + 1, anchorUs + age / 1000);
    if (t >= anchorUs + leaseMillis * 1000 - 1) {
      return -1;
    }
    lastToken = t;
    return t;
  }

  private Attempt takeAttempt(long token) {
    Attempt a = new Attempt(true, token, 0);
    a.request = request;
    a.cache = this;
    return a;
  }

  // ---------------------------------------------------------------- keeping a grant

  /**
   * The final release of {@code hold}, a grant from Redis, with nobody of this JVM waiting: keeps
   * it instead (unless the lock was contended lately, the lease is short of its margin, or Redis
   * is unreachable). Subscribes to the lock's channel, then sends renew.lua's first {@code ~}
   * call, which marks the grant cached and anchors the tokens; takes wait for it.
   *
   * @return null if not kept (the caller releases it); else the release's outcome: completes once
   *     Redis marked the grant cached, so that when the caller's unlock returns, another client's
   *     attempt finds it cached and revokes it (as it would find a released lock free)
   */
  CompletableFuture<Boolean> keep(AsyncHold.Lock hold, AsyncGate<LockHold> g) {
    long now = io.now();
    Lease held = hold.lease();
    if (!io.open() || registry.contended(key) || !usable(held, now) || !io.subscriberOpen()) {
      return null;
    }
    Lease idle;
    CompletableFuture<Boolean> outcome = new CompletableFuture<>();
    mu.lock();
    try {
      if (state != State.NONE) {
        return null;
      }
      kept = outcome;
      state = State.STARTING;
      revoked = false;
      toldInUse = false;
      evicted = false;
      anchored = false;
      request = held.requestId;
      grantToken = held.token;
      lastToken = held.token;
      idle = newLease(held.token, held.sinceNanos());
      lease = idle;
      started = new CompletableFuture<>();
    } finally {
      mu.unlock();
    }
    io.ended(hold);
    if (g != null) {
      g.endedLocally(hold);
    }
    io.renewing(idle, true);
    WakeChannel s;
    try {
      s = io.subscribe();
    } catch (RuntimeException e) {
      giveUp(idle);
      return outcome;
    }
    mu.lock();
    try {
      sub = s;
    } finally {
      mu.unlock();
    }
    s.ready().whenComplete((v, e) -> {
      if (e != null) {
        giveUp(idle);
        return;
      }
      listen(s);
      start(idle);
    });
    return outcome;
  }

  /** Sends the first {@code ~} renewal of {@code idle}: marks the grant cached, anchors the tokens. */
  private void start(Lease idle) {
    long sentAt = io.now();
    io.markCached(idle.requestId).whenComplete((r, e) -> {
          Object reply = e == null && r != null && !r.isEmpty() ? r.get(0) : null;
          if (!(reply instanceof List<?> confirmed)) {
            // 0 (the request no longer holds the lock: the release is a no-op, and the caller is
            // told false), Redis unreachable or a refusal: released (re-sent until answered)
            giveUp(idle);
            return;
          }
          idle.renewed(sentAt);
          confirmed(idle, confirmed, sentAt);
          CompletableFuture<Void> done = null;
          CompletableFuture<Boolean> k = null;
          boolean release = false;
          mu.lock();
          try {
            if (lease == idle && state == State.STARTING) {
              done = started;
              started = null;
              k = kept;
              kept = null;
              if (revoked) {
                release = true;
              } else {
                state = State.IDLE;
                idleSince = io.now();
              }
            }
          } finally {
            mu.unlock();
          }
          if (release) {
            // revoked while it was being cached: released (a head that waited for the cache attempts after it)
            CompletableFuture<Boolean> out = giveUp(idle);
            CompletableFuture<Boolean> pending = k;
            if (pending != null) {
              out.whenComplete((v, x) -> pending.complete(x == null ? v : Boolean.TRUE));
            }
            done.complete(null);
          } else if (done != null) {
            registry.idle.put(this, Boolean.TRUE);
            done.complete(null);
            k.complete(true);
          }
        });
  }

  /** A revocation message on the lock's channel (lock_acquire.lua publishes {@code r}), or the subscription's loss. */
  private void listen(WakeChannel s) {
    s.next().thenRun(() -> {
      boolean mine;
      mu.lock();
      try {
        mine = sub == s;
      } finally {
        mu.unlock();
      }
      if (mine) {
        revoke();
        listen(s);
      }
    });
  }

  /**
   * A renewal sent at {@code sentAt} for {@code l}, a lease of the cached grant, answered
   * {@code {1, server µs, waiting}}. Every take and every return to idle replaces the lease object
   * (each hold has its own), so the reply may find {@code l} replaced already: it confirms the
   * grant, whose current lease is confirmed with it, and the anchor moves forward (never back).
   * A reply that says a waiting mark may exist gives the grant up (a revocation message missed).
   */
  void confirmed(Lease l, List<?> reply, long sentAt) {
    boolean waiting = reply.size() > 2 && Long.valueOf(1).equals(reply.get(2));
    long us = Long.parseLong(String.valueOf(reply.get(1)));
    long readAt = io.now();
    Lease current;
    mu.lock();
    try {
      if (lease == null || !l.requestId.equals(request)) {
        return; // a grant this cache no longer keeps
      }
      current = lease;
      if (!anchored || us > anchorUs) {
        anchorUs = us;
        anchorNanos = readAt;
        anchored = true;
      }
    } finally {
      mu.unlock();
    }
    if (current != l) {
      current.confirmed(sentAt);
    }
    if (waiting) {
      revoke();
    }
  }

  /**
   * Another client asked for the lock: given up at once when idle; else at the end of the current
   * hold, and while a thread uses it the askers are told so (once), so that a {@code tryLock()}
   * there ends at once rather than at the revocation's bound.
   */
  void revoke() {
    registry.contention(key);
    Lease idle = null;
    String inUse = null;
    mu.lock();
    try {
      revoked = true;
      if (state == State.IDLE) {
        idle = lease;
      } else if (state == State.TAKEN && !toldInUse) {
        toldInUse = true;
        inUse = request;
      }
    } finally {
      mu.unlock();
    }
    if (idle != null) {
      giveUp(idle);
    } else if (inUse != null) {
      io.markInUse(inUse);
    }
  }

  /** Caffeine evicted the idle grant (the bound, or its idle time): released if still idle. */
  void evicted(RemovalCause cause) {
    Lease idle = null;
    boolean keep = false;
    long now = io.now();
    mu.lock();
    try {
      if (cause != RemovalCause.EXPIRED && (state == State.TAKEN || state == State.STARTING)) {
        evicted = true; // over the bound while in use: released at the end of the hold
      } else if (state == State.TAKEN || state == State.STARTING
          || (state == State.IDLE && cause == RemovalCause.EXPIRED && now - idleSince < registry.idleNanos)) {
        keep = true; // in use, or used since it was registered: its idle time starts again
      } else if (state == State.IDLE) {
        idle = lease;
      }
    } finally {
      mu.unlock();
    }
    if (keep) {
      registry.idle.put(this, Boolean.TRUE);
    } else if (idle != null) {
      giveUp(idle);
    }
  }

  private CompletableFuture<Boolean> giveUpIfIdle() {
    Lease idle = null;
    mu.lock();
    try {
      if (state == State.IDLE) {
        idle = lease;
      }
    } finally {
      mu.unlock();
    }
    return idle == null ? null : giveUp(idle);
  }

  /**
   * The idle lease {@code l} was lost (a renewal refused, or its time ran out by the local clock):
   * nothing cached. Its release is sent all the same, as a lost hold's is (it names the request:
   * harmless if Redis gave the lock to another, and it frees the lock now if Redis still has the
   * grant, after a jump of the local clock).
   */
  private void leaseLost(Lease l, String reason) {
    giveUp(l, false, false);
  }

  /**
   * Releases the cached grant whose lease is {@code l} in Redis, carrying the last token issued
   * (lock_release.lua raises the record's token to it), if {@code l} is still the cache's.
   *
   * @return the release's outcome, or a completed false if {@code l} was no longer cached
   */
  private CompletableFuture<Boolean> giveUp(Lease l) {
    return giveUp(l, true, false);
  }

  /**
   * As {@link #giveUp(Lease)}. {@code end}: end the lease (the cache's own, idle or being cached;
   * not a lost one, nor a take's, which ends with its hold). {@code take}: {@code l} is the lease of
   * the take that ends now ({@link #endTake}, the only way a grant in use is given up); otherwise
   * nothing is given up while a take holds the grant.
   */
  private CompletableFuture<Boolean> giveUp(Lease l, boolean end, boolean take) {
    String req;
    long granted;
    long last;
    WakeChannel s;
    CompletableFuture<Void> done;
    CompletableFuture<Boolean> k;
    mu.lock();
    try {
      if (lease != l || (state == State.TAKEN) != take) {
        return CompletableFuture.completedFuture(false);
      }
      k = kept;
      kept = null;
      req = request;
      granted = grantToken;
      last = lastToken;
      state = State.NONE;
      lease = null;
      s = sub;
      sub = null;
      done = started;
      started = null;
    } finally {
      mu.unlock();
    }
    io.renewing(l, false);
    if (end) {
      l.end();
    }
    registry.idle.invalidate(this);
    if (s != null) {
      s.close();
    }
    CompletableFuture<Boolean> released = io.release(req, granted, last, leaseEnd(l));
    if (done != null) {
      done.complete(null);
    }
    if (k != null) {
      released.whenComplete((v, x) -> k.complete(x == null ? v : Boolean.TRUE));
    }
    return released;
  }

  /** When ({@link System#nanoTime}) {@code l} runs out at the latest. */
  private long leaseEnd(Lease l) {
    return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, l.remainingMillis(io.now())));
  }

  // ---------------------------------------------------------------- takes

  /** {@return the future a new head waits on while the grant is being cached, or null} */
  CompletableFuture<Void> starting() {
    mu.lock();
    try {
      return state == State.STARTING ? started : null;
    } finally {
      mu.unlock();
    }
  }

  /** Whether the grant is cached here and no hold of this JVM uses it. */
  boolean idleHere() {
    mu.lock();
    try {
      return state == State.IDLE || state == State.STARTING;
    } finally {
      mu.unlock();
    }
  }

  /**
   * The head {@code w} takes the cached grant, with no round trip, if it is idle and usable: a
   * fencing token from the local clock, the lease continued. An idle grant that is not usable
   * (its margin, its anchor) is released first, and {@code w} attempts in Redis after that release.
   *
   * @return true if {@code w} was handed the grant (or it ended meanwhile and the grant is idle again)
   */
  boolean take(AsyncAcquisition<LockHold> w) {
    long now = io.now();
    Lease idle;
    Attempt a = null;
    mu.lock();
    try {
      if (state != State.IDLE) {
        return false;
      }
      idle = lease;
      long t = usable(idle, now) ? nextToken(now) : -1;
      if (t >= 0) {
        a = takeAttempt(t);
        state = State.TAKEN;
        takes.incrementAndGet();
      }
    } finally {
      mu.unlock();
    }
    if (a == null) {
      giveUp(idle); // w's attempt follows the release on the same connection
      return false;
    }
    io.renewing(idle, false);
    idle.end();
    if (!w.handedOver(a, idle.sinceNanos())) {
      untake(idle.sinceNanos()); // w ended meanwhile (its cancelGrant found no hold yet)
    }
    return true;
  }

  /** The hold a take creates was granted: it uses the cached grant from now. */
  void took(AsyncHold.Lock hold) {
    mu.lock();
    try {
      taken = hold;
      lease = hold.lease();
    } finally {
      mu.unlock();
    }
  }

  /** A take's grant that its acquisition did not keep (it ended meanwhile): idle again. */
  void untake(long sinceNanos) {
    Lease idle;
    mu.lock();
    try {
      if (state != State.TAKEN || taken != null) {
        return;
      }
      idle = newLease(lastToken, sinceNanos);
      lease = idle;
      state = State.IDLE;
      idleSince = io.now();
    } finally {
      mu.unlock();
    }
    io.renewing(idle, true);
    if (revoked) {
      giveUp(idle);
    }
  }

  /** Whether {@code hold} uses this cache's grant (a take). */
  boolean isTake(AsyncHold hold) {
    return hold instanceof AsyncHold.Lock && hold.lease().cache == this;
  }

  /**
   * The release of a take: hands the grant to this JVM's next head with a new local token, keeps it
   * idle, or (revoked, unusable, contended, Redis unreachable) releases it in Redis, carrying the
   * last token issued.
   *
   * @return the release's outcome
   */
  CompletableFuture<Boolean> endTake(AsyncHold.Lock hold, AsyncGate<LockHold> g) {
    long now = io.now();
    Lease l = hold.lease();
    io.ended(hold);
    AsyncGate.Successor<LockHold> next = null;
    Attempt a = null;
    Lease idle = null;
    boolean release = false;
    mu.lock();
    try {
      if (taken == hold) {
        taken = null;
      }
      boolean ok = state == State.TAKEN && lease == l && !revoked && !evicted && io.open() && usable(l, now);
      if (ok && g != null) {
        next = g.successor(Integer.MAX_VALUE);
        if (next != null) {
          long t = nextToken(now);
          if (t >= 0) {
            a = takeAttempt(t);
            takes.incrementAndGet();
          } else {
            ok = false;
          }
        }
      }
      if (ok && a == null) {
        if (registry.contended(key)) {
          ok = false;
        } else {
          idle = newLease(lastToken, l.sinceNanos());
          lease = idle;
          state = State.IDLE;
          idleSince = now;
        }
      }
      if (!ok && state == State.TAKEN && lease == l) {
        release = true; // stays TAKEN until giveUp, so that no take can start on a grant being given up
      }
    } finally {
      mu.unlock();
    }
    if (a != null) {
      g.handedOff(false); // the run of hand-offs counts only while no cache holds the grant
      if (!next.acquisition().handedOver(a, l.sinceNanos())) {
        untake(l.sinceNanos());
        if (g != null) {
          g.endedLocally(hold);
        }
      }
      return CompletableFuture.completedFuture(true);
    }
    if (g != null) {
      g.endedLocally(hold);
    }
    if (idle != null) {
      io.renewing(idle, true);
      return CompletableFuture.completedFuture(true);
    }
    if (release) {
      Runnable seam = beforeReleaseAtEndOfTake;
      if (seam != null) {
        seam.run();
      }
      return giveUp(l, false, true);
    }
    // no longer this cache's grant (lost meanwhile): released by request, as any hold
    return io.release(l.requestId, l.token, l.token, leaseEnd(l));
  }
}
