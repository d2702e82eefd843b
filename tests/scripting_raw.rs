//! The raw Lua C API path of scripting (`src/scripting/raw.rs`), end to end: every
//! unsafe block is reached here. KEYS/ARGV building (binary strings, huge counts),
//! `redis.call` / `redis.pcall` reading their arguments off the stack (strings with
//! NULs, integers, floats, wrong types, none, thousands, from a coroutine), replies
//! pushed of every type in both `redis.setresp` versions, errors raised and returned,
//! the script's result converted from the stack, and the memory limit. Most rows are
//! compared with redis-server when it is installed.

mod common;
use common::*;

/// Scripts whose replies must match redis-server's in RESP2 and RESP3.
const SAME_AS_REDIS: &[&[&str]] = &[
    // Arguments: binary strings, integers, floats.
    &[
        "EVAL",
        "return redis.call('set', KEYS[1], 'a\\0b\\0')",
        "1",
        "k",
    ],
    &[
        "EVAL",
        "return {redis.call('strlen', KEYS[1]), redis.call('get', KEYS[1])}",
        "1",
        "k",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 1.5) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 3.0) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], -7) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 1e20) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 2^53) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 1/3) return redis.call('get', KEYS[1])",
        "1",
        "f",
    ],
    &["EVAL", "return redis.call('incrby', KEYS[1], 5)", "1", "n"],
    // Wrong argument types, no arguments: raised by call, returned by pcall.
    &["EVAL", "return redis.call('set', KEYS[1], true)", "1", "f"],
    &["EVAL", "return redis.call('set', KEYS[1], {})", "1", "f"],
    &["EVAL", "return redis.call('set', KEYS[1], nil)", "1", "f"],
    &["EVAL", "return redis.call()", "0"],
    &["EVAL", "return redis.pcall()", "0"],
    &["EVAL", "return redis.pcall('set', KEYS[1], {})", "1", "f"],
    &[
        "EVAL",
        "return redis.pcall('set', KEYS[1], false).err",
        "1",
        "f",
    ],
    &["EVAL", "return redis.call('nosuch')", "0"],
    &["EVAL", "return redis.pcall('nosuch')", "0"],
    &["EVAL", "return redis.call('get')", "0"],
    &[
        "EVAL",
        "local function f() return redis.call('nosuch') end\nreturn f()",
        "0",
    ],
    // Command errors: pcall returns the error table, call raises it.
    &[
        "EVAL",
        "redis.call('set','s','x') local r = redis.pcall('incr', 's') return r.err",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('set','s','x') return redis.pcall('incr', 's')",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('set','s','x') return redis.call('incr', 's')",
        "0",
    ],
    &["EVAL", "return redis.pcall('lpush', 's', 'x')", "0"],
    // Replies of every type, RESP2 view.
    &["EVAL", "return redis.call('set','x','y')", "0"],
    &["EVAL", "return redis.call('set','x','y').ok", "0"],
    &["EVAL", "return redis.call('get','missing')", "0"],
    &["EVAL", "return tostring(redis.call('get','missing'))", "0"],
    &[
        "EVAL",
        "redis.call('hset','h','a','1','b','2') return redis.call('hgetall','h')",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('sadd','st','a') return redis.call('smembers','st')",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('zadd','z','1.5','a','2','b') return redis.call('zscore','z','a')",
        "0",
    ],
    &[
        "EVAL",
        "return redis.call('zrange','z',0,-1,'withscores')",
        "0",
    ],
    &[
        "EVAL",
        "redis.call('rpush','l','a','b','c') return redis.call('lrange','l',0,-1)",
        "0",
    ],
    &["EVAL", "return redis.call('lpos','l','zz')", "0"],
    &["EVAL", "return redis.call('hmget','h','a','zz','b')", "0"],
    &["EVAL", "return redis.call('exists','l','h','zz')", "0"],
    &[
        "EVAL",
        "redis.call('xadd','xs','1-1','f','v') return redis.call('xrange','xs','-','+')",
        "0",
    ],
    &["EVAL", "return redis.call('geopos','nogeo','m')", "0"],
    // The same in RESP3 inside the script.
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('set','x','y')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return tostring(redis.call('get','missing'))",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('hgetall','h').map.a",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('hgetall','h')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return tostring(redis.call('smembers','st').set.a)",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('smembers','st')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('zscore','z','a').double",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('zscore','z','a')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('zrange','z',0,-1,'withscores')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('hmget','h','a','zz')",
        "0",
    ],
    &[
        "EVAL",
        "redis.setresp(3) return redis.call('xrange','xs','-','+')",
        "0",
    ],
    // Script results converted from the stack.
    &[
        "EVAL",
        "return {1,{2,{3,{'x',{ok='fine'}}}},false,'y'}",
        "0",
    ],
    &["EVAL", "return {1,2,nil,4}", "0"],
    &["EVAL", "return {double=3}", "0"],
    &["EVAL", "return {double=3.5}", "0"],
    &["EVAL", "return {err='MYERR custom'}", "0"],
    &["EVAL", "return {ok='multi\\r\\nline'}", "0"],
    &["EVAL", "return {map={a=1}}", "0"],
    &["EVAL", "return {set={a=true}}", "0"],
    &[
        "EVAL",
        "return {big_number='123456789012345678901234567890'}",
        "0",
    ],
    &[
        "EVAL",
        "return {verbatim_string={format='txt', string='hi'}}",
        "0",
    ],
    &["EVAL", "return 3.99", "0"],
    &["EVAL", "return -3.99", "0"],
    &["EVAL", "return true", "0"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return nil", "0"],
    &["EVAL", "return 'a\\0b'", "0"],
    &["EVAL", "return function() end", "0"],
    &[
        "EVAL",
        "return {KEYS[1], ARGV[1], #KEYS, #ARGV}",
        "2",
        "k1",
        "k2",
        "a1",
    ],
    // redis.call from a coroutine: the C function gets the coroutine's stack.
    &[
        "EVAL",
        "local co = coroutine.create(function(k) return redis.call('incr', k) end)\n\
         local ok, v = coroutine.resume(co, KEYS[1]) return {tostring(ok), v}",
        "1",
        "cnt",
    ],
    &[
        "EVAL",
        "local co = coroutine.wrap(function() return redis.pcall('incr', 'h') end)\n\
         return co()",
        "0",
    ],
];

#[test]
fn same_as_redis() {
    if !redis_server_available() {
        eprintln!("redis-server not installed: differential rows skipped");
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(&s, &r, SAME_AS_REDIS);
}

/// Thousands of arguments each way: KEYS/ARGV tables and `redis.call`'s argument list
/// (more than the inline capacity of its argument vector, more than Lua's minimum
/// stack for a C function).
#[test]
fn huge_argument_counts() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let n = 20_000;
    let mut args: Vec<String> = vec![
        "EVAL".into(),
        "return {#KEYS, #ARGV, KEYS[1], ARGV[#ARGV]}".into(),
    ];
    args.push(n.to_string());
    args.extend((0..n).map(|i| format!("k{i}")));
    args.extend((0..n).map(|i| format!("a{i}")));
    let refs: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
    assert_eq!(
        c.cmd(&refs),
        format!("*4\r\n:{n}\r\n:{n}\r\n$2\r\nk0\r\n$6\r\na{}\r\n", n - 1)
    );
    // 7000 arguments to one call (unpack stays under Lua's 8000-slot C stack).
    let body = "local t = {} for i = 1, 7000 do t[i] = i end\n\
                return redis.call('rpush', KEYS[1], unpack(t))";
    assert_eq!(c.cmd(&["EVAL", body, "1", "big"]), ":7000\r\n");
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return redis.call('lrange', KEYS[1], 6998, -1)",
            "1",
            "big"
        ]),
        "*2\r\n$4\r\n6999\r\n$4\r\n7000\r\n"
    );
    // A big reply pushed back into Lua.
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return #redis.call('lrange', KEYS[1], 0, -1)",
            "1",
            "big"
        ]),
        ":7000\r\n"
    );
    // The same functions through FCALL (KEYS and ARGV as arguments).
    let lib = "#!lua name=rawlib\n\
               redis.register_function('cnt', function(keys, args) return {#keys, #args, keys[1], args[2]} end)";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), "$6\r\nrawlib\r\n");
    assert_eq!(
        c.cmd(&["FCALL", "cnt", "1", "k", "a", "b"]),
        "*4\r\n:1\r\n:2\r\n$1\r\nk\r\n$1\r\nb\r\n"
    );
}

/// Behaviour where redis-server 7.0 (installed) differs from 7.4, or where Redis has
/// no equivalent (the Lua memory limit).
#[test]
fn errors_and_limits() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // redis.call raises the `{err=...}` table, and the scripts' pcall (Redis 7's
    // luaRedisPcall) hands back its message: a string, whose `.err` is nil.
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "local ok, e = pcall(redis.call, 'incr', 'a', 'b') return {tostring(ok), type(e), e.err, e}",
            "0"
        ]),
        "*2\r\n$5\r\nfalse\r\n$6\r\nstring\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "local ok, e = pcall(redis.call, 'incr', 'a', 'b') return e",
            "0"
        ]),
        "$58\r\nERR Wrong number of args calling Redis command from script\r\n"
    );
    // A `string.rep` bomb hits the VM's memory limit: a clean error, and the VM works
    // on (KEYS/ARGV and replies are built with the limit lifted, so an allocation
    // failure can never longjmp out of the raw path).
    let bomb = "local s = string.rep('x', 1024 * 1024) local t = {} \
                for i = 1, 1000 do t[i] = s .. i end return #t";
    let got = c.cmd(&["EVAL", bomb, "0"]);
    assert!(
        got.starts_with("-ERR ") && got.contains("not enough memory"),
        "{got}"
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            "k",
            "v"
        ]),
        "+OK\r\n"
    );
    // The bomb under redis.pcall-returned errors and a nested pcall: still clean.
    let got = c.cmd(&[
        "EVAL",
        "local ok, e = pcall(string.rep, 'x', 1024 * 1024 * 1024) return tostring(ok)",
        "0",
    ]);
    assert_eq!(got, "$5\r\nfalse\r\n");
    // Deeply nested script results stop at the conversion's depth limit.
    let deep = "local t = {} local c = t for i = 1, 1100 do c[1] = {} c = c[1] end return t";
    let got = c.cmd(&["EVAL", deep, "0"]);
    assert!(got.contains("-ERR reached lua stack limit\r\n"), "{got}");
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
}

/// Lua numbers passed to redis.call and Lua doubles returned in RESP3 are formatted
/// as Redis 7.4 does: integers within ±2^62 as integers (-0 included, as `double2ll`
/// takes it for 0), other values in the shortest form that reads back exactly.
/// redis-server 7.0 printed `%.17g` here, so these are exact values, not differential.
#[test]
fn lua_numbers_follow_redis_7_4() {
    let s = TestServer::start();
    let set_get = |expr: &str| -> String {
        let script =
            format!("redis.call('set', KEYS[1], {expr}) return redis.call('get', KEYS[1])");
        s.raw(2).cmd(&["EVAL", &script, "1", "f"])
    };
    let rows: &[(&str, &str)] = &[
        ("-0.0", "$1\r\n0\r\n"),
        ("0.1", "$3\r\n0.1\r\n"),
        ("1/3", "$18\r\n0.3333333333333333\r\n"),
        ("1e300", "$6\r\n1e+300\r\n"),
        ("1.5e-7", "$6\r\n1.5e-7\r\n"),
        ("2^62", "$19\r\n4611686018427387904\r\n"),
        ("2^63", "$19\r\n9223372036854776000\r\n"),
        ("-2^63", "$20\r\n-9223372036854776000\r\n"),
        ("1e9", "$10\r\n1000000000\r\n"),
        ("1/0", "$3\r\ninf\r\n"),
    ];
    for (expr, want) in rows {
        assert_eq!(set_get(expr), *want, "{expr}");
    }
    let mut r3 = s.raw(3);
    r3.check(&[
        (
            &["EVAL", "redis.setresp(3) return {double=0.1}", "0"],
            ",0.1\r\n",
        ),
        (
            &["EVAL", "redis.setresp(3) return {double=1e300}", "0"],
            ",1e+300\r\n",
        ),
        (
            &["EVAL", "redis.setresp(3) return {double=-0.0}", "0"],
            ",-0\r\n",
        ),
        (
            &["EVAL", "redis.setresp(3) return {double=3.14}", "0"],
            ",3.14\r\n",
        ),
    ]);
    let mut r2 = s.raw(2);
    r2.check(&[(
        &["EVAL", "redis.setresp(3) return {double=0.1}", "0"],
        "$3\r\n0.1\r\n",
    )]);
}
