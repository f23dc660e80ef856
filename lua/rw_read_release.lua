-- Release one read hold of a read-write lock, idempotently per request.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  this request's unlock latch
-- ARGV[1]  release message ("0": a waiter may now write)
-- ARGV[2]  owner field
-- ARGV[3]  latch lifetime in milliseconds
-- ARGV[4]  lease in milliseconds the owner's remaining read holds need, when holds remain;
--          0 when the client holds no more: every read hold of the owner goes, its timeout
--          keys with it (see release.lua)
-- ARGV[5]  the lock's channel (redisson_rwlock:{name})
-- ARGV[6]  prefix of this owner's per-hold timeout keys (hold k is ARGV[6] .. ':' .. k)
-- ARGV[7]  prefix of every owner's timeout keys: "<ARGV[7]><owner>:rwlock_timeout:<k>"
-- ARGV[8]  "1" when this request was sent before with its outcome unknown (its latch may hold the
--          outcome; finding nothing of the owner in a lock nobody else holds is the release
--          having happened), else "0"
--
-- Returns  nil (this owner holds no read hold), 0 (released; the lock is still held),
--          1 (released; the lock is free and the message was published), 2 (sent before,
--          nothing of the owner in a lock no writer holds: see release.lua). While this owner
--          keeps read holds the outcome is stored in the latch, and a retry of the same
--          request replays it; after its last read hold a retry finds nothing of it.
-- Hold keys are interchangeable: the release deletes the highest one, and the owner's
-- remaining ones are set to last as long as its remaining holds need (`ARGV[4]`, computed
-- by the client from their leases), no longer and no shorter. In read mode the hash's lease
-- becomes the longest remaining lease of the read holds left; holds whose timeout key
-- expired (dead readers) count for nothing, and when none is left the lock is deleted. In
-- write mode (this owner's downgrade) the writer's lease stays. Everything is read first,
-- so a refusal (an ACL rule) comes before the first write.
if ARGV[8] == '1' then
    local replay = redis.call('get', KEYS[2])
    if replay then
        return tonumber(replay)
    end
end
-- One HGETALL reads the mode and every owner's holds (a handful of fields).
local fields = {}
local all = redis.call('hgetall', KEYS[1])
for at = 1, #all, 2 do
    fields[all[at]] = all[at + 1]
end
local holds = tonumber(fields[ARGV[2]])
if not holds then
    -- Sent before with its outcome unknown: no writer is this release done (see
    -- release.lua; other readers share the lock with it).
    if ARGV[8] == '1' and fields['mode'] ~= 'write' then
        return 2
    end
    return nil
end
local left = holds - 1
if ARGV[4] == '0' then
    left = 0
end
if left == 0 then
    -- This owner's last read hold may free the lock: the channel is needed whether or not
    -- others still read, so that a user refused it is refused every time.
    may('publish', ARGV[5], ARGV[1])
end
local keep = tonumber(ARGV[4])
local read_mode = fields['mode'] ~= 'write'
local outcome = 0
local longest = -3
if read_mode then
    for field, value in pairs(fields) do
        local count = tonumber(value)
        -- This owner's remaining holds count for what they need (`keep`), below.
        if count and field ~= ARGV[2] and string.sub(field, -6) ~= ':write' then
            for k = 1, count do
                longest = math.max(longest, redis.call('pttl', ARGV[7] .. field .. ':rwlock_timeout:' .. k))
            end
        end
    end
    if left > 0 then
        longest = math.max(longest, keep)
    end
    if longest <= 0 then
        outcome = 1
        publish(ARGV[5], ARGV[1])
    end
end
-- The hold keys released: the highest one, or all of this owner's above the holds left.
local released = {}
for k = left + 1, holds do
    released[#released + 1] = ARGV[6] .. ':' .. k
end
may('del', released[1])
if outcome == 1 then
    -- The lock is freed, so this owner keeps no hold either (`keep` is at least 1 ms while
    -- it does): the hash goes with its field in it.
    released[#released + 1] = KEYS[1]
    redis.call('del', unpack(released))
    return 1
end
if left > 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
else
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', unpack(released))
for k = 1, left do
    redis.call('set', ARGV[6] .. ':' .. k, 1, 'px', keep)
end
if read_mode then
    redis.call('pexpire', KEYS[1], longest)
end
if left > 0 then
    redis.call('set', KEYS[2], 0, 'px', ARGV[3])
end
return 0
