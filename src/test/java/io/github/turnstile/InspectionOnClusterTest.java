package io.github.turnstile;

import io.github.turnstile.testing.RedisTopology;

/** Inspections on a Redis Cluster, where the identity records and each primitive live in different slots. */
@RedisTopology(RedisTopology.Kind.CLUSTER)
class InspectionOnClusterTest extends InspectionTest {}
