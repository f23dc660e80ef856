-- Read everything Redis keeps for one name, at one instant, writing nothing: the key and
-- its type, fields and time to live; a read-write lock's read holds' times to live; a fair
-- lock's queue and deadlines; a fenced lock's last token; a semaphore's permits available
-- and a permit-expirable one's taken permits with their deadlines; and how many
-- connections listen on the lock's and the semaphore's channels (waiting clients).
--
-- KEYS[1]  the name (a lock's hash, a semaphore's or a latch's number)
-- KEYS[2]  the fair lock's queue        KEYS[3]  its deadlines
-- KEYS[4]  the fenced lock's token      KEYS[5]  the permit-expirable semaphore's permits
-- ARGV[1]  the prefix of a read hold's key, before ':<owner>:rwlock_timeout:<k>'
-- ARGV[2]  most permits listed
-- ARGV[3]  the lock's channel          ARGV[4]  the semaphore's channel
--
-- Returns  {now, type, fields, pttl, queue, deadlines, token, read ttls, value, permits
--          taken, permits listed, {listeners on the lock channel, on the semaphore channel}}
--          (a listener count is -1 when the user may not count subscribers).
local name, queue, timeouts, token, permits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind = redis.call('type', name)['ok']
local fields, reads = {}, {}
if kind == 'hash' then
    fields = redis.call('hgetall', name)
    if redis.call('hexists', name, 'mode') == 1 then
        for i = 1, #fields, 2 do
            local owner = fields[i]
            if owner ~= 'mode' and string.sub(owner, -6) ~= ':write' then
                local best = -2
                -- At most 1000 keys per reader.
                for k = 1, math.min(tonumber(fields[i + 1]) or 0, 1000) do
                    local ttl = redis.call('pttl', ARGV[1] .. ':' .. owner .. ':rwlock_timeout:' .. k)
                    if ttl == -1 or best == -1 then best = -1 elseif ttl > best then best = ttl end
                end
                table.insert(reads, owner)
                table.insert(reads, tostring(best))
            end
        end
    end
end
local waiting, deadlines, last = {}, {}, false
if redis.call('type', queue)['ok'] == 'list' then waiting = redis.call('lrange', queue, 0, 999) end
if redis.call('type', timeouts)['ok'] == 'zset' then
    deadlines = redis.call('zrange', timeouts, 0, 999, 'withscores')
end
if redis.call('type', token)['ok'] == 'string' then last = redis.call('get', token) end
local value, taken, listed = false, 0, {}
if kind == 'string' then value = redis.call('get', name) end
if redis.call('type', permits)['ok'] == 'zset' then
    taken = redis.call('zcard', permits)
    listed = redis.call('zrange', permits, 0, tonumber(ARGV[2]) - 1, 'withscores')
end
local function listeners(channel)
    local counts = redis.pcall('pubsub', 'numsub', channel)
    if type(counts) == 'table' and not counts.err then return counts[2] end
    return -1
end
return {tostring(now), kind, fields, tostring(redis.call('pttl', name)), waiting, deadlines, last, reads,
    value, taken, listed, {listeners(ARGV[3]), listeners(ARGV[4])}}
