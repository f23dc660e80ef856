-- Renew a batch of leases held by one client (the watchdog's single round trip).
--
-- KEYS[1..n]     lock hashes
-- ARGV[1]        lease in milliseconds
-- ARGV[2i]       the hash field of the hold renewed in KEYS[i]: the owner, or for a
--                read-write lock's write hold "<owner>:write"
-- ARGV[2i + 1]   how to renew it:
--                ""    the hold is the field alone: reset the lock's expiry to the lease
--                "+"   the same, but only ever lengthen it (the owner also has fixed-lease
--                      holds, which may need longer)
--                other the prefix of the owner's per-hold read timeout keys: holds
--                      1..count are "<prefix>:<k>"; each key and the hash are only ever
--                      lengthened (a read lock's hash keeps the longest lease of any hold)
--
-- Returns  an array of n entries: 1 when the hold was still there and its lease was
--          reset, 0 when it is gone (the lease is lost; nothing is touched for it), or the
--          error text when Redis refused it (an ACL rule): one lease refused does not
--          keep the others in the batch from being renewed.
--
-- In a cluster the batch holds the leases of one master, whose slots differ, and a
-- command's declared keys must share one slot: there KEYS is empty and lease i is
-- ARGV[3i - 1] (the lock hash), ARGV[3i] (the field), ARGV[3i + 1] (how). A lock whose
-- slot this master no longer serves answers with Redis's "non local key" error text.
local lease = tonumber(ARGV[1])
local declared = #KEYS > 0
local count = declared and #KEYS or (#ARGV - 1) / 3

local function entry(i)
    if declared then
        return KEYS[i], ARGV[2 * i], ARGV[2 * i + 1]
    end
    return ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
end

local function lengthen(key)
    if redis.call('pttl', key) < lease then
        redis.call('pexpire', key, lease)
    end
end

local function renew(key, field, how)
    if how == '' then
        if redis.call('hexists', key, field) == 0 then
            return 0
        end
        redis.call('pexpire', key, lease)
        return 1
    end
    if how == '+' then
        if redis.call('hexists', key, field) == 0 then
            return 0
        end
        lengthen(key)
        return 1
    end
    local count = tonumber(redis.call('hget', key, field))
    if not count then
        return 0
    end
    -- The field is what holds the lock; a hold key that expired (a fixed lease inside a
    -- renewed one) is made again, since every hold it counts is alive.
    for k = 1, count do
        local hold = how .. ':' .. k
        if redis.call('pttl', hold) < lease then
            redis.call('set', hold, 1, 'px', lease)
        end
    end
    lengthen(key)
    return 1
end

local renewed = {}
for i = 1, count do
    local ok, outcome = pcall(renew, entry(i))
    if ok then
        renewed[i] = outcome
    else
        renewed[i] = type(outcome) == 'table' and outcome.err or tostring(outcome)
    end
end
return renewed
