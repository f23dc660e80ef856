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
-- Returns  {n, i, outcome, j, outcome, ...}: how many leases it went through, then each
--          lease not renewed, by its place in the batch: 0 when its hold is gone (the lease
--          is lost; nothing is touched for it), or the error text when Redis refused it (an
--          ACL rule): one lease refused does not keep the others in the batch from being
--          renewed. Every lease not listed was renewed: the usual reply is {n}.
--
-- In a cluster the batch holds the leases of one master, whose slots differ, and a
-- command's declared keys must share one slot: there the keys come as arguments. A lock
-- whose slot this master no longer serves answers with Redis's "non local key" error text.
--
-- Cost: Redis spends most of a batch in the two commands of each plain reset, so that loop
-- does little else: a field shared by many leases (one thread's) comes once, the lease goes
-- to PEXPIRE as the string it came as (a Lua number would be formatted again for every
-- lease), and one pcall covers the whole batch, entered again after a lease that raised,
-- instead of one per lease.
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

-- The leases not renewed, after the count of leases gone through (set at the end).
local missed = {0}
local function miss(at, outcome)
    missed[#missed + 1] = at
    missed[#missed + 1] = outcome
end
-- Progress, kept outside `run` so that a pcall entered again goes on from the next lease.
local i, group, group_end = 1, 0, 0
local function run()
    while i <= resets do
        if i > group_end then
            group = group + 1
            group_end = group_end + tonumber(ARGV[groups_at + 2 * group])
        end
        local field = ARGV[groups_at + 2 * group - 1]
        while i <= group_end do
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
        local at = others_at + 2 * (i - resets)
        if renew(keys[keys_at + i], ARGV[at - 1], ARGV[at]) == 0 then
            miss(i, 0)
        end
        i = i + 1
    end
end

while i <= count do
    local ok, refusal = pcall(run)
    if not ok then
        miss(i, type(refusal) == 'table' and refusal.err or tostring(refusal))
        i = i + 1
    end
end
missed[1] = i - 1
return missed
