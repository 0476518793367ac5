-- GET /health at a fixed rate when DELAY_MS is set (pause before each request), else as fast as possible.
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")
if delay_ms > 0 then
    delay = function() return delay_ms end
end
