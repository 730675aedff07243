-- lock_busy.lua: the client that caches a lock's grant answers another client's revocation while
-- one of its threads uses the grant: "in use, given up at the end of this hold" (DESIGN §17).
--
-- KEYS[1]  lock hash   {prefix:name}:lock   (lock_acquire.lua describes its fields)
-- KEYS[2]  wake list   {prefix:name}:wake   at most one wake token; waiters BLPOP it
-- ARGV[1]  request id of the cached grant
-- ARGV[2]  ttl (ms) of an unconsumed wake token
-- ARGV[3]  optional: the publish command: PUBLISH (when absent), or SPUBLISH on a Redis 7 Cluster
--
-- Returns 1  marked: field b set (lock_acquire.lua then answers another client's attempt with
--            {0, pttl, owner, 2} and publishes nothing), and, if a waiting mark may exist (q), one
--            wake token pushed unless one is in the list, and one message published if a waiter
--            waits by pub/sub (p): the waiters attempt again and read the answer. Also when b was
--            set already (a copy sent again, or a second revocation): nothing written.
--         0  the request does not hold the lock, or its grant is not cached (c unset): nothing
--            written. A release or a takeover deletes b with c, so b never outlives the grant.
--
-- b changes no holder: every attempt still decides in lock_acquire.lua, and b only tells it what
-- to answer. Writes more than once only after asking the ACL about each write
-- (redis.acl_check_cmd, Redis 7.0 and later), so a refusal changes nothing.
local lock, wake = KEYS[1], KEYS[2]
local f = redis.call('HMGET', lock, 'r', 'o', 'c', 'b', 'q', 'p')
if f[1] ~= ARGV[1] or not f[2] or not f[3] then
  return 0
end
if f[4] then
  return 1
end
local publish = ARGV[3] or 'PUBLISH'
local channel = string.sub(lock, 1, -5) .. 'ch'
local push = f[5] and redis.call('LLEN', wake) == 0
if redis.acl_check_cmd then
  local asks = {}
  if push then
    asks[#asks + 1] = {'RPUSH', wake, '1'}
    asks[#asks + 1] = {'PEXPIRE', wake, ARGV[2]}
  end
  if f[5] and f[6] then
    asks[#asks + 1] = {publish, channel, '1'}
  end
  for _, a in ipairs(asks) do
    if not redis.acl_check_cmd(a[1], a[2], a[3]) then
      return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(a[1])
        .. "' command on " .. a[2] .. ", asked before the script's first write: nothing was changed")
    end
  end
end
redis.call('HSET', lock, 'b', '1')
if push then
  redis.call('RPUSH', wake, '1')
  redis.call('PEXPIRE', wake, ARGV[2])
end
if f[5] and f[6] then
  redis.call(publish, channel, '1')
end
return 1
