-- semaphore.lua: every operation of a DistributedSemaphore. Every change of who holds what is a
-- call keyed by a request (a memo slot and a sequence number of the calling client); a re-sent
-- copy of a call is answered from its stored outcome. Blocking commands never move permits: they
-- only wake (BLPOP on the wake list), as do the messages on the channel.
--
-- KEYS[1]  state   {p:name}:s        hash: a (free permits; negative after reducePermits), m (mode:
--                                    L leased, C counting), k (leased: capacity = a + sum of c:*),
--                                    c:<client> (leased: permits held by that client's registration),
--                                    e:<client> (leased: that registration's epoch), g:<client>
--                                    (leased: the permits ever granted under that registration,
--                                    which renew.lua reports), ec (the last
--                                    epoch issued), p (a waiter waits by pub/sub), n (marks may
--                                    exist in KEYS[3]: releases look there only then)
-- KEYS[2]  live    {p:name}:s:l      zset (leased): "<client>:<epoch>" -> server ms until which that
--                                    registration is alive; renewed by the client's watchdog
-- KEYS[3]  waiters {p:name}:s:w      zset: "<client>:<lane>:<seq>" -> 1, a single-permit request
--                                    blocked on the wake list (lane t: the client's threads, a: its
--                                    async acquisitions); PX two leases, refreshed by every mark (a
--                                    live waiter attempts at least once a lease). A mark names its
--                                    request, so a cancel of an older request never removes it
-- KEYS[4]  wake    {p:name}:s:wake   list of at most one wake token; blocked waiters BLPOP it
-- KEYS[5]  memo    {p:name}:s:q:<me>:<slot>  string: the call's memo slot, "<seq>|<reply>"; PX lease
--                                    (any key of the tag for ops without a slot)
-- ARGV[1]  op: init | acquire | release | cancel | drain | add | reduce | retire | pass | state
-- ARGV[2]  the caller's client id (16 hex digits)
-- ARGV[3]  lease, ms
-- ARGV[4]  memo slot of the call ("" for ops that change no holder: init, pass, state)
-- ARGV[5]  the call's sequence number (unique per client, and the same for every copy of a call)
-- ARGV[6]  permits (acquire, release, add, reduce)
-- ARGV[7]  flags: w = a single-permit request that waits on the wake list: a refusal marks it
--          (waiters), its grant or cancel removes the mark; s = the caller waits by pub/sub: a
--          refusal asks the next call that frees permits to publish; y (release) = the caller
--          yields after a run of local hand-offs while its own threads go on waiting: one wake
--          token is pushed whether or not a waiter is marked, for the first waiter blocked on
--          the list (another client's, or the caller's own head, which may block there
--          before its next attempt), so the permits never lie free while everyone stands back. (There is
--          no "first copy" flag to skip the memo: Lettuce re-sends the very same command after a
--          reconnect, so a first copy can run twice.)
-- ARGV[8]  lane: t or a
-- ARGV[9]  epoch: acquire, drain: the caller's live registration ("0": none), which its watchdog
--          renews; release: the epoch the permits are released from
-- ARGV[10] the channel {p:name}:s:ch
-- ARGV[11] the publish command: PUBLISH, or SPUBLISH on a Redis 7 Cluster
-- ARGV[12] mode (L or C), used when the state does not exist (init, or a call after a restart
--          that lost it)
-- ARGV[13] initial permits, used likewise
-- ARGV[14] acquire, drain: the caller's last epoch that it knows to be dead ("0": none): a
--          registration with that epoch is replaced (its permits are free again)
--
-- Replies (integers):
--   acquire  {1, n, epoch, 0, reclaimed}      granted n permits (epoch 0 in counting mode)
--            {0, 0, 0, hintMs, reclaimed}     refused (or cancelled: the memo says so);
--                                                     hintMs: when a registration may run out
--                                                     (-1: unknown, wait a lease at most)
--            {-1}                                     a stale copy (its slot holds a later call)
--   release  {1, n, free} released; {0, 0, free} the registration is gone (the lease was lost);
--            {-2} overflow (counting mode: more than Integer.MAX_VALUE free); {-1} stale
--   cancel   {n} permits given back (0: the acquire never granted; a later copy of it is refused)
--   drain    {1, moved, epoch}  (moved < 0: a debt that was cancelled, as Semaphore.drainPermits)
--   add      {1, capacity or free, free} or {-2} overflow; reduce likewise, {-2} underflow
--   retire   {1} the caller's registration ARGV[9] is gone, its permits free; {0} it was gone already
--   pass     {pushed};  state {free, capacity, mode (1 L, 2 C), held by the caller, waiting lanes}
--   init     {mode (1 L, 2 C), capacity (leased) or free (counting)}
--
-- Work per call: O(1) commands, plus at most RECLAIM_MAX dead registrations reclaimed. Every key is
-- in KEYS and carries the primitive's hash tag.
local S, L, W, K, Q = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, me, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local slot, seq = ARGV[4], ARGV[5]
local n = tonumber(ARGV[6]) or 0
local flags = ARGV[7] or ''
local lane = me .. ':' .. (ARGV[8] or 't') .. ':' .. seq
local arg_epoch = ARGV[9] or '0'
local dead_epoch = ARGV[14] or '0'
local channel, publish = ARGV[10], ARGV[11]

-- ---------------------------------------------------------------- the fast paths
-- An acquire that finds enough permits, and a release, while nobody waits (no pub/sub flag p, no
-- mark n), the call is no re-sent copy and the caller's registration is the one it renews: the
-- same effect as the general ops below, with no other work (no function is even defined: the
-- general part follows). Any other case (a re-sent copy, a registration to make or replace, a
-- refusal, waiters to wake) runs the general op.
--
-- "No re-sent copy", leased: the call's sequence number is above s:<me>, the highest of the
-- client's calls that ran under its live registration (every call that runs raises it; it goes
-- only with the registration, whose epoch never comes back), so no copy of this call has run and
-- its memo need not be read. A call at or below it (a copy, or a call overtaken by a later one of
-- the same client) reads its memo in the general op. Counting mode has no registration to bound
-- such a field, so there the memo is read: absent, or of an earlier call of the slot (a slot is
-- used again only once every copy of its earlier call has been answered), the call is new.
local memo = false -- the call's memo (GET, once), when it has a slot
local memo_read = false
local f = redis.call('HMGET', S, 'a', 'm', 'k', 'c:' .. me, 'e:' .. me, 'p', 'ec', 'n', 's:' .. me,
  'q:' .. me .. ':' .. slot, 'g:' .. me)
if (op == 'acquire' or op == 'release') and slot ~= '' and f[2] and not f[6] and not f[8]
    and not (op == 'release' and string.find(flags, 'y', 1, true)) then
  local mode_f, e_f = f[2], f[5]
  local new_call = false
  if mode_f == 'L' then
    new_call = e_f and e_f == ARGV[9] and tonumber(seq) > tonumber(f[9] or '0')
  else
    memo, memo_read = redis.call('GET', Q), true
    new_call = not memo or tonumber(string.match(memo, '^(%d+)|')) < tonumber(seq)
  end
  if new_call then
    -- two writes: the memo's is asked first (Redis 7.0+; see permit below)
    if redis.acl_check_cmd and not redis.acl_check_cmd('SET', Q, '0', 'PX', '1') then
      return redis.error_reply("NOPERM this user has no permissions to run the 'set' command on " .. Q
        .. ", asked before the script's first write: nothing was changed")
    end
    local free = tonumber(f[1])
    local held = tonumber(f[4] or '0')
    if op == 'acquire' and free >= n then
      if mode_f == 'C' then
        redis.call('HSET', S, 'a', free - n)
        redis.call('SET', Q, seq .. '|1,' .. n .. ',0,0,0', 'PX', lease)
        return {1, n, 0, 0, 0}
      end
      redis.call('HSET', S, 'a', free - n, 'c:' .. me, held + n, 's:' .. me, seq,
        'g:' .. me, tonumber(f[11] or '0') + n)
      redis.call('SET', Q, seq .. '|1,' .. n .. ',' .. e_f .. ',0,0', 'PX', lease)
      return {1, n, tonumber(e_f), 0, 0}
    elseif op == 'release' and (mode_f == 'L' or free + n <= 2147483647) then
      local give = n
      if mode_f == 'L' then
        give = math.min(n, held)
        redis.call('HSET', S, 'a', free + give, 'c:' .. me, held - give, 's:' .. me, seq)
      else
        redis.call('HSET', S, 'a', free + give)
      end
      redis.call('SET', Q, seq .. '|1,' .. give .. ',' .. (free + give), 'PX', lease)
      return {1, give, free + give}
    end
  end
end
if slot ~= '' and not memo_read then
  memo = redis.call('GET', Q)
end
-- the memo the call has is the later of the memo key and the field q:<me>:<slot> that
-- semaphore_fast.lua writes (on a tie the key: a general op of the same call, a cancel, ran after
-- the fast one, which runs only for a call that never ran before)
if f[10] and slot ~= '' and (not memo
    or tonumber(string.match(f[10], '^(%d+)|')) > tonumber(string.match(memo, '^(%d+)|'))) then
  memo = f[10]
end

-- Redis does not roll a script back: a write refused after another would leave permits neither
-- given nor taken, a memo missing (so a cancel could not undo the call) or waiters asleep. Every op
-- first asks the ACL about every write an op may make (Redis 7.0 and later:
-- redis.acl_check_cmd), and is refused before its first write (a NOPERM error naming the command).
local function permit(cmd, key, ...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(cmd, key, ...) then
    error({err = "NOPERM this user has no permissions to run the '" .. string.lower(cmd) .. "' command on "
      .. key .. ", asked before the script's first write: nothing was changed"})
  end
end
if redis.acl_check_cmd then
  permit('HSET', S, 'a', '0')
  permit('HDEL', S, 'p')
  permit('SET', Q, '0', 'PX', '1')
  permit('ZADD', L, '0', me)
  permit('ZREM', L, me)
  permit('ZADD', W, '1', lane)
  permit('ZREM', W, lane)
  permit('PEXPIRE', W, '1')
  permit('RPUSH', K, '1')
  permit('PEXPIRE', K, '1')
  permit(publish, channel, '1')
end

local RECLAIM_MAX = 16
local INT_MAX, INT_MIN = 2147483647, -2147483648

local function flag(f)
  return string.find(flags, f, 1, true) ~= nil
end

local function fmt(v)
  return string.format('%d', v)
end

-- the server clock, read at most once per call
local now_ms, now_us
local function clock()
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    now_us = t[1] .. string.format('%06d', tonumber(t[2]))
  end
end

-- ---------------------------------------------------------------- memo

local function recall()
  local v = memo
  if not v then
    return nil
  end
  local s, rest = string.match(v, '^(%d+)|(.*)$')
  local d = tonumber(s) - tonumber(seq)
  if d > 0 then
    return {-1}
  end
  if d < 0 then
    return nil
  end
  local out = {}
  for x in string.gmatch(rest, '[^,]+') do
    out[#out + 1] = tonumber(x)
  end
  return out
end

-- ---------------------------------------------------------------- state

local exists = f[2] ~= false
local a = tonumber(f[1] or '0')
local mode = f[2] or ARGV[12]
local leased = mode == 'L'
local cap = tonumber(f[3] or '0')
local mine = tonumber(f[4] or '0')
local mine_e = f[5] or nil
-- g:<me>: the permits ever granted under the caller's registration (renew.lua reports it)
local mine_g = mine_e and tonumber(f[11] or '0') or 0
local subscribed = f[6]
local last_epoch = f[7]
local marked = f[8]
local set = {} -- fields to write at the end, in one HSET
if not exists then
  a = tonumber(ARGV[13])
  set.a, set.m = a, mode
  if leased then
    cap = a
    set.k = cap
  end
end
local reclaimed = 0
local removed_mine = false

-- s:<me>, the fast path's proof that a call is new: at or above every call of the caller that
-- ran under its live registration. Raised by every call with a slot that runs while the caller
-- has a registration (in flush's HSET, or by itself after an op that did not flush); it goes with
-- the registration (HDEL with c: and e:). Raising it is always safe: a call at or below it only
-- reads its memo in the general op.
local high = f[9] -- s:<me> as stored now (nil: none)

local function needs_high()
  return leased and mine_e and slot ~= '' and (not high or tonumber(high) < tonumber(seq))
end

local function raise_high(alone)
  if needs_high() then
    high = seq
    if alone then
      redis.call('HSET', S, 's:' .. me, seq)
    else
      set['s:' .. me] = seq
    end
  end
end

-- the fields that go with a client's registration: c:, e:, s:, g: and the memo fields
-- q:<client>:<slot> that semaphore_fast.lua writes (slots 0..FAST_SLOTS-1 only: at most that many
-- per client)
local FAST_SLOTS = 32
local function registration_fields(c)
  local fields = {'c:' .. c, 'e:' .. c, 's:' .. c, 'g:' .. c}
  for i = 0, FAST_SLOTS - 1 do
    fields[#fields + 1] = 'q:' .. c .. ':' .. i
  end
  return fields
end

local function flush(extra_del)
  if not removed_mine then
    raise_high(false)
  end
  local args = {}
  for k, v in pairs(set) do
    args[#args + 1] = k
    args[#args + 1] = v
  end
  if #args > 0 then
    redis.call('HSET', S, unpack(args))
  end
  if removed_mine then
    redis.call('HDEL', S, unpack(registration_fields(me)))
    high = nil
  end
end

-- a registration that is gone (run out, or replaced): its permits are free again
local function drop(client, epoch, held)
  if held ~= 0 then
    a = a + held
    set.a = a
  end
  redis.call('ZREM', L, client .. ':' .. epoch)
end

-- returns the permits of registrations that ran out (at most RECLAIM_MAX per call)
local function reclaim()
  clock()
  local dead = redis.call('ZRANGEBYSCORE', L, '-inf', now_ms, 'LIMIT', 0, RECLAIM_MAX)
  for _, member in ipairs(dead) do
    local c, e = string.match(member, '^(.*):([^:]*)$')
    if c == me then
      if mine_e == e then
        drop(me, e, mine)
        if mine > 0 then
          reclaimed = reclaimed + 1
        end
        mine, mine_e, mine_g, removed_mine = 0, nil, 0, true
      else
        redis.call('ZREM', L, member)
      end
    else
      local g = redis.call('HMGET', S, 'c:' .. c, 'e:' .. c)
      if g[2] == e then
        local held = tonumber(g[1] or '0')
        drop(c, e, held)
        redis.call('HDEL', S, unpack(registration_fields(c)))
        if held > 0 then
          reclaimed = reclaimed + 1
        end
      else
        redis.call('ZREM', L, member)
      end
    end
  end
end

-- a new registration of the caller: epoch = max(last + 1, server time in us), strictly increasing
local function register()
  clock()
  local e = now_us
  if last_epoch and tonumber(last_epoch) >= tonumber(now_us) then
    e = fmt(tonumber(last_epoch) + 1)
  end
  redis.call('ZADD', L, now_ms + lease, me .. ':' .. e)
  set['e:' .. me], set.ec = e, e
  mine_e, removed_mine = e, false
  return e
end

-- before a grant: the caller's registration is used as it is if it is the one the caller renews;
-- replaced (its permits free again) if the caller declared it dead or it has run out; otherwise
-- (made by a call of the caller whose reply has not arrived yet) its time is renewed here, since
-- the caller will renew it from this reply on
local function settle_mine()
  if not leased or not mine_e or mine_e == arg_epoch then
    return
  end
  if mine_e ~= dead_epoch then
    clock()
    local until_ms = redis.call('ZSCORE', L, me .. ':' .. mine_e)
    if until_ms and tonumber(until_ms) > now_ms then
      redis.call('ZADD', L, now_ms + lease, me .. ':' .. mine_e)
      return
    end
  end
  drop(me, mine_e, mine)
  mine, mine_e, mine_g, removed_mine = 0, nil, 0, true
end

local function remember(reply)
  local parts = {}
  for i, v in ipairs(reply) do
    parts[i] = fmt(v)
  end
  redis.call('SET', Q, seq .. '|' .. table.concat(parts, ','), 'PX', lease)
  raise_high(true)
  return reply
end

-- permits are free: wake the waiters. Pub/sub waiters (every multi-permit waiter, single-permit
-- ones past the blocking pool, and acquire(0), which waits while the count is negative) get one
-- message if one asked (p), and re-check; a wake token is pushed (one at most in the list) if a
-- single-permit waiter other than `except` is blocked on the list, and whoever takes it can use
-- it. A refusal wakes nobody: only calls that free permits do (`freeing`: a count that rose to 0
-- from below may serve an acquire(0); a grant that leaves 0 serves nobody), so waiters that cannot
-- use what is free never wake each other in turn, and a stale mark (a crashed waiter) costs at
-- most one unused token per release.
local function wake(except, freeing)
  if a < 0 or (a == 0 and not freeing) then
    return
  end
  if subscribed then
    redis.call(publish, channel, '1')
    redis.call('HDEL', S, 'p')
    subscribed = nil
  end
  if a > 0 and marked then
    local marks = redis.call('ZRANGE', W, 0, 1)
    if not marks[1] then
      redis.call('HDEL', S, 'n') -- no mark left: releases need not look until the next one
      marked = nil
    elseif (marks[1] ~= except or marks[2]) and redis.call('LLEN', K) == 0 then
      redis.call('RPUSH', K, '1')
      redis.call('PEXPIRE', K, lease)
    end
  end
end

-- a release that yields (flag y): one token for the first waiter blocked on the list, marked or
-- not (the caller's own head may block there, unmarked, before its next attempt)
local function yield_token()
  if a > 0 and flag('y') and redis.call('LLEN', K) == 0 then
    redis.call('RPUSH', K, '1')
    redis.call('PEXPIRE', K, lease)
  end
end

-- ---------------------------------------------------------------- ops

if op == 'acquire' then
  local r = recall()
  if r then
    return r
  end
  settle_mine()
  if leased and a < n then
    reclaim()
  end
  if a >= n then
    a = a - n
    set.a = a
    local e = 0
    if leased then
      e = mine_e or register()
      mine, mine_g = mine + n, mine_g + n
      set['c:' .. me], set['g:' .. me] = mine, mine_g
    end
    flush()
    if flag('w') then
      redis.call('ZREM', W, lane)
    end
    wake(lane)
    return remember({1, n, tonumber(e), 0, reclaimed})
  end
  if flag('w') and not marked then
    set.n = 1
    marked = '1'
  end
  flush()
  if flag('w') then
    redis.call('ZADD', W, 1, lane)
    redis.call('PEXPIRE', W, 2 * lease) -- outlives a lease between two attempts of a live waiter
  end
  if flag('s') and not subscribed then
    redis.call('HSET', S, 'p', '1')
  end
  local hint = -1
  if leased then
    local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
    if first[2] then
      clock()
      hint = math.max(0, tonumber(first[2]) - now_ms)
    end
  end
  return {0, 0, 0, hint, reclaimed}
end

if op == 'release' then
  local r = recall()
  if r then
    return r
  end
  if leased then
    if mine_e ~= arg_epoch then
      return remember({0, 0, a})
    end
    local give = math.min(n, mine)
    mine = mine - give
    a = a + give
    set.a, set['c:' .. me] = a, mine
    flush()
    wake(nil, true)
    yield_token()
    return remember({1, give, a})
  end
  if a + n > INT_MAX then
    return remember({-2})
  end
  a = a + n
  set.a = a
  flush()
  wake(nil, true)
  yield_token()
  return remember({1, n, a})
end

if op == 'cancel' then
  -- undoes the acquire of this slot and sequence number: gives back what it granted, or records
  -- that it is cancelled, so that a copy of it that runs later is refused
  local v = memo
  local undone = 0
  local s, rest
  if v then
    s, rest = string.match(v, '^(%d+)|(.*)$')
  end
  if s and tonumber(s) > tonumber(seq) then
    undone = -1 -- the slot holds a later call: nothing to do
  else
    if s and tonumber(s) == tonumber(seq) then
      local st, got, e = string.match(rest, '^(-?%d+),(-?%d+),(-?%d+)')
      if st == '1' and tonumber(got) > 0 then
        if not leased then
          a = a + tonumber(got)
          set.a = a
          undone = tonumber(got)
        elseif mine_e == e then
          local give = math.min(tonumber(got), mine)
          mine, a = mine - give, a + give
          set.a, set['c:' .. me] = a, mine
          undone = give
        end
      end
    end
    flush()
    remember({0, 0, 0, -1, 0})
    if undone > 0 then
      wake(nil, true)
    end
  end
  redis.call('ZREM', W, lane)
  return {undone}
end

if op == 'retire' then
  -- the caller gives up its registration ARGV[9] (its lease was lost by its own clock, or it is
  -- idle): what it held is free at once rather than when its time runs out. Idempotent by epoch.
  if leased and mine_e and mine_e == arg_epoch then
    drop(me, mine_e, mine)
    mine, mine_e, mine_g, removed_mine = 0, nil, 0, true
    flush()
    wake(nil, true)
    return {1}
  end
  return {0}
end

if op == 'pass' then
  -- a waiter consumed a wake token (or may have) that it will not use: hand it on
  flush()
  if a > 0 then
    local before = redis.call('LLEN', K)
    wake(lane)
    return {redis.call('LLEN', K) - before}
  end
  return {0}
end

if op == 'drain' then
  local r = recall()
  if r then
    return r
  end
  settle_mine()
  if leased then
    reclaim()
  end
  local moved = a
  local e = 0
  if a > 0 then
    if leased then
      e = mine_e or register()
      mine, mine_g = mine + a, mine_g + a
      set['c:' .. me], set['g:' .. me] = mine, mine_g
    end
  elseif a < 0 and leased then
    cap = cap - a -- the debt is forgiven: the capacity grows by it, as Semaphore.drainPermits frees it
    set.k = cap
  end
  a = 0
  set.a = a
  flush()
  return remember({1, moved, tonumber(e)})
end

if op == 'add' or op == 'reduce' then
  local r = recall()
  if r then
    return r
  end
  if op == 'reduce' then
    n = -n
  end
  if a + n > INT_MAX or a + n < INT_MIN or (leased and (cap + n > INT_MAX or cap + n < INT_MIN)) then
    return remember({-2})
  end
  a = a + n
  set.a = a
  if leased then
    cap = cap + n
    set.k = cap
  end
  flush()
  if n > 0 then
    wake(nil, true)
  end
  if leased then
    return remember({1, cap, a})
  end
  return remember({1, a, a})
end

if op == 'state' then
  if leased then
    reclaim()
  end
  flush()
  if reclaimed > 0 then
    wake(nil, true)
  end
  local m = 2
  if leased then
    m = 1
  end
  return {a, cap, m, mine, redis.call('ZCARD', W)}
end

if op == 'init' then
  flush()
  if leased then
    return {1, cap}
  end
  return {2, a}
end

return redis.error_reply('semaphore.lua: unknown op ' .. tostring(op))
