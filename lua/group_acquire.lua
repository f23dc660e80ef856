-- Take values of a group lock, all or none (Redisson's RedissonFasterMultiLock layout): one
-- hash per group; per value, the field F (a 22-character hash of the value) names its
-- holder, "F:<holder>:expire_time" when the holder's lease ends (epoch ms) and
-- "F:<holder>:lock_count" how many holds it has.
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
for at = 1, #fields, 22 do
    local field = string.sub(fields, at, at + 21)
    local holder = redis.call('hget', KEYS[1], field)
    if holder and holder ~= owner then
        local ends = tonumber(redis.call('hget', KEYS[1], field .. ':' .. holder .. ':expire_time'))
        if ends and ends > now and ends > latest then
            latest = ends
        end
    end
end
if latest >= 0 then
    return math.max(1, latest - now)
end
local ends = string.format('%d', now + lease)
for at = 1, #fields, 22 do
    local field = string.sub(fields, at, at + 21)
    local holder = redis.call('hget', KEYS[1], field)
    if holder and holder ~= owner then
        redis.call('hdel', KEYS[1], field .. ':' .. holder .. ':expire_time', field .. ':' .. holder .. ':lock_count')
    end
    redis.call('hset', KEYS[1], field, owner, field .. ':' .. owner .. ':expire_time', ends,
        field .. ':' .. owner .. ':lock_count', 1)
end
-- The key outlives every lease in it; it only bounds what is left behind.
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return nil
