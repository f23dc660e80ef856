-- Campaign in an election (redlease's own layout; Redisson has none): become leader when
-- nobody leads, taking the next term from a counter that never expires, and advertise a
-- value beside the leader's owner field; otherwise wait as for a fenced lock.
--
-- KEYS[1]  the election's hash, prefixed("redlease_election", name): the leader's owner
--          field (1), `value` and `term`; its time to live is the leader's lease
-- KEYS[2]  the term counter, prefixed("redlease_term", KEYS[1]); no TTL
-- KEYS[3]  the election's waiting redlease clients (as for a plain lock)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client uuid>:<number>" (each campaign's own)
-- ARGV[3]  the client's wake token when the caller waits, else ""
-- ARGV[4]  how long a registration lasts, in milliseconds
-- ARGV[5]  the value the leader advertises
-- ARGV[6]  the observers' channel, prefixed("redlease_leader", KEYS[1])
--
-- Returns  {1, term} when this owner leads now, {2, term} when it led already (the request
--          sent again after its reply was lost: the same term, the lease then counted again
--          from now); {0, pttl} when another leads.
-- The new term is published on the observers' channel before anything is written (a user
-- refused the channel changes nothing).
local token = ARGV[3]
if redis.call('exists', KEYS[1]) == 0 then
    may('incr', KEYS[2])
    local term = (tonumber(redis.call('get', KEYS[2])) or 0) + 1
    publish(ARGV[6], tostring(term))
    unregister_waiter(KEYS[3], token)
    redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], ARGV[2], 1, 'value', ARGV[5], 'term', term)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, term}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- This campaign's own earlier grant, its reply lost: the client counts the lease from
    -- this request's send, so the expiry counts from now too (never shorter).
    unregister_waiter(KEYS[3], token)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {2, tonumber(redis.call('hget', KEYS[1], 'term'))}
end
register_waiter(KEYS[3], token, ARGV[4])
return {0, redis.call('pttl', KEYS[1])}
