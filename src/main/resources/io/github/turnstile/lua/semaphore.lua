-- semaphore.lua: every operation of a DistributedSemaphore, so that the reclaim of dead clients
-- (which every operation runs first) is written once.
--
-- Representation (bounded work: no call loops once per permit). Free permits are a counter
-- (meta field "avail") plus up to K tokens on the hand-off list, which waiters BLMOVE from (a
-- token moved into a client's inflight list is a permit held by that client: taking it and
-- recording the holder is one step). Held permits are a counter per client (hash "holders") plus
-- the tokens in that client's inflight list, which its next script folds into the counter.
--
-- KEYS[1]  meta      {p:name}:s:meta         hash: cap, avail (free permits off the list; negative
--                                             = debt after reducePermits), p (a waiter waits by pub/sub)
-- KEYS[2]  handoff   {p:name}:s:handoff      list of free permit tokens ("1"); waiters BLMOVE from it
-- KEYS[3]  clients   {p:name}:s:clients      zset: client id -> server ms until which its liveness is
--                                             known to last (a lower bound: renewals do not update it)
-- KEYS[4]  inflight  {p:name}:s:inflight:<c> list: tokens this client's BLMOVEs took (permits it holds)
-- KEYS[5]  alive     {p:name}:s:alive:<c>    hash {r = client id}, PX lease: this client's liveness
-- KEYS[6]  holders   {p:name}:s:holders      hash: client id -> permits it holds (besides inflight);
--                                             t:<client> -> sequence number of its last trim
-- KEYS[7]  gone      {p:name}:s:gone         zset: reclaimed client -> server ms until which a late
--                                             BLMOVE of its may still drop a token in its inflight list
-- ARGV[1]  op        init | acquire | release | trim | drain | add | reduce | state
-- ARGV[2]  client id
-- ARGV[3]  lease ms
-- ARGV[4]  key prefix of client keys, "{p:name}:s:" (other clients' inflight/alive keys are
--          derived from it; they share the hash tag, hence the slot)
-- ARGV[5]  capacity this client was created with (used only when no meta exists)
-- ARGV[6]  op argument: permits (acquire, release, add, reduce); trim: the least count Redis may
--          rightly attribute to this client (what it counts)
-- ARGV[7]  acquire: "all" (all or nothing) or "some" (take what is free, up to ARGV[6]); trim: the
--          most (what it counts, plus what its commands in flight may add or not yet have given back)
-- ARGV[8]  request id, unique per call (acquire, release, drain, add, reduce): a call that changed
--          something stores its reply under {p:name}:s:rq:<request> for one lease, and a re-sent
--          copy of the call (Lettuce re-sends unanswered commands after a reconnect) gets that
--          reply back instead of running twice
-- ARGV[9]  acquire: "1" if the caller waits by pub/sub: a refusal sets meta field p, and the
--          next call that frees a permit publishes a wake-up; trim: its sequence number (a trim
--          not above the last one run for this client, holders field t:<client>, is ignored)
-- ARGV[10] the semaphore's wake-up channel {p:name}:s:ch
-- ARGV[11] the publish command: PUBLISH, or SPUBLISH on a Redis 7 Cluster
--
-- Every reply is an array whose last element is added by reply(): the number of crashed clients
-- whose permits this call reclaimed (the client reports them in its metrics and log).
--
-- Invariants after every call:
--   avail + LLEN(handoff) + sum over clients (holders[c] + LLEN(inflight:c)) == cap
--   avail < 0 implies handoff is empty (an owed permit is never handed off)
--   avail > 0 implies LLEN(handoff) == K (BLMOVE sees a free permit whenever one is free, up to K)
-- Work per call: O(1) commands, plus at most K list elements moved and at most RECLAIM_MAX dead
-- clients reclaimed, whatever the arguments.

local meta, handoff, clients, inflight, alive, holders, gone =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local op, cid, lease, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local RECLAIM_MAX = 16
local K_MAX = 256

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local t_now = nil
local function now()
  t_now = t_now or now_ms()
  return t_now
end

-- Permits that became free in this call (0 -> more): tier-2 (pub/sub) waiters are told in reply().
local freed = 0
local reclaimed = 0

local function avail()
  return tonumber(redis.call('HGET', meta, 'avail') or '0')
end

-- Hand-off tokens to keep: one per registered client (each client has at most one waiter
-- blocked in BLMOVE), at least one, at most K_MAX.
local function k_target()
  return math.max(1, math.min(redis.call('ZCARD', clients), K_MAX))
end

-- Restores "avail > 0 implies LLEN(handoff) == K": moves counted free permits onto the list,
-- where a blocked BLMOVE takes one at once (the longest-blocked first).
local function refill()
  local a = avail()
  if a <= 0 then
    return
  end
  local want = k_target() - redis.call('LLEN', handoff)
  local move = math.min(a, want)
  if move > 0 then
    local tokens = {}
    for i = 1, move do
      tokens[i] = '1'
    end
    redis.call('HINCRBY', meta, 'avail', -move)
    redis.call('RPUSH', handoff, unpack(tokens))
  end
end

-- k permits come back (a release, a reclaim, added capacity): they pay debt first, then are free.
local function put_back(k)
  if k <= 0 then
    return
  end
  local after = redis.call('HINCRBY', meta, 'avail', k)
  freed = freed + math.max(0, after) - math.max(0, after - k)
end

-- Tokens a BLMOVE moved into client c's inflight list join its counter.
local function fold(c, list)
  local k = redis.call('LLEN', list)
  if k > 0 then
    redis.call('DEL', list)
    redis.call('HINCRBY', holders, c, k)
  end
end

local function held_by(c)
  return tonumber(redis.call('HGET', holders, c) or '0')
end

local function set_held(c, n)
  if n > 0 then
    redis.call('HSET', holders, c, n)
  else
    redis.call('HDEL', holders, c)
  end
end

local function reply(t)
  refill()
  if freed > 0 and redis.call('HGET', meta, 'p') then
    -- a waiter waits by pub/sub (it set p when refused): one message wakes every such waiter
    redis.call('HDEL', meta, 'p')
    redis.call(ARGV[11], ARGV[10], '1')
  end
  t[#t + 1] = reclaimed
  return t
end

-- Clients whose liveness ran out get their permits taken back: at most RECLAIM_MAX per call, and
-- only clients whose recorded liveness bound has passed are looked at (O(log n) when none has). A
-- live one gets its bound raised to its real expiry. A dead one is forgotten, and watched one more
-- lease in "gone": a BLMOVE it sent before it died may still move a token into its inflight list,
-- and that token is reclaimed when the watch ends. So work per call stays bounded however many
-- clients ever registered, and however many die at once.
local function reclaim()
  local due = redis.call('ZRANGEBYSCORE', clients, '-inf', now(), 'LIMIT', 0, RECLAIM_MAX)
  for _, c in ipairs(due) do
    local pttl = redis.call('PTTL', prefix .. 'alive:' .. c)
    if pttl > 0 then
      redis.call('ZADD', clients, now() + pttl, c)
    else
      local list = prefix .. 'inflight:' .. c
      local k = held_by(c) + redis.call('LLEN', list)
      if k > 0 then
        reclaimed = reclaimed + 1
        redis.call('DEL', list)
        put_back(k)
      end
      redis.call('HDEL', holders, c, 't:' .. c)
      redis.call('ZREM', clients, c)
      redis.call('ZADD', gone, now() + lease, c)
    end
  end
  local late = redis.call('ZRANGEBYSCORE', gone, '-inf', now(), 'LIMIT', 0, RECLAIM_MAX)
  for _, c in ipairs(late) do
    redis.call('ZREM', gone, c)
    if redis.call('PTTL', prefix .. 'alive:' .. c) <= 0 then
      local list = prefix .. 'inflight:' .. c
      local k = redis.call('LLEN', list)
      if k > 0 then
        reclaimed = reclaimed + 1
        redis.call('DEL', list)
        put_back(k)
      end
    end
  end
end

-- The wait hint: ms until the earliest recorded liveness bound of another client, at most
-- lease / 2. A waiter blocks no longer than this, then runs a script again (which reclaims). A
-- client that registers later cannot expire before that: its liveness lasts a whole lease.
local function hint()
  local h = math.floor(lease / 2)
  local first = redis.call('ZRANGEBYSCORE', clients, '(' .. now(), '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
  for i = 1, #first, 2 do
    if first[i] ~= cid then
      h = math.min(h, tonumber(first[i + 1]) - now())
      break
    end
  end
  return h
end

local cap = redis.call('HGET', meta, 'cap')
if not cap then
  -- first use (or state lost): create with this client's capacity, all of it free
  cap = tonumber(ARGV[5])
  redis.call('HSET', meta, 'cap', cap, 'avail', cap)
else
  cap = tonumber(cap)
end

-- A re-sent call whose first run changed something: answer as the first run did.
local memo = ARGV[8] and ARGV[8] ~= '' and (prefix .. 'rq:' .. ARGV[8]) or nil
if memo then
  local done = redis.call('GET', memo)
  if done then
    local first = {}
    for v in string.gmatch(done, '[^,]+') do
      first[#first + 1] = tonumber(v)
    end
    first[#first + 1] = 0 -- nothing reclaimed by this copy
    return first
  end
end

-- Records the reply of a call that changed something (see ARGV[8]) and returns it.
local function remember(t)
  if memo then
    redis.call('SET', memo, table.concat(t, ','), 'PX', lease)
  end
  return reply(t)
end

if op == 'init' then
  return reply({cap, avail() + redis.call('LLEN', handoff)})
end

reclaim()

local function register()
  redis.call('HSET', alive, 'r', cid)
  redis.call('PEXPIRE', alive, lease)
  redis.call('ZADD', clients, now() + lease, cid)
end

local n = tonumber(ARGV[6] or '0')

if op == 'acquire' then
  -- returns {taken, hintMs, cap}
  if n > cap then
    return reply({-1, 0, cap})
  end
  register()
  fold(cid, inflight)
  local a = avail()
  local free = math.max(0, a) + redis.call('LLEN', handoff)
  local take = 0
  if free >= n then
    take = n
  elseif ARGV[7] == 'some' then
    take = free
  end
  if take > 0 then
    local from_counter = math.min(take, math.max(0, a))
    if from_counter > 0 then
      redis.call('HINCRBY', meta, 'avail', -from_counter)
    end
    local from_list = take - from_counter
    if from_list > 0 then
      redis.call('LPOP', handoff, from_list)
    end
    redis.call('HINCRBY', holders, cid, take)
  end
  if take < n and ARGV[9] == '1' then
    redis.call('HSET', meta, 'p', 1)
  end
  if take > 0 then
    return remember({take, hint(), cap})
  end
  return reply({take, hint(), cap})
end

if op == 'release' then
  -- gives back what this client holds, up to n: {given, heldAfter, hintMs}; given < n means
  -- Redis attributed fewer permits to this client than it released (its lease was lost)
  fold(cid, inflight)
  local h = held_by(cid)
  local give = math.min(n, h)
  if give > 0 then
    set_held(cid, h - give)
    put_back(give)
    return remember({give, h - give, hint()})
  end
  return reply({0, h, hint()})
end

if op == 'trim' then
  -- reconciles this client's permits with the range [low, high] it may rightly hold: gives back
  -- the excess above high (a lost reply, a discarded BLMOVE, a late BLMOVE after its lease was
  -- lost, a release that never arrived); {returned, missing}, missing > 0 when Redis attributes
  -- fewer than low (they were reclaimed: the client lost its lease); {returned, missing, heldAfter}.
  -- Idempotent.
  local high = tonumber(ARGV[7])
  local seq = tonumber(ARGV[9])
  local last = tonumber(redis.call('HGET', holders, 't:' .. cid) or '0')
  fold(cid, inflight)
  local h = held_by(cid)
  if seq <= last then
    -- a trim the client gave up on (queued for a dead master, delivered late): its range is stale
    return reply({0, 0, h})
  end
  redis.call('HSET', holders, 't:' .. cid, seq)
  if h > high then
    set_held(cid, high)
    put_back(h - high)
    return reply({h - high, 0, high})
  end
  return reply({0, math.max(0, n - h), h})
end

if op == 'drain' then
  -- all free permits to this client; returns {moved}
  register()
  fold(cid, inflight)
  local a = avail()
  local listed = redis.call('LLEN', handoff)
  local moved = math.max(0, a) + listed
  if a > 0 then
    redis.call('HSET', meta, 'avail', 0)
  end
  if listed > 0 then
    redis.call('DEL', handoff)
  end
  if moved > 0 then
    redis.call('HINCRBY', holders, cid, moved)
  end
  return remember({moved})
end

if op == 'add' then
  -- {newCap}, or {-1} when the capacity would exceed 2^31 - 1 (an int on the client)
  if cap + n > 2147483647 then
    return reply({-1})
  end
  redis.call('HINCRBY', meta, 'cap', n)
  put_back(n)
  return remember({cap + n})
end

if op == 'reduce' then
  -- {newCap}, or {-1} when n exceeds the capacity
  if n > cap then
    return reply({-1})
  end
  redis.call('HINCRBY', meta, 'cap', 0 - n)
  local a = redis.call('HINCRBY', meta, 'avail', 0 - n)
  if a < 0 then
    -- owed permits are never handed off: take tokens back from the list to pay the debt
    local back = math.min(redis.call('LLEN', handoff), -a)
    if back > 0 then
      redis.call('LPOP', handoff, back)
      redis.call('HINCRBY', meta, 'avail', back)
    end
  end
  return remember({cap - n})
end

if op == 'state' then
  -- {cap, debt, free, held by all clients, available}: O(1), held is what conservation leaves
  local a = avail()
  local listed = redis.call('LLEN', handoff)
  return reply({cap, math.max(0, -a), math.max(0, a) + listed, cap - a - listed, a + listed})
end

return redis.error_reply('semaphore.lua: unknown op ' .. tostring(op))
