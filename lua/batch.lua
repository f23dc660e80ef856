-- Prepended (after `lua/prelude.lua`) to the batched renew scripts: their reply, and one
-- pcall for a whole batch.
--
-- The reply is {n, i, outcome, j, outcome, ...}: how many leases the script went through,
-- then each lease not renewed, by its place in the batch: 0 when it is gone (the lease is
-- lost; nothing is touched for it), or Redis's words when Redis refused it (an ACL rule, a
-- key of another type, a slot this node no longer serves). Every lease not listed was
-- renewed: the usual reply is {n}, not one entry per lease.
local missed = {0}

-- Lists lease `at` as not renewed, for `outcome`.
local function miss(at, outcome)
    missed[#missed + 1] = at
    missed[#missed + 1] = outcome
end

-- Goes through leases 1..count with `step(cursor)`, which renews the leases from
-- cursor[1] on and keeps cursor[1] at the lease it is on, under one pcall rather than one
-- per lease: a lease that raises is listed with Redis's words, and the pcall is entered
-- again after it, so one refusal does not keep the others from being renewed.
local function each_lease(count, step)
    local cursor = {1}
    while cursor[1] <= count do
        local ok, refusal = pcall(step, cursor)
        if not ok then
            miss(cursor[1], type(refusal) == 'table' and refusal.err or tostring(refusal))
            cursor[1] = cursor[1] + 1
        end
    end
    missed[1] = count
    return missed
end

-- each_lease for a script that renews one lease at a time: `renew_one(i)` renews lease i
-- and answers 1, or 0 when it is gone (listed as not renewed).
local function each_lease_alone(count, renew_one)
    local function step(cursor)
        for i = cursor[1], count do
            cursor[1] = i
            if renew_one(i) == 0 then
                miss(i, 0)
            end
        end
        cursor[1] = count + 1
    end
    return each_lease(count, step)
end
