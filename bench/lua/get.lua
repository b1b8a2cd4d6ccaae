-- One URL, GET, the headers given with -H (W1-W4): e.g. a loadTable with If-None-Match.
-- Usage: BENCH_LUA_DIR=bench/lua wrk -s bench/lua/get.lua -H 'If-None-Match: "..."' <url>

dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")

done = bench_done
