-- lock_pass.lua: hand on a wake token that a waiter consumed (or may have consumed) but will not use.
--
-- KEYS[1]  lock hash   {prefix:name}:lock
-- KEYS[2]  wake list   {prefix:name}:wake
-- ARGV[1]  ttl (ms) of the wake token
--
-- Returns 1 when the lock is free and a token was pushed, 0 otherwise. If the lock is held, its
-- holder's release will push a token anyway, so nothing is lost by pushing none here.
if redis.call('HGET', KEYS[1], 'o') then
  return 0
end
if redis.call('LLEN', KEYS[2]) == 0 then
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return 1
