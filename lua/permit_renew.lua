-- Renew a batch of permit leases held by one client (the watchdog's round trip for
-- permits): every permit of a lease gets a new deadline, if it is still there and not
-- past its deadline.
--
-- KEYS[1..n]     the timeouts sorted sets of the semaphores
-- ARGV[1]        lease in milliseconds
-- ARGV[i + 1]    the ids of lease i, concatenated (16 bytes each)
--
-- Returns  an array of n integers: 1 when every permit of the lease was renewed, 0 when
--          one was gone or past its deadline (the lease is lost; the others are left alone).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS do
    local ids = ARGV[i + 1]
    local ok = 1
    for at = 1, #ids, 16 do
        local current = redis.call('zscore', KEYS[i], string.sub(ids, at, at + 15))
        if not current or tonumber(current) <= now then
            ok = 0
        end
    end
    if ok == 1 then
        for at = 1, #ids, 16 do
            redis.call('zadd', KEYS[i], 'XX', deadline, string.sub(ids, at, at + 15))
        end
    end
    renewed[i] = ok
end
return renewed
