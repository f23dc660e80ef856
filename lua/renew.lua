-- Renew a batch of leases held by one client (the watchdog's single round trip).
--
-- KEYS[1..n]     lock hashes
-- ARGV[1]        lease in milliseconds
-- ARGV[2i]       the hash field of the hold renewed in KEYS[i]: the owner, or for a
--                read-write lock's write hold "<owner>:write"
-- ARGV[2i + 1]   "" for a hold that is the field alone; for read holds, the prefix of their
--                per-hold timeout keys: holds 1..count of that owner are "<prefix>:<k>"
--
-- Returns  an array of n integers: 1 when the hold was still there and its lease was
--          reset, 0 when it is gone (the lease is lost; nothing is touched for it).
-- A read lock's hash keeps the longest lease of any hold on it, never a shorter one.
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
    local field, holds = ARGV[2 * i], ARGV[2 * i + 1]
    local ok = 0
    if holds == '' then
        if redis.call('hexists', KEYS[i], field) == 1 then
            redis.call('pexpire', KEYS[i], lease)
            ok = 1
        end
    else
        local count = tonumber(redis.call('hget', KEYS[i], field))
        if count then
            ok = 1
            for k = 1, count do
                if redis.call('pexpire', holds .. ':' .. k, lease) == 0 then
                    ok = 0
                end
            end
            if ok == 1 then
                redis.call('pexpire', KEYS[i], math.max(redis.call('pttl', KEYS[i]), lease))
            end
        end
    end
    renewed[i] = ok
end
return renewed
