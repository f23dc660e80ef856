-- Release one acquisition's values of a group lock (the layout: `lua/group.lua`), and wake the
-- group's waiters.
--
-- KEYS[1]  the group's hash
-- ARGV[1]  the group's channel (Redisson's lock channel of the group's name)
-- ARGV[2]  the owner (one acquisition's own)
-- ARGV[3]  the values' fields, concatenated (22 characters each)
--
-- Returns  {released, late, free, taken}: values the owner held and released; values whose
--          hold had run out but nobody had taken (released too); values nobody holds
--          (released before, by a first send whose reply was lost, or run out and taken
--          and given back); values another owner holds now. Only the owner's own fields
--          are touched, so a request sent twice does no harm. Everything is read first and
--          the message goes before the writes: a user refused the channel changes nothing.
local now = server_ms()
local owner = ARGV[2]
local fields = ARGV[3]
local released, late, free, taken = 0, 0, 0, 0
local mine = {}
each_field(fields, function(field)
    local holder = redis.call('hget', KEYS[1], field)
    local ends = holder and lease_end(KEYS[1], field, holder)
    if holder == owner then
        table.insert(mine, field)
        if ends and ends >= now then
            released = released + 1
        else
            late = late + 1
        end
    elseif ends and ends > now then
        taken = taken + 1
    else
        free = free + 1
    end
end)
if #mine > 0 then
    publish(ARGV[1], '0')
    for _, field in ipairs(mine) do
        drop_hold(KEYS[1], field, owner)
    end
end
return {released, late, free, taken}
