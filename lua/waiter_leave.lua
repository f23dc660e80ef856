-- A redlease client stops waiting for a reentrant or fenced lock without it (a timeout, an
-- error): it takes its registration back, and when a release had already named it (its
-- token is gone while the lock is free), it passes that wake-up on, to the next client
-- registered or to everyone (wake_waiters in the prelude), so that no waiter sleeps through
-- a free lock.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's waiting redlease clients (see acquire.lua)
-- ARGV[1]  the client's wake token
-- ARGV[2]  the lock's release channel
-- ARGV[3]  the release message ("0")
-- ARGV[4]  the redlease clients' mark channel, or '' (see release.lua)
-- ARGV[5]  the prefix of the waiting clients' own channels
--
-- Returns  1 when a wake-up was passed on, else 0.
if redis.call('zscore', KEYS[2], ARGV[1]) then
    redis.call('zrem', KEYS[2], ARGV[1])
    return 0
end
if redis.call('exists', KEYS[1]) == 1 then
    -- Held: its release wakes the next one.
    return 0
end
wake_waiters(KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
return 1
