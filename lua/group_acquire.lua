-- Take values of a group lock, all or none (the layout: `lua/group.lua`).
--
-- KEYS[1]  the group's hash
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner (one acquisition's own)
-- ARGV[3]  the values' fields, concatenated (22 characters each)
--
-- Returns  nil when every value was free and is now the owner's (or was already, when a
--          request is sent again after a lost reply); otherwise nothing is written and the
--          reply is how long the caller may sleep: until the latest lease among the values
--          held by others ends (at least 1 ms).
-- "Now" is the server's clock (Redisson uses each client's own). A value whose holder's
-- lease has ended is free; the old holder's fields go when it is taken (Redisson leaves
-- them, and its next hold of the value then counts from a stale lock_count).
local now = server_ms()
local lease = tonumber(ARGV[1])
local owner = ARGV[2]
local fields = ARGV[3]
local latest = -1
each_field(fields, function(field)
    local holder = redis.call('hget', KEYS[1], field)
    if holder and holder ~= owner then
        local ends = lease_end(KEYS[1], field, holder)
        if ends and ends > now and ends > latest then
            latest = ends
        end
    end
end)
if latest >= 0 then
    return math.max(1, latest - now)
end
local ends = string.format('%d', now + lease)
each_field(fields, function(field)
    local holder = redis.call('hget', KEYS[1], field)
    if holder and holder ~= owner then
        drop_hold(KEYS[1], field, holder)
    end
    redis.call('hset', KEYS[1], field, owner, expire_time(field, owner), ends, lock_count(field, owner), 1)
end)
-- The key outlives every lease in it; it only bounds what is left behind.
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return nil
