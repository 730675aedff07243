-- lock_release.lua: release one acquisition and wake the waiters.
--
-- KEYS[1]  lock hash   {prefix:name}:lock
-- KEYS[2]  wake list   {prefix:name}:wake    at most one wake token; waiters BLPOP it
-- KEYS[3]  marker      {prefix:name}:lock:x:<request>  set (PX = ARGV[2]) when this request is
--                      released, so that a re-sent release recognises its own earlier success
--                      even after other acquisitions were released since (field x keeps only
--                      the last one)
-- ARGV[1]  request id of the acquisition being released
-- ARGV[2]  ttl (ms) of the release marker and of an unconsumed wake token
-- ARGV[3]  optional: the releasing client's id, when another of its threads goes on waiting
--          (it queues behind other clients after a run of local hand-offs): field w:<client>
-- ARGV[4]  the lock's wake-up channel {prefix:name}:ch
-- ARGV[5]  the publish command: PUBLISH, or SPUBLISH on a Redis 7 Cluster
--
-- Returns 1  released by this call: owner fields removed, field x (last released request) and the
--            marker KEYS[3] set, one wake token pushed unless one is already waiting in the list, and, if a waiter
--            waits by pub/sub (field p, set by its refused attempt), one message published.
--         2  this request was already released (a re-sent release after a reconnect): field x or
--            the marker names it.
--         0  this request does not hold the lock (lease expired, taken over, or never granted).
--            If the lock is free, the waiters are woken all the same: one of them may be asleep
--            on a lock whose holder's lease ran out.
--
-- Also used to cancel an acquire whose reply never arrived: it is sent on the same connection
-- after the acquire, so Redis runs it after the acquire if the acquire ever runs.
local function wake(subscribed)
  if redis.call('LLEN', KEYS[2]) == 0 then
    redis.call('RPUSH', KEYS[2], '1')
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  if subscribed then
    redis.call(ARGV[5], ARGV[4], '1')
  end
end

local f = redis.call('HMGET', KEYS[1], 'r', 'p', 'x', 'o')
if f[1] == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'o', 'r', 't', 'p')
  if ARGV[3] and ARGV[3] ~= '' then
    redis.call('HSET', KEYS[1], 'x', ARGV[1], 'w:' .. ARGV[3], 1)
  else
    redis.call('HSET', KEYS[1], 'x', ARGV[1])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[2])
  wake(f[2])
  return 1
end
if f[3] == ARGV[1] or redis.call('EXISTS', KEYS[3]) == 1 then
  return 2
end
if not f[4] then
  if f[2] then
    redis.call('HDEL', KEYS[1], 'p')
  end
  wake(f[2])
end
return 0
