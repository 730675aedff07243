-- renew.lua: the watchdog's batched lease renewal, one call per tick for every lease a client holds.
--
-- KEYS[i]      a lease: a hash whose field r names the holding request (locks, read holds), or a
--              zset of registrations (a semaphore's {p:name}:s:l, member "<client>:<epoch>" ->
--              server ms until which it is alive)
-- ARGV[2i-1]   the request id expected in field r of KEYS[i]; or "#" followed by the zset member
-- ARGV[2i]     the lease to set on KEYS[i], milliseconds
--
-- Returns an array: element i is 1 when KEYS[i] was still held by that request (or the member was
-- still alive) and its lease was reset, 0 when the lease is gone (expired, released, replaced, or
-- taken by another request). A lease is never resurrected: a missing key or member stays missing,
-- and a member whose time has run out is not renewed (the next semaphore call reclaims it).
local out = {}
local now
for i = 1, #KEYS do
  local r = ARGV[2 * i - 1]
  if string.byte(r, 1) == 35 then -- '#': a semaphore registration
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local member = string.sub(r, 2)
    local until_ms = redis.call('ZSCORE', KEYS[i], member)
    if until_ms and tonumber(until_ms) > now then
      redis.call('ZADD', KEYS[i], now + tonumber(ARGV[2 * i]), member)
      out[i] = 1
    else
      out[i] = 0
    end
  elseif redis.call('HGET', KEYS[i], 'r') == r then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
