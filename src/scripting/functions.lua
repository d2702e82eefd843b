-- The functions VM's loading environment (see functions.rs). Runs once with the real
-- globals and the Rust `register_function`; returns set_mode(loading), which points the
-- global `redis` at the restricted loading API or back at the full runtime API.
local real_g, register = ...
local rawset, error, tostring, setmetatable = rawset, error, tostring, setmetatable
local full_redis = real_g.redis
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
local load_redis = setmetatable({}, {
  __index = function(_, k)
    local v = api[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
return function(loading)
  if loading then rawset(real_g, "redis", load_redis) else rawset(real_g, "redis", full_redis) end
end
