-- semaphore_fast.lua: the uncontended acquire and release of a leased DistributedSemaphore, in as
-- few arguments and commands as the lock's scripts. It decides only the plain case and answers
-- {-3} ("use semaphore.lua") for everything else, changing nothing; the client then sends the same
-- call (same slot and sequence number) to semaphore.lua, whose general ops handle it.
--
-- KEYS[1]  state   {p:name}:s   the hash of semaphore.lua (DESIGN §9); this script reads m, p, n, a,
--                               e:<me>, s:<me>, c:<me>, g:<me> and writes a, c:<me>, s:<me>,
--                               q:<me>:<slot> (and g:<me>, the permits ever granted under the
--                               registration, on an acquire)
-- ARGV[1]  op: a (acquire) | r (release)
-- ARGV[2]  the caller's client id
-- ARGV[3]  the call's memo slot: 0..31 (a higher slot is refused: the bound on q:<me>:* fields)
-- ARGV[4]  the call's sequence number (the same for every copy of the call)
-- ARGV[5]  permits
-- ARGV[6]  the caller's live registration (epoch) that it renews (acquire), or releases from
--
-- Decides only when: the mode is leased (m = L); nobody waits (no p, no n); the caller's
-- registration e:<me> is ARGV[6]; the call is new (its sequence number is above s:<me>, the highest
-- of the caller's calls that ran under this registration: no copy of it has run); and, for an
-- acquire, enough permits are free. Then it has the effect of semaphore.lua's acquire or release
-- (whose wake-up would do nothing: nobody waits) and writes the call's memo into the state hash,
-- field q:<me>:<slot> = "<seq>|<reply>", which semaphore.lua's recall reads beside the memo key.
--
-- Replies: acquire {1, n, epoch, 0, 0}; release {1, given, free}; {-3} not decided here.
local S, me, seq = KEYS[1], ARGV[2], ARGV[4]
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
