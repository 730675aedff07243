-- renew.lua: the watchdog's batched lease renewal, one call per tick for every lease a client holds.
--
-- KEYS[i]      a lease hash (any primitive) whose field r names the holding request
-- ARGV[2i-1]   the request id expected in field r of KEYS[i]
-- ARGV[2i]     the lease to set on KEYS[i], milliseconds
--
-- Returns an array: element i is 1 when KEYS[i] was still held by that request and its lease was
-- reset, 0 when the lease is gone (expired, released, or taken by another request). A lease is
-- never resurrected: a missing key stays missing.
local out = {}
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'r') == ARGV[2 * i - 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
