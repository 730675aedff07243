-- lock_pass.lua: hand on a wake token that a waiter consumed (or may have consumed) but will not use.
--
-- KEYS[1]  lock hash   {prefix:name}:lock
-- KEYS[2]  wake list   {prefix:name}:wake
-- ARGV[1]  ttl (ms) of the wake token
--
-- Returns 1 when the lock is free, a waiting mark may exist (q) and a token was pushed (unless one
-- was there already); 0 otherwise. If the lock is held, its holder's release will push a token
-- anyway; without a mark nobody waits on the list.
local f = redis.call('HMGET', KEYS[1], 'o', 'q')
if f[1] or not f[2] then
  return 0
end
if redis.call('LLEN', KEYS[2]) == 0 then
  -- two writes: the ACL is asked first (Redis 7.0+), so that it cannot refuse the second alone
  if redis.acl_check_cmd and not redis.acl_check_cmd('PEXPIRE', KEYS[2], ARGV[1]) then
    return redis.error_reply("NOPERM this user has no permissions to run the 'pexpire' command on " .. KEYS[2]
      .. ", asked before the script's first write: nothing was changed")
  end
  redis.call('RPUSH', KEYS[2], '1')
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return 1
