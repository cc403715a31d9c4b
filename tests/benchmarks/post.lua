-- wrk script: POST the JSON body in the file named by $BENCH_BODY on every request.
-- With $BENCH_MAX set, each thread stops after that many responses (a bounded run).
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"

local max = tonumber(os.getenv("BENCH_MAX") or "")
local seen = 0
if max then
  function response(status, headers, body)
    seen = seen + 1
    if seen >= max then wrk.thread:stop() end
  end
end
