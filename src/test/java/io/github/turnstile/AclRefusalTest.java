package io.github.turnstile;

import static io.github.turnstile.TestSupport.millisSince;
import static io.github.turnstile.TestSupport.unique;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.turnstile.testing.LeastPrivilege;
import io.github.turnstile.testing.LeastPrivilege.Deployment;
import io.github.turnstile.testing.RedisServerProcess;
import io.lettuce.core.RedisCommandExecutionException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.function.Executable;

/**
 * A user that lacks one permission of the README's line gets a {@link TurnstileException} that
 * names the refused command, at once: never after waiting through the outage tolerance (60 s
 * here), from {@code lock()}, {@code acquire()} and the timed and untimed tries alike; and a
 * refusal leaves nothing behind (no blocked connection, no permit taken). Then the messages of
 * Redis 6.2, 7.0 and 7.2+ are each mapped to the command.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class AclRefusalTest {
  /** Far below the outage tolerance: a refusal is reported, not waited out. */
  private static final long PROMPT_MS = 5_000;
  private static final String PASSWORD = "acl-refusal-test";

  private RedisServerProcess server;
  /** A client of the README's full user: holds what the restricted clients wait for. */
  private Turnstile full;
  private final List<Turnstile> opened = new ArrayList<>();
  private int users;

  @BeforeAll
  void start() {
    server = RedisServerProcess.start();
    LeastPrivilege.createUser(server, Deployment.STANDALONE, "full", PASSWORD, r -> r);
    full = Turnstile.connect(uri("full"));
  }

  @AfterEach
  void closeRestricted() {
    opened.forEach(Turnstile::close);
    opened.clear();
  }

  @AfterAll
  void stop() {
    if (full != null) {
      full.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private String uri(String user) {
    return "redis://" + user + ":" + PASSWORD + "@" + server.host() + ":" + server.port();
  }

  /** The README's rules without {@code rule} (which must be there). */
  private static UnaryOperator<List<String>> without(String rule) {
    return rules -> {
      List<String> out = new ArrayList<>(rules);
      assertTrue(out.remove(rule), "the README line grants " + rule);
      return out;
    };
  }

  /** A Turnstile connected as a new user: the README's line, edited. */
  private Turnstile restricted(UnaryOperator<List<String>> edit) {
    return restricted(edit, TurnstileOptions.builder());
  }

  private Turnstile restricted(UnaryOperator<List<String>> edit, TurnstileOptions.Builder options) {
    String user = "restricted-" + (++users);
    LeastPrivilege.createUser(server, Deployment.STANDALONE, user, PASSWORD, edit);
    Turnstile t = Turnstile.connect(uri(user), options.outageTolerance(Duration.ofSeconds(60)).build());
    opened.add(t);
    return t;
  }

  /** Takes {@code command} away from the last user made by {@link #restricted}, as an operator may while it holds. */
  private void revoke(String command) {
    assertEquals("OK", server.command("ACL", "SETUSER", "restricted-" + users, "-" + command));
  }

  /**
   * {@code call} throws at once a TurnstileException naming {@code command} (for a subcommand on
   * Redis 6.2, whose refusal names only the container, {@code client}: that is what is named).
   */
  private TurnstileException assertRefused(String command, Executable call) {
    long start = System.nanoTime();
    TurnstileException e = assertThrows(TurnstileException.class, call);
    long ms = millisSince(start);
    String named = command.contains("|") && LeastPrivilege.major(server.version()) < 7
        ? command.substring(0, command.indexOf('|')) : command;
    assertTrue(e.getMessage().contains("Redis refused '" + named + "'")
        && e.getMessage().contains("(ACL)"), "names the refused command '" + named + "': " + e.getMessage());
    assertTrue(ms < PROMPT_MS, "refused at once, not waited out: " + ms + " ms; " + e.getMessage());
    return e;
  }

  private long blockedClients() {
    String info = server.command("INFO", "clients");
    for (String line : info.split("\r?\n")) {
      if (line.startsWith("blocked_clients:")) {
        return Long.parseLong(line.substring("blocked_clients:".length()).trim());
      }
    }
    throw new AssertionError(info);
  }

  // ---------------------------------------------------------------- against Redis

  @Test
  void withoutEvalsha() {
    Turnstile t = restricted(without("+evalsha"));
    DistributedLock lock = t.lock(unique("no-evalsha"));
    assertRefused("evalsha", lock::lock);
    assertRefused("evalsha", lock::lockInterruptibly);
    assertRefused("evalsha", () -> lock.tryLock(10, TimeUnit.SECONDS));
    assertRefused("evalsha", lock::tryLock);
    assertEquals(0, lock.getHoldCount());
    assertRefused("evalsha", () -> t.semaphore(unique("no-evalsha"), 1));
    assertRefused("evalsha", () -> t.readWriteLock(unique("no-evalsha")).readLock().lock());
  }

  @Test
  void withoutBlpop() throws Exception {
    String name = unique("no-blpop");
    DistributedLock held = full.lock(name);
    held.lock();
    try {
      DistributedLock lock = restricted(without("+blpop")).lock(name);
      assertRefused("blpop", lock::lock);
      assertRefused("blpop", () -> lock.tryLock(10, TimeUnit.SECONDS));
      assertEquals(0, lock.getHoldCount());
      assertEquals(0, blockedClients(), "no connection left blocked");
    } finally {
      held.unlock();
    }
  }

  /**
   * A grant that Redis stops part-way is undone. Without {@code PEXPIRE}, the first grant of a new
   * lock writes its record ({@code HSET}) and is then refused at the expiry: Redis does not roll
   * a script back, so the lock was left held, with no expiry, by a request whose caller got the
   * refusal (CHANGELOG.md: a grant refused part-way by the ACL). The attempt is now cancelled by
   * its request id: a user with the whole line then takes the lock at once, by every kind of call.
   */
  @Test
  void aGrantRefusedPartWayLeavesNothingHeld() throws Exception {
    Turnstile t = restricted(without("+pexpire"));
    List<Executable> kinds = new ArrayList<>();
    List<String> names = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      names.add(unique("refused-part-way-" + i));
    }
    kinds.add(() -> t.lock(names.get(0)).tryLock());
    kinds.add(() -> t.lock(names.get(1)).lock());
    kinds.add(() -> t.lock(names.get(2)).tryLock(10, TimeUnit.SECONDS));
    kinds.add(() -> {
      try {
        t.lock(names.get(3)).tryLockAsync(10, TimeUnit.SECONDS).get(10, TimeUnit.SECONDS);
      } catch (java.util.concurrent.ExecutionException e) {
        throw e.getCause();
      }
    });
    for (int i = 0; i < kinds.size(); i++) {
      assertRefused("pexpire", kinds.get(i));
      String lockKey = ((RedisLock) t.lock(names.get(i))).lockKey;
      TestSupport.await("the half-made grant " + i + " undone", Duration.ofSeconds(10),
          () -> "0".equals(server.command("HEXISTS", lockKey, "o")));
      DistributedLock theirs = full.lock(names.get(i));
      assertTrue(theirs.tryLock(), "lock " + i + " free for a user with the whole line");
      theirs.unlock();
    }
  }

  /**
   * A release that the ACL would refuse part-way changes nothing. Redis does not roll a script
   * back: lock_release.lua removed the owner ({@code HDEL}), then was refused the wake token
   * ({@code RPUSH}), so the lock lay free while its waiter slept in {@code BLPOP} until its slice
   * ended. Now the release asks the ACL first (Redis 7.0+) and is refused before its first write:
   * the lock stays held until its lease runs out, and then the waiter takes it.
   */
  @Test
  void aLockReleaseRefusedPartWayChangesNothing() throws Exception {
    assumeAclCheck();
    String name = unique("release-refused");
    Turnstile t = restricted(r -> r, TurnstileOptions.builder().lockCaching(false).leaseTime(Duration.ofSeconds(3)));
    DistributedLock mine = t.lock(name);
    mine.lock();
    AtomicLong acquired = new AtomicLong();
    Thread waiter = TestSupport.start("waiter", () -> {
      DistributedLock theirs = full.lock(name);
      theirs.lock();
      acquired.set(System.nanoTime());
      theirs.unlock();
    });
    TestSupport.await("the waiter blocked in Redis", Duration.ofSeconds(10), () -> blockedClients() == 1);
    revoke("rpush");
    assertRefused("rpush", mine::unlock);
    String lockKey = ((RedisLock) mine).lockKey;
    assertEquals("1", server.command("HEXISTS", lockKey, "o"), "still held: the refused release changed nothing");
    assertEquals(0, acquired.get(), "the waiter waits for the lease");
    waiter.join(TimeUnit.SECONDS.toMillis(30));
    assertTrue(acquired.get() != 0, "the waiter took the lock when the lease ran out");
  }

  /**
   * The last reader out while a writer waits asks for the writer's wake-up before it writes: without
   * {@code RPUSH} the read release removed the reader and was then refused the writer's token, so
   * the lock lay free with the writer asleep in {@code BLPOP}. Now nothing changes, and the writer
   * takes the lock when the read lease runs out.
   */
  @Test
  void aLastReadReleaseRefusedPartWayChangesNothing() throws Exception {
    assumeAclCheck();
    String name = unique("runlock-refused");
    Turnstile t = restricted(r -> r, TurnstileOptions.builder().leaseTime(Duration.ofSeconds(3)));
    DistributedReadWriteLock mine = t.readWriteLock(name);
    mine.readLock().lock();
    AtomicLong acquired = new AtomicLong();
    Thread writer = TestSupport.start("writer", () -> {
      DistributedReadWriteLock theirs = full.readWriteLock(name);
      theirs.writeLock().lock();
      acquired.set(System.nanoTime());
      theirs.writeLock().unlock();
    });
    TestSupport.await("the writer blocked in Redis", Duration.ofSeconds(10), () -> blockedClients() == 1);
    revoke("rpush");
    assertRefused("rpush", () -> mine.readLock().unlock());
    assertEquals("1", server.command("ZCARD", "{turnstile:" + name + "}:rw:readers"),
        "still a reader: the refused release changed nothing");
    writer.join(TimeUnit.SECONDS.toMillis(30));
    assertTrue(acquired.get() != 0, "the writer took the lock when the read lease ran out");
  }

  /**
   * The same for a semaphore: a release with a waiter of another client runs semaphore.lua, which
   * freed the permit ({@code HSET}) and was then refused its memo ({@code SET}): the permit was
   * back in Redis while the caller was told the release failed. Now nothing changes.
   */
  @Test
  void aSemaphoreReleaseRefusedPartWayChangesNothing() throws Exception {
    assumeAclCheck();
    String name = unique("sem-release-refused");
    Turnstile t = restricted(r -> r, TurnstileOptions.builder().leaseTime(Duration.ofSeconds(3)));
    DistributedSemaphore mine = t.semaphore(name, 1);
    mine.acquire();
    AtomicLong acquired = new AtomicLong();
    Thread waiter = TestSupport.start("waiter", () -> {
      DistributedSemaphore theirs = full.semaphore(name, 1);
      theirs.acquire();
      acquired.set(System.nanoTime());
      theirs.release();
    });
    TestSupport.await("the waiter blocked in Redis", Duration.ofSeconds(10), () -> blockedClients() == 1);
    revoke("set");
    assertRefused("set", mine::release);
    String state = "{turnstile:" + name + "}:s";
    assertEquals("0", server.command("HGET", state, "a"), "no permit freed by the refused release");
    assertEquals("1", server.command("HGET", state, "c:" + t.clientId()), "still held: nothing changed");
    waiter.join(TimeUnit.SECONDS.toMillis(30));
    assertTrue(acquired.get() != 0, "the waiter took the permit when the registration ran out");
  }

  /**
   * A counting semaphore's uncontended calls run semaphore_fast.lua, which writes twice (the memo
   * key, then the free permits): without {@code HSET} it is refused before its first write, so no
   * memo says "granted" or "released" for a call that changed no permit; without {@code SET} the
   * first write itself is refused. Either way nothing changes, and with the ACL whole again the
   * semaphore is exact.
   */
  @Test
  void aCountingCallRefusedPartWayChangesNothing() throws Exception {
    assumeAclCheck();
    String name = unique("csem-refused");
    String state = "{turnstile:" + name + "}:s";
    Turnstile t = restricted(r -> r);
    DistributedSemaphore sem = t.countingSemaphore(name, 2);
    assertTrue(sem.tryAcquire()); // the scripts loaded, the state made
    java.util.Map<String, String> memos = memos(name);
    for (String command : new String[] {"hset", "set"}) {
      revoke(command);
      assertRefused(command, sem::tryAcquire);
      assertRefused(command, sem::release);
      assertEquals("1", server.command("HGET", state, "a"), "no permit moved without " + command);
      assertEquals(memos, memos(name), "no memo written without " + command);
      assertEquals("OK", server.command("ACL", "SETUSER", "restricted-" + users, "+" + command));
    }
    sem.release();
    assertEquals(2, sem.availablePermits());
  }

  /** The memo keys of the semaphore {@code name}, with their values. */
  private java.util.Map<String, String> memos(String name) {
    java.util.Map<String, String> m = new java.util.TreeMap<>();
    for (String key : server.command("KEYS", "{turnstile:" + name + "}:s:q:*").split("\\R")) {
      if (!key.isBlank()) {
        m.put(key.trim(), server.command("GET", key.trim()));
      }
    }
    return m;
  }

  /**
   * A renewal that the ACL refuses for one lease of a batch renews the others. renew.lua renews
   * every lease of a client in one call; without {@code ZADD} (a semaphore registration's renewal)
   * the whole call failed, part-way, so the client's lock lease went unconfirmed and was declared
   * lost after one lease. Now renew.lua asks first and answers the refusal for that lease alone.
   */
  @Test
  void aRenewalRefusedForOneLeaseRenewsTheOthers() throws Exception {
    assumeAclCheck();
    List<LeaseLostEvent> lost = new java.util.concurrent.CopyOnWriteArrayList<>();
    Turnstile t = restricted(r -> r, TurnstileOptions.builder().leaseTime(Duration.ofSeconds(2))
        .leaseLossListener(lost::add));
    String name = unique("renew-refused");
    DistributedLock lock = t.lock(name);
    lock.lock();
    DistributedSemaphore sem = t.semaphore(name, 1);
    sem.acquire();
    revoke("zadd");
    long token = lock.fencingToken();
    // three leases: without its renewals the lock's lease would be gone, in Redis and here
    Thread.sleep(6_000);
    assertTrue(lost.stream().noneMatch(e -> e.fencingToken() == token),
        "the lock's lease renewed all along: " + lost);
    assertEquals("1", server.command("HEXISTS", ((RedisLock) lock).lockKey, "o"), "held in Redis");
    lock.unlock();
  }

  /** {@code redis.acl_check_cmd}, which the scripts ask before their first write, is in Redis 7.0 and later. */
  private void assumeAclCheck() {
    org.junit.jupiter.api.Assumptions.assumeTrue(LeastPrivilege.major(server.version()) >= 7,
        "Redis " + server.version() + " has no redis.acl_check_cmd: a refusal part-way is not undone there");
  }

  /** A semaphore waiter blocks on the wake list as a lock waiter does: without BLPOP it is refused at once. */
  @Test
  void semaphoreWaiterWithoutBlpop() throws Exception {
    String name = unique("sem-no-blpop");
    DistributedSemaphore taken = full.semaphore(name, 1);
    taken.acquire();
    DistributedSemaphore sem = restricted(without("+blpop")).semaphore(name, 1);
    try {
      assertRefused("blpop", sem::acquire);
      assertRefused("blpop", sem::acquireUninterruptibly);
      assertRefused("blpop", () -> sem.tryAcquire(10, TimeUnit.SECONDS));
      assertEquals(0, sem.getQueueLength(), "no thread left waiting");
      assertEquals(0, blockedClients(), "no connection left blocked");
    } finally {
      taken.release();
    }
    assertEquals(1, sem.availablePermits(), "the refusals took no permit");
    assertTrue(sem.tryAcquire(), "a free permit is taken without BLPOP");
    sem.release();
  }

  /** Without the channel pattern, a waiter by pub/sub (a reader always is) is refused SUBSCRIBE. */
  @Test
  void withoutChannelPattern() throws Exception {
    String name = unique("no-channel");
    DistributedReadWriteLock held = full.readWriteLock(name);
    held.writeLock().lock();
    try {
      DistributedReadWriteLock rw = restricted(without("&{turnstile:*")).readWriteLock(name);
      TurnstileException e = assertRefused("subscribe", () -> rw.readLock().lock());
      assertTrue(e.getMessage().contains("channel"), e.getMessage());
      assertRefused("subscribe", () -> rw.readLock().tryLock(10, TimeUnit.SECONDS));
      assertEquals(0, rw.getReadHoldCount());
      // the same for a future: it fails, it does not subscribe again and again (it spun on the
      // refused SUBSCRIBE, a reply thread at 100 % CPU, before)
      assertRefused("subscribe", () -> {
        try {
          rw.readLock().lockAsync().get(10, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException x) {
          throw x.getCause();
        }
      });
    } finally {
      held.writeLock().unlock();
    }
  }

  /**
   * A user whose key pattern leaves out the identity records ({@code {turnstile:}:client:...}):
   * connect returns (the record's write at connect is refused once, in {@code ACL LOG}, and not
   * sent again), locks work, and inspections name its holds by client id only.
   */
  @Test
  void withoutTheIdentityRecordsKeys() throws Exception {
    String name = unique("kept-no-identity");
    long start = System.nanoTime();
    Turnstile t = restricted(rules -> {
      List<String> out = new ArrayList<>(rules);
      assertTrue(out.remove("~{turnstile:*"), "the README line's key pattern");
      out.add("~{turnstile:kept-*");
      return out;
    });
    long connectMs = millisSince(start);
    assertTrue(connectMs < PROMPT_MS, "connected at once, not held up by the refusal: " + connectMs + " ms");
    String record = Identity.key("turnstile", t.clientId());
    DistributedLock lock = t.lock(name);
    lock.lock();
    try {
      Inspection seen = full.inspect(Inspection.Kind.LOCK, name);
      assertTrue(seen.isHeld(), seen.toString());
      assertEquals(t.clientId(), seen.holders().get(0).clientId(), seen.toString());
      assertNull(seen.holders().get(0).clientName(), "no identity record to name it by: " + seen);
    } finally {
      lock.unlock();
    }
    assertEquals("0", server.command("EXISTS", record));
    List<String> refused = LeastPrivilege.refusals(server.command("ACL", "LOG")).stream()
        .filter(r -> r.endsWith(" " + "restricted-" + users)).toList();
    assertEquals(1, refused.size(), "one refusal, the record's write at connect: " + refused);
    assertTrue(refused.get(0).contains(record), refused.toString());
  }

  /** A command inside a script: Redis 6.2/7.0 name only the line, Turnstile reads the command there. */
  @Test
  void withoutACommandOfAScript() {
    DistributedLock lock = restricted(without("+time")).lock(unique("no-time"));
    TurnstileException e = assertRefused("time", lock::lock);
    // the script calls TIME on two lines (its usual grant is written out first): either is named
    assertTrue(linesOf(Script.LOCK_ACQUIRE, "redis.call('TIME')").stream()
            .anyMatch(line -> e.getMessage().contains("lock_acquire.lua line " + line + ")")), e.getMessage());
  }

  /** The computed command of a script (the publish command), in a write release that wakes readers. */
  @Test
  void withoutPublish() throws Exception {
    String name = unique("no-publish");
    DistributedReadWriteLock rw = restricted(without("+publish")).readWriteLock(name);
    rw.writeLock().lock();
    DistributedReadWriteLock other = full.readWriteLock(name);
    Thread reader = TestSupport.start("reader", () -> other.readLock().tryLock(1, TimeUnit.SECONDS));
    TestSupport.await("the reader to wait", Duration.ofSeconds(5),
        () -> "1".equals(server.command("ZCARD", "{turnstile:" + name + "}:rw:rwait")));
    TurnstileException e = assertRefused("publish", () -> rw.writeLock().unlock());
    if (LeastPrivilege.major(server.version()) >= 7) {
      // asked before the release's first write: the write lock is still held, until its lease ends
      // (it was released, and the waiting reader not woken, before)
      assertEquals("1", server.command("HEXISTS", "{turnstile:" + name + "}:rw:w", "o"), e.getMessage());
    } else {
      assertTrue(e.getMessage().contains("rwlock.lua line " + lineOf(Script.RWLOCK, "redis.call(publish, prefix .. 'rch'")),
          e.getMessage());
    }
    reader.join();
  }

  /**
   * The optional commands are no refusal: without {@code client|setname} (and, as in the README's
   * default line, without {@code client|id} and {@code client|unblock}) a client connects and waits
   * in Redis. Before the least-privilege work both failed: connecting (no {@code CLIENT SETNAME}) or waiting (no
   * {@code CLIENT ID} for a blocking connection) threw the refusal. {@code NoAdminTest} has the
   * rest.
   */
  @Test
  void withoutTheOptionalCommands() throws Exception {
    String name = unique("no-optional");
    DistributedLock held = full.lock(name);
    held.lock();
    DistributedLock lock = restricted(without("+client|setname")).lock(name);
    assertFalse(lock.tryLock(100, TimeUnit.MILLISECONDS), "waited in Redis, and timed out");
    held.unlock();
    assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
    lock.unlock();
  }

  private static java.util.List<Integer> linesOf(Script s, String text) {
    java.util.List<Integer> found = new java.util.ArrayList<>();
    String[] lines = s.body.split("\n", -1);
    for (int i = 0; i < lines.length; i++) {
      if (lines[i].contains(text)) {
        found.add(i + 1);
      }
    }
    return found;
  }

  private static int lineOf(Script s, String text) {
    String[] lines = s.body.split("\n", -1);
    for (int i = 0; i < lines.length; i++) {
      if (lines[i].contains(text)) {
        return i + 1;
      }
    }
    throw new AssertionError(text + " not in " + s);
  }

  // ---------------------------------------------------------------- the messages of each Redis version

  private static AclRefusal map(String message, String sent, Script script) {
    return AclRefusal.of(new RedisCommandExecutionException(message), sent, script, "PUBLISH");
  }

  @Test
  void plainCommandRefusals() {
    assertEquals("blmove", map("NOPERM this user has no permissions to run the 'blmove' command", null, null).command);
    assertEquals("blmove", map("NOPERM User turnstile has no permissions to run the 'blmove' command", null, null).command);
    assertEquals("blpop", map("NOPERM this user has no permissions to run the 'blpop' command or its subcommand",
        null, null).command);
    assertEquals("client|id", map("NOPERM this user has no permissions to run the 'client|id' command", null, null)
        .command);
    assertEquals("client", map("NOPERM this user has no permissions to run the 'client' command or its subcommand",
        null, null).command, "Redis 6.2 names only the container of a subcommand");
    // a key or channel outside the user's patterns: the message names no command, so the one sent is named
    assertEquals("evalsha", map("NOPERM this user has no permissions to access one of the keys used as arguments",
        "evalsha", null).command);
    assertEquals("subscribe", map("NOPERM No permissions to access a channel", "subscribe", null).command);
    AclRefusal unnamed = map("NOPERM No permissions to access a key", null, null);
    assertNull(unnamed.command);
    assertTrue(unnamed.getMessage().startsWith("Redis refused a command to this user (ACL): NOPERM"), unnamed.getMessage());
  }

  @Test
  void scriptRefusalsOfEachVersion() {
    int time = lineOf(Script.LOCK_ACQUIRE, "redis.call('TIME')");
    String sha = Script.LOCK_ACQUIRE.sha;
    for (String message : List.of(
        // 7.0
        "ERR The user executing the script can't run this command or subcommand script: " + sha
            + ", on @user_script:" + time + ".",
        // 6.2
        "ERR Error running script (call to f_" + sha + "): @user_script:" + time + ": @user_script: " + time
            + ": The user executing the script can't run this command or subcommand",
        // 7.2 and later name the command themselves
        "ERR ACL failure in script: User turnstile has no permissions to run the 'time' command script: " + sha
            + ", on @user_script:" + time + ".")) {
      AclRefusal r = map(message, "evalsha", Script.LOCK_ACQUIRE);
      assertEquals("time", r.command, message);
      assertTrue(r.getMessage().startsWith("Redis refused 'time' (lock_acquire.lua line " + time + ") to this user (ACL): "),
          r.getMessage());
    }
    // a key outside the patterns, inside a script (7.0): the command on that line
    int hmget = lineOf(Script.LOCK_ACQUIRE, "redis.call('HMGET'");
    assertEquals("hmget", map("ERR The user executing the script can't access at least one of the keys mentioned in"
        + " the command arguments script: x, on @user_script:" + hmget + ".", "evalsha", Script.LOCK_ACQUIRE).command);
    // the computed command: the publish command
    int publish = lineOf(Script.LOCK_RELEASE, "redis.call(publish");
    assertEquals("publish", map("ERR The user executing the script can't publish to the channel mentioned in the"
        + " command script: x, on @user_script:" + publish + ".", "evalsha", Script.LOCK_RELEASE).command);
  }

  @Test
  void otherErrorsAreNoRefusals() {
    assertNull(map("ERR wrong number of arguments for 'evalsha' command", "evalsha", null));
    assertNull(map("LOADING Redis is loading the dataset in memory", null, null));
    assertNull(AclRefusal.of(new TurnstileException("cannot talk: The user executing the script can't"), null, null,
        null), "only Redis's own errors are read");
    assertFalse(Engine.isTransient(new RedisCommandExecutionException("NOPERM this user has no permissions to run"
        + " the 'blpop' command")), "a refusal is no outage");
    assertFalse(Engine.isTransient(map("NOPERM this user has no permissions to run the 'blpop' command", null, null)));
    // wrapped by a connection's set-up: found in the cause, prefixed once per layer that names itself
    TurnstileException setup = new TurnstileException("cannot set up a blocking connection: NOPERM ...",
        new RedisCommandExecutionException("NOPERM this user has no permissions to run the 'client|id' command"));
    AclRefusal r = AclRefusal.of(setup, null, null, null);
    assertEquals("client|id", r.command);
    assertEquals("lock 'x': " + r.getMessage(), Engine.failure("lock 'x'", r).getMessage());
  }
}
