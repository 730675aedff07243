-- semaphore.lua: every operation of a DistributedSemaphore, so that the reclaim of dead clients
-- (which every operation runs first) is written once.
--
-- KEYS[1]  meta      {p:name}:s:meta      hash: cap (capacity), debt (permits owed by reducePermits)
-- KEYS[2]  free      {p:name}:s:free      list of free permit tokens ("1"); waiters BLMOVE from it
-- KEYS[3]  clients   {p:name}:s:clients   zset: client id -> server ms until which its liveness is
--                                          known to last (a lower bound: renewals do not update it)
-- KEYS[4]  held      {p:name}:s:held:<c>  list: tokens held by this client (BLMOVE destination)
-- KEYS[5]  alive     {p:name}:s:alive:<c> hash {r = client id}, PX lease: this client's liveness
-- ARGV[1]  op        init | acquire | release | trim | drain | add | reduce | state
-- ARGV[2]  client id
-- ARGV[3]  lease ms
-- ARGV[4]  key prefix of client keys, "{p:name}:s:" (other clients' held/alive keys are derived
--          from it; they share the hash tag, hence the slot)
-- ARGV[5]  capacity this client was created with (used only when no meta exists)
-- ARGV[6]  op argument (permits)
-- ARGV[7]  acquire only: "all" (all or nothing) or "some" (take what is free, up to ARGV[6])
-- ARGV[8]  request id, unique per call (acquire, release, drain, add, reduce): a call that changed
--          something stores its reply under {p:name}:s:rq:<request> for one lease, and a re-sent
--          copy of the call (Lettuce re-sends unanswered commands after a reconnect) gets that
--          reply back instead of running twice
-- ARGV[9]  acquire only: "1" if the caller waits by pub/sub: a refusal sets meta field p, and the
--          next call that frees a permit publishes a wake-up
-- ARGV[10] the semaphore's wake-up channel {p:name}:s:ch
-- ARGV[11] the publish command: PUBLISH, or SPUBLISH on a Redis 7 Cluster
--
-- Every reply is an array whose last element is added by reply(): the number of crashed clients
-- whose permits this call reclaimed (the client reports them in its metrics and log).
--
-- Invariant after every call: LLEN(free) + sum over clients LLEN(held:c) == cap + debt, and
-- debt > 0 implies free is empty (so BLMOVE never takes an owed permit).

local meta, free, clients, held, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, cid, lease, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Permits this call put on the free list: if any, waiters that wait by pub/sub are told.
local freed = 0

-- One token leaves a held list: it pays a debt, or goes back to the free list (which serves the
-- longest-blocked BLMOVE waiter at once).
local function give_back(list)
  local debt = tonumber(redis.call('HGET', meta, 'debt') or '0')
  if debt > 0 then
    redis.call('LPOP', list)
    redis.call('HINCRBY', meta, 'debt', -1)
  else
    redis.call('LMOVE', list, free, 'LEFT', 'RIGHT')
    freed = freed + 1
  end
end

local reclaimed = 0
local function reply(t)
  if freed > 0 and redis.call('HGET', meta, 'p') then
    -- a waiter waits by pub/sub (it set p when refused): one message wakes every such waiter
    redis.call('HDEL', meta, 'p')
    redis.call(ARGV[11], ARGV[10], '1')
  end
  t[#t + 1] = reclaimed
  return t
end

local t_now = nil
local function now()
  t_now = t_now or now_ms()
  return t_now
end

-- Clients whose liveness ran out get their tokens taken back. Only clients whose recorded
-- liveness bound has passed are looked at (O(log n) when none has). A live one gets its bound
-- raised to its real expiry; a dead one stays listed for one more lease, so that a token that a
-- late BLMOVE of its drops into its held list is reclaimed as well, then it is forgotten.
local function reclaim()
  local due = redis.call('ZRANGEBYSCORE', clients, '-inf', now(), 'WITHSCORES')
  for i = 1, #due, 2 do
    local c, until_ms = due[i], tonumber(due[i + 1])
    local pttl = redis.call('PTTL', prefix .. 'alive:' .. c)
    if pttl > 0 then
      redis.call('ZADD', clients, now() + pttl, c)
    else
      local list = prefix .. 'held:' .. c
      local tokens = redis.call('LLEN', list)
      if tokens > 0 then
        reclaimed = reclaimed + 1
      end
      for _ = 1, tokens do
        give_back(list)
      end
      if now() - until_ms > lease then
        redis.call('ZREM', clients, c)
        redis.call('DEL', list)
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
  -- first use (or state lost): create with this client's capacity
  cap = tonumber(ARGV[5])
  redis.call('HSET', meta, 'cap', cap, 'debt', 0)
  redis.call('DEL', free)
  for _ = 1, cap do
    redis.call('RPUSH', free, '1')
  end
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
    return reply(first) -- nothing reclaimed by this copy
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
  return reply({cap, redis.call('LLEN', free) - tonumber(redis.call('HGET', meta, 'debt') or '0')})
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
  local avail = redis.call('LLEN', free)
  local take = 0
  if avail >= n then
    take = n
  elseif ARGV[7] == 'some' then
    take = avail
  end
  for _ = 1, take do
    redis.call('LMOVE', free, held, 'LEFT', 'RIGHT')
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
  -- returns {1, heldAfter, hintMs} or {0, held, hintMs} when this client holds fewer than n
  local h = redis.call('LLEN', held)
  if h < n then
    return reply({0, h, hint()})
  end
  for _ = 1, n do
    give_back(held)
  end
  return remember({1, h - n, hint()})
end

if op == 'trim' then
  -- after a BLMOVE whose outcome the client could not learn: keep at most n tokens in this
  -- client's held list, returning the rest; returns {returned}
  local returned = 0
  while redis.call('LLEN', held) > n do
    give_back(held)
    returned = returned + 1
  end
  return reply({returned})
end

if op == 'drain' then
  -- all free permits into this client's held list; returns {moved}
  register()
  local moved = 0
  while redis.call('LMOVE', free, held, 'LEFT', 'RIGHT') do
    moved = moved + 1
  end
  return remember({moved})
end

if op == 'add' then
  local debt = tonumber(redis.call('HGET', meta, 'debt') or '0')
  local pay = math.min(debt, n)
  redis.call('HSET', meta, 'debt', debt - pay, 'cap', cap + n)
  for _ = 1, n - pay do
    redis.call('RPUSH', free, '1')
  end
  freed = n - pay
  return remember({cap + n})
end

if op == 'reduce' then
  local removed = 0
  while removed < n and redis.call('LPOP', free) do
    removed = removed + 1
  end
  redis.call('HINCRBY', meta, 'debt', n - removed)
  redis.call('HSET', meta, 'cap', cap - n)
  return remember({cap - n})
end

if op == 'state' then
  -- {cap, debt, free, held by all listed clients, available}
  local debt = tonumber(redis.call('HGET', meta, 'debt') or '0')
  local total = 0
  for _, c in ipairs(redis.call('ZRANGE', clients, 0, -1)) do -- O(clients): diagnostics only
    total = total + redis.call('LLEN', prefix .. 'held:' .. c)
  end
  local f = redis.call('LLEN', free)
  return reply({cap, debt, f, total, f - debt})
end

return redis.error_reply('semaphore.lua: unknown op ' .. tostring(op))
