-- Prepended to the scripts that need it. Lua does not roll back, so a script must be refused
-- before its first write or not at all: a script calls `may` with a command it will run
-- later, before it writes anything, and is refused here, naming the command, the key or
-- channel and the user's missing permission. Redis 7's ACL check; older servers have no
-- such check (and, before 6.2, no channel permissions) and refuse at the command itself.
local function permitted(...)
    return not redis.acl_check_cmd or redis.acl_check_cmd(...)
end

local function may(...)
    if not permitted(...) then
        error({err = 'NOPERM this user has no permission for: ' .. table.concat({...}, ' ')})
    end
end

-- Publishes, refused first with the channel named when the user may not publish there.
local function publish(channel, message)
    may('publish', channel, message)
    return redis.call('publish', channel, message)
end


-- The server's clock in milliseconds: deadlines are the server's, so that client clock
-- skew cannot cut a live lease or waiter short.
local function server_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A fair lock's queue keeps Redisson's chain of deadlines, each one wait timeout after the
-- one before it, at its front only: the first FAIR_FRONT waiters. Only a head can be
-- dropped, and a Redisson grant makes the next head from the second's deadline, so the
-- front is what a deadline is read for; re-chaining the whole queue at every grant (as
-- Redisson does) made a grant cost Redis time in proportion to the queue. Deeper deadlines
-- stay as written, later than the chain's (never earlier), and are chained when their
-- waiter reaches the front.
local FAIR_FRONT = 16

-- Chains the deadlines of the waiters at positions `from` .. FAIR_FRONT - 1 of `queue`
-- behind `anchor`, the deadline of the one at `from` - 1: one LRANGE and one ZADD.
local function chain_front(queue, timeouts, from, anchor, wait)
    if from >= FAIR_FRONT then
        return
    end
    local owners = redis.call('lrange', queue, from, FAIR_FRONT - 1)
    if #owners == 0 then
        return
    end
    local batch = {}
    for i, owner in ipairs(owners) do
        batch[#batch + 1] = string.format('%d', anchor + i * wait)
        batch[#batch + 1] = owner
    end
    redis.call('zadd', timeouts, unpack(batch))
end

-- A waiting redlease client names itself when it finds a plain or fenced lock busy: its
-- wake token goes into the lock's sorted set of waiting clients, scored by when the
-- registration runs out (see acquire.lua); `token` is '' for a caller that does not wait.
local function register_waiter(waiters, token, window)
    if token ~= '' then
        redis.call('zadd', waiters, server_ms() + tonumber(window), token)
        redis.call('pexpire', waiters, window)
    end
end

-- A grant takes the client's registration back.
local function unregister_waiter(waiters, token)
    if token ~= '' then
        redis.call('zrem', waiters, token)
    end
end

-- A plain or fenced lock was freed: wake one redlease client waiting for it, and every
-- Redisson waiter. A waiting redlease client listens on the lock's channel and on two
-- channels beside it, in one subscription: its own, `wake_prefix .. token` (its wake-ups),
-- and `mark`, whose subscribers are the redlease clients listening on the lock's channel.
-- The registered clients are named in turn, longest registered first, each on its own
-- channel, until one is listening (a client registered but with no connection subscribed
-- to its channel, dead or not yet subscribed, is passed over: its next attempt registers it
-- again). The lock's channel gets a message only when someone else listens there (its
-- subscribers outnumber the mark's: a Redisson waiter, or a redlease client of an older
-- version), and then the name first (redlease clients take the message after a name as
-- handled) and `message`, which Redisson's waiters act on. Nobody named: `message` alone,
-- which wakes one waiter in every client. `mark` '' means "someone else may listen where
-- this server cannot count" (Redisson waiters subscribed on replicas): the lock's channel
-- always gets its messages. So it does without the right to count subscribers (an ACL
-- rule without `pubsub|numsub`); without the right to publish on the clients' channels,
-- nobody is named.
local function wake_waiters(waiters, channel, message, mark, wake_prefix)
    if redis.call('exists', waiters) == 0 then
        publish(channel, message)
        return
    end
    -- Refused before anything is written, whether or not this release ends up publishing
    -- on the lock's channel.
    may('publish', channel, message)
    local now = server_ms()
    may('zremrangebyscore', waiters, '-inf', now)
    local tried = {}
    local named = nil
    for _, token in ipairs(redis.call('zrangebyscore', waiters, now, '+inf', 'limit', 0, 4)) do
        local own = wake_prefix .. token
        if not permitted('publish', own, message) then
            break
        end
        -- A refusal that no check could foresee (Redis 6) names nobody instead of failing.
        local heard = redis.pcall('publish', own, message)
        if type(heard) ~= 'number' then
            break
        end
        tried[#tried + 1] = token
        if heard > 0 then
            named = token
            break
        end
    end
    local others = true
    if named and mark ~= '' and permitted('pubsub', 'numsub', channel, mark) then
        local counts = redis.pcall('pubsub', 'numsub', channel, mark)
        if type(counts) == 'table' and not counts.err and counts[2] <= counts[4] then
            others = false
        end
    end
    if others then
        if named then
            publish(channel, named)
        end
        publish(channel, message)
    end
    redis.call('zremrangebyscore', waiters, '-inf', now)
    if #tried > 0 then
        redis.call('zrem', waiters, unpack(tried))
    end
end
