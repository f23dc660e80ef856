-- Release one hold of a reentrant lock, idempotently per request.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  this request's unlock latch: "<prefixed(redisson_unlock_latch, name)>:<request id>"
-- KEYS[3]  the lock's waiting redlease clients (see acquire.lua)
-- ARGV[1]  release message published when the lock is freed ("0"), or "" for a lock
--          without messages (the spin lock: nobody waits on a channel, and a deployment
--          without pub/sub may not grant one)
-- ARGV[2]  lease in milliseconds the owner's remaining holds need, when holds remain;
--          0 when the client holds no more (its last guard): every hold of the owner goes
--          then, whatever Redis counted (a resent acquire joined its own lost grant, and no
--          guard stands for that hold)
-- ARGV[3]  owner field, "<client uuid>:<thread number>"
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  the release channel
-- ARGV[6]  "1" when this request was sent before with its outcome unknown (its latch may hold the
--          outcome; finding nothing of the owner in a lock nobody else holds is the release
--          having happened), else "0"
-- ARGV[7]  the channel on which waiting redlease clients mark that they listen, or '' to
--          publish on the release channel whoever listens (see wake_waiters in the prelude)
-- ARGV[8]  the prefix of the waiting clients' own channels (their token follows)
-- ARGV[9]  optional: a channel that also hears `0` when the lock is freed (an election's
--          observers')
--
-- Returns  nil  the owner holds nothing: not held (never was, or the lease was lost)
--          0    one hold released, the owner still holds the lock
--          1    the last hold released: the key is deleted and the message published
--          2    sent before with its outcome unknown, and nothing of the owner is left in a
--               lock nobody holds: the release happened, or the hold was gone before it (the
--               client tells them apart by the server's run)
-- A retry of the same request (same latch) replays the stored 0 without acting again, so
-- a release whose reply was lost can be sent once more safely. Only a release that leaves
-- holds behind needs the latch: after the last hold is gone a retry finds no field of this
-- owner and acts on nothing (the client takes that as done), so the common case writes no
-- latch key. The message goes out before the key is deleted (nobody can observe the order
-- inside a script), so a user refused the channel leaves the lock as it was.
-- Who is woken, and on which channel: see wake_waiters in the prelude.
if ARGV[6] == '1' then
    local replay = redis.call('get', KEYS[2])
    if replay then
        return tonumber(replay)
    end
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if not holds then
    -- Sent before with its outcome unknown: a free lock is this release done (or a lease
    -- that lapsed with nobody after it); one held by another owner may be a loss.
    if ARGV[6] == '1' and redis.call('exists', KEYS[1]) == 0 then
        return 2
    end
    return nil
end
if holds > 1 and ARGV[2] ~= '0' then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[2], 0, 'px', ARGV[4])
    return 0
end
if ARGV[9] then
    publish(ARGV[9], '0')
end
if ARGV[1] ~= '' then
    wake_waiters(KEYS[3], ARGV[5], ARGV[1], ARGV[7], ARGV[8])
end
redis.call('del', KEYS[1])
return 1
