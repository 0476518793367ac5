-- POST /v1/couples/{couple}/budget/expenses for one of the couples in PAIRS ("couple owner" per line), chosen at
-- random, as its owner. With KEYED=1 each request carries an Idempotency-Key no other request has (RUN names the
-- run). Environment: RBAC_KEY (service key), PAIRS, KEYED, RUN.
local key = os.getenv("RBAC_KEY")
local keyed = os.getenv("KEYED") == "1"
local run = os.getenv("RUN") or "run"

local couples = {}
for line in io.lines(os.getenv("PAIRS")) do
    local couple, owner = line:match("(%S+) (%S+)")
    couples[#couples + 1] = { path = "/v1/couples/" .. couple .. "/budget/expenses", owner = owner }
end
local body = '{"name":"Cake","amount":12.5}'

-- Each thread's number, for keys unique across threads: wrk runs setup once per thread, in its own Lua state.
local threads = 0
setup = function(thread)
    thread:set("thread_number", threads)
    threads = threads + 1
end

-- Built per request, keyed or not, so that both runs cost wrk the same.
local sent = 0
request = function()
    local couple = couples[math.random(#couples)]
    local headers = {
        ["Authorization"] = "Bearer " .. key,
        ["Content-Type"] = "application/json",
        ["X-Acting-User"] = couple.owner,
    }
    sent = sent + 1
    if keyed then headers["Idempotency-Key"] = run .. "-" .. thread_number .. "-" .. sent end
    return wrk.format("POST", couple.path, headers, body)
end
