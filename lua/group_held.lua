-- How many values of a group lock someone holds now (the layout: `lua/group.lua`): a holder
-- whose lease has ended holds nothing.
--
-- KEYS[1]  the group's hash
-- ARGV[1]  the values' fields, concatenated (22 characters each)
local now = server_ms()
local held = 0
each_field(ARGV[1], function(field)
    local holder = redis.call('hget', KEYS[1], field)
    local ends = holder and lease_end(KEYS[1], field, holder)
    if ends and ends > now then
        held = held + 1
    end
end)
return held
