-- lock_release.lua: release one acquisition, and wake a waiter only if one may wait.
--
-- KEYS[1]  lock hash   {prefix:name}:lock
-- KEYS[2]  wake list   {prefix:name}:wake    at most one wake token; waiters BLPOP it
-- ARGV[1]  request id of the acquisition being released
-- ARGV[2]  its fencing token, or 0 when unknown (the cancel of an attempt whose reply never came)
-- ARGV[3]  ttl (ms) of the lock record after a release that someone waits for, and of an
--          unconsumed wake token
-- ARGV[4]  optional: the publish command: PUBLISH (when absent), or SPUBLISH on a Redis 7 Cluster
-- ARGV[5]  optional: the releasing client's id, when another of its threads goes on waiting
--          (it queues behind other clients after a run of local hand-offs): field w:<client>;
--          "" for none
-- ARGV[6]  optional: the release of a grant its client cached: the last fencing token the client
--          issued from its cache. The record's t becomes at least that (every later grant's token
--          is above it), and c and b go
--
-- Returns 1  released by this call: field o removed; r and t stay as the record of the last hold
--            (with the lease's remaining time, or ttl when someone waits). If a waiting mark may
--            exist (q) or ARGV[5] is given: one wake token pushed unless one is already in the
--            list, and, if a waiter waits by pub/sub (p), one message published on the channel
--            {prefix:name}:ch.
--         2  this request was already released (a copy sent again after a reconnect): r names
--            it and o is gone; or the lock has moved on to a later hold (t above the token) and
--            this hold did not end by expiry (its token is not below e, the first token granted
--            after a hold record was found gone).
--         0  this request does not hold the lock (lease expired, taken over, or never granted).
--            If the lock is free and someone may wait, the waiters are woken all the same.
--
-- Also used to cancel an acquire whose reply never arrived: it is sent on the same connection
-- after the acquire, so Redis runs it after the acquire if the acquire ever runs.
--
-- A path that writes more than once first asks the ACL about every write after its first (Redis
-- 7.0 and later: redis.acl_check_cmd), and is refused before its first write: Redis does not roll a
-- script back, so a write refused after another would leave the lock free with its waiters
-- asleep. The refusal is a NOPERM error naming the command; nothing has changed.
local lock, wake = KEYS[1], KEYS[2]
local req, ttl = ARGV[1], ARGV[3]
local waiting = ARGV[5]
if waiting == '' then
  waiting = nil
end
local carried = ARGV[6]

local f = redis.call('HMGET', lock, 'r', 'q')
if f[1] == req and not f[2] and not waiting and not carried then
  -- nobody waits: nothing else to do. HDEL answers whether this call released it: 0 when this
  -- request was released before (o gone), and this call is a copy sent again
  return redis.call('HDEL', lock, 'o') == 1 and 1 or 2
end

local function permit(cmd, key, ...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(cmd, key, ...) then
    error({err = "NOPERM this user has no permissions to run the '" .. string.lower(cmd) .. "' command on "
      .. key .. ", asked before the script's first write: nothing was changed"})
  end
end

-- the wake-up's writes, asked for before the first write of the path; returns whether to push
local function may_wake(p)
  local push = redis.call('LLEN', wake) == 0
  if push then
    permit('RPUSH', wake, '1')
    permit('PEXPIRE', wake, ttl)
  end
  if p then
    permit(ARGV[4] or 'PUBLISH', string.sub(lock, 1, -5) .. 'ch', '1')
  end
  return push
end

local function wake_up(push, p)
  if push then
    redis.call('RPUSH', wake, '1')
    redis.call('PEXPIRE', wake, ttl)
  end
  if p then
    local publish = ARGV[4] or 'PUBLISH'
    redis.call(publish, string.sub(lock, 1, -5) .. 'ch', '1')
  end
end

if f[1] == req then
  local g = redis.call('HMGET', lock, 'o', 'p', 't')
  if not g[1] then
    return 2
  end
  if waiting or carried then
    permit('HSET', lock, 'q', '1')
  end
  if carried then
    permit('HDEL', lock, 'o')
  end
  if f[2] or waiting then
    permit('PEXPIRE', lock, ttl)
  end
  local push = (f[2] or waiting) and may_wake(g[2])
  if carried then
    -- a cached grant: every token its client issued from the cache is at most carried
    if tonumber(carried) > tonumber(g[3]) then
      redis.call('HSET', lock, 't', carried)
    end
    if not (f[2] or waiting) then
      redis.call('HDEL', lock, 'o', 'c', 'b')
      return 1
    end
  end
  -- d goes too: the record's expiry is set to ttl below, for which d does not hold (lock_acquire.lua)
  if g[2] then
    redis.call('HDEL', lock, 'o', 'p', 'd', 'c', 'b')
  else
    redis.call('HDEL', lock, 'o', 'd', 'c', 'b')
  end
  if waiting then
    redis.call('HSET', lock, 'w:' .. waiting, '1', 'q', '1')
  end
  redis.call('PEXPIRE', lock, ttl)
  wake_up(push, g[2])
  return 1
end
local token = tonumber(ARGV[2])
if f[1] and token and token > 0 then
  local g = redis.call('HMGET', lock, 't', 'e')
  if g[1] and token < tonumber(g[1]) and token >= tonumber(g[2] or 0) then
    return 2
  end
end
if f[2] and not redis.call('HGET', lock, 'o') then
  local p = redis.call('HGET', lock, 'p')
  local push = may_wake(p)
  if p then
    redis.call('HDEL', lock, 'p')
  end
  wake_up(push, p)
end
return 0
