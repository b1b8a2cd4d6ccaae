-- One URL, POST with the JSON body in the file $BENCH_BODY (signRequest); headers via -H.
-- Usage: BENCH_LUA_DIR=bench/lua BENCH_BODY=body.json wrk -s bench/lua/post.lua <url>

dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")

local file = assert(io.open(os.getenv("BENCH_BODY"), "r"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"

done = bench_done
