-- Release one hold of a fair lock, idempotently per request; when the lock is freed, wake
-- only the waiter whose turn it is.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- KEYS[4]  the lock's release channel; a waiter's own channel is KEYS[4] .. ':' .. owner
-- KEYS[5]  this request's unlock latch
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in milliseconds to keep when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  latch lifetime in milliseconds
--
-- Returns  nil (not held), 0 (one hold released, others remain), 1 (lock freed; the head
--          waiter, after dead ones are dropped, was told). A retry replays the stored 0 or 1.
local replay = redis.call('get', KEYS[5])
if replay then
    return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[5], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], head))
    if deadline and deadline > now then
        redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1])
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
end
redis.call('set', KEYS[5], 1, 'px', ARGV[4])
return 1
