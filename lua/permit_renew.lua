-- Renew a batch of permit leases held by one client (the watchdog's round trip for
-- permits): every permit of a lease gets a new deadline, if it is still there and not
-- past its deadline.
--
-- KEYS[1..n]     the timeouts sorted sets of the semaphores
-- ARGV[1]        lease in milliseconds
-- ARGV[i + 1]    the ids of lease i, concatenated (16 bytes each)
--
-- Returns  the leases not renewed, as `lua/batch.lua` says: a lease with a permit gone or
--          past its deadline is lost (its other permits are left alone).
--
-- In a cluster the batch holds the leases of one master, whose slots differ, and a
-- command's declared keys must share one slot: there KEYS is empty and lease i is
-- ARGV[2i] (the sorted set) and ARGV[2i + 1] (the ids). A semaphore whose slot this
-- master no longer serves answers with Redis's "non local key" error text.
local now = server_ms()
-- Formatted once: a Lua number given to a command is formatted again at every call.
local deadline = string.format('%d', now + tonumber(ARGV[1]))
local declared = #KEYS > 0
local count = declared and #KEYS or (#ARGV - 1) / 2

local function renew(key, ids)
    for at = 1, #ids, 16 do
        local current = redis.call('zscore', key, string.sub(ids, at, at + 15))
        if not current or tonumber(current) <= now then
            return 0
        end
    end
    for at = 1, #ids, 16 do
        redis.call('zadd', key, 'XX', deadline, string.sub(ids, at, at + 15))
    end
    return 1
end

return each_lease_alone(count, function(i)
    if declared then
        return renew(KEYS[i], ARGV[i + 1])
    end
    return renew(ARGV[2 * i], ARGV[2 * i + 1])
end)
