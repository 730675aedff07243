-- identity.lua: writes this client's identity record (DESIGN §16), once per client, never per
-- acquisition: sent when the client connects, then by the watchdog once per lease while the client
-- is open (sooner after a reconnect), and when a thread that holds something is not named in it
-- yet (at most once per watchdog scan).
--
-- KEYS[1]  {prefix:}:client:<client id>   hash, replaced whole
-- ARGV[1]  its lifetime, ms (three leases: it outlives every hold the client took while alive)
-- ARGV[2..] field, value, field, value, ...: id, host, pid, started, name (optional), and
--          t:<thread id> = thread name for at most 64 threads that hold something (bounded)
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
