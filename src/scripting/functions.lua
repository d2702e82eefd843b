-- The functions VM's loading environment (see functions.rs). Runs once with the Rust
-- `register_function` and the sandbox's helpers; returns set_mode(loading), which points
-- global lookups at the library API while library code runs (as Redis: its `redis`
-- table holds only register_function, log and the constants, and no other global is
-- visible) and back at the real globals after.
local register, full_redis, protect, set_globals_index, missing_global = ...
local setmetatable = setmetatable
local api = {
  register_function = register,
  log = full_redis.log,
  LOG_DEBUG = full_redis.LOG_DEBUG,
  LOG_VERBOSE = full_redis.LOG_VERBOSE,
  LOG_NOTICE = full_redis.LOG_NOTICE,
  LOG_WARNING = full_redis.LOG_WARNING,
  REDIS_VERSION = full_redis.REDIS_VERSION,
  REDIS_VERSION_NUM = full_redis.REDIS_VERSION_NUM,
}
setmetatable(api, {__index = missing_global, __metatable = false})
local library_globals = setmetatable({redis = protect(api)}, {__index = missing_global, __metatable = false})
library_globals = protect(library_globals)
return function(loading)
  if loading then set_globals_index(library_globals) else set_globals_index(nil) end
end
