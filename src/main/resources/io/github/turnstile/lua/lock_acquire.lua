-- lock_acquire.lua: take the lock for one acquisition request, or report who is in the way.
--
-- KEYS[1]  lock hash   {prefix:name}:lock   o owner (only while held), r request and t fencing token
--                      (of the holder, or of the last hold after its release), e expiry mark,
--                      q "waiting marks may exist", p "publish at release", w:<client> waiting
--                      marks, c = the client that caches the grant (renew.lua sets it, a release
--                      or a takeover clears it), b = that client answered a revocation with "in use
--                      by one of its threads" (lock_busy.lua; cleared with c), d = the lease the record's expiry was set with, at the end of the
--                      token window of t (DESIGN §3; "-" when not); expiry = the holder's lease,
--                      and at most one window (and 3 ms) more
-- KEYS[2]  fence       {prefix:name}:fence  above every token issued, never expires
-- ARGV[1]  owner id    "<clientId>:<threadId>" (an async hold: "<clientId>:h<n>")
-- ARGV[2]  request id  "<clientId>:<seq>", the same for every copy of one acquisition attempt
-- ARGV[3]  lease, milliseconds
-- ARGV[4]  flags (optional, any order): h = this request's previous attempt was refused;
--          n = the caller will not wait if refused (tryLock()); s = the caller waits by pub/sub;
--          k = keep this client's waiting mark (another acquisition of this client waits);
--          r = with a hand-off: renew the lease (PEXPIRE), the handing hold having run a third of it
-- ARGV[5]  hand-off (optional): the request id of the current holder, a thread of the same client
--          that hands the lock straight to ARGV[1]/ARGV[2] at its unlock ("" or absent: none)
-- ARGV[6]  optional: the publish command: PUBLISH (when absent), or SPUBLISH on a Redis 7 Cluster
--          (a revocation of another client's cached grant)
--
-- Returns {1, token[, reclaimed, others, same]}  held by this request: a fresh grant, a replay of
--             the same request (same token; PEXPIRE unless a hand-off), a takeover of an older
--             grant of the same owner that the client never learned of, or a hand-off. Missing
--             elements are 0. reclaimed = 1 when flag h is set and the hold record is gone
--             altogether (a release keeps r and t for the rest of the lease): the holder seen
--             before never released. others = 1 when a waiting mark of another client may be
--             left; same = 1 when the last hold was this client's, or this is a hand-off.
--         {0, pttl, owner[, 1]}   held by another owner; pttl = its remaining lease in ms, owner its
--                     owner id. A caller that will wait is marked: w:<client> and q (and p with flag s).
--                     The fourth element is 1 when another client caches the grant (c): the
--                     script has published "r" on {prefix:name}:ch, which asks that client to give
--                     it up (at once if idle, else at the end of its current hold); 2 when that
--                     client answered already that one of its threads uses it (b): nothing published.
--         {0, -3}     hand-off only: ARGV[5] no longer holds the lock (its lease ran out).
--
-- Idempotent: re-sending the same (owner, request) never yields a second token.
--
-- Fencing token = max(t + 1, server time in µs), or max(fence + 1, time) when the hold record is
-- gone. The fence holds the end of the 2^15 µs window of the latest token; it is written only
-- when a token enters a later window than t's, so a grant seldom writes it (see DESIGN §3).
local lock, fence = KEYS[1], KEYS[2]
local owner, req, lease = ARGV[1], ARGV[2], ARGV[3]
local flags, from = ARGV[4] or '', ARGV[5]
if from == '' then
  from = nil
end
local WINDOW = 32768 -- µs (2^15: exact in doubles); at most half the least lease (100 ms)

local f
local tm -- the server time, read once per call (TIME)
if not from then
  f = redis.call('HMGET', lock, 'o', 't', 'q', 'd')
  if not f[1] and f[2] and not f[3] then
    -- The usual grant, written out: free, nobody waits, the record of the last hold is there and
    -- the token stays in its window (the flags matter on no path of this one). Otherwise the
    -- general path below goes on with the time read here.
    tm = redis.call('TIME')
    -- (arithmetic on the decimal strings converts them: no tonumber or math.floor calls here)
    local now = tm[1] * 1000000 + tm[2]
    local last = f[2] + 0
    if now > last and now - now % WINDOW == last - last % WINDOW then
      local us = tm[2]
      local token = tm[1] .. (#us == 6 and us or string.sub('00000' .. us, -6))
      if f[4] == lease then
        -- the record expires a lease after the end of this window (d), or later: this grant has
        -- its lease, and at most one window more. No expiry write
        redis.call('HSET', lock, 'o', owner, 'r', req, 't', token)
      else
        redis.call('HSET', lock, 'o', owner, 'r', req, 't', token, 'd', lease)
        -- a lease after the end of this window (past_window below, written out)
        redis.call('PEXPIRE', lock, string.format('%.0f', math.floor((math.floor(now / WINDOW) + 1) * WINDOW / 1000) + 2
          - math.floor(now / 1000) + tonumber(lease)))
      end
      return {1, token}
    end
  end
end

-- The PEXPIRE argument (ms, a decimal string) that makes the record expire a lease after the end
-- of the token window of server time now (µs): whole ms, rounded up, and 1 ms more for the time
-- between the script's start (PEXPIRE's base on Redis 7.2 and later) and its TIME. A plain
-- PEXPIRE, not PEXPIREAT: the least-privilege ACL grants PEXPIRE (docs/ACL.md).
local function past_window(now)
  return string.format('%.0f', math.floor((math.floor(now / WINDOW) + 1) * WINDOW / 1000) + 2
    - math.floor(now / 1000) + tonumber(lease))
end

local function client_of(id)
  return string.match(id, '^[^:]*') -- ids start with "<client id>:"
end

-- The next token after prev (the record's t; false if the record is gone), as a decimal string
-- (no Lua double is ever formatted in exponent form), and the server time (µs) when the token is
-- that time (nil when the clock is behind and the counter went on). Writes the fence, the
-- end of the token's window, when the token is in a later window than prev (or prev is unknown):
-- every token issued is then below the fence.
local function next_token(prev)
  if not tm then
    tm = redis.call('TIME')
  end
  local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  local last
  if prev then
    last = tonumber(prev)
  else
    -- no record: every token issued before is below the fence (or equal to it, when an older
    -- version of this script wrote it); without a fence (first use, data lost) the clock decides
    local fv = redis.call('GET', fence)
    last = fv and tonumber(fv) or -1
  end
  local token, timed
  if now > last then
    token = tm[1] .. string.sub('00000' .. tm[2], -6)
    timed = true
  else
    now = last + 1 -- the clock is behind: the counter goes on
    token = string.format('%.0f', now)
  end
  local window = math.floor(now / WINDOW)
  if not prev or window > math.floor(last / WINDOW) then
    redis.call('SET', fence, string.format('%.0f', (window + 1) * WINDOW))
  end
  return token, timed and now
end

-- Writes the grant to this request. The waiting state (marks, publish flag) is read only when
-- the record says there may be some (q): then this client's own mark is withdrawn (unless flag k),
-- same tells whether the hold before was this client's, and others whether another client's mark
-- is left (when none is, q goes).
local function grant(t, q, same)
  local me, g
  if q then
    me = client_of(owner)
    g = redis.call('HMGET', lock, 'w:' .. me, 'p', 'e', 'x', 'r')
  end
  -- the expiry: a lease after the end of the token's window (d = lease), so that later grants in
  -- the window need not write it; a lease from now when the clock is behind (d = "-")
  local token, now = next_token(t)
  local d = now and lease or '-'
  if t then
    redis.call('HSET', lock, 'o', owner, 'r', req, 't', token, 'd', d)
  else
    redis.call('HSET', lock, 'o', owner, 'r', req, 't', token, 'e', token, 'd', d)
  end
  if now then
    redis.call('PEXPIRE', lock, past_window(now))
  else
    redis.call('PEXPIRE', lock, lease)
  end
  if not q then
    return token, 0, same
  end
  local keep = string.find(flags, 'k', 1, true)
  if g[1] and not keep then
    redis.call('HDEL', lock, 'w:' .. me)
  end
  if g[5] and client_of(g[5]) == me then
    same = 1
  end
  -- fields besides other clients' marks: o r t q d, and e p x (an older version's field) when
  -- present, and this client's mark when kept
  local base = 5
  if g[3] or not t then
    base = base + 1
  end
  if g[2] then
    base = base + 1
  end
  if g[4] then
    base = base + 1
  end
  if keep and g[1] then
    base = base + 1
  end
  if redis.call('HLEN', lock) > base then
    return token, 1, same
  end
  redis.call('HDEL', lock, 'q', 'p') -- no mark left: nobody waits (a lone p is stale)
  return token, 0, same
end

if from then
  local f = redis.call('HMGET', lock, 'o', 'r', 't', 'q')
  if f[2] == req and f[1] then
    return {1, f[3]} -- a re-sent hand-off
  end
  if f[2] ~= from or not f[1] then
    return {0, -3}
  end
  -- the handing request counts as released; the hand-off moves the hold, not the lease: no PEXPIRE
  -- (the successor's lease ends when the handing one would have, until the watchdog renews it).
  -- The waiting state is not read: others = q (a stale q costs at most one release in Redis when
  -- the streak reaches its limit; the next full grant clears it)
  -- d = "-": the token may enter a later window than the expiry was set for
  local token = next_token(f[3])
  redis.call('HSET', lock, 'o', owner, 'r', req, 't', token, 'd', '-')
  if string.find(flags, 'r', 1, true) then
    -- a chain of hand-offs outlives the lease: the watchdog's renewals name requests already
    -- handed on, and are refused; the hand-off of an aged hold renews it instead
    redis.call('PEXPIRE', lock, lease)
  end
  return {1, token, 0, f[4] and 1 or 0, 1}
end

local o, t, q = f[1], f[2], f[3]
if o then
  if o ~= owner then
    local me = client_of(owner)
    local wait = not string.find(flags, 'n', 1, true)
    local mark = 'w:' .. me
    local g
    if wait then
      g = redis.call('HMGET', lock, mark, 'p', 'c', 'b')
    else
      local cb = redis.call('HMGET', lock, 'c', 'b')
      g = {true, true, cb[1], cb[2]}
    end
    -- another client caches the grant: ask it to give the lock up (its cache is subscribed to the
    -- channel while it keeps the grant; a message it misses, its next renewal reports: q)
    local cached = g[3] and g[3] ~= me
    local busy = cached and g[4]
    local publish = ARGV[6] or 'PUBLISH'
    local channel = string.sub(lock, 1, -5) .. 'ch'
    if cached and not busy and redis.acl_check_cmd and not redis.acl_check_cmd(publish, channel, 'r') then
      return redis.error_reply("NOPERM this user has no permissions to run the '" .. string.lower(publish)
        .. "' command on " .. channel .. ", asked before the script's first write: nothing was changed")
    end
    if wait then
      -- this caller waits: mark its client (w:<client>), and say a mark exists (q); with pub/sub,
      -- ask the release to publish (p)
      local sub = string.find(flags, 's', 1, true)
      if not g[1] and sub and not g[2] then
        redis.call('HSET', lock, mark, '1', 'q', '1', 'p', '1')
      elseif not g[1] then
        redis.call('HSET', lock, mark, '1', 'q', '1')
      elseif sub and not g[2] then
        redis.call('HSET', lock, 'p', '1', 'q', '1')
      end
    end
    if busy then
      return {0, redis.call('PTTL', lock), o, 2}
    end
    if cached then
      redis.call(publish, channel, 'r')
      return {0, redis.call('PTTL', lock), o, 1}
    end
    return {0, redis.call('PTTL', lock), o}
  end
  if redis.call('HGET', lock, 'r') == req then
    -- a re-sent copy of the grant: its lease again, from now; d goes (it does not hold for that)
    redis.call('HDEL', lock, 'd')
    redis.call('PEXPIRE', lock, lease)
    return {1, t}
  end
  -- an earlier grant of this owner that it never learned of, taken over: no longer cached
  redis.call('HDEL', lock, 'c', 'b')
end
local reclaimed = 0
if not t and string.find(flags, 'h', 1, true) then
  reclaimed = 1
end
local token, others, same = grant(t, q, 0)
if reclaimed == 0 and others == 0 and same == 0 then
  return {1, token}
end
return {1, token, reclaimed, others, same}
