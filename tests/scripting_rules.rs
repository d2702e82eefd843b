//! Scripting rules of Redis 7.4 end to end: the sandbox's `os` (clock only) and `_G`
//! metatable, the process-wide unseeded `math.random`, cjson's settings,
//! `redis.acl_check_cmd`, many-argument calls, WAIT/WAITAOF from scripts, how refused
//! and failed calls count in the error statistics, the checks shebang scripts pass
//! before running, SORT BY a constant from scripts, TIME inside scripts, replies a
//! script cannot pass on verbatim (a big number with CR LF, an attribute), and DEBUG
//! SET-DISABLE-DENY-SCRIPTS / DEBUG OBJECT.

mod common;
use common::*;

fn eval(c: &mut RawConn, body: &str, args: &[&str]) -> String {
    let mut v = vec!["EVAL", body];
    v.extend_from_slice(args);
    c.cmd(&v)
}

#[test]
fn os_library_has_only_clock() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let names =
        "local t = {} for k, v in pairs(os) do t[#t + 1] = k .. ':' .. type(v) end return t";
    assert_eq!(
        eval(&mut c, names, &["0"]),
        "*1\r\n$14\r\nclock:function\r\n"
    );
    assert_eq!(
        eval(&mut c, "return type(os.clock())", &["0"]),
        "$6\r\nnumber\r\n"
    );
    for f in [
        "execute",
        "exit",
        "getenv",
        "remove",
        "rename",
        "setlocale",
        "tmpname",
    ] {
        let r = eval(&mut c, &format!("os.{f}()"), &["0"]);
        assert!(
            r.starts_with("-ERR ") && r.contains(&format!("attempt to call field '{f}'")),
            "{f}: {r}"
        );
    }
    let r = eval(&mut c, "os.x = 1", &["0"]);
    assert!(r.contains("Attempt to modify a readonly table"), "{r}");
}

#[test]
fn global_metatable_is_readonly() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    assert_eq!(
        eval(&mut c, "return type(getmetatable(_G))", &["0"]),
        "$5\r\ntable\r\n"
    );
    let r = eval(&mut c, "local g = getmetatable(_G)\ng.__index = {}", &["0"]);
    assert!(r.contains("Attempt to modify a readonly table"), "{r}");
    let r = eval(&mut c, "return nosuchglobal", &["0"]);
    assert!(
        r.contains("Script attempted to access nonexistent global variable 'nosuchglobal'"),
        "{r}"
    );
}

/// A script that could change the strings' shared metatable would run its code inside
/// every later script, another user's included (CVE-2025-46818's shape).
#[test]
fn string_metatable_is_readonly() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for body in [
        "getmetatable('').__index = function() return redis.call('get', 'secret') end",
        "getmetatable('').__index.upper = function() return 'owned' end",
        "rawset(getmetatable(''), '__index', {})",
        "setmetatable(getmetatable(''), {})",
    ] {
        let r = eval(&mut c, body, &["0"]);
        assert!(
            r.contains("Attempt to modify a readonly table"),
            "{body}: {r}"
        );
    }
    assert_eq!(
        eval(&mut c, "return ('abc'):upper()", &["0"]),
        "$3\r\nABC\r\n"
    );
}

/// Lua 5.1's unpack overflows a C int on a huge range and crashed the process
/// (CVE-2025-46817's shape); now it is the error a too-long range always gave.
#[test]
fn unpack_with_a_huge_range_is_an_error() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for range in [
        "-1, 2147483647",
        "-2147483648, 2147483647",
        "1, 1e9",
        "0, 1/0",
    ] {
        let r = eval(&mut c, &format!("return unpack({{}}, {range})"), &["0"]);
        assert!(
            r.starts_with("-ERR user_script:1: too many results to unpack script: "),
            "{range}: {r}"
        );
    }
    assert_eq!(
        eval(&mut c, "return {unpack({1, 2, 3}, '2')}", &["0"]),
        "*2\r\n:2\r\n:3\r\n"
    );
    let r = eval(&mut c, "return unpack()", &["0"]);
    assert!(
        r.starts_with(
            "-ERR user_script:1: bad argument #1 to 'unpack' (table expected, got no value)"
        ),
        "{r}"
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// Lua 5.1 matches patterns by unbounded C recursion: a pattern of 150,000 quantified
/// items overflowed the stack and killed the process.
#[test]
fn deep_pattern_is_an_error() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // gsub's fourth argument (a count) is no plain flag: it is checked too.
    for (f, extra) in [("find", ""), ("match", ""), ("gsub", ""), ("gsub", ", 1")] {
        let body = format!(
            "return string.{f}(string.rep('a', 150000), string.rep('a?', 150000), ''{extra})"
        );
        let r = eval(&mut c, &body, &["0"]);
        assert!(
            r.starts_with("-ERR user_script:1: pattern too complex script: "),
            "{f}: {r}"
        );
    }
    let r = eval(
        &mut c,
        "for w in string.gmatch('aaa', string.rep('a*', 150000)) do end",
        &["0"],
    );
    assert!(
        r.starts_with("-ERR user_script:1: pattern too complex script: "),
        "{r}"
    );
    assert_eq!(
        eval(
            &mut c,
            "return string.find(string.rep('a', 5000), string.rep('a?', 5000))",
            &["0"]
        ),
        ":1\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn math_random_is_not_reseeded_per_script() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // Redis's generator state at startup, then the sequence goes on across scripts
    // (and across SCRIPT FLUSH) instead of restarting at every script.
    let r = "return tostring(math.random())";
    assert_eq!(eval(&mut c, r, &["0"]), "$16\r\n0.39646477363839\r\n");
    c.cmd(&["SCRIPT", "FLUSH"]);
    assert_eq!(eval(&mut c, r, &["0"]), "$16\r\n0.84048536971234\r\n");
    // randomseed still makes it deterministic.
    let seeded = "math.randomseed(ARGV[1]) return tostring(math.random())";
    let a = eval(&mut c, seeded, &["0", "10"]);
    assert_eq!(eval(&mut c, seeded, &["0", "10"]), a);
}

#[test]
fn cjson_settings_take_effect() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let r = eval(&mut c, "return cjson.encode({0/0})", &["0"]);
    assert!(
        r.contains("Cannot serialise number: must not be NaN or Inf"),
        "{r}"
    );
    assert_eq!(
        eval(
            &mut c,
            "local now = cjson.encode_invalid_numbers('null') local s = cjson.encode({1/0}) cjson.encode_invalid_numbers(false) return {tostring(now), s}",
            &["0"]
        ),
        "*2\r\n$4\r\nnull\r\n$6\r\n[null]\r\n"
    );
    assert_eq!(
        eval(
            &mut c,
            "cjson.encode_invalid_numbers(true) local s = cjson.encode({0/0}) cjson.encode_invalid_numbers(false) return s",
            &["0"]
        ),
        "$5\r\n[nan]\r\n"
    );
    assert_eq!(
        eval(
            &mut c,
            "return {tostring(cjson.encode_keep_buffer(false)), tostring(cjson.encode_keep_buffer(true))}",
            &["0"]
        ),
        "*2\r\n$5\r\nfalse\r\n$4\r\ntrue\r\n"
    );
    // Sparse arrays: refused by default, converted to objects when asked.
    let sparse = "return cjson.encode({[1]='a', [20]='b'})";
    assert!(eval(&mut c, sparse, &["0"]).contains("excessively sparse array"));
    eval(&mut c, "cjson.encode_sparse_array(true)", &["0"]);
    let r = eval(&mut c, sparse, &["0"]);
    assert!(
        r.contains("\"1\":\"a\"") && r.contains("\"20\":\"b\""),
        "{r}"
    );
    eval(&mut c, "cjson.encode_sparse_array(false)", &["0"]);
    assert_eq!(
        eval(&mut c, "cjson.encode_number_precision(3) local s = cjson.encode({1/3}) cjson.encode_number_precision(14) return s", &["0"]),
        "$7\r\n[0.333]\r\n"
    );
    // Invalid numbers refused by the decoder when asked.
    assert_eq!(
        eval(&mut c, "return cjson.decode('[0x10]')[1]", &["0"]),
        ":16\r\n"
    );
    let r = eval(
        &mut c,
        "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[0x10]') cjson.decode_invalid_numbers(true) return tostring(e)",
        &["0"],
    );
    assert!(r.contains("invalid number"), "{r}");
}

#[test]
fn acl_check_cmd() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&[
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">123",
        "+@scripting",
        "+set",
        "~x*",
    ]);
    assert_eq!(c.cmd(&["AUTH", "bob", "123"]), "+OK\r\n");
    let check = "return redis.acl_check_cmd(unpack(ARGV))";
    assert_eq!(eval(&mut c, check, &["0", "set", "xx", "1"]), ":1\r\n");
    assert_eq!(
        eval(&mut c, check, &["0", "hset", "xx", "f", "1"]),
        "$-1\r\n"
    );
    assert_eq!(eval(&mut c, check, &["0", "set", "yy", "1"]), "$-1\r\n");
    let r = eval(&mut c, check, &["0", "invalid-cmd", "arg"]);
    assert!(
        r.starts_with("-ERR Invalid command passed to redis.acl_check_cmd()"),
        "{r}"
    );
}

#[test]
fn call_with_7999_arguments() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let body = "local a = {} for i = 1, 7999 do a[i] = 1 end return redis.call('lpush', KEYS[1], unpack(a))";
    assert_eq!(eval(&mut c, body, &["1", "l"]), ":7999\r\n");
    let body = "local a = {} for i = 1, 7999 do a[i] = 1 end return redis.pcall('lpush', KEYS[1], unpack(a))";
    assert_eq!(eval(&mut c, body, &["1", "l"]), ":15998\r\n");
}

#[test]
fn wait_and_waitaof_do_not_block_scripts() {
    let s = TestServer::start_with(&["--appendonly", "no"]);
    let mut c = s.raw(2);
    assert_eq!(
        eval(&mut c, "return redis.pcall('wait','1','0')", &["0"]),
        ":0\r\n"
    );
    assert_eq!(
        eval(&mut c, "return redis.pcall('waitaof','0','1','0')", &["0"]),
        "*2\r\n:0\r\n:0\r\n"
    );
}

fn stat_lines(c: &mut RawConn) -> Vec<String> {
    let mut out = Vec::new();
    for section in ["errorstats", "stats", "commandstats"] {
        let r = c.cmd(&["INFO", section]);
        for l in r.split("\r\n") {
            if l.starts_with("errorstat_") || l.starts_with("total_error_replies:") {
                out.push(l.to_string());
            }
            if let Some(rest) = l.strip_prefix("cmdstat_") {
                let (name, fields) = rest.split_once(':').unwrap();
                let calls = fields.split(',').next().unwrap();
                let tail: Vec<&str> = fields
                    .split(',')
                    .filter(|f| f.starts_with("rejected_calls") || f.starts_with("failed_calls"))
                    .collect();
                if name != "info" && name != "config|resetstat" {
                    out.push(format!("{name}:{calls},{}", tail.join(",")));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn refused_and_failed_calls_count_once() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    // A command refused inside a script is a rejected call of that command; the
    // script's error reply is not counted a second time.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let r = c.cmd(&["EVAL_RO", "return redis.call('set','x','y')", "1", "x"]);
    assert!(r.starts_with("-ERR Write commands are not allowed from read-only scripts."));
    assert_eq!(
        stat_lines(&mut c),
        [
            "errorstat_ERR:count=1",
            "eval_ro:calls=1,rejected_calls=0,failed_calls=1",
            "set:calls=0,rejected_calls=1,failed_calls=0",
            "total_error_replies:1",
        ]
    );
    // Caught with pcall: the error still counts once, the script does not fail.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let r = c.cmd(&[
        "EVAL_RO",
        "return redis.pcall('set','x','y')['err']",
        "1",
        "x",
    ]);
    assert_eq!(
        r,
        "$58\r\nERR Write commands are not allowed from read-only scripts.\r\n"
    );
    assert_eq!(
        stat_lines(&mut c),
        [
            "errorstat_ERR:count=1",
            "eval_ro:calls=1,rejected_calls=0,failed_calls=0",
            "set:calls=0,rejected_calls=1,failed_calls=0",
            "total_error_replies:1",
        ]
    );
    // A command that ran and failed: its own failed call, counted once.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let r = c.cmd(&["EVAL", "return redis.call('select',99)", "0"]);
    assert!(r.starts_with("-ERR DB index is out of range"), "{r}");
    assert_eq!(
        stat_lines(&mut c),
        [
            "errorstat_ERR:count=1",
            "eval:calls=1,rejected_calls=0,failed_calls=1",
            "select:calls=1,rejected_calls=0,failed_calls=1",
            "total_error_replies:1",
        ]
    );
    // Returning the error table of a failed call: the same.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let r = c.cmd(&["EVAL", "return redis.pcall('select',99)", "0"]);
    assert_eq!(r, "-ERR DB index is out of range\r\n");
    assert_eq!(
        stat_lines(&mut c),
        [
            "errorstat_ERR:count=1",
            "eval:calls=1,rejected_calls=0,failed_calls=1",
            "select:calls=1,rejected_calls=0,failed_calls=1",
            "total_error_replies:1",
        ]
    );
    // An error the script makes itself is the script's own.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let r = c.cmd(&["EVAL", "return {err='MY failure'}", "0"]);
    assert_eq!(r, "-MY failure\r\n");
    assert_eq!(
        stat_lines(&mut c),
        [
            "errorstat_MY:count=1",
            "eval:calls=1,rejected_calls=0,failed_calls=1",
            "total_error_replies:1",
        ]
    );
}

#[test]
fn shebang_scripts_need_enough_replicas() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SET", "x", "v"]);
    c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert_eq!(
        eval(
            &mut c,
            "#!lua flags=no-writes\nreturn redis.call('get','x')",
            &["1", "x"]
        ),
        "$1\r\nv\r\n"
    );
    assert_eq!(
        eval(&mut c, "return redis.call('get','x')", &["1", "x"]),
        "$1\r\nv\r\n"
    );
    assert_eq!(
        eval(&mut c, "#!lua\nreturn redis.call('get','x')", &["1", "x"]),
        "-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    let r = eval(&mut c, "return redis.call('set','x','1')", &["1", "x"]);
    assert!(
        r.starts_with("-NOREPLICAS Not enough good replicas to write."),
        "{r}"
    );
    c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    assert_eq!(
        c.cmd(&["EVAL_RO", "#!lua\nreturn 1", "0"]),
        "-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
}

#[test]
fn sort_by_constant_is_ordered_for_scripts() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["SADD", "myset", "b", "aa", "c", "a", "azz"]);
    assert_eq!(
        eval(
            &mut c,
            "return redis.call('sort',KEYS[1],'by','_')",
            &["1", "myset"]
        ),
        "*5\r\n$1\r\na\r\n$2\r\naa\r\n$3\r\nazz\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
}

#[test]
fn debug_helpers_for_scripts() {
    let s = TestServer::start_with(&["--enable-debug-command", "yes"]);
    let mut c = s.raw(2);
    let attrib = "redis.setresp(3) return redis.call('debug', 'protocol', 'attrib')";
    let r = eval(&mut c, attrib, &["0"]);
    assert!(
        r.starts_with("-ERR This Redis command is not allowed from script"),
        "{r}"
    );
    assert_eq!(
        c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]),
        "+OK\r\n"
    );
    // The attribute is dropped; the reply after it is what the script sees.
    assert_eq!(
        eval(&mut c, attrib, &["0"]),
        "$39\r\nSome real reply following the attribute\r\n"
    );
    // A big number cannot carry CR LF to the client.
    assert_eq!(
        eval(&mut c, "return {big_number='123\\r\\n123'}", &["0"]),
        "$8\r\n123  123\r\n"
    );
    // TIME is the script's start time throughout.
    let same = "local a = redis.call('TIME') redis.call('DEBUG','SLEEP','0.01') local b = redis.call('TIME') return (a[1] == b[1] and a[2] == b[2]) and 1 or 0";
    assert_eq!(eval(&mut c, same, &["0"]), ":1\r\n");
    assert_eq!(
        c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]),
        "+OK\r\n"
    );
    // DEBUG OBJECT finds a key that expired but was not deleted, and leaves it.
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    c.cmd(&["SET", "k", "v", "PX", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(c.cmd(&["DEBUG", "OBJECT", "k"]).starts_with("+Value at:"));
    assert_eq!(
        eval(&mut c, "return redis.call('EXISTS', KEYS[1])", &["1", "k"]),
        ":0\r\n"
    );
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// Many short scripts leave their garbage to a collection step every 50 runs (as
/// Redis's luaCallFunction), so the Lua VM stays near its size (Redis's suite: "EVAL
/// does not leak in the Lua stack", used_memory_lua under 100 KB after 10000 runs).
#[test]
fn many_short_scripts_keep_the_lua_vm_small() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let body = "return redis.call('incr', KEYS[1])";
    assert_eq!(eval(&mut c, body, &["1", "x"]), ":1\r\n");
    let base: u64 = c.info_field("memory", "used_memory_lua").parse().unwrap();
    for _ in 0..9999 {
        c.send(&["EVAL", body, "1", "x"]);
    }
    for _ in 0..9999 {
        c.read_reply();
    }
    assert_eq!(c.cmd(&["GET", "x"]), "$5\r\n10000\r\n");
    let after: u64 = c.info_field("memory", "used_memory_lua").parse().unwrap();
    assert!(after < base + 16 * 1024, "{base} -> {after}");
}

/// An error's code for INFO errorstats is its first word only when a space ends that
/// word within the error's first 32 bytes (Redis's afterErrorReply); an error with no
/// such space (empty, one word, or a first word too long) counts as ERR.
#[test]
fn errorstats_code_is_a_short_first_word_or_err() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let long = "X".repeat(40);
    for (script, reply) in [
        ("return {err=''}", "-\r\n".to_string()),
        ("return {err='ONEWORD'}", "-ONEWORD\r\n".into()),
        (
            &*format!("return {{err='{long} message'}}"),
            format!("-{long} message\r\n"),
        ),
        (
            "return redis.error_reply('MYCODE went wrong')",
            "-MYCODE went wrong\r\n".into(),
        ),
    ] {
        assert_eq!(eval(&mut c, script, &["0"]), reply, "{script}");
    }
    let stats: Vec<String> = stat_lines(&mut c)
        .into_iter()
        .filter(|l| l.starts_with("errorstat_"))
        .collect();
    assert_eq!(stats, ["errorstat_ERR:count=3", "errorstat_MYCODE:count=1"]);
}
