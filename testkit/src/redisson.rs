//! Redisson's own lock scripts, as its `RedissonLock` (3.x) sends them, for tests and the
//! benchmark to run beside redlease's on the same keys.

/// `tryLockInnerAsync`. `KEYS[1]` the lock; `ARGV[1]` the lease in milliseconds, `ARGV[2]`
/// the owner field (`<uuid>:<thread id>`). Returns nil when acquired, else the lock's PTTL.
pub const LOCK_ACQUIRE: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// `unlockInnerAsync`. `KEYS[1]` the lock, `KEYS[2]` its channel, `KEYS[3]` the request's
/// unlock latch; `ARGV[1]` the unlock message (`0`), `ARGV[2]` the lease, `ARGV[3]` the
/// owner field, `ARGV[4]` the publish command (`publish`, or `spublish` on a cluster with
/// sharded pub/sub), `ARGV[5]` the latch's lifetime in milliseconds. Returns nil when the
/// owner holds nothing, 0 when holds remain, 1 when the lock was freed and the message
/// published.
pub const LOCK_RELEASE: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";

/// `RedissonNonReentrantLock.tryLockInnerAsync` (RedissonNonReentrantLock.java, line 55). The
/// only script it overrides (release, force unlock and renewal are `RedissonLock`'s). Sent with
/// `EVAL_LONG` (lock, tryLock with a wait) and `EVAL_NULL_BOOLEAN` (`tryLock()`). `KEYS[1]` the
/// lock; `ARGV[1]` the lease in ms, `ARGV[2]` the owner field, `ARGV[3]` the error text
/// `NON_REENTRANT_REACQUIRE`. Returns nil when acquired (field set to 1 with `HINCRBY`), an
/// error reply made of `ARGV[3]` when this owner already holds the lock (Redis 7 sends it as
/// `-ERR NON_REENTRANT_REACQUIRE`), else the lock's PTTL. SHA1
/// `3daa7be6cf69d9309ad990442e83bf25094f9b22`.
pub const NON_REENTRANT_LOCK_ACQUIRE: &str = "if redis.call('exists', KEYS[1]) == 0 then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then return redis.error_reply(ARGV[3]); end; return redis.call('pttl', KEYS[1]);";

/// `RedissonNonReentrantFairLock.tryLockInnerAsync (EVAL_LONG branch)`
/// (RedissonNonReentrantFairLock.java, line 102). `lock()`, `tryLock(wait, ...)`. `KEYS[1]` the
/// lock, `KEYS[2]` its queue `redisson_lock_queue:{name}`, `KEYS[3]` its deadlines
/// `redisson_lock_timeout:{name}`; `ARGV[1]` the lease in ms, `ARGV[2]` the owner field,
/// `ARGV[3]` the wait in ms, `ARGV[4]` now (client clock), `ARGV[5]` `NON_REENTRANT_REACQUIRE`.
/// Returns nil when acquired, an error reply made of `ARGV[5]` when this owner holds the lock
/// (checked before queueing), else a time to wait in ms (the owner is queued if not yet). SHA1
/// `46724422f148047badd768b1b1a3d750d86bded2`.
pub const NON_REENTRANT_FAIR_LOCK_ACQUIRE: &str = "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end;local timeout = redis.call('zscore', KEYS[3], firstThreadId2);if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then return redis.error_reply(ARGV[5]);end;local timeout = redis.call('zscore', KEYS[3], ARGV[2]);if timeout ~= false then local ttl = redis.call('pttl', KEYS[1]);return math.max(0, ttl); end;local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], lastThreadId) ~= false then ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);else ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;return ttl;";

/// `RedissonFairLock.unlockInnerAsync` (RedissonFairLock.java, line 237). Also
/// `RedissonNonReentrantFairLock`'s release. `KEYS[1]` the lock, `KEYS[2]` the queue, `KEYS[3]`
/// the deadlines, `KEYS[4]` the channel `redisson_lock__channel:{name}` (the message goes to
/// `KEYS[4] .. ':' .. <queue head's owner field>`), `KEYS[5]` the unlock latch; `ARGV[1]` `0`,
/// `ARGV[2]` `internalLockLeaseTime`, `ARGV[3]` the owner field, `ARGV[4]` now (client clock),
/// `ARGV[5]` the publish command, `ARGV[6]` the latch's lifetime in ms. Returns 1 when the lock
/// key is absent (waking the head, whoever calls), nil when the owner holds nothing, 0 when
/// holds remain, 1 when freed. SHA1 `367f80bd2e300e411fb0936d9b601e5bcb3fd4b6`.
pub const FAIR_LOCK_RELEASE: &str = "local val = redis.call('get', KEYS[5]); if val ~= false then return tonumber(val);end; while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end; local timeout = redis.call('zscore', KEYS[3], firstThreadId2);if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break;end; end;if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; redis.call('set', KEYS[5], 1, 'px', ARGV[6]); return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[5], 0, 'px', ARGV[6]); return 0; end; redis.call('del', KEYS[1]); redis.call('set', KEYS[5], 1, 'px', ARGV[6]); local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; ";

/// `RedissonSpinLock.tryLockInnerAsync` (RedissonSpinLock.java, line 132). Same key and fields
/// as `RedissonLock` (reentrant, `HINCRBY`), same result. `KEYS[1]` the lock; `ARGV[1]` the
/// lease in ms (`internalLockLeaseTime`, set to this call's lease), `ARGV[2]` the owner field.
/// Returns nil when acquired or re-entered, else the PTTL (unused by the Java side, which
/// sleeps by its back-off instead). SHA1 `dad0f8d619e548e04f21fb48d50be5034df3adae`.
pub const SPIN_LOCK_ACQUIRE: &str = "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// `RedissonSpinLock.unlockInnerAsync` (RedissonSpinLock.java, line 204). `RedissonLock`'s
/// release without the publish. `KEYS[1]` the lock, `KEYS[2]` the unlock latch
/// `redisson_unlock_latch:{name}:<request id>`; `ARGV[1]` `internalLockLeaseTime` (for a
/// partial release), `ARGV[2]` the owner field, `ARGV[3]` the latch's lifetime in ms. Returns
/// nil when the owner holds nothing, 0 when holds remain, 1 when freed. Publishes nothing. SHA1
/// `73ac2729af29ea9a975f95e8097f7ee9a74cce3d`.
pub const SPIN_LOCK_RELEASE: &str = "local val = redis.call('get', KEYS[2]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[2]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[1]); redis.call('set', KEYS[2], 0, 'px', ARGV[3]); return 0; else redis.call('del', KEYS[1]); redis.call('set', KEYS[2], 1, 'px', ARGV[3]); return 1; end; ";

/// `RedissonSemaphore.releaseIfExistsAsync` (RedissonSemaphore.java, line 485). `KEYS[1]` the
/// semaphore, `KEYS[2]` `redisson_sc:{name}`; `ARGV[1]` the permits (> 0; the Java side answers
/// false for 0 without sending), `ARGV[2]` the publish command. Returns 0 when the key does not
/// exist (nothing written or published), else `INCRBY`, publishes the new count, returns 1.
/// SHA1 `6883802454c09d455e3234c8b01549adf1fb8b4c`.
pub const SEMAPHORE_RELEASE_IF_EXISTS: &str = "if redis.call('exists', KEYS[1]) == 0 then return 0 end local value = redis.call('incrby', KEYS[1], ARGV[1]) redis.call(ARGV[2], KEYS[2], value) return 1 ";

/// `RedissonSemaphore.trySetPermitsAsync(int, Duration)` (RedissonSemaphore.java, line 566).
/// `KEYS[1]` the semaphore, `KEYS[2]` `redisson_sc:{name}`; `ARGV[1]` the permits, `ARGV[2]`
/// the publish command, `ARGV[3]` the time to live in ms (`Duration.toMillis()`). Returns 1
/// when the key was absent (`SET ... PX`, `ARGV[1]` published), else 0 with nothing changed
/// (the existing value and TTL stay). A TTL of 0 ms is a Redis error (`invalid expire time`).
/// SHA1 `38bf99884eb94708a40a9aabacb15b4c5f16e804`.
pub const SEMAPHORE_TRY_SET_PERMITS_WITH_TTL: &str = "local value = redis.call('get', KEYS[1]); if (value == false) then redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]); redis.call(ARGV[2], KEYS[2], ARGV[1]); return 1;end;return 0;";

/// `RedissonFasterMultiLock.tryLockOnceInnerAsync` (RedissonFasterMultiLock.java, line 335).
/// `tryLock()` (`EVAL_BOOLEAN`). `KEYS[1]` the group's hash (the group name); `ARGV[1]` now
/// (client clock, epoch ms), `ARGV[2]` the lease in ms, `ARGV[3]` the owner field, `ARGV[4..]`
/// one field per value (base64 of a 128-bit `HighwayHash` of the encoded value, 22 chars).
/// Returns 1 when every field was taken, 0 when one is held by another owner whose
/// `<field>:<owner>:expire_time` is in the future. Raises a Lua error when a field's owner has
/// no `expire_time` field. SHA1 `6f6c8d62862d8d76ea41fc769938285c3aca3005`.
pub const FAST_MULTI_LOCK_TRY_ACQUIRE: &str = "local currentTime = tonumber(ARGV[1]);local leaseTime = tonumber(ARGV[2]);local currentThread = ARGV[3];local keyExist = nil;if (redis.call('exists',KEYS[1]) > 0) then   keyExist = 1;   for i=4, #ARGV, 1 do        local lockThread = redis.call('hget', KEYS[1], ARGV[i]);        if(lockThread ~= false and currentThread ~= lockThread ) then            local expireFieldName = ARGV[i]..':'..lockThread..':expire_time'           local expireTime = redis.call('hget', KEYS[1], expireFieldName);           if( tonumber(expireTime) > currentTime and currentThread ~= lockThread) then                return 0;           end       end;    end; else   keyExist = 0;end;for i=4, #ARGV, 1 do    redis.call('hset', KEYS[1], ARGV[i], currentThread);    local expireFieldName = ARGV[i]..':'..currentThread..':expire_time'   local expireTime = redis.call('hget', KEYS[1], expireFieldName);    local newExpireTime = leaseTime + currentTime    if(expireTime == false or tonumber(expireTime) < newExpireTime ) then      redis.call('hset', KEYS[1], expireFieldName, newExpireTime);    end;   redis.call('HINCRBY', KEYS[1], ARGV[i]..':'..currentThread..':lock_count', 1); end; if(keyExist == 1) then   local expireTime = redis.call('pttl',KEYS[1]);   if(tonumber(expireTime) > 0 and leaseTime > tonumber(expireTime)) then       redis.call('pexpire',KEYS[1], leaseTime);   end;else    redis.call('pexpire',KEYS[1], leaseTime);end;return 1;";

/// `RedissonFasterMultiLock.tryLockInnerAsync` (RedissonFasterMultiLock.java, line 383).
/// `lock()`, `tryLock(wait, ...)` (`EVAL_LONG`). `KEYS[1]` the group's hash; `ARGV[1]` the
/// lease in ms, `ARGV[2]` now (client clock), `ARGV[3]` the owner field, `ARGV[4..]` the fields
/// (note `ARGV[1]`/`ARGV[2]` swapped against the try variant). Returns nil when every field was
/// taken, else the ms until the latest conflicting lease ends. SHA1
/// `eba4f75b2998ef1ead8e55019d89d93d85dadf60`.
pub const FAST_MULTI_LOCK_ACQUIRE: &str = "local leaseTime = tonumber(ARGV[1]);local currentTime = tonumber(ARGV[2]);local currentThread = ARGV[3];local maxExpireTime = -1;local keyExist = nil;if (tonumber(redis.call('exists',KEYS[1])) > 0) then   keyExist = 1;   for i=4, #ARGV, 1 do        local lockThread = redis.call('hget', KEYS[1], ARGV[i]);        if(lockThread ~= false and lockThread ~= currentThread) then            local expireFieldName = ARGV[i]..':'..lockThread..':expire_time';           local expireTime = redis.call('hget', KEYS[1], expireFieldName);           if(expireTime ~= false and tonumber(expireTime) > currentTime ) then                if(tonumber(expireTime) > maxExpireTime) then                   maxExpireTime = tonumber(expireTime);               end;           end       end;    end; else   keyExist = 0;end;if( maxExpireTime ~= -1) then   return maxExpireTime-currentTime;end;for i=4, #ARGV, 1 do    redis.call('hset', KEYS[1], ARGV[i], currentThread);    local expireFieldName = ARGV[i]..':'..currentThread..':expire_time'   local expireTime = redis.call('hget', KEYS[1], expireFieldName);    local newExpireTime = leaseTime + currentTime    if(expireTime == false or tonumber(expireTime) < newExpireTime ) then      redis.call('hset', KEYS[1], expireFieldName, newExpireTime);    end;   redis.call('HINCRBY', KEYS[1], ARGV[i]..':'..currentThread..':lock_count', 1); end; if(keyExist == 1) then   local expireTime = redis.call('pttl',KEYS[1]);   if(tonumber(expireTime) > 0 and leaseTime > tonumber(expireTime)) then       redis.call('pexpire',KEYS[1], leaseTime);   end;else    redis.call('pexpire',KEYS[1], leaseTime);end;return nil;";

/// `RedissonFasterMultiLock.unlockInnerAsync` (RedissonFasterMultiLock.java, line 481).
/// `KEYS[1]` the group's hash, `KEYS[2]` `redisson_lock__channel:{group}`, `KEYS[3]` the unlock
/// latch `redisson_unlock_latch:{group}:<request id>`; `ARGV[1]` the owner field, `ARGV[2]`
/// `0`, `ARGV[3]` `internalLockLeaseTime`, `ARGV[4]` the publish command, `ARGV[5]` the latch's
/// lifetime in ms, `ARGV[6]` now (client clock), `ARGV[7..]` the fields. Returns nil when the
/// key is absent (after publishing `0`) or one field's hold is missing or expired (after
/// releasing the fields before it; no latch), 0 when holds remain, 1 when every field was
/// freed. Publishes `0` on every non-nil outcome (`if(hasDeleted)` is always true in Lua). SHA1
/// `5088a04fb08aa002f465f0f90b35ed8da9b27a3c`.
pub const FAST_MULTI_LOCK_RELEASE: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then    return tonumber(val);end; if(redis.call('exists', KEYS[1]) == 0) then   redis.call(ARGV[4], KEYS[2], ARGV[2]);    return nil;end;local lockName = ARGV[1];local hasFailed = 0;local allDeleted = 1;local hasDeleted = 0;local newExpireTime = tonumber(ARGV[3]) + tonumber(ARGV[6]);for i = 7,#ARGV,1 do   local expireTime = redis.call('hget', KEYS[1], ARGV[i]..':'..lockName..':expire_time');   if (expireTime ~= false and tonumber(expireTime) >= tonumber(ARGV[6])) then       if(tonumber(redis.call('hincrby', KEYS[1], ARGV[i]..':'..lockName..':lock_count',-1)) <= 0) then           redis.call('hdel',KEYS[1], ARGV[i]..':'..lockName..':expire_time');           redis.call('hdel',KEYS[1], ARGV[i]..':'..lockName..':lock_count');           redis.call('hdel',KEYS[1], ARGV[i]);           hasDeleted = 1;       else           if(tonumber(expireTime) < newExpireTime) then                redis.call('hset', KEYS[1], ARGV[i]..':'..lockName..':expire_time', newExpireTime);           end;           allDeleted = 0;       end;   else       allDeleted = 0;       hasFailed = 1;   end;end;if(hasFailed ~= 0) then   return nil;end;if(hasDeleted) then   redis.call(ARGV[4], KEYS[2], ARGV[2]); end;if(allDeleted == 1) then   redis.call('set', KEYS[3], 1, 'px', ARGV[5]); else    redis.call('set', KEYS[3], 0, 'px', ARGV[5]);    local expireTime = redis.call('pttl',KEYS[1]);   if(tonumber(ARGV[3]) > tonumber(expireTime)) then       redis.call('pexpire',KEYS[1], ARGV[3]);   end;end;return allDeleted;";

/// `RedissonFasterMultiLock.isLockedAsync` (RedissonFasterMultiLock.java, line 760). `KEYS[1]`
/// the group's hash; `ARGV[1]` now (client clock), `ARGV[2..]` the fields. Returns 1 when any
/// field has an owner whose `expire_time` is at or after now, else 0. SHA1
/// `25ede9b3422ba7c8d75cc43d73a4d90331598aa0`.
pub const FAST_MULTI_LOCK_IS_LOCKED: &str = "local currentTime = tonumber(ARGV[1]);for i = 2,#ARGV,1 do   local localThread = redis.call('hget', KEYS[1], ARGV[i]);   if(localThread ~= false) then       local expireTime = redis.call('hget', KEYS[1], ARGV[i]..':'..localThread..':expire_time');       if (expireTime ~= false and tonumber(expireTime) >= currentTime) then           return 1;       end;   end;end;return 0;";
