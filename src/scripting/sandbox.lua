-- Builds Redis's script sandbox on top of a fresh Lua 5.1 state (see mod.rs).
-- Runs once per VM with the real globals; returns the protected view scripts see,
-- the runner (for library loading; scripts run from raw.rs), the protect function,
-- the setter of where global lookups go and the missing-global error function.
local real_g = ...
local error, tostring, type, setmetatable, rawset, rawget = error, tostring, type, setmetatable, rawset, rawget
local next, pairs, ipairs, loadstring, xpcall, select = next, pairs, ipairs, loadstring, xpcall, select
local concat, tinsert, tremove, tsort = table.concat, table.insert, table.remove, table.sort
local sub, byte, find = string.sub, string.byte, string.find

-- proxy -> real table, for the readonly views.
local real_of = setmetatable({}, {__mode = "k"})
local function ro_error() error("Attempt to modify a readonly table", 2) end

local function protect(real)
  local proxy = {}
  real_of[proxy] = real
  setmetatable(proxy, {__index = real, __newindex = ro_error, __metatable = false})
  return proxy
end

-- Scripts see a proxy whose __index is the real globals table itself, so an existing
-- global is found by two table lookups with no Lua call (a global read is in every
-- script: `redis`, `KEYS`, `ARGV`). Only a miss reaches the real table's own
-- metatable (set last, below), which raises Redis's error; that also covers code
-- compiled by loadstring, which runs with the real table as environment, as in Redis.
local function missing_global(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
-- What getmetatable(_G) shows, as in Redis: a readonly table whose __index raises.
local globals_mt_view = protect({__index = missing_global})
local globals_mt
local function protect_globals(real)
  local proxy = {}
  real_of[proxy] = real
  globals_mt = {__index = real, __newindex = ro_error, __metatable = globals_mt_view}
  setmetatable(proxy, globals_mt)
  return proxy
end
-- Where the scripts' globals are looked up: another table (FUNCTION LOAD's library
-- API, which has its own missing-global metatable) or, with nil, the real globals.
local function set_globals_index(t)
  globals_mt.__index = t or real_g
end
local function guard_real_globals(real)
  setmetatable(real, {
    __index = missing_global,
    __newindex = ro_error,
    __metatable = globals_mt_view,
  })
end

local function check_writable(t)
  if real_of[t] then error("Attempt to modify a readonly table", 0) end
end

real_g.rawset = function(t, k, v) check_writable(t) return rawset(t, k, v) end
real_g.setmetatable = function(t, mt) check_writable(t) return setmetatable(t, mt) end
real_g.rawget = function(t, k) return rawget(real_of[t] or t, k) end
local function next_w(t, k) return next(real_of[t] or t, k) end
real_g.next = next_w
real_g.pairs = function(t) if real_of[t] then return next_w, t, nil end return pairs(t) end
real_g.ipairs = function(t) return ipairs(real_of[t] or t) end
table.insert = function(t, ...) check_writable(t) return tinsert(t, ...) end
table.remove = function(t, ...) check_writable(t) return tremove(t, ...) end
table.sort = function(t, ...) check_writable(t) return tsort(t, ...) end

-- Bytecode is never loaded: it is parsed as text, as Redis's patched Lua does.
local function chunkid(source)
  local first = sub(source, 1, 1)
  if first == "=" then return sub(source, 2, 60) end
  if first == "@" then return sub(source, 2, 60) end
  local stop = find(source, "[\n\r%z]")
  local len = (stop or #source + 1) - 1
  local trunc = false
  if len > 43 then len = 43 trunc = true end
  if stop and byte(source, stop) ~= 0 then trunc = true end
  local id = sub(source, 1, len)
  if trunc then id = id .. "..." end
  return '[string "' .. id .. '"]'
end

local function safe_loadstring(s, name)
  if type(s) == "string" and byte(s, 1) == 27 then
    return nil, chunkid(name or s) .. ":1: unexpected symbol near 'char(27)'"
  end
  return loadstring(s, name)
end
real_g.loadstring = safe_loadstring
real_g.load = function(fn, name)
  local parts = {}
  while true do
    local p = fn()
    if p == nil or p == "" then break end
    if type(p) ~= "string" then error("reader function must return a string", 2) end
    parts[#parts + 1] = p
  end
  return safe_loadstring(concat(parts), name or "=(load)")
end

-- The redis table: call, pcall, setresp, log, sha1hex, set_repl, breakpoint and
-- debug are Rust functions; the rest is plain Lua.
local redis = real_g.redis
redis.error_reply = function(...)
  local e = ...
  if select("#", ...) ~= 1 or type(e) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  if sub(e, 1, 1) ~= "-" then e = "-" .. e end
  if find(e, " ", 1, true) then return {err = sub(e, 2)} end
  return {err = "ERR " .. sub(e, 2)}
end
redis.status_reply = function(...)
  local s = ...
  if select("#", ...) ~= 1 or type(s) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  return {ok = s}
end
redis.replicate_commands = function() return true end

local function run(f, h) return xpcall(f, h) end

-- Every library table becomes a readonly view.
for _, name in ipairs({"string", "table", "math", "os", "coroutine", "redis", "cjson", "cmsgpack", "bit", "struct"}) do
  if real_g[name] then real_g[name] = protect(real_g[name]) end
end
-- Strings share one metatable: a script able to change it would run its own code inside
-- other users' scripts (CVE-2025-46818's shape), so scripts get a readonly view of it.
local sm = getmetatable("")
if sm then
  sm.__index = real_g.string
  sm.__metatable = protect(sm)
end
local globals = protect_globals(real_g)
real_g._G = globals
guard_real_globals(real_g)
return globals, run, protect, set_globals_index, missing_global
