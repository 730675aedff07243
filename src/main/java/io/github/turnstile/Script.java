package io.github.turnstile;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** A Lua script loaded from a {@code .lua} resource, with its SHA-1 for EVALSHA. */
final class Script {
  static final Script LOCK_ACQUIRE = load("lock_acquire");
  static final Script LOCK_RELEASE = load("lock_release");
  static final Script LOCK_PASS = load("lock_pass");
  static final Script LOCK_BUSY = load("lock_busy");
  static final Script RENEW = load("renew");
  static final Script SEMAPHORE = load("semaphore");
  static final Script SEMAPHORE_FAST = load("semaphore_fast");
  static final Script RWLOCK = load("rwlock");
  static final Script INSPECT = load("inspect");
  static final Script IDENTITY = load("identity");

  final String name;
  final String body;
  final String sha;

  private Script(String name, String body) {
    this.name = name;
    this.body = body;
    this.sha = sha1(body);
  }

  static Script load(String name) {
    String resource = "lua/" + name + ".lua";
    try (InputStream in = Script.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("missing script resource " + resource);
      }
      return new Script(name, new String(in.readAllBytes(), StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new IllegalStateException("cannot read script resource " + resource, e);
    }
  }

  private static String sha1(String body) {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-1");
      return HexFormat.of().formatHex(md.digest(body.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String toString() {
    return name + ".lua(" + sha.substring(0, 8) + ")";
  }
}
