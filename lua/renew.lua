-- Renew a batch of leases held by one client (the watchdog's single round trip).
--
-- ARGV[1]   lease in milliseconds
-- ARGV[2]   n, the number of leases
-- ARGV[3]   r: leases 1..r are renewed by a plain reset, leases r+1..n as their "how" says
-- ARGV[4]   g, the number of groups the plain resets come in
-- keys      the lock hashes: KEYS[1..n], or, when KEYS is empty, the n arguments after
--           ARGV[4]
-- groups    then g pairs (field, count): the next `count` plain resets renew the hold
--           `field` (the owner, or for a read-write lock's write hold "<owner>:write"); a
--           reset sets the lock's expiry to the lease when the field is there
-- others    then, for each of leases r+1..n, a pair (field, how):
--           "+"   the hold is the field alone, but only ever lengthen the lock's expiry
--                 (the owner also has fixed-lease holds, which may need longer)
--           other the prefix of the owner's per-hold read timeout keys: holds 1..count
--                 are "<prefix>:<k>"; each key and the hash are only ever lengthened (a
--                 read lock's hash keeps the longest lease of any hold)
--
-- Returns  the leases not renewed, as `lua/batch.lua` says: a lease whose hold is gone is
--          lost (nothing is touched for it); one refused does not keep the others in the
--          batch from being renewed.
--
-- In a cluster the batch holds the leases of one master, whose slots differ, and a
-- command's declared keys must share one slot: there the keys come as arguments. A lock
-- whose slot this master no longer serves answers with Redis's "non local key" error text.
--
-- Cost: Redis spends most of a batch in the two commands of each plain reset, so that loop
-- does little else: a field shared by many leases (one thread's) comes once, the lease goes
-- to PEXPIRE as the string it came as (a Lua number would be formatted again for every
-- lease), and one pcall covers the whole batch (`each_lease`).
local lease_arg = ARGV[1]
local lease = tonumber(lease_arg)
local count, resets, groups = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local keys, keys_at = KEYS, 0
if #KEYS == 0 then
    keys, keys_at = ARGV, 4
end
local groups_at = keys_at == 0 and 4 or 4 + count
local others_at = groups_at + 2 * groups

local function lengthen(key)
    if redis.call('pttl', key) < lease then
        redis.call('pexpire', key, lease_arg)
    end
end

local function renew(key, field, how)
    if how == '+' then
        if redis.call('hexists', key, field) == 0 then
            return 0
        end
        lengthen(key)
        return 1
    end
    local holds = tonumber(redis.call('hget', key, field))
    if not holds then
        return 0
    end
    -- The field is what holds the lock; a hold key that expired (a fixed lease inside a
    -- renewed one) is made again, since every hold it counts is alive.
    for k = 1, holds do
        local hold = how .. ':' .. k
        if redis.call('pttl', hold) < lease then
            redis.call('set', hold, 1, 'px', lease_arg)
        end
    end
    lengthen(key)
    return 1
end

-- The group the plain resets are in, kept outside `step` so that a pcall entered again
-- goes on in the right one.
local group, group_end = 0, 0
local function step(cursor)
    local i = cursor[1]
    while i <= resets do
        if i > group_end then
            group = group + 1
            group_end = group_end + tonumber(ARGV[groups_at + 2 * group])
        end
        local field = ARGV[groups_at + 2 * group - 1]
        while i <= group_end do
            cursor[1] = i
            local key = keys[keys_at + i]
            if redis.call('hexists', key, field) == 1 then
                redis.call('pexpire', key, lease_arg)
            else
                miss(i, 0)
            end
            i = i + 1
        end
    end
    while i <= count do
        cursor[1] = i
        local at = others_at + 2 * (i - resets)
        if renew(keys[keys_at + i], ARGV[at - 1], ARGV[at]) == 0 then
            miss(i, 0)
        end
        i = i + 1
    end
    cursor[1] = i
end

return each_lease(count, step)
