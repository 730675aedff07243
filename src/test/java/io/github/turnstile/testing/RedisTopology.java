package io.github.turnstile.testing;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Chooses the Redis deployment {@link RedisExtension} injects into a test class. Without it the
 * class gets the shared single server. A subclass of a contract suite annotated
 * {@code @RedisTopology(Kind.CLUSTER)} runs the whole suite on a Redis Cluster.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface RedisTopology {
    /** The deployments. */
    enum Kind {
        /** One server: REDIS_URI, Testcontainers or a redis-server process. */
        SINGLE,
        /** 3 masters + 3 replicas from redis-server processes, shared by every CLUSTER class in the JVM. */
        CLUSTER,
        /** 1 primary, 1 replica, 3 sentinels from redis-server processes, shared likewise. */
        SENTINEL,
        /**
         * One redis-server process of its own, which Turnstile reaches as the least-privilege user
         * of the README's {@code ACL SETUSER} line with its optional line: everything Turnstile can
         * use ({@link TestRedis#uri()} carries its credentials); the tests' own commands run as the
         * default user ({@link TestRedis#asUser}).
         */
        ACL_USER,
        /**
         * As {@link #ACL_USER}, but the user is {@link LeastPrivilege#restrictedUser}: the README's
         * default line without {@code +client|setname}, so it lacks every command Turnstile can do
         * without ({@code client|unblock}, {@code client|id}, {@code client|setname}, {@code info},
         * {@code wait}).
         */
        NO_ADMIN,
        /**
         * A Cluster as {@link #CLUSTER} (of its own, not shared with CLUSTER classes), reached as the
         * {@link LeastPrivilege#restrictedUser} of the README's Cluster line on every node.
         */
        NO_ADMIN_CLUSTER
    }

    /** @return the deployment */
    Kind value();
}
