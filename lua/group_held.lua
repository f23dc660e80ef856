-- How many values of a group lock someone holds now (see group_acquire.lua): a holder
-- whose lease has ended holds nothing.
--
-- KEYS[1]  the group's hash
-- ARGV[1]  the values' fields, concatenated (22 characters each)
local now = server_ms()
local fields = ARGV[1]
local held = 0
for at = 1, #fields, 22 do
    local field = string.sub(fields, at, at + 21)
    local holder = redis.call('hget', KEYS[1], field)
    if holder then
        local ends = tonumber(redis.call('hget', KEYS[1], field .. ':' .. holder .. ':expire_time'))
        if ends and ends > now then
            held = held + 1
        end
    end
end
return held
