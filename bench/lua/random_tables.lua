-- GET loadTable of a table chosen at random for each request out of a catalog too big to list
-- path by path (W14: 1,000,000 tables; pages.lua would format a million requests at start-up).
-- $BENCH_PATHS holds one line: "<path up to the namespace's child index>|<namespaces>|<tables each>",
-- e.g. "/v1/warehouse/namespaces/ns098%1Fr|1000|1000" for ns098.r000 .. r999, tables t00000 ..
-- The random sequence is fixed ($BENCH_SEED + thread number), as in pages.lua.

dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")

local threads_started = 0

function setup(thread)
  threads_started = threads_started + 1
  thread:set("thread_number", threads_started)
end

local prefix, namespaces, tables

function init(args)
  math.randomseed(tonumber(os.getenv("BENCH_SEED") or "1") + (thread_number or 0))
  local f = assert(io.open(os.getenv("BENCH_PATHS")))
  local line = f:read("*l")
  f:close()
  local p, n, t = line:match("^(.-)|(%d+)|(%d+)$")
  assert(p, "BENCH_PATHS: expected <prefix>|<namespaces>|<tables each>, got " .. line)
  prefix, namespaces, tables = p, tonumber(n), tonumber(t)
end

function request()
  local ns = math.random(namespaces) - 1
  local t = math.random(tables) - 1
  return wrk.format("GET", string.format("%s%03d/tables/t%05d", prefix, ns, t))
end

done = bench_done
