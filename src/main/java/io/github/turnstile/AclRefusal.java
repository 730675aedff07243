package io.github.turnstile;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Redis refused a command to this client's user (an ACL {@code NOPERM}): the user lacks the
 * command, a key pattern or a channel pattern that Turnstile needs (docs/ACL.md, "Least privilege").
 * It is a configuration error, never an outage: it is reported to the caller at once, never
 * retried, and its message names the refused command.
 *
 * <p>Redis words the refusal differently by version and by where the command ran:
 * <ul>
 *   <li>a command sent by the client: {@code NOPERM this user has no permissions to run the
 *       'blmove' command} (6.2, 7.0), {@code NOPERM User u has no permissions to run the 'blmove'
 *       command} (7.2+), or, for a key or channel outside the user's patterns, a message that
 *       names neither (then the command sent is named);</li>
 *   <li>a command inside a script: 7.2+ names it ({@code ERR ACL failure in script: User u has no
 *       permissions to run the 'time' command script: ..., on @user_script:73.}); 6.2 and 7.0 give
 *       only the script line ({@code ERR The user executing the script can't run this command or
 *       subcommand script: ..., on @user_script:73.}), so the command is read from that line of
 *       the script's source.</li>
 * </ul>
 */
final class AclRefusal extends TurnstileException {
  private static final long serialVersionUID = 1L;

  private static final Pattern NAMED = Pattern.compile("'([^' ]+)' command");
  private static final Pattern SCRIPT_LINE = Pattern.compile("@user_script:\\s*(\\d+)");
  private static final Pattern LITERAL_CALL =
      Pattern.compile("redis\\.p?call\\(\\s*['\"]([A-Za-z|]+)['\"]");
  private static final Pattern ANY_CALL = Pattern.compile("redis\\.p?call\\(");

  /** The refused command, lower case as Redis names it ({@code "blmove"}, {@code "client|setname"}). */
  final String command;

  private AclRefusal(String message, String command, Throwable cause) {
    super(message, cause);
    this.command = command;
  }

  /** Returns whether {@code message} is Redis refusing a command to this user (ACL). */
  static boolean isRefusal(String message) {
    return message != null && (message.startsWith("NOPERM")
        || message.contains("ACL failure in script")
        || message.contains("The user executing the script can't"));
  }

  /**
   * The refusal in {@code error} (or in one of its causes) as the exception the caller gets, or
   * null if {@code error} is no ACL refusal.
   *
   * @param sent the command the client sent, lower case: named when Redis does not name the
   *     refused one (a key or channel outside the user's patterns); null if unknown
   * @param script the script that was run, or null: a refusal inside it may name only its line
   * @param computed the command a script calls through a variable rather than a literal (the
   *     publish command), or null
   * @return the refusal, or null
   */
  static AclRefusal of(Throwable error, String sent, Script script, String computed) {
    for (Throwable t = error; t != null; t = t.getCause()) {
      if (t instanceof AclRefusal) {
        return (AclRefusal) t;
      }
      String m = t.getMessage();
      if (isRefusal(m) && !(t instanceof TurnstileException)) {
        return refused(t, m, sent, script, computed);
      }
      for (Throwable s : t.getSuppressed()) { // e.g. Lettuce's "cannot retrieve cluster partitions"
        AclRefusal r = of(s, sent, script, computed);
        if (r != null) {
          return r;
        }
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return null;
  }

  private static AclRefusal refused(Throwable t, String message, String sent, Script script, String computed) {
    String command = null;
    String where = "";
    Matcher named = NAMED.matcher(message);
    if (named.find()) {
      command = named.group(1).toLowerCase(Locale.ROOT);
    }
    Matcher line = SCRIPT_LINE.matcher(message);
    if (script != null && line.find()) {
      int n = Integer.parseInt(line.group(1));
      where = " (" + script.name + ".lua line " + n + ")";
      if (command == null) {
        command = commandAt(script.body, n, computed);
      }
    }
    if (command == null) {
      command = sent;
    }
    String what = command == null ? "a command" : "'" + command + "'";
    return new AclRefusal("Redis refused " + what + where + " to this user (ACL): " + message
        + " (see docs/ACL.md, \"Least privilege\")", command, t);
  }

  /** The command(s) line {@code n} of a script calls, e.g. {@code "hget"}, or null if none. */
  static String commandAt(String body, int n, String computed) {
    String[] lines = body.split("\n", -1);
    if (n < 1 || n > lines.length) {
      return null;
    }
    List<String> found = new ArrayList<>();
    Matcher m = LITERAL_CALL.matcher(lines[n - 1]);
    while (m.find()) {
      found.add(m.group(1).toLowerCase(Locale.ROOT));
    }
    int calls = 0;
    Matcher any = ANY_CALL.matcher(lines[n - 1]);
    while (any.find()) {
      calls++;
    }
    if (calls > found.size() && computed != null) {
      found.add(computed.toLowerCase(Locale.ROOT)); // the one command scripts get as an argument
    }
    return found.isEmpty() ? null : String.join("' or '", found);
  }

  /** Returns this refusal with {@code what} (e.g. "lock 'orders:42'") in front of its message. */
  AclRefusal in(String what) {
    return new AclRefusal(what + ": " + getMessage(), command, getCause());
  }
}
