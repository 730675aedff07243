-- semaphore_fast.lua: the uncontended acquire and release of a DistributedSemaphore, in as few
-- arguments and commands as the lock's scripts. It decides only the plain case and answers {-3}
-- ("use semaphore.lua") for everything else, changing nothing; the client then sends the same call
-- (same slot and sequence number) to semaphore.lua, whose general ops handle it.
--
-- KEYS[1]  state   {p:name}:s   the hash of semaphore.lua (DESIGN §9); this script reads m, p, n, a
--                               (and, leased, e:<me>, s:<me>, c:<me>, g:<me>); leased, it writes a,
--                               c:<me>, s:<me>, q:<me>:<slot> (and g:<me>, the permits ever granted
--                               under the registration, on an acquire); counting, it writes a
-- KEYS[2]  memo    {p:name}:s:q:<me>:<slot>  the call's memo key of semaphore.lua (counting mode:
--                               SET ... PX lease GET, Redis 6.2+; leased mode does not use it)
-- ARGV[1]  op: a (acquire) | r (release) of a leased semaphore; A | R of a counting semaphore
-- ARGV[2]  the caller's client id
-- ARGV[3]  the call's memo slot; leased: 0..31 (a higher slot is refused: the bound on q:<me>:*
--          fields)
-- ARGV[4]  the call's sequence number (the same for every copy of the call)
-- ARGV[5]  permits
-- ARGV[6]  the caller's live registration (epoch) that it renews (acquire), or releases from;
--          "0" in counting mode
-- ARGV[7]  lease, ms: the memo key's expiry (counting mode)
--
-- Decides only when nobody waits (no p, no n), the call is new, and, for an acquire, enough
-- permits are free (for a counting release: the free permits stay within Integer.MAX_VALUE).
-- Leased (m = L): the caller's registration e:<me> is ARGV[6], and the call is new when its
-- sequence number is above s:<me>, the highest of the caller's calls that ran under this
-- registration (no copy of it has run); the memo goes into the state hash, field
-- q:<me>:<slot> = "<seq>|<reply>", which semaphore.lua's recall reads beside the memo key.
-- Counting (m = C): no registration bounds a field per client, so the memo is semaphore.lua's memo
-- key, and the call is new when that key is absent or holds an earlier call of the slot (a slot is
-- used again only once every copy of its earlier call has been answered). Either way it has the
-- effect of semaphore.lua's acquire or release (whose wake-up would do nothing: nobody waits).
--
-- Replies: acquire {1, n, epoch, 0, 0}; release {1, given, free}; {-3} not decided here.
local S, me, seq = KEYS[1], ARGV[2], ARGV[4]
local op = ARGV[1]
if op == 'A' or op == 'R' then
  local f = redis.call('HMGET', S, 'm', 'p', 'n', 'a')
  if f[1] ~= 'C' or f[2] or f[3] then
    return {-3}
  end
  local n, free = tonumber(ARGV[5]), tonumber(f[4])
  if op == 'A' then
    if free < n then
      return {-3}
    end
    free = free - n
  elseif free + n > 2147483647 then
    return {-3}
  else
    free = free + n
  end
  -- two writes: the second is asked first (Redis 7.0+), so that a refusal changes nothing
  if redis.acl_check_cmd and not redis.acl_check_cmd('HSET', S, 'a', '0') then
    return redis.error_reply("NOPERM this user has no permissions to run the 'hset' command on " .. S
      .. ", asked before the script's first write: nothing was changed")
  end
  -- the memo written and the one before read in one command; a copy of a call that ran (or one
  -- overtaken by a later call of the slot) puts the memo back and is left to semaphore.lua
  local Q, lease = KEYS[2], ARGV[7]
  local reply = op == 'A' and {1, n, 0, 0, 0} or {1, n, free}
  local was = redis.call('SET', Q, seq .. '|' .. table.concat(reply, ','), 'PX', lease, 'GET')
  if was and tonumber(string.match(was, '^(%d+)|')) >= tonumber(seq) then
    redis.call('SET', Q, was, 'PX', lease)
    return {-3}
  end
  redis.call('HSET', S, 'a', free)
  return reply
end
local f = redis.call('HMGET', S, 'm', 'p', 'n', 'e:' .. me, 's:' .. me, 'a', 'c:' .. me, 'g:' .. me)
if f[1] ~= 'L' or f[2] or f[3] or f[4] ~= ARGV[6] or tonumber(seq) <= tonumber(f[5] or '0')
    or tonumber(ARGV[3]) >= 32 then
  return {-3}
end
local n, free, held = tonumber(ARGV[5]), tonumber(f[6]), tonumber(f[7] or '0')
if ARGV[1] == 'a' then
  if free < n then
    return {-3}
  end
  redis.call('HSET', S, 'a', free - n, 'c:' .. me, held + n, 's:' .. me, seq, 'g:' .. me, tonumber(f[8] or '0') + n,
    'q:' .. me .. ':' .. ARGV[3], seq .. '|1,' .. n .. ',' .. f[4] .. ',0,0')
  return {1, n, tonumber(f[4]), 0, 0}
end
local give = math.min(n, held)
redis.call('HSET', S, 'a', free + give, 'c:' .. me, held - give, 's:' .. me, seq,
  'q:' .. me .. ':' .. ARGV[3], seq .. '|1,' .. give .. ',' .. (free + give))
return {1, give, free + give}
