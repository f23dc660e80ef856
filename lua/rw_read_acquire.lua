-- Take a read hold of a read-write lock (Redisson's layout).
--
-- KEYS[1]  the lock hash: 'mode' -> 'read' | 'write'; "<owner>" -> read holds;
--          "<owner>:write" -> write holds
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
-- ARGV[3]  the owner's write field, "<owner>:write"
-- ARGV[4]  prefix of this owner's per-hold timeout keys: hold k is ARGV[4] .. ':' .. k
--
-- Returns  nil when granted: no mode is set, the mode is read, or this owner holds the
--          write lock (a downgrade); the status JOINED instead when this owner had read holds
--          already (reentrant, or its own grant whose reply was lost); otherwise the lock's
--          PTTL (-1 when it has no expiry).
-- Each read hold gets its own timeout key, so that a dead reader's holds end on their own;
-- the hash keeps the longest lease of any hold.
-- A first hold on a free lock (the uncontended acquire) writes the hash in one command and
-- sets the new key's expiry without reading it.
-- The hold key, not among KEYS, is written first: where Redis cannot check it beforehand
-- (Redis 6 has no `acl_check_cmd`), a user refused it is refused before anything else is
-- written, not after a hash without its expiry.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    local hold = ARGV[4] .. ':1'
    may('set', hold, '1', 'px', ARGV[1])
    redis.call('set', hold, 1, 'px', ARGV[1])
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    local held = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
    local hold = ARGV[4] .. ':' .. (held + 1)
    may('set', hold, '1', 'px', ARGV[1])
    redis.call('set', hold, 1, 'px', ARGV[1])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    if held > 0 then
        return redis.status_reply('JOINED')
    end
    return nil
end
return redis.call('pttl', KEYS[1])
