-- GET one of several paths (one per line in the file $BENCH_PATHS), chosen at random with a
-- fixed seed ($BENCH_SEED + thread number) so every run sends the same sequence (W8: pages of
-- a listTables walk, each with its own pageToken).

dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")

local threads_started = 0

function setup(thread)
  threads_started = threads_started + 1
  thread:set("thread_number", threads_started)
end

local requests = {}

function init(args)
  local seed = tonumber(os.getenv("BENCH_SEED") or "1") + (thread_number or 0)
  math.randomseed(seed)
  for path in io.lines(os.getenv("BENCH_PATHS")) do
    if path ~= "" then
      requests[#requests + 1] = wrk.format("GET", path)
    end
  end
  if #requests == 0 then
    error("no paths in " .. os.getenv("BENCH_PATHS"))
  end
end

function request()
  return requests[math.random(#requests)]
end

done = bench_done
