-- wrk script: POST the JSON bodies of a file (one per line) round-robin; print a JSON summary.
--   wrk -t2 -c16 -d12s -s benchmarks/wrk/bodies.lua URL -- bodies.jsonl
-- Requests are formatted once in init, so that sending one costs wrk no more than a static request.
local prepared = {}
local i = 0

function init(args)
  local headers = {["Content-Type"] = "application/json"}
  for line in io.lines(args[1]) do
    prepared[#prepared + 1] = wrk.format("POST", nil, headers, line)
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
