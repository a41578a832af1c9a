-- wrk script: POST bodies round-robin; print a JSON summary.
--   wrk -t2 -c16 -d12s -s benchmarks/wrk/bodies.lua URL -- CONTENT_TYPE bodies.jsonl   (one body per line)
--   wrk -t2 -c2 -d12s -s benchmarks/wrk/bodies.lua URL -- CONTENT_TYPE a.bin b.bin     (one body per file)
-- Requests are formatted once in init, so that sending one costs wrk no more than a static request.
local prepared = {}
local i = 0

function init(args)
  local headers = {["Content-Type"] = args[1]}
  if #args == 2 and args[2]:match("%.jsonl$") then
    for line in io.lines(args[2]) do
      prepared[#prepared + 1] = wrk.format("POST", nil, headers, line)
    end
  else
    for k = 2, #args do
      local fh = assert(io.open(args[k], "rb"))
      prepared[#prepared + 1] = wrk.format("POST", nil, headers, fh:read("*a"))
      fh:close()
    end
  end
  i = math.random(#prepared) - 1
end

function request()
  i = i % #prepared + 1
  return prepared[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "socket_errors": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
