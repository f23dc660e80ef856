-- Prepended to the group lock's scripts: Redisson's RedissonFasterMultiLock layout, one
-- hash per group; per value, the field F (a 22-character hash of the value) names its
-- holder, "F:<holder>:expire_time" when the holder's lease ends (epoch ms) and
-- "F:<holder>:lock_count" how many holds it has. A request names its values as their
-- fields concatenated.

-- Calls `visit(field)` for each value's field in `fields`, in order, until one returns
-- something, which is returned.
local function each_field(fields, visit)
    for at = 1, #fields, 22 do
        local stop = visit(string.sub(fields, at, at + 21))
        if stop ~= nil then
            return stop
        end
    end
end

local function expire_time(field, holder)
    return field .. ':' .. holder .. ':expire_time'
end

local function lock_count(field, holder)
    return field .. ':' .. holder .. ':lock_count'
end

-- When `holder`'s lease of the value `field` ends (epoch ms); nil when it says nothing.
local function lease_end(key, field, holder)
    return tonumber(redis.call('hget', key, expire_time(field, holder)))
end

-- Removes `holder`'s hold of the value `field`.
local function drop_hold(key, field, holder)
    redis.call('hdel', key, field, expire_time(field, holder), lock_count(field, holder))
end

