package io.github.turnstile.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The one place that says which Redis commands Turnstile needs, for the {@code ACL SETUSER}
 * lines of docs/ACL.md (which the README links to) and the tests that hold those lines to it.
 *
 * <p>The commands come from three places: Lettuce itself when it connects, Turnstile's Java code
 * (both listed here by hand, per deployment), and the Lua scripts (read from
 * {@code src/main/resources/io/github/turnstile/lua/*.lua}: every {@code redis.call('X', ...)}).
 * A script may compute its command only for the publish command, passed as an argument that the
 * script's header documents as "the publish command" ({@code PUBLISH}, or {@code SPUBLISH} on a
 * Redis 7 Cluster); any other computed command fails {@link #scriptCommands()}.
 *
 * <p>Some of the Java code's commands are <b>optional</b> ({@link #optional}): Turnstile uses them
 * when Redis lets it and does without them otherwise, detecting a refusal once per client. The
 * README's default lines leave them out (with every {@code @admin} and {@code @dangerous} command)
 * and its optional line grants them, saying what each buys.
 *
 * <p>A new command in a script, or in the lists below, makes {@code AclLineTest} fail until the
 * README's lines say the same; the contract suites then run as the user those lines create.
 */
public final class LeastPrivilege {
    private LeastPrivilege() {}

    /** The deployments with a line of their own in the README. */
    public enum Deployment {
        /** One server, or the data nodes of a Sentinel deployment. */
        STANDALONE,
        /** A Redis Cluster of Redis 7 or later (sharded pub/sub). */
        CLUSTER
    }

    /** The README's user name. */
    public static final String USER = "turnstile";

    /**
     * Commands sent by Turnstile's Java code and by Lettuce, on one server or a Sentinel
     * deployment's data nodes, each with why. Lettuce's own {@code HELLO 3 AUTH user password}
     * needs no permission (Redis lets every user authenticate), nor does Lettuce's
     * {@code CLIENT SETINFO} on Redis 7.2+ (sent fire-and-forget, its refusal ignored).
     */
    private static final Map<String, String> STANDALONE_CLIENT = ordered(
            "client|setname", "Turnstile names every connection (CLIENT LIST shows turnstile:<id>:...)",
            "client|id", "optional: the id of a blocking connection, to unblock it, where the RESP3 handshake did not give it",
            "client|unblock", "optional: a waiter that gives up (deadline, interrupt, recovery, close) ends its BLPOP"
                    + " and keeps the connection",
            "evalsha", "every script",
            "eval", "a script after NOSCRIPT (restart, SCRIPT FLUSH)",
            "blpop", "lock, write-lock and semaphore waiters block on the wake list",
            "hset", "a lock waiter that queues without attempting marks its client as waiting",
            "hdel", "a lock waiter that gives up clears that mark",
            "hexists", "isLocked()",
            "pexpire", "replicaAcks: the write that WAIT then counts",
            "wait", "optional: replicaAcks only",
            "subscribe", "waiters past the blocking pool, and readers, wait by pub/sub",
            "unsubscribe", "the last local waiter on a channel leaves it");

    /** As {@link #STANDALONE_CLIENT}, on a Redis 7 Cluster. */
    private static final Map<String, String> CLUSTER_CLIENT = ordered(
            "client|setname", "Turnstile names its blocking and subscriber connections; Lettuce names its topology"
                    + " refresh connections",
            "client|id", "optional: the id of a blocking connection, to unblock it, where the RESP3 handshake did not give it",
            "client|unblock", "optional: a waiter that gives up ends its BLPOP and keeps the connection",
            "evalsha", "every script",
            "eval", "a script after NOSCRIPT (restart, SCRIPT FLUSH)",
            "blpop", "lock, write-lock and semaphore waiters block on the wake list",
            "hset", "a lock waiter that queues without attempting marks its client as waiting",
            "hdel", "a lock waiter that gives up clears that mark",
            "hexists", "isLocked()",
            "pexpire", "replicaAcks: the write that WAIT then counts",
            "wait", "optional: replicaAcks only",
            "ssubscribe", "waiters past the blocking pool, and readers, wait by sharded pub/sub",
            "sunsubscribe", "the last local waiter on a shard channel leaves it",
            "ping", "Turnstile checks the cluster connection when it connects",
            "info", "optional: Lettuce's topology refresh reads INFO of every node (and goes on without it); Turnstile"
                    + " reads the server version there only where the RESP3 handshake did not give it",
            "cluster|nodes", "Lettuce's topology refresh",
            "cluster|myid", "Lettuce's cluster connection asks its node's id when it connects (to drop stale ones)",
            "asking", "Lettuce follows ASK redirects while a slot migrates");

    /**
     * The commands Turnstile does without where Redis refuses them (each detected once per client), with
     * what granting each buys: the README's optional line. Every {@code @admin} and {@code @dangerous}
     * command Turnstile or Lettuce sends is among them.
     */
    private static final Map<String, String> OPTIONAL = ordered(
            "client|unblock", "(@admin) a waiter that gives up (deadline, interrupt, recovery event, close) ends its"
                    + " blocking command and keeps its connection; without it the connection is closed and a new one"
                    + " opened when next needed",
            "client|id", "with +client|unblock, where the connection's handshake is RESP2 (RESP3's HELLO gives the id)",
            "wait", "replicaAcks(n, timeout); without it, connecting with replicaAcks fails at once",
            "info", "(@dangerous; Cluster) Lettuce's topology refresh reads it on every node and goes on without it,"
                    + " but each refusal shows in ACL LOG");

    /**
     * Returns the optional commands of {@code d}, with what granting each buys.
     *
     * @param d the deployment
     * @return command to what it buys
     */
    public static Map<String, String> optional(Deployment d) {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : OPTIONAL.entrySet()) {
            if (clientCommands(d).containsKey(e.getKey())) {
                out.put(e.getKey(), e.getValue());
            }
        }
        return out;
    }

    /**
     * Returns every optional command, of any deployment (the README's optional line).
     *
     * @return command to what it buys
     */
    public static Map<String, String> optional() {
        return OPTIONAL;
    }

    /** The command scripts publish with: {@code publish}, or {@code spublish} on a Redis 7 Cluster. */
    public static String publishCommand(Deployment d) {
        return d == Deployment.CLUSTER ? "spublish" : "publish";
    }

    private static Map<String, String> ordered(String... pairs) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return Collections.unmodifiableMap(m);
    }

    /**
     * Returns the commands Turnstile's Java code and Lettuce send, with why.
     *
     * @param d the deployment
     * @return command (lower case, {@code container|sub} for subcommands) to the reason it is needed
     */
    public static Map<String, String> clientCommands(Deployment d) {
        return d == Deployment.CLUSTER ? CLUSTER_CLIENT : STANDALONE_CLIENT;
    }

    // ------------------------------------------------------------------ the scripts

    private static final Pattern CALL = Pattern.compile("redis\\.p?call\\(\\s*");
    private static final Pattern LITERAL = Pattern.compile("['\"]([A-Za-z|]+)['\"]");
    private static final Pattern EXPRESSION = Pattern.compile("([A-Za-z_][A-Za-z0-9_]*(?:\\[\\d+\\])?)");
    private static final Pattern LOCALS = Pattern.compile("(?m)^[ \\t]*local[ \\t]+([A-Za-z_][\\w, \\t]*?)[ \\t]*=[ \\t]*(.+)$");

    /** The directory of the scripts, from the project's base directory. */
    public static Path scriptDir() {
        return baseDir().resolve("src/main/resources/io/github/turnstile/lua");
    }

    private static Path baseDir() {
        String basedir = System.getProperty("basedir");
        return basedir != null ? Path.of(basedir) : Path.of("").toAbsolutePath();
    }

    /**
     * Every command the scripts call, with where ({@code "lock_acquire.lua:35"}). A computed
     * command counts as {@code "<publish>"} when it is the documented publish command; any other
     * computed command throws.
     *
     * @return command (lower case) to the places that call it
     * @throws IllegalStateException if a script computes a command that is not the publish command
     */
    public static Map<String, List<String>> scriptCommands() {
        Map<String, List<String>> out = new TreeMap<>();
        List<Path> scripts;
        try (Stream<Path> files = Files.list(scriptDir())) {
            scripts = files.filter(p -> p.toString().endsWith(".lua")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + scriptDir(), e);
        }
        if (scripts.isEmpty()) {
            throw new IllegalStateException("no .lua script under " + scriptDir());
        }
        for (Path p : scripts) {
            String text;
            try {
                text = Files.readString(p);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            String name = p.getFileName().toString();
            Set<String> publish = publishExpressions(text);
            String[] lines = text.split("\n", -1);
            for (int i = 0; i < lines.length; i++) {
                String code = stripComment(lines[i]);
                Matcher call = CALL.matcher(code);
                while (call.find()) {
                    String rest = code.substring(call.end());
                    String where = name + ":" + (i + 1);
                    Matcher lit = LITERAL.matcher(rest);
                    if (lit.lookingAt()) {
                        out.computeIfAbsent(lit.group(1).toLowerCase(Locale.ROOT), k -> new ArrayList<>()).add(where);
                        continue;
                    }
                    Matcher expr = EXPRESSION.matcher(rest);
                    String e = expr.lookingAt() ? expr.group(1) : rest;
                    if (!publish.contains(e)) {
                        throw new IllegalStateException(where + " calls redis.call(" + e + ", ...): a computed"
                                + " command name. Only the publish command (an ARGV the script's header documents"
                                + " as \"the publish command\", or a local assigned from it) may be computed;"
                                + " write any other command as a literal, so that the ACL test sees it. Line: "
                                + lines[i].trim());
                    }
                    out.computeIfAbsent("<publish>", k -> new ArrayList<>()).add(where);
                }
            }
        }
        return out;
    }

    /** ARGV[n] documented as "the publish command" in the header, and locals assigned from them. */
    private static Set<String> publishExpressions(String text) {
        Set<String> found = new TreeSet<>();
        Matcher doc = Pattern.compile("(?m)^--\\s*(ARGV\\[\\d+\\])\\s+(.*)$").matcher(text);
        while (doc.find()) {
            if (doc.group(2).toLowerCase(Locale.ROOT).contains("publish command")) {
                found.add(doc.group(1));
            }
        }
        Matcher local = LOCALS.matcher(text);
        while (local.find()) {
            String[] names = local.group(1).split("\\s*,\\s*");
            String[] values = stripComment(local.group(2)).split("\\s*,\\s*");
            for (int i = 0; i < Math.min(names.length, values.length); i++) {
                // "ARGV[4] or 'PUBLISH'": the argument, or a default when it is absent
                String value = values[i].trim().replaceFirst("\\s+or\\s+'[A-Z]+'$", "");
                if (found.contains(value)) {
                    found.add(names[i].trim());
                }
            }
        }
        return found;
    }

    /** A Lua line without its {@code --} comment (quotes respected). */
    private static String stripComment(String line) {
        char quote = 0;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quote != 0) {
                if (c == '\\') {
                    i++;
                } else if (c == quote) {
                    quote = 0;
                }
            } else if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == '-' && i + 1 < line.length() && line.charAt(i + 1) == '-') {
                return line.substring(0, i);
            }
        }
        return line;
    }

    /**
     * Returns every command Turnstile needs on {@code d}: the client's and the scripts'.
     *
     * @param d the deployment
     * @return command (lower case) to why or where it is used
     */
    public static Map<String, String> required(Deployment d) {
        Map<String, String> all = new TreeMap<>(clientCommands(d));
        for (Map.Entry<String, List<String>> e : scriptCommands().entrySet()) {
            String cmd = e.getKey().equals("<publish>") ? publishCommand(d) : e.getKey();
            all.merge(cmd, "scripts: " + String.join(", ", e.getValue()), (a, b) -> a + "; " + b);
        }
        return all;
    }

    /**
     * Returns what the README's default line for {@code d} grants: every command Turnstile needs,
     * less the {@link #optional} ones.
     *
     * @param d the deployment
     * @return command (lower case) to why or where it is used
     */
    public static Map<String, String> defaults(Deployment d) {
        Map<String, String> all = new TreeMap<>(required(d));
        all.keySet().removeAll(OPTIONAL.keySet());
        return all;
    }

    // ------------------------------------------------------------------ the README

    /**
     * Returns the default {@code ACL SETUSER} line for {@code d} of docs/ACL.md (the README links to it), split into arguments after
     * {@code ACL SETUSER} (the user name first). The Cluster line is the one whose preceding
     * comment line (a line starting with {@code #}) mentions "Cluster"; there is exactly one of
     * each. The optional line (its comment says "optional") is not one of them: {@link #readmeOptionalLine}.
     *
     * @param d the deployment
     * @return the arguments, e.g. {@code [turnstile, reset, on, >CHANGE-ME, ~{turnstile:*, ...]}
     */
    public static List<String> readmeLine(Deployment d) {
        List<List<String>> found = readmeLines(d == Deployment.CLUSTER ? "Cluster" : null);
        if (found.size() != 1) {
            throw new IllegalStateException("docs/ACL.md should have exactly one ACL SETUSER line for " + d
                    + " (the Cluster one after a '# ... Cluster ...' comment line), found " + found.size());
        }
        return found.get(0);
    }

    /**
     * Returns the README's optional {@code ACL SETUSER} line (after a comment line that says
     * "optional"), split into arguments after {@code ACL SETUSER}: the user name, then the rules it adds
     * to the default line.
     *
     * @return the arguments, e.g. {@code [turnstile, +client|unblock, ...]}
     */
    public static List<String> readmeOptionalLine() {
        List<List<String>> found = readmeLines("optional");
        if (found.size() != 1) {
            throw new IllegalStateException("docs/ACL.md should have exactly one optional ACL SETUSER line (after a"
                    + " '# ... optional ...' comment line), found " + found.size());
        }
        return found.get(0);
    }

    /** The ACL SETUSER lines whose comment says {@code kind} ("Cluster", "optional"), or (null) default lines not for a Cluster. */
    private static List<List<String>> readmeLines(String kind) {
        List<String> lines;
        Path readme = baseDir().resolve("docs").resolve("ACL.md");
        try {
            lines = Files.readAllLines(readme);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + readme, e);
        }
        List<List<String>> found = new ArrayList<>();
        String comment = "";
        for (String line : lines) {
            String t = line.trim();
            if (t.startsWith("#")) {
                comment = t;
            } else if (t.startsWith("ACL SETUSER ")) {
                boolean optional = comment.contains("optional");
                boolean cluster = !optional && comment.contains("Cluster");
                boolean wanted = "optional".equals(kind) ? optional
                        : "Cluster".equals(kind) ? cluster : !optional && !cluster;
                if (wanted) {
                    found.add(List.of(t.substring("ACL SETUSER ".length()).trim().split("\\s+")));
                }
                comment = "";
            } else if (!t.isEmpty()) {
                comment = "";
            }
        }
        return found;
    }

    /**
     * Returns the README line for {@code d} as {@code ACL SETUSER} arguments, with {@code password}
     * in place of the README's placeholder and {@code user} as the user name.
     *
     * @param d the deployment
     * @param user the user name to create
     * @param password the password to set
     * @return {@code ["ACL", "SETUSER", user, ...]}, ready for {@link RedisServerProcess#command}
     */
    public static List<String> setUser(Deployment d, String user, String password) {
        List<String> args = new ArrayList<>(List.of("ACL", "SETUSER", user));
        for (String rule : readmeLine(d).subList(1, readmeLine(d).size())) {
            args.add(rule.startsWith(">") ? ">" + password : rule);
        }
        return args;
    }

    /**
     * Creates {@code user} from the README line on {@code server}, through its default user.
     *
     * @param server the server
     * @param d the deployment whose line to use
     * @param user the user name
     * @param password its password
     * @param edit changes to the rules before they are sent (e.g. remove {@code "+blpop"}); may be empty
     */
    public static void createUser(RedisServerProcess server, Deployment d, String user, String password,
            java.util.function.UnaryOperator<List<String>> edit) {
        List<String> args = edit.apply(setUser(d, user, password));
        createUser(server, user, args);
    }

    /**
     * Creates {@code user} on {@code server} with the README's default line for {@code d} and its
     * optional line: everything Turnstile can use (no refusal in {@code ACL LOG} is expected).
     *
     * @param server the server
     * @param d the deployment whose line to use
     * @param user the user name
     * @param password its password
     */
    public static void createFullUser(RedisServerProcess server, Deployment d, String user, String password) {
        List<String> args = setUser(d, user, password);
        args.addAll(readmeOptionalLine().subList(1, readmeOptionalLine().size()));
        createUser(server, user, args);
    }

    /**
     * The rules of the most restricted user Turnstile works for, as {@code ACL SETUSER} arguments: the
     * README's default line for {@code d} without {@code +client|setname}, so that it lacks every
     * command Turnstile can do without ({@link #WITHOUT}).
     *
     * @param d the deployment
     * @param user the user name
     * @param password its password
     * @return {@code ["ACL", "SETUSER", user, ...]}
     */
    public static List<String> restrictedUser(Deployment d, String user, String password) {
        List<String> args = setUser(d, user, password);
        for (String c : WITHOUT) {
            args.remove("+" + c);
        }
        return args;
    }

    /** What the {@link #restrictedUser} lacks: the commands Turnstile can do without, and {@code client|setname}. */
    public static final List<String> WITHOUT = List.of("client|unblock", "client|id", "client|setname", "info", "wait");

    /**
     * Runs {@code ACL SETUSER} ({@code args}, as {@link #setUser} or {@link #restrictedUser} give
     * them) on {@code server} through its default user.
     *
     * @param server the server
     * @param user the user name, for the message
     * @param args the whole command
     */
    public static void createUser(RedisServerProcess server, String user, List<String> args) {
        String reply = server.command(args.toArray(new String[0]));
        if (!"OK".equals(reply)) {
            throw new IllegalStateException("ACL SETUSER " + user + " failed on " + server + ": " + reply);
        }
    }

    /**
     * Returns the refusals in a server's {@code ACL LOG}, one line each ("reason object context
     * username"), ignoring Lettuce's fire-and-forget {@code CLIENT SETINFO}: logged as
     * {@code client|setinfo} by Redis 7.2+, and as {@code client} by Redis 6.2, which checks the ACL
     * before it finds the subcommand unknown and logs only the container (Redis 7.0 rejects the
     * unknown subcommand first and logs nothing; Redis 7 always logs {@code client|<sub>}, so a bare
     * {@code client} is this one). On 6.2 that hides a refused CLIENT subcommand from this check;
     * the 7.x runs still see it.
     *
     * @param aclLogReply the reply of {@code ACL LOG}, as {@link RedisServerProcess#command} decodes it
     * @return the refusals
     */
    public static List<String> refusals(String aclLogReply) {
        List<String> out = new ArrayList<>();
        if (aclLogReply == null || aclLogReply.isEmpty()) {
            return out;
        }
        List<String> tokens = Arrays.asList(aclLogReply.split("\n"));
        Map<String, String> entry = null;
        for (int i = 0; i + 1 < tokens.size(); i++) {
            String k = tokens.get(i);
            if (k.equals("count")) {
                if (entry != null) {
                    add(out, entry);
                }
                entry = new LinkedHashMap<>();
            }
            if (entry != null && (k.equals("reason") || k.equals("object") || k.equals("context")
                    || k.equals("username"))) {
                entry.put(k, tokens.get(i + 1));
                i++;
            }
        }
        if (entry != null) {
            add(out, entry);
        }
        return out;
    }

    private static void add(List<String> out, Map<String, String> entry) {
        String object = entry.get("object");
        if (!"client|setinfo".equals(object) && !"client".equals(object)) {
            out.add(String.join(" ", entry.values()));
        }
    }

    /**
     * Returns how many times each command was refused, from a server's {@code ACL LOG} (entries of
     * one command are grouped, each with its {@code count}), ignoring Lettuce's {@code CLIENT SETINFO}
     * as {@link #refusals} does.
     *
     * @param aclLogReply the reply of {@code ACL LOG}, as {@link RedisServerProcess#command} decodes it
     * @return refused command (the entry's object) to the number of refusals
     */
    public static Map<String, Long> refusalCounts(String aclLogReply) {
        Map<String, Long> out = new TreeMap<>();
        if (aclLogReply == null || aclLogReply.isEmpty()) {
            return out;
        }
        List<String> tokens = Arrays.asList(aclLogReply.split("\n"));
        long count = 0;
        for (int i = 0; i + 1 < tokens.size(); i++) {
            String k = tokens.get(i);
            if (k.equals("count")) {
                count = Long.parseLong(tokens.get(i + 1).trim());
                i++;
            } else if (k.equals("object")) {
                String object = tokens.get(i + 1);
                if (!"client|setinfo".equals(object) && !"client".equals(object)) {
                    out.merge(object, count, Long::sum);
                }
                i++;
            }
        }
        return out;
    }

    /**
     * Returns the ACL rules of the README's default line for {@code d} as {@code redis-server}
     * arguments ({@code --user name rules...}), so that the user survives a restart of the server
     * (an {@code ACL SETUSER} is lost with it).
     *
     * @param args the {@code ACL SETUSER} command ({@link #setUser}, {@link #restrictedUser})
     * @return {@code ["--user", name, rule, ...]}
     */
    public static List<String> serverArgs(List<String> args) {
        List<String> out = new ArrayList<>();
        out.add("--user");
        out.addAll(args.subList(2, args.size()));
        return out;
    }

    /**
     * Returns the major version of a {@code redis_version} string ({@code "7.0.15"} gives 7; 0 if unknown).
     *
     * @param version the version
     * @return its major number
     */
    public static int major(String version) {
        try {
            return Integer.parseInt(version.substring(0, version.indexOf('.')));
        } catch (RuntimeException e) {
            return 0;
        }
    }
}
