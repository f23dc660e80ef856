-- Release the last hold of a plain lock's owner but keep the lock taken until a deadline
-- (a hold kept at least so long after its grant, ShedLock's lockAtLeastFor): the owner's
-- field gives way to the keeper's, `<client uuid>:0`, a number no thread and no acquisition
-- ever has, so nobody enters until the key expires, the owner's own thread included.
-- Nothing is published: nobody could take the lock before then.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  owner field
-- ARGV[2]  the keeper's field
-- ARGV[3]  milliseconds the lock stays taken
--
-- Returns  1 when kept (also when sent again after its reply was lost: the keeper's field
--          is there and the owner's is not); nil when the owner holds nothing.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
        return 1
    end
    return nil
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[3])
return 1
