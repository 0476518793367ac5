-- POST /v1/check for members of the seeded couples (Benchmarks/permissions/seed.sql), chosen at random from the
-- first COUPLES couples. Environment: RBAC_KEY (service key), COUPLES, DELAY_MS (optional: pause this long on
-- average before each request, to hold a rate).
local key = os.getenv("RBAC_KEY")
local couples = tonumber(os.getenv("COUPLES") or "1000")
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")

-- md5 is not in wrk's Lua, so the ids come from a file the benchmark script writes: "couple user" per line.
local pairs_file = os.getenv("PAIRS")
local bodies = {}
for line in io.lines(pairs_file) do
    local couple, user = line:match("(%S+) (%S+)")
    bodies[#bodies + 1] = '{"couple_id":"' .. couple .. '","user_id":"' .. user .. '","permission":"budget.edit"}'
    if #bodies >= couples * 3 then break end
end

wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. key
wrk.headers["Content-Type"] = "application/json"

-- Formatted once, so that each request costs wrk a table lookup, not the building of a request: wrk shares
-- the machine with the server, and GET /health costs it no more than that. In init, which wrk calls once it
-- has set the Host field: a request without one is refused.
local requests = {}
init = function(args)
    for i, body in ipairs(bodies) do
        requests[i] = wrk.format(nil, "/v1/check", nil, body)
    end
end

request = function()
    return requests[math.random(#requests)]
end

-- Each pause is drawn from 0 to 2 x DELAY_MS. Equal pauses keep the connections in step: they send their
-- requests in bursts, and the queue a burst builds is what the latency then measures.
if delay_ms > 0 then
    delay = function() return math.random(0, 2 * delay_ms) end
end

done = function(summary, latency, requests)
    io.stderr:write(string.format("non-2xx responses: %d\n", summary.errors.status))
end
