-- renew.lua: the watchdog's batched lease renewal, one call per tick for every lease a client holds.
--
-- KEYS         per lease, in order: a lease hash whose field r names the holding request (locks,
--              read holds); or, for a lock grant its client caches ("~" below), two keys: the
--              lock hash and its fence; or, for a semaphore registration, two keys: its zset of registrations
--              {p:name}:s:l ("<client>:<epoch>" -> server ms until which it is alive) and its
--              state hash {p:name}:s (field g:<client>: the permits ever granted under that
--              client's registration)
-- ARGV[2i-1]   lease i: the request id expected in field r; or "~<request>", a lock grant that
--              its client caches (it sets field c to the client and raises the fence to a lease
--              past the server time, above every token the client issues from the cache until its
--              next renewal); or "#<client>:<epoch>", a registration
-- ARGV[2i]     lease i: the lease to set, milliseconds
--
-- Returns an array: element i is, for a cached lock grant, {1, server time in µs (a string), 1 if a
-- waiting mark of another acquisition may exist (q) else 0} when that request still holds the
-- lock, else 0; for a lease hash, 1 when it was still held by that request and
-- its lease was reset, 0 when the lease is gone (expired, released, or taken by another request);
-- for a registration, the permits Redis ever granted under it after its time was reset, or -1 when
-- it is gone or its time has run out (the next semaphore call reclaims it). The client checks that
-- total against the grants it was answered under the registration: fewer means Redis lost a grant
-- (a failover). Releases do not change it, so no release on its way can hide a lost grant. A
-- lease is never resurrected: a missing key or member stays missing.
--
-- Element i is instead a status reply "NOPERM <command> <key>" when the ACL refuses a write of
-- lease i (asked first, on Redis 7.0 and later: redis.acl_check_cmd): that lease is left as it
-- was, and the others are renewed. Redis does not roll a script back, so a refusal raised by the
-- write itself would leave the batch renewed up to that lease (it still does on Redis 6.2).
local out = {}
local function refused(cmd, key, ...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(cmd, key, ...) then
    return {ok = 'NOPERM ' .. string.lower(cmd) .. ' ' .. key}
  end
end
local now
local k = 1
for i = 1, #ARGV / 2 do
  local r = ARGV[2 * i - 1]
  if string.byte(r, 1) == 35 then -- '#': a semaphore registration
    local live, state = KEYS[k], KEYS[k + 1]
    k = k + 2
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local member = string.sub(r, 2)
    local client, epoch = string.match(member, '^(.*):([^:]*)$')
    local until_ms = redis.call('ZSCORE', live, member)
    local f = redis.call('HMGET', state, 'g:' .. client, 'e:' .. client)
    if until_ms and tonumber(until_ms) > now and f[2] == epoch then
      out[i] = refused('ZADD', live, now + tonumber(ARGV[2 * i]), member)
      if not out[i] then
        redis.call('ZADD', live, now + tonumber(ARGV[2 * i]), member)
        out[i] = tonumber(f[1] or '0')
      end
    else
      out[i] = -1
    end
  elseif string.byte(r, 1) == 126 then -- '~': a lock grant that its client caches (DESIGN §17)
    local lock, fence = KEYS[k], KEYS[k + 1]
    k = k + 2
    local req = string.sub(r, 2)
    local f = redis.call('HMGET', lock, 'r', 'o', 'q', 'c', 'd')
    if f[1] == req and f[2] then
      local client = string.match(req, '^[^:]*')
      out[i] = refused('PEXPIRE', lock, ARGV[2 * i]) or (f[5] and refused('HDEL', lock, 'd'))
        or (not f[4] and refused('HSET', lock, 'c', client)) or refused('SET', fence, '0')
      if not out[i] then
        local t = redis.call('TIME')
        local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
        redis.call('PEXPIRE', lock, ARGV[2 * i])
        if f[5] then
          redis.call('HDEL', lock, 'd')
        end
        if not f[4] then
          redis.call('HSET', lock, 'c', client)
        end
        -- every token the client issues from its cache until its next renewal stays below this
        local bound = now_us + tonumber(ARGV[2 * i]) * 1000
        local fv = redis.call('GET', fence)
        if not fv or tonumber(fv) < bound then
          redis.call('SET', fence, string.format('%.0f', bound))
        end
        out[i] = {1, string.format('%.0f', now_us), f[3] and 1 or 0}
      end
    else
      out[i] = 0
    end
  else
    local key = KEYS[k]
    k = k + 1
    local f = redis.call('HMGET', key, 'r', 'd')
    if f[1] == r then
      out[i] = refused('PEXPIRE', key, ARGV[2 * i]) or (f[2] and refused('HDEL', key, 'd'))
      if not out[i] then
        redis.call('PEXPIRE', key, ARGV[2 * i])
        if f[2] then
          redis.call('HDEL', key, 'd') -- a lock record's d no longer holds for this expiry (lock_acquire.lua)
        end
        out[i] = 1
      end
    else
      out[i] = 0
    end
  end
end
return out
