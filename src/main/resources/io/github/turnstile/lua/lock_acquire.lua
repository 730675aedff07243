-- lock_acquire.lua: take the lock for one acquisition request, or report who is in the way.
--
-- KEYS[1]  lock hash   {prefix:name}:lock    fields o (owner), r (request id), t (fencing token); PX = lease
-- KEYS[2]  fence       {prefix:name}:fence   fencing counter, never expires
-- ARGV[1]  owner id    "<clientId>:<threadId>"
-- ARGV[2]  request id  "<clientId>:<seq>", unique per acquisition attempt
-- ARGV[3]  lease, milliseconds
-- ARGV[4]  "1" if this request's previous attempt found another holder (optional)
-- ARGV[5]  local hand-off (optional): the request id of the current holder, a thread of the same
--          client that hands the lock straight to ARGV[1]/ARGV[2] at its unlock
-- ARGV[6]  "1" if the caller will not wait when refused (tryLock()): it is not marked as waiting
-- ARGV[7]  "1" if the caller waits by pub/sub: a refusal sets field p, and the next release
--          publishes a wake-up (lock_release.lua)
--
-- Returns {1, token, reclaimed, others, same}  the lock is held by this request: fresh grant, or a replay of
--                     the same request (same token, lease refreshed), or a takeover of an older
--                     grant of the same owner that the client never learned of (new token).
--                     reclaimed = 1 when ARGV[4] is "1" and the lock key is gone altogether: the
--                     holder seen before never released (a release leaves field x for a lease),
--                     its lease ran out, so it crashed or was cut off. Otherwise 0.
--                     others = 1 when another client waits (field w:<client>, set when its
--                     request was refused, or by lock_release for a client that goes on
--                     waiting); same = 1 when the last release (field x) was by this client, or
--                     this is a hand-off. Both 0 on a replay. The grant deletes this client's
--                     own w:<client>.
--         {0, pttl}   the lock is held by another owner; pttl = its remaining lease in ms.
--         {0, -3}     hand-off only: ARGV[5] no longer holds the lock (its lease ran out).
--
-- Idempotent: re-sending the same (owner, request) never yields a second token.
local function client_of(id)
  return string.match(id, '^[^:]*') -- ids start with "<client id>:"
end
local me = client_of(ARGV[1])
local fields = redis.call('HMGET', KEYS[1], 'o', 'r', 'x', 'w:' .. me, 'p')
local owner, holder, released, waiting, subscribed = fields[1], fields[2], fields[3], fields[4], fields[5]
local handing = ARGV[5] and ARGV[5] ~= ''
if handing then
  if holder == ARGV[2] then -- a re-sent hand-off
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, redis.call('HGET', KEYS[1], 't'), 0}
  end
  if holder ~= ARGV[5] then
    return {0, -3}
  end
elseif owner then
  if owner ~= ARGV[1] then
    -- this client waits: field w:<client> tells the holder's client not to keep passing the lock
    -- among its own threads for long (see "others" below); field p asks the release to publish
    local mark = client_of(owner) ~= me and not waiting and ARGV[6] ~= '1'
    local sub = ARGV[7] == '1'
    if mark and sub then
      redis.call('HSET', KEYS[1], 'w:' .. me, 1, 'p', 1)
    elseif mark then
      redis.call('HSET', KEYS[1], 'w:' .. me, 1)
    elseif sub then
      redis.call('HSET', KEYS[1], 'p', 1)
    end
    return {0, redis.call('PTTL', KEYS[1])}
  end
  if holder == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, redis.call('HGET', KEYS[1], 't'), 0}
  end
end
local reclaimed = 0
if ARGV[4] == '1' and not owner and redis.call('EXISTS', KEYS[1]) == 0 then
  reclaimed = 1
end

-- Fencing token: max(previous + 1, server time in microseconds), kept as a decimal string so no
-- Lua double ever formats it. Strictly increasing on one server; after a restart that lost the
-- counter (or a failover to a lagging replica) it continues from the server clock, which is ahead
-- of every token issued before, unless that server's clock is behind. The usual case (the clock
-- is ahead of the counter) costs one SET ... GET.
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local prev = redis.call('SET', KEYS[2], now, 'GET')
local token = now
if prev and tonumber(prev) >= tonumber(now) then
  redis.call('SET', KEYS[2], prev)
  redis.call('INCR', KEYS[2])
  token = redis.call('GET', KEYS[2])
end

-- others = 1 when another client waits (a field w:<client> other than this client's); same = 1
-- when the last release (field x) was this client's. The client counts grants in a row to itself
-- while others wait, and bounds them (localHandoffLimit).
if waiting then
  redis.call('HDEL', KEYS[1], 'w:' .. me)
end
local base = 0 -- fields other than w:* after the HSET below: o, r, t, x if present, p if present
if handing or released then
  base = 4
else
  base = 3
end
if subscribed then
  base = base + 1
end
local same = 0
if handing or (released and client_of(released) == me) then
  same = 1
end

if handing then
  -- the handing request counts as released (a re-sent release of it answers "already released")
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'r', ARGV[2], 't', token, 'x', ARGV[5])
else
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'r', ARGV[2], 't', token)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local others = 0
if redis.call('HLEN', KEYS[1]) > base then
  others = 1
end
return {1, token, reclaimed, others, same}
