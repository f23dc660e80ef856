-- Release values of a group lock whoever holds them (see group_acquire.lua), and wake the
-- group's waiters.
--
-- KEYS[1]  the group's hash
-- ARGV[1]  the group's channel
-- ARGV[2]  the values' fields, concatenated (22 characters each)
--
-- Returns  how many of the values were held (by a live lease or not). Read first, the
--          message before the writes.
local fields = ARGV[2]
local held = {}
for at = 1, #fields, 22 do
    local field = string.sub(fields, at, at + 21)
    local holder = redis.call('hget', KEYS[1], field)
    if holder then
        table.insert(held, {field, holder})
    end
end
if #held > 0 then
    publish(ARGV[1], '0')
    for _, hold in ipairs(held) do
        local field, holder = hold[1], hold[2]
        redis.call('hdel', KEYS[1], field, field .. ':' .. holder .. ':expire_time', field .. ':' .. holder .. ':lock_count')
    end
end
return #held
