-- rwlock.lua: every operation of a DistributedReadWriteLock (one script, so reclaim and waking
-- are written once).
--
-- KEYS[1]  w        {p:n}:rw:w        hash: writer o (owner), r (request), t (token); x = last
--                                      released write request. PX = the writer's lease
-- KEYS[2]  fence    {p:n}:rw:fence    fencing counter (every acquisition, read or write, gets one)
-- KEYS[3]  readers  {p:n}:rw:readers  zset: read request -> server ms its lease is known to last
-- KEYS[4]  wwait    {p:n}:rw:wwait    zset: waiting write request -> server ms of its last attempt
-- KEYS[5]  rwait    {p:n}:rw:rwait    zset: waiting read request -> server ms of its last attempt
-- KEYS[6]  wq       {p:n}:rw:wq       wake list of waiting writers (at most one token)
-- KEYS[7]  state    {p:n}:rw:state    hash: admit = server ms of the last write release that had
--                                      readers waiting (readers waiting since then may pass
--                                      writers); wp = a writer waits by pub/sub
-- KEYS[8]  rd       {p:n}:rw:rd:<req> this read request's lease: hash {r = req, t = token}, PX lease
-- KEYS[9]  rx       {p:n}:rw:rx:<req> marker of a released read or write request, PX lease: a
--                                      re-sent release recognises its own earlier success (field
--                                      x of w keeps only the last write release)
-- ARGV[1]  op       read | write | runlock | wunlock | rcancel | wcancel | wpass | count
-- ARGV[2]  owner    "<clientId>:<threadId>"
-- ARGV[3]  request  "<clientId>:<seq>"
-- ARGV[4]  lease ms
-- ARGV[5]  prefix   "{p:n}:rw:" (the lease keys of other readers are derived from it: same slot)
-- ARGV[6]  read only: server ms at which this JVM's readers started waiting (0 = not waiting;
--          -1 = tryLock(), which barges past waiting writers as ReentrantReadWriteLock's does)
-- ARGV[7]  write only: "1" if the writer waits by pub/sub (a refusal sets state field wp)
-- ARGV[8]  readers' channel {p:n}:rw:rch: waiting readers are always subscribed to it
-- ARGV[9]  writers' channel {p:n}:rw:wch
-- ARGV[10] the publish command: PUBLISH, or SPUBLISH on a Redis 7 Cluster
--
-- Policy (phase-fair): a waiting writer stops new readers; a write release admits every reader
-- that was already waiting, even past waiting writers; the last reader out wakes one writer.
-- Waiting entries are refreshed by every attempt (waiters re-attempt at least every lease/2) and
-- count only while younger than one lease, so a dead waiter stops mattering within a lease.

local w, fence, readers, wwait, rwait, wq, state, rd, rx =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local publish, rch, wch = ARGV[10], ARGV[8], ARGV[9]
local op, owner, req, lease, prefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]

-- Dead readers dropped by this call (reclaim_readers). The read and write ops report it as the
-- 4th element of their reply, and count as the 3rd, for the client's metrics and log; the other
-- ops reclaim silently.
local reclaimed = 0

local t_now = nil
local function now()
  if not t_now then
    local t = redis.call('TIME')
    t_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return t_now
end

local function next_token()
  local t = redis.call('TIME')
  local us = t[1] .. string.format('%06d', tonumber(t[2]))
  local cur = redis.call('GET', fence)
  if (not cur) or tonumber(cur) < tonumber(us) then
    redis.call('SET', fence, us)
    return us
  end
  redis.call('INCR', fence)
  return redis.call('GET', fence)
end

-- Readers whose recorded lease bound has passed: keep the live ones (raising the bound), drop
-- the dead ones. O(log n) when none is due.
local function reclaim_readers()
  local due = redis.call('ZRANGEBYSCORE', readers, '-inf', now())
  for _, r in ipairs(due) do
    local pttl = redis.call('PTTL', prefix .. 'rd:' .. r)
    if pttl > 0 then
      redis.call('ZADD', readers, now() + pttl, r)
    else
      redis.call('ZREM', readers, r)
      reclaimed = reclaimed + 1
    end
  end
  return redis.call('ZCARD', readers)
end

local function live(zset)
  redis.call('ZREMRANGEBYSCORE', zset, '-inf', now() - lease)
  return redis.call('ZCARD', zset)
end

-- Wake one writer: a token for a writer blocked on wq, and a message if a writer waits by pub/sub.
local function wake_writer()
  if redis.call('LLEN', wq) == 0 then
    redis.call('RPUSH', wq, '1')
    redis.call('PEXPIRE', wq, lease)
  end
  if redis.call('HDEL', state, 'wp') == 1 then
    redis.call(publish, wch, '1')
  end
end

-- Wake every waiting reader: one message on the readers' channel, to which every waiting reader
-- is subscribed (one subscriber per JVM), whatever their number.
local function wake_readers(admit)
  local n = live(rwait)
  if n > 0 then
    if admit then
      redis.call('HSET', state, 'admit', now())
    end
    redis.call(publish, rch, '1')
  end
  return n
end

-- The hint for a blocked waiter: how long the obstacle can last at most, never above lease / 2.
local function cap(ms)
  return math.max(0, math.min(ms, math.floor(lease / 2)))
end

local function earliest_reader_ms()
  local first = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return lease
  end
  return tonumber(first[2]) - now()
end

local function earliest_waiting_writer_expiry_ms()
  local first = redis.call('ZRANGE', wwait, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return lease
  end
  return tonumber(first[2]) + lease - now()
end

local function release_write()
  redis.call('HDEL', w, 'o', 'r', 't')
  redis.call('HSET', w, 'x', req)
  redis.call('PEXPIRE', w, lease)
  redis.call('SET', rx, '1', 'PX', lease)
  if wake_readers(true) == 0 then
    wake_writer()
  end
end

local function release_read()
  redis.call('DEL', rd)
  redis.call('ZREM', readers, req)
  redis.call('SET', rx, '1', 'PX', lease)
  if reclaim_readers() == 0 then
    wake_writer()
  end
end

if op == 'read' then
  -- {1, token, 0, reclaimed} granted; {0, hintMs, nowMs, reclaimed} must wait
  if redis.call('HGET', rd, 'r') == req then
    redis.call('PEXPIRE', rd, lease)
    return {1, redis.call('HGET', rd, 't'), 0, 0}
  end
  local o = redis.call('HGET', w, 'o')
  if o and o ~= owner then
    redis.call('ZADD', rwait, now(), req)
    return {0, cap(redis.call('PTTL', w)), now(), 0}
  end
  if (not o) and live(wwait) > 0 then
    local since = tonumber(ARGV[6] or '0')
    local admit = tonumber(redis.call('HGET', state, 'admit') or '0')
    if since == 0 or since > admit then
      redis.call('ZADD', rwait, now(), req)
      return {0, cap(earliest_waiting_writer_expiry_ms()), now(), 0}
    end
  end
  reclaim_readers()
  local token = next_token()
  redis.call('HSET', rd, 'r', req, 't', token)
  redis.call('PEXPIRE', rd, lease)
  redis.call('ZADD', readers, now() + lease, req)
  redis.call('ZREM', rwait, req)
  return {1, token, 0, reclaimed}
end

if op == 'write' then
  -- {1, token, 0, reclaimed} granted; {0, hintMs, nowMs, reclaimed} must wait
  local o = redis.call('HGET', w, 'o')
  local function wait_write()
    redis.call('ZADD', wwait, now(), req)
    if ARGV[7] == '1' then
      redis.call('HSET', state, 'wp', 1)
    end
  end
  if o then
    if o ~= owner then
      wait_write()
      return {0, cap(redis.call('PTTL', w)), now(), 0}
    end
    if redis.call('HGET', w, 'r') == req then
      redis.call('PEXPIRE', w, lease)
      return {1, redis.call('HGET', w, 't'), 0, 0}
    end
  end
  if reclaim_readers() > 0 then
    wait_write()
    return {0, cap(earliest_reader_ms()), now(), reclaimed}
  end
  local token = next_token()
  redis.call('HSET', w, 'o', owner, 'r', req, 't', token)
  redis.call('PEXPIRE', w, lease)
  redis.call('ZREM', wwait, req)
  return {1, token, 0, reclaimed}
end

if op == 'wunlock' then
  -- 1 released, 2 already released (replay), 0 not held by this request
  if redis.call('HGET', w, 'r') == req then
    release_write()
    return 1
  end
  if redis.call('HGET', w, 'x') == req or redis.call('EXISTS', rx) == 1 then
    return 2
  end
  return 0
end

if op == 'runlock' then
  if redis.call('HGET', rd, 'r') == req then
    release_read()
    return 1
  end
  if redis.call('EXISTS', rx) == 1 then
    return 2
  end
  -- lost (expired or deleted): whatever is left of this request stops counting as a reader now
  if redis.call('ZREM', readers, req) == 1 and reclaim_readers() == 0 then
    wake_writer()
  end
  return 0
end

if op == 'wcancel' then
  -- a writer gave up: undo a grant it will not use, and stop blocking readers on its account
  redis.call('ZREM', wwait, req)
  if redis.call('HGET', w, 'r') == req then
    release_write()
  elseif not redis.call('HGET', w, 'o') and live(wwait) == 0 then
    wake_readers(false)
  end
  return 1
end

if op == 'rcancel' then
  redis.call('ZREM', rwait, req)
  if redis.call('HGET', rd, 'r') == req then
    release_read()
  end
  return 1
end

if op == 'wpass' then
  -- hand on a writer's wake token if a writer could proceed now
  if not redis.call('HGET', w, 'o') and reclaim_readers() == 0 then
    wake_writer()
  end
  return 1
end

if op == 'count' then
  -- {readers, write held 0/1, reclaimed}
  local o = redis.call('HGET', w, 'o')
  local n = reclaim_readers()
  return {n, o and 1 or 0, reclaimed}
end

return redis.error_reply('rwlock.lua: unknown op ' .. tostring(op))
