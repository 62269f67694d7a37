-- wrk script: POST one KServe v2 inference request to the `tiny` model
-- (input x, FP32 [1,64]) on every connection, and report replies that were not 2xx/3xx.
--   build/ebb serve --port 8000 &
--   wrk -t 2 -c 8 -d 10s --latency -s tools/wrk_infer.lua http://127.0.0.1:8000/v2/models/tiny/infer
local values = {}
for i = 1, 64 do values[i] = string.format("%.4f", (i - 1) / 64) end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"inputs":[{"name":"x","shape":[1,64],"datatype":"FP32","data":[' .. table.concat(values, ",") .. ']}]}'

function done(summary, latency, requests)
  io.write(string.format("non-2xx/3xx replies: %d, socket errors: %d\n", summary.errors.status,
                         summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
