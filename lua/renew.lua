-- Renew a batch of leases held by one client (the watchdog's single round trip).
--
-- KEYS[1..n]    lock hashes
-- ARGV[1]       lease in milliseconds
-- ARGV[2..n+1]  owner field for KEYS[i] is ARGV[i + 1]
--
-- Returns  an array of n integers: 1 when that owner still held the lock and its lease
--          was reset, 0 when it no longer holds it (the lease is lost; nothing is touched).
local renewed = {}
for i = 1, #KEYS do
    if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
