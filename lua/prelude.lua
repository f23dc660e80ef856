-- Prepended to the scripts that need it. Lua does not roll back, so a script must be refused
-- before its first write or not at all: a script calls `may` with a command it will run
-- later, before it writes anything, and is refused here, naming the command, the key or
-- channel and the user's missing permission. Redis 7's ACL check; older servers have no
-- such check (and, before 6.2, no channel permissions) and refuse at the command itself.
local function may(...)
    if redis.acl_check_cmd and not redis.acl_check_cmd(...) then
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
