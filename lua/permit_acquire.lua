-- Take permits of a permit-expirable semaphore (Redisson's RPermitExpirableSemaphore
-- layout): the key holds the number of permits available, the sorted set
-- "{name}:timeout" each taken permit's id (16 bytes) with its deadline (epoch ms). Permits
-- past their deadline are first returned (their holders died or lost them).
--
-- KEYS[1]  the semaphore
-- KEYS[2]  its timeouts sorted set
-- ARGV[1]  permits wanted (at least 1)
-- ARGV[2]  their lease in milliseconds, or -1 for permits that never expire
-- ARGV[3]  the semaphore's channel
-- ARGV[4..] the new permits' ids, one per permit
--
-- Returns  nil when taken (or taken before by the same request); otherwise how long the
--          caller may sleep before trying again:
--          until the earliest permit expires (at least 1 ms), or -1 when none will.
-- "Now" is the server's clock (Redisson uses each client's own).
local now = server_ms()
local never = 922337203685477
-- Sent again after a lost reply, a request whose permits were granted is granted already:
-- the ids are there (taking more would leak permits nobody holds). The client counts their
-- lease from this send, so their deadlines count from now too (never earlier).
if redis.call('zscore', KEYS[2], ARGV[4]) then
    if tonumber(ARGV[2]) >= 0 then
        local deadline = now + tonumber(ARGV[2])
        for i = 4, #ARGV do
            local was = tonumber(redis.call('zscore', KEYS[2], ARGV[i]))
            if was and was < deadline then
                redis.call('zadd', KEYS[2], deadline, ARGV[i])
            end
        end
    end
    return nil
end
local available = tonumber(redis.call('get', KEYS[1]))
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
    -- The message goes before the writes: a user refused the channel changes nothing.
    available = (available or 0) + #expired
    publish(ARGV[3], available)
    for _, id in ipairs(expired) do
        redis.call('zrem', KEYS[2], id)
    end
    redis.call('incrby', KEYS[1], #expired)
end
local wanted = tonumber(ARGV[1])
if available and available >= wanted then
    redis.call('decrby', KEYS[1], wanted)
    local deadline = never
    if tonumber(ARGV[2]) >= 0 then
        deadline = now + tonumber(ARGV[2])
    end
    for i = 4, #ARGV do
        redis.call('zadd', KEYS[2], deadline, ARGV[i])
    end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return nil
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) < never then
    return math.max(tonumber(first[2]) - now, 1)
end
return -1
