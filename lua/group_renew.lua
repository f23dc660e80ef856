-- Renew a batch of group-lock leases held by one client (the watchdog's round trip for
-- groups): every value of a lease gets a new end, if the lease's owner still holds it and
-- its lease has not ended.
--
-- KEYS[1..n]     the groups' hashes
-- ARGV[1]        lease in milliseconds
-- ARGV[2i]       lease i's owner
-- ARGV[2i + 1]   lease i's fields, concatenated (22 characters each)
--
-- Returns  the leases not renewed, as `lua/batch.lua` says: a lease with a value gone
--          (taken by another owner, released, or past its end) is lost, and none of its
--          values is touched.
--
-- In a cluster the batch holds the leases of one master, whose slots differ, and a
-- command's declared keys must share one slot: there KEYS is empty and lease i is
-- ARGV[3i - 1] (the hash), ARGV[3i] (the owner) and ARGV[3i + 1] (the fields).
local now = server_ms()
local lease = tonumber(ARGV[1])
-- Formatted once: a Lua number given to a command is formatted again at every call.
local ends = string.format('%d', now + lease)
local declared = #KEYS > 0
local count = declared and #KEYS or (#ARGV - 1) / 3

local function renew(key, owner, fields)
    local gone = each_field(fields, function(field)
        if redis.call('hget', key, field) ~= owner then
            return true
        end
        local current = lease_end(key, field, owner)
        if not current or current < now then
            return true
        end
    end)
    if gone then
        return 0
    end
    each_field(fields, function(field)
        redis.call('hset', key, expire_time(field, owner), ends)
    end)
    if redis.call('pttl', key) < lease then
        redis.call('pexpire', key, lease)
    end
    return 1
end

return each_lease_alone(count, function(i)
    if declared then
        return renew(KEYS[i], ARGV[2 * i], ARGV[2 * i + 1])
    end
    return renew(ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1])
end)
