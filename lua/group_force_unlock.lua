-- Release values of a group lock whoever holds them (the layout: `lua/group.lua`), and wake
-- the group's waiters.
--
-- KEYS[1]  the group's hash
-- ARGV[1]  the group's channel
-- ARGV[2]  the values' fields, concatenated (22 characters each)
--
-- Returns  how many of the values were held (by a live lease or not). Read first, the
--          message before the writes.
local held = {}
each_field(ARGV[2], function(field)
    local holder = redis.call('hget', KEYS[1], field)
    if holder then
        table.insert(held, {field, holder})
    end
end)
if #held > 0 then
    publish(ARGV[1], '0')
    for _, hold in ipairs(held) do
        drop_hold(KEYS[1], hold[1], hold[2])
    end
end
return #held
