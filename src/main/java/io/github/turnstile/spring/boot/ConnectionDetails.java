package io.github.turnstile.spring.boot;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.util.ClassUtils;

/**
 * Spring Boot's Redis connection details, read without compiling against them: Spring Boot 3.1 to
 * 3.5 define {@code org.springframework.boot.autoconfigure.data.redis.RedisConnectionDetails},
 * Spring Boot 4 {@code org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails};
 * their methods have the same names ({@code getUsername}, {@code getPassword},
 * {@code getStandalone().getHost()}, ...). Boot 4 has one {@code getSslBundle()} for the whole
 * connection, Boot 3.5 one per topology; both are honoured. Methods are looked up on the
 * interfaces, so any implementation (a lambda, a proxy, a non-public class) works.
 */
final class ConnectionDetails {
  /** The interfaces, newest first. */
  static final List<String> TYPES = List.of(
      "org.springframework.boot.data.redis.autoconfigure.DataRedisConnectionDetails",
      "org.springframework.boot.autoconfigure.data.redis.RedisConnectionDetails");

  /**
   * Boot's own details, made from the {@code spring.data.redis.*} properties, which
   * {@link TurnstileConnector} reads itself (as before there were details; Boot 3.5's do not carry
   * {@code ssl.enabled}).
   */
  static final Set<String> FROM_PROPERTIES = Set.of(
      "org.springframework.boot.data.redis.autoconfigure.PropertiesDataRedisConnectionDetails",
      "org.springframework.boot.autoconfigure.data.redis.PropertiesRedisConnectionDetails");

  private ConnectionDetails() {}

  /**
   * Returns the application's Redis connection details bean, if it has one that did not come from
   * the properties.
   *
   * @param beans where to look
   * @param classLoader the application's class loader
   * @return the bean, or null
   * @throws org.springframework.beans.factory.NoUniqueBeanDefinitionException if there are several
   *     and none is primary (Spring Data Redis would refuse them as well)
   */
  static Object find(BeanFactory beans, ClassLoader classLoader) {
    for (String type : TYPES) {
      if (!ClassUtils.isPresent(type, classLoader)) {
        continue;
      }
      Object details = beans.getBeanProvider(ClassUtils.resolveClassName(type, classLoader)).getIfAvailable();
      if (details != null && !FROM_PROPERTIES.contains(details.getClass().getName())) {
        return details;
      }
    }
    return null;
  }

  /**
   * Replaces where {@code d} points (host, port, database, Sentinel, Cluster, credentials, TLS) with
   * what the details say; the connect timeout stays the properties'. Sentinel comes first, then
   * Cluster, then standalone, as in Spring Data Redis.
   *
   * @throws IllegalStateException if the details name a static master/replica setup (not
   *     supported by Turnstile) or no Redis at all
   */
  static void applyTo(Object details, TurnstileConnector.DataRedis d) {
    Class<?> type = typeOf(details);
    String what = type.getSimpleName() + " bean " + details.getClass().getName();
    d.url = null;
    d.host = null;
    d.port = 6379;
    d.database = 0;
    d.sentinelMaster = null;
    d.sentinelNodes = List.of();
    d.sentinelUsername = null;
    d.sentinelPassword = null;
    d.clusterNodes = List.of();
    d.username = (String) call(type, details, "getUsername");
    d.password = (String) call(type, details, "getPassword");
    SslBundle ssl = (SslBundle) callIfDeclared(type, details, "getSslBundle"); // Boot 4
    Object sentinel = callIfDeclared(type, details, "getSentinel");
    Object cluster = callIfDeclared(type, details, "getCluster");
    Object masterReplica = callIfDeclared(type, details, "getMasterReplica"); // Boot 4
    Object standalone = callIfDeclared(type, details, "getStandalone");
    if (sentinel != null) {
      Class<?> s = returnType(type, "getSentinel");
      d.sentinelMaster = (String) call(s, sentinel, "getMaster");
      d.sentinelNodes = nodes(s, sentinel);
      d.sentinelUsername = (String) call(s, sentinel, "getUsername");
      d.sentinelPassword = (String) call(s, sentinel, "getPassword");
      d.database = (Integer) call(s, sentinel, "getDatabase");
      ssl = ssl != null ? ssl : (SslBundle) callIfDeclared(s, sentinel, "getSslBundle"); // Boot 3.5
      if (d.sentinelMaster == null || d.sentinelNodes.isEmpty()) {
        throw new IllegalStateException(what + " names a Sentinel without a master name or without nodes");
      }
    } else if (cluster != null) {
      Class<?> c = returnType(type, "getCluster");
      d.clusterNodes = nodes(c, cluster);
      ssl = ssl != null ? ssl : (SslBundle) callIfDeclared(c, cluster, "getSslBundle");
      if (d.clusterNodes.isEmpty()) {
        throw new IllegalStateException(what + " names a Cluster without nodes");
      }
    } else if (masterReplica != null) {
      throw new IllegalStateException(what + " names a static master/replica setup, which Turnstile does not"
          + " support (its locks need the one primary): use Sentinel, a Cluster, or set turnstile.uri");
    } else if (standalone != null) {
      Class<?> s = returnType(type, "getStandalone");
      d.host = (String) call(s, standalone, "getHost");
      d.port = (Integer) call(s, standalone, "getPort");
      d.database = (Integer) call(s, standalone, "getDatabase");
      ssl = ssl != null ? ssl : (SslBundle) callIfDeclared(s, standalone, "getSslBundle");
    } else {
      throw new IllegalStateException(what + " names no Redis (no standalone, Sentinel or Cluster)");
    }
    d.sslBundle = ssl;
    d.ssl = d.ssl || ssl != null; // spring.data.redis.ssl.enabled turns TLS on, as for Spring Data Redis
  }

  private static Class<?> typeOf(Object details) {
    for (String name : TYPES) {
      for (Class<?> c = details.getClass(); c != null; c = c.getSuperclass()) {
        for (Class<?> i : ClassUtils.getAllInterfacesForClassAsSet(c)) {
          if (i.getName().equals(name)) {
            return i;
          }
        }
      }
    }
    throw new IllegalArgumentException(details.getClass() + " is not a Redis connection details type");
  }

  /** host:port of each node ({@code [host]:port} for an IPv6 address). */
  private static List<String> nodes(Class<?> type, Object target) {
    List<String> out = new ArrayList<>();
    Object nodes = call(type, target, "getNodes");
    if (nodes != null) {
      for (Object node : (List<?>) nodes) {
        String host = (String) call(node.getClass(), node, "host");
        int port = (Integer) call(node.getClass(), node, "port");
        out.add((host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port);
      }
    }
    return out;
  }

  private static Class<?> returnType(Class<?> type, String method) {
    try {
      return type.getMethod(method).getReturnType();
    } catch (NoSuchMethodException e) {
      throw new IllegalStateException(e);
    }
  }

  private static Object callIfDeclared(Class<?> type, Object target, String method) {
    try {
      type.getMethod(method);
    } catch (NoSuchMethodException e) {
      return null; // not in this Spring Boot version
    }
    return call(type, target, method);
  }

  private static Object call(Class<?> type, Object target, String method) {
    try {
      Method m = type.getMethod(method);
      return m.invoke(target);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      throw new IllegalStateException(type.getSimpleName() + "." + method + "() failed", cause);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read " + type.getName() + "." + method + "()", e);
    }
  }
}
