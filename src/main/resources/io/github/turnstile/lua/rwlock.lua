-- rwlock.lua: every operation of a DistributedReadWriteLock (one script, so reclaim and waking
-- are written once).
--
-- KEYS[1]  w        {p:n}:rw:w        hash: writer o (owner, only while held), r (request) and t
--                                      (token) of the writer or of the last write hold, e (the
--                                      first write token granted after a write record was found
--                                      gone). PX = the writer's lease
-- KEYS[2]  fence    {p:n}:rw:fence    the last fencing token issued (every acquisition, read or
--                                      write, gets one)
-- KEYS[3]  readers  {p:n}:rw:readers  zset: read request -> server ms its lease is known to last
-- KEYS[4]  wwait    {p:n}:rw:wwait    zset: waiting write request -> server ms of its last attempt
-- KEYS[5]  rwait    {p:n}:rw:rwait    zset: waiting read request -> server ms of its last attempt
-- KEYS[6]  wq       {p:n}:rw:wq       wake list of waiting writers (at most one token)
-- KEYS[7]  state    {p:n}:rw:state    hash: admit = server ms of the last write release that had
--                                      readers waiting (readers waiting since then may pass
--                                      writers); wp = a writer waits by pub/sub
-- KEYS[8]  rd       {p:n}:rw:rd:<req> this read request's lease: hash {r = req, t = token}, PX
--                                      lease; its release removes r and leaves t until the lease ends
-- ARGV[1]  op       read | write | runlock | wunlock | rcancel | wcancel | wpass | count
-- ARGV[2]  owner    "<clientId>:<threadId>"
-- ARGV[3]  request  "<clientId>:<seq>"
-- ARGV[4]  lease ms
-- ARGV[5]  optional (0 when absent): read: server ms at which this JVM's readers started waiting
--          (0 = not waiting; -1 = tryLock(), which barges past waiting writers as
--          ReentrantReadWriteLock's does); wunlock: the fencing token of the write hold released
--          (0 = unknown)
-- ARGV[6]  optional ("" when absent): write: flags, "s" if the writer waits by pub/sub (a refusal
--          sets state field wp)
-- ARGV[7]  optional: the publish command: PUBLISH (when absent), or SPUBLISH on a Redis 7 Cluster
--
-- Derived from KEYS[1] (so not sent with every call): the prefix "{p:n}:rw:" (the lease keys of
-- other readers are prefix .. "rd:" .. request: same slot), the readers' channel prefix .. "rch"
-- (waiting readers are always subscribed to it) and the writers' channel prefix .. "wch".
--
-- Policy (phase-fair): a waiting writer stops new readers; a write release admits every reader
-- that was already waiting, even past waiting writers; the last reader out wakes one writer.
-- Waiting entries are refreshed by every attempt (waiters re-attempt at least every lease/2) and
-- count only while younger than one lease, so a dead waiter stops mattering within a lease.
-- Nothing is done for waiters when none waits: the waiting sets are counted (ZCARD) first.

local w, fence, readers, wwait, rwait, wq, state, rd =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local op, owner, req, leasems = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local publish = ARGV[7] or 'PUBLISH'
local lease = leasems + 0 -- arithmetic; leasems (the argument) for PEXPIRE: no number formatting

-- Redis does not roll a script back. The releases and cancels, which write more than once, first
-- ask the ACL about every write they may make (Redis 7.0 and later: redis.acl_check_cmd), and are
-- refused before their first write (a NOPERM error naming the command): a write refused after
-- another would leave the lock free with its waiters asleep. Not defined for a read attempt.
local permit, permit_wakes, permit_release
if op ~= 'read' then
  permit = function(cmd, key, ...)
    if redis.acl_check_cmd and not redis.acl_check_cmd(cmd, key, ...) then
      error({err = "NOPERM this user has no permissions to run the '" .. string.lower(cmd) .. "' command on "
        .. key .. ", asked before the script's first write: nothing was changed"})
    end
  end
  -- the writes of waking a writer (a token, a message) and, with readers, of admitting them
  permit_wakes = function(readers_too)
    local ch = string.sub(w, 1, -2)
    permit('RPUSH', wq, '1')
    permit('PEXPIRE', wq, leasems)
    permit('HDEL', state, 'wp')
    permit(publish, ch .. 'wch', '1')
    if readers_too then
      permit('ZREMRANGEBYSCORE', rwait, '-inf', '0')
      permit('HSET', state, 'admit', '0')
      permit(publish, ch .. 'rch', '1')
    end
  end
  -- every write of the rarer releases and cancels: ending a hold, dropping waiting entries and
  -- dead readers, and the wake-ups
  permit_release = function()
    permit('ZREM', readers, req)
    permit('HDEL', w, 'o')
    permit('HDEL', rd, 'r')
    permit('ZADD', readers, '0', req)
    permit('ZREMRANGEBYSCORE', wwait, '-inf', '0')
    permit_wakes(true)
  end
end

-- The read ops, the frequent ones of a read-mostly lock, are written out first, before the other
-- helpers are defined (each call of this script would otherwise create them all): a read release,
-- and a read attempt. Reads reclaim no dead reader: writers do, when they need the count. A read
-- release asks the ACL only about its second write, and about the wake-up if it is the last
-- reader out while a writer waits (known before it writes: this request leaves readers empty).
local last -- runlock: the last reader out while a writer waits
if op == 'runlock' then
  permit('ZREM', readers, req)
  last = redis.call('ZCARD', wwait) > 0
    and redis.call('ZCARD', readers) == (redis.call('ZSCORE', readers, req) and 1 or 0)
  if last then
    permit_wakes(false)
  end
end
if op == 'runlock' and redis.call('HDEL', rd, 'r') == 1 then -- r is only ever this request's
  redis.call('ZREM', readers, req)
  if not last then
    return 1 -- no writer waits (one call when no writer waits, the read-mostly case), or readers remain
  end
  -- the last reader out, and a writer waits: wake it (as wake_writer below)
  if redis.call('LLEN', wq) == 0 then
    redis.call('RPUSH', wq, '1')
    redis.call('PEXPIRE', wq, leasems)
  end
  if redis.call('HDEL', state, 'wp') == 1 then
    redis.call(publish, string.sub(w, 1, -2) .. 'wch', '1')
  end
  return 1
end
if op == 'read' then
  -- {1, token, writersWaiting 0/1, 0} granted; {0, hintMs, nowMs, 0} must wait
  if redis.call('HGET', rd, 'r') == req then
    redis.call('PEXPIRE', rd, leasems)
    return {1, redis.call('HGET', rd, 't'), 0, 0}
  end
  local o = redis.call('HGET', w, 'o')
  local tm = redis.call('TIME')
  -- (arithmetic on the decimal strings converts them: no tonumber or math.floor calls on a grant)
  local us = tm[2]
  local ms = tm[1] * 1000 + (us - us % 1000) / 1000
  if o and o ~= owner then
    redis.call('ZADD', rwait, ms, req)
    return {0, math.max(0, math.min(redis.call('PTTL', w), math.floor(lease / 2))), ms, 0} -- hints: lease / 2 at most
  end
  -- the first live waiting writer, found without removing the dead ones (the write ops do that):
  -- one call both tells whether one waits and gives the hint. The admission is read only for a
  -- reader that has waited (since ~= 0): a first-time reader never passes a waiting writer.
  local first = nil
  if not o then
    first = redis.call('ZRANGEBYSCORE', wwait, ms - lease, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    local since = #first > 0 and tonumber(ARGV[5] or '0')
    if since and (since == 0 or since > tonumber(redis.call('HGET', state, 'admit') or '0')) then
      redis.call('ZADD', rwait, ms, req)
      return {0, math.max(0, math.min(tonumber(first[2]) + lease - ms, math.floor(lease / 2))), ms, 0}
    end
  end
  -- the token as next_token below: max(fence + 1, server time in µs)
  local token = tm[1] .. (#us == 6 and us or string.sub('00000' .. us, -6))
  local prev = redis.call('SET', fence, token, 'GET')
  if prev and prev + 0 >= token + 0 then
    token = string.format('%.0f', tonumber(prev) + 1)
    redis.call('SET', fence, token)
  end
  redis.call('HSET', rd, 'r', req, 't', token)
  redis.call('PEXPIRE', rd, leasems)
  redis.call('ZADD', readers, ms + lease, req)
  -- this request's waiting entry, if an earlier attempt of it was refused: always removed. The
  -- client cannot know of every refusal: a copy sent again after a reconnect (Lettuce re-sends
  -- what was in flight) answers for both, and the first may have been refused. An entry left
  -- behind made write releases admit readers that never came, and not wake the waiting writer.
  redis.call('ZREM', rwait, req)
  -- 3rd element: 1 if granted past a live waiting writer (an admitted reader), so the client
  -- knows a new reader of its would be refused
  return {1, token, (first and #first > 0) and 1 or 0, 0}
end

local prefix = string.sub(w, 1, -2) -- "{p:n}:rw:"

-- Dead readers dropped by this call (reclaim_readers). The read and write ops report it as the
-- 4th element of their reply, and count as the 3rd, for the client's metrics and log; the other
-- ops reclaim silently.
local reclaimed = 0

-- One TIME per call: the server ms of waiting entries and leases, and the µs of a token.
local tm, t_now = nil, nil
local function now()
  if not tm then
    tm = redis.call('TIME')
    t_now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  end
  return t_now
end

-- max(fence + 1, server time in µs), as a decimal string: one SET ... GET in the usual case.
local function next_token()
  now()
  local us = tm[1] .. string.sub('00000' .. tm[2], -6)
  local prev = redis.call('SET', fence, us, 'GET')
  if prev and tonumber(prev) >= tonumber(us) then
    local token = string.format('%.0f', tonumber(prev) + 1)
    redis.call('SET', fence, token)
    return token
  end
  return us
end

-- Readers whose recorded lease bound has passed: keep the live ones (raising the bound), drop
-- the dead ones. O(log n) when none is due; one ZCARD when there is no reader.
local function reclaim_readers()
  local n = redis.call('ZCARD', readers)
  if n == 0 then
    return 0
  end
  local due = redis.call('ZRANGEBYSCORE', readers, '-inf', now())
  local dropped = 0
  for _, r in ipairs(due) do
    local pttl = redis.call('PTTL', prefix .. 'rd:' .. r)
    if pttl > 0 then
      redis.call('ZADD', readers, now() + pttl, r)
    else
      redis.call('ZREM', readers, r)
      dropped = dropped + 1
    end
  end
  reclaimed = reclaimed + dropped
  return n - dropped
end

-- The live entries of a waiting set (younger than one lease); one ZCARD when it is empty.
local function live(zset)
  if redis.call('ZCARD', zset) == 0 then
    return 0
  end
  redis.call('ZREMRANGEBYSCORE', zset, '-inf', now() - lease)
  return redis.call('ZCARD', zset)
end

-- Wake one writer, if one waits (known: the caller counted wwait): a token for a writer blocked
-- on wq, and a message if a writer waits by pub/sub.
local function wake_writer(known)
  if not known and redis.call('ZCARD', wwait) == 0 then
    return
  end
  if redis.call('LLEN', wq) == 0 then
    redis.call('RPUSH', wq, '1')
    redis.call('PEXPIRE', wq, leasems)
  end
  if redis.call('HDEL', state, 'wp') == 1 then
    redis.call(publish, prefix .. 'wch', '1')
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
    redis.call(publish, prefix .. 'rch', '1')
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

-- The write hold ends: o goes, r and t stay (the record: a re-sent wunlock answers 2). Waiting
-- readers are admitted, or else a waiting writer woken.
local function release_write()
  redis.call('HDEL', w, 'o')
  if wake_readers(true) == 0 then
    wake_writer()
  end
end

-- The read hold ends: r goes from its lease key, which stays until the lease ends (a re-sent
-- runlock answers 2). The last reader out wakes a waiting writer. Dead readers are not reclaimed
-- here: a writer waiting behind one retries when its recorded lease bound passes (its hint), and
-- reclaims it then.
local function release_read()
  redis.call('HDEL', rd, 'r')
  redis.call('ZREM', readers, req)
  if redis.call('ZCARD', readers) == 0 and redis.call('ZCARD', wwait) > 0 then
    wake_writer(true)
  end
end

if op == 'write' then
  -- {1, token, 0, reclaimed} granted; {0, hintMs, nowMs, reclaimed} must wait
  local f = redis.call('HMGET', w, 'o', 'r', 't')
  local o = f[1]
  local function wait_write()
    redis.call('ZADD', wwait, now(), req)
    if ARGV[6] == 's' then
      redis.call('HSET', state, 'wp', '1')
    end
  end
  if o then
    if o ~= owner then
      wait_write()
      return {0, cap(redis.call('PTTL', w)), now(), 0}
    end
    if f[2] == req then
      redis.call('PEXPIRE', w, leasems)
      return {1, f[3], 0, 0}
    end
  end
  if reclaim_readers() > 0 then
    wait_write()
    return {0, cap(earliest_reader_ms()), now(), reclaimed}
  end
  local token = next_token()
  if f[3] then
    redis.call('HSET', w, 'o', owner, 'r', req, 't', token)
  else
    redis.call('HSET', w, 'o', owner, 'r', req, 't', token, 'e', token)
  end
  redis.call('PEXPIRE', w, leasems)
  redis.call('ZREM', wwait, req)
  return {1, token, 0, reclaimed}
end

if op == 'wunlock' then
  permit_wakes(true)
  -- 1 released, 2 already released (a copy sent again), 0 not held by this request
  if redis.call('HGET', w, 'r') == req then
    if redis.call('HDEL', w, 'o') == 0 then
      return 2
    end
    if wake_readers(true) == 0 then
      wake_writer()
    end
    return 1
  end
  -- moved on to a later write hold: released, unless this hold may have ended by expiry (its
  -- token is below e, the first token granted after a write record was found gone)
  local token = tonumber(ARGV[5] or '0')
  if token > 0 then
    local g = redis.call('HMGET', w, 't', 'e')
    if g[1] and token < tonumber(g[1]) and token >= tonumber(g[2] or 0) then
      return 2
    end
  end
  return 0
end

if op == 'runlock' then
  -- not held by this request any more (the release above found no r)
  permit_release()
  if redis.call('EXISTS', rd) == 1 then
    return 2 -- released before: its lease key stays, without r, until the lease ends
  end
  -- lost (expired or deleted): whatever is left of this request stops counting as a reader now
  if redis.call('ZREM', readers, req) == 1 and redis.call('ZCARD', wwait) > 0 and reclaim_readers() == 0 then
    wake_writer(true)
  end
  return 0
end

if op == 'wcancel' then
  permit_release()
  -- a writer gave up: undo a grant it will not use, and stop blocking readers on its account
  redis.call('ZREM', wwait, req)
  local f = redis.call('HMGET', w, 'o', 'r')
  if f[1] and f[2] == req then
    release_write()
  elseif not f[1] and live(wwait) == 0 then
    wake_readers(false)
  end
  return 1
end

if op == 'rcancel' then
  permit_release()
  redis.call('ZREM', rwait, req)
  if redis.call('HGET', rd, 'r') == req then
    release_read()
  end
  return 1
end

if op == 'wpass' then
  permit_release()
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
