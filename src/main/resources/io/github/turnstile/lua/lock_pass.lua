-- lock_pass.lua: hand on a wake token that a waiter consumed (or may have consumed) but will not use.
--
-- KEYS[1]  lock hash   {prefix:name}:lock
-- Derived from KEYS[1] (its name less the trailing "lock"; same slot):
--          wake list   {prefix:name}:wake
-- ARGV[1]  ttl (ms) of the wake token
--
-- Returns 1 when the lock is free, a waiting mark may exist (q) and a token was pushed (unless one
-- was there already); 0 otherwise. If the lock is held, its holder's release will push a token
-- anyway; without a mark nobody waits on the list.
local f = redis.call('HMGET', KEYS[1], 'o', 'q')
if f[1] or not f[2] then
  return 0
end
local wake = string.sub(KEYS[1], 1, -5) .. 'wake'
if redis.call('LLEN', wake) == 0 then
  redis.call('RPUSH', wake, '1')
  redis.call('PEXPIRE', wake, ARGV[1])
end
return 1
