package io.github.turnstile.spring.boot;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * An application's own Redis connection details bean, for whichever Spring Boot runs the test:
 * {@code DataRedisConnectionDetails} (Boot 4) or {@code RedisConnectionDetails} (Boot 3.5), as a
 * proxy of that interface whose getters answer the given values (the nested standalone, Sentinel
 * and Cluster interfaces too; {@code getSslBundle} wherever the Boot version declares it). One
 * test source thus defines the bean on both stacks, as {@code @ServiceConnection} or an
 * application would.
 */
public final class RedisDetails {
  private RedisDetails() {}

  /**
   * Returns the connection details interface of the Spring Boot on the classpath.
   *
   * @return the connection details interface of the Spring Boot on the classpath
   */
  public static Class<?> type() {
    for (String name : ConnectionDetails.TYPES) {
      try {
        return Class.forName(name);
      } catch (ClassNotFoundException e) {
        // the other Boot generation
      }
    }
    throw new IllegalStateException("no Redis connection details type on the classpath: " + ConnectionDetails.TYPES);
  }

  /**
   * Details of one Redis server.
   *
   * @return the details
   */
  public static Object standalone(String host, int port, int database, String username, String password,
      SslBundle ssl) {
    Map<String, Object> s = new HashMap<>();
    s.put("getHost", host);
    s.put("getPort", port);
    s.put("getDatabase", database);
    s.put("getSslBundle", ssl);
    Map<String, Object> top = credentials(username, password, ssl);
    top.put("getStandalone", s);
    return proxy(type(), top);
  }

  /**
   * Details of a Sentinel deployment.
   *
   * @param nodes the sentinels, host:port
   * @return the details
   */
  public static Object sentinel(String master, List<String> nodes, String username, String password) {
    Map<String, Object> s = new HashMap<>();
    s.put("getMaster", master);
    s.put("getNodes", nodes);
    s.put("getDatabase", 0);
    s.put("getUsername", null);
    s.put("getPassword", null);
    Map<String, Object> top = credentials(username, password, null);
    top.put("getSentinel", s);
    return proxy(type(), top);
  }

  /**
   * Details of a Redis Cluster.
   *
   * @param nodes seed nodes, host:port
   * @return the details
   */
  public static Object cluster(List<String> nodes, String username, String password) {
    Map<String, Object> c = new HashMap<>();
    c.put("getNodes", nodes);
    Map<String, Object> top = credentials(username, password, null);
    top.put("getCluster", c);
    return proxy(type(), top);
  }

  /** Registers the details as a bean, as an application or {@code @ServiceConnection} would. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static ApplicationContextRunner withBean(ApplicationContextRunner runner, Object details) {
    return runner.withBean("myRedisConnectionDetails", (Class) type(), () -> details);
  }

  private static Map<String, Object> credentials(String username, String password, SslBundle ssl) {
    Map<String, Object> top = new HashMap<>();
    top.put("getUsername", username);
    top.put("getPassword", password);
    top.put("getSslBundle", ssl);
    return top;
  }

  /**
   * A proxy of {@code type}: a getter named in {@code values} answers its value (a map becomes a
   * proxy of the getter's return type; a list of host:port strings, a list of that type's
   * {@code Node}s); any other default method runs as declared.
   */
  private static Object proxy(Class<?> type, Map<String, Object> values) {
    InvocationHandler h = (self, m, args) -> {
      switch (m.getName()) {
        case "toString":
          return type.getSimpleName() + values;
        case "hashCode":
          return System.identityHashCode(self);
        case "equals":
          return self == args[0];
        default:
          break;
      }
      if (values.containsKey(m.getName())) {
        return convert(m, values.get(m.getName()));
      }
      if (m.isDefault()) {
        return InvocationHandler.invokeDefault(self, m, args);
      }
      return null;
    };
    return Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h);
  }

  @SuppressWarnings("unchecked")
  private static Object convert(Method m, Object value) throws ReflectiveOperationException {
    if (value instanceof Map) {
      return proxy(m.getReturnType(), (Map<String, Object>) value);
    }
    if (value instanceof List) {
      Class<?> node = Class.forName(type().getName() + "$Node", true, type().getClassLoader());
      List<Object> nodes = new ArrayList<>();
      for (Object hostPort : (List<?>) value) {
        String s = (String) hostPort;
        int colon = s.lastIndexOf(':');
        nodes.add(node.getConstructor(String.class, int.class)
            .newInstance(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1))));
      }
      return nodes;
    }
    return value;
  }
}
