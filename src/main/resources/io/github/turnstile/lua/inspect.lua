-- inspect.lua: a read-only snapshot of one primitive, for DistributedLock.inspect() and its kin
-- (DESIGN §16). It never writes: an inspection of a name nobody uses creates no key. Every command
-- is a read, O(1) or bounded by LIMIT.
--
-- ARGV[1]  kind: lock | rwlock | semaphore
-- ARGV[2]  lease, ms (rwlock: a waiting entry counts for one lease, as in rwlock.lua)
--
-- lock       KEYS {p:name}:lock
--   {now_ms, owner, token, pttl, marks}
--     owner ""  when free; token "" when no record; pttl as PTTL (-2: no key);
--     marks = waiting clients (fields w:<client>): HLEN less the fields that are not marks
-- rwlock     KEYS {p:name}:rw:w, {p:name}:rw:readers, {p:name}:rw:wwait, {p:name}:rw:rwait
--   {now_ms, writer, token, pttl, readers, waitingWriters, waitingReaders, r1, until1, r2, until2, ...}
--     readers = ZCARD (dead readers not yet reclaimed included); waiting* = entries of the last
--     lease; then at most LIMIT readers: request id and the server ms its lease is known to last
-- semaphore  KEYS {p:name}:s, {p:name}:s:l, {p:name}:s:w
--   {now_ms, exists, mode, free, capacity, registrations, marks, pubsub,
--    member1, until1, permits1, epoch1, ...}
--     at most LIMIT registrations (the earliest to run out first)
local LIMIT = 32
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = ARGV[1]
if kind == 'lock' then
  local f = redis.call('HMGET', KEYS[1], 'o', 't', 'r', 'q', 'e', 'p', 'x', 'd', 'c')
  local present = 0
  for i = 1, 9 do
    if f[i] then present = present + 1 end
  end
  local marks = redis.call('HLEN', KEYS[1]) - present
  return {now, f[1] or '', f[2] or '', redis.call('PTTL', KEYS[1]), marks, f[9] or ''}
elseif kind == 'rwlock' then
  local f = redis.call('HMGET', KEYS[1], 'o', 't')
  local since = now - tonumber(ARGV[2])
  local out = {now, f[1] or '', f[2] or '', redis.call('PTTL', KEYS[1]), redis.call('ZCARD', KEYS[2]),
    redis.call('ZCOUNT', KEYS[3], since, '+inf'), redis.call('ZCOUNT', KEYS[4], since, '+inf')}
  local r = redis.call('ZRANGE', KEYS[2], 0, LIMIT - 1, 'WITHSCORES')
  for i = 1, #r do
    out[#out + 1] = r[i]
  end
  return out
elseif kind == 'semaphore' then
  local f = redis.call('HMGET', KEYS[1], 'm', 'a', 'k', 'p')
  if not f[1] then
    return {now, 0}
  end
  local out = {now, 1, f[1], f[2] or '0', f[3] or '', redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
    f[4] and 1 or 0}
  local r = redis.call('ZRANGE', KEYS[2], 0, LIMIT - 1, 'WITHSCORES')
  for i = 1, #r, 2 do
    local client = string.match(r[i], '^(.*):[^:]*$') or r[i]
    local c = redis.call('HMGET', KEYS[1], 'c:' .. client, 'e:' .. client)
    out[#out + 1] = r[i]
    out[#out + 1] = r[i + 1]
    out[#out + 1] = c[1] or '0'
    out[#out + 1] = c[2] or ''
  end
  return out
end
return redis.error_reply('inspect.lua: unknown kind ' .. tostring(kind))
