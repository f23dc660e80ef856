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
