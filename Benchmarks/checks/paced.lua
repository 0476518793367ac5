-- Paces a plain request (GET /health) as check.lua paces checks: each connection pauses 0 to 2 x DELAY_MS at
-- random before each request. The HTTP stack's own latency at the pace the checks' latency goal is measured at.
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")

if delay_ms > 0 then
    delay = function() return math.random(0, 2 * delay_ms) end
end
