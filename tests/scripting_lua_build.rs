//! The Lua interpreter built by build.rs: its lexer and parser fixes (CVE-2025-46819,
//! CVE-2025-49844) keep Lua 5.1's results and errors, and a pathological string pattern
//! reaches the busy-script watchdog, so SCRIPT KILL / FUNCTION KILL stop it and other
//! clients get BUSY meanwhile.

mod common;

use common::{RawConn, TestServer};
use std::time::{Duration, Instant};

const BUSY_EVAL: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &str =
    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

/// A subject and a shallow pattern that backtrack for minutes inside one C call.
const SLOW_SUBJECT: &str = "string.rep('a', 30000)";
const SLOW_PATTERN: &str = "string.rep('a*', 30) .. 'b'";

fn eval(c: &mut RawConn, script: &str) -> String {
    c.cmd(&["EVAL", script, "0"])
}

fn sha1_hex(s: &str) -> String {
    let mut h = sha1_smol::Sha1::new();
    h.update(s.as_bytes());
    h.digest().to_string()
}

/// Polls with PING on fresh connections until the server answers BUSY.
fn wait_busy(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = RawConn::connect(port, 2).cmd(&["PING"]);
        if r.starts_with("-BUSY") {
            return r;
        }
        assert!(Instant::now() < deadline, "server never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn long_brackets_keep_lua_51_results_and_errors() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["EVAL", "return [==[x]]y]==]", "0"], "$4\r\nx]]y\r\n"),
        (&["EVAL", "return [[\nline]]", "0"], "$4\r\nline\r\n"),
        (&["EVAL", "--[==[ c ]] ]==] return 5", "0"], ":5\r\n"),
        (&["EVAL", "--[= not long\nreturn 6", "0"], ":6\r\n"),
        (&["EVAL", "local t = {7} return t[ [[1]] + 0 ]", "0"], ":7\r\n"),
        (
            &["EVAL", "return [=x", "0"],
            "-ERR Error compiling script (new function): user_script:1: invalid long string delimiter near '[='\r\n",
        ),
        (
            &["EVAL", "return [[ a [[ b ]]", "0"],
            "-ERR Error compiling script (new function): user_script:1: nesting of [[...]] is deprecated near '['\r\n",
        ),
        (
            &["EVAL", "return [==[ a [[ b ]]", "0"],
            "-ERR Error compiling script (new function): user_script:1: unfinished long string near '<eof>'\r\n",
        ),
        (
            &["EVAL", "--[=[ unfinished", "0"],
            "-ERR Error compiling script (new function): user_script:1: unfinished long comment near '<eof>'\r\n",
        ),
        (
            &["EVAL", "return ]==]", "0"],
            "-ERR Error compiling script (new function): user_script:1: unexpected symbol near ']'\r\n",
        ),
    ]);
}

/// CVE-2025-46819's shape: the count of `=` in a long bracket. A wide bracket lexes to
/// the right string and comment; a lone or unfinished one gives Lua's errors.
#[test]
fn wide_long_brackets_lex_exactly() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let script = "local eq = string.rep('=', 100000)
        local f = assert(loadstring('return [' .. eq .. '[abc]' .. eq .. ']'))
        local g = assert(loadstring('--[' .. eq .. '[ comment ]' .. eq .. '] return 2'))
        local _, e = loadstring('return [' .. eq .. 'x', '=wide')
        local _, u = loadstring('return [' .. eq .. '[abc]' .. eq .. '=]', '=wide')
        return {f(), g(), e, u}";
    let delimiter = format!(
        "wide:1: invalid long string delimiter near '[{}'",
        "=".repeat(100000)
    );
    let unfinished = "wide:1: unfinished long string near '<eof>'";
    assert_eq!(
        eval(&mut c, script),
        format!(
            "*4\r\n$3\r\nabc\r\n:2\r\n${}\r\n{delimiter}\r\n${}\r\n{unfinished}\r\n",
            delimiter.len(),
            unfinished.len()
        )
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// CVE-2025-49844's shape: chunks compiled while the collector runs at every step, with
/// chunk names that nothing else holds; the names come back intact in results and errors.
#[test]
fn chunk_names_survive_collection_during_parse() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let script = "collectgarbage('setpause', 1)
        collectgarbage('setstepmul', 1000)
        local errs = {}
        for i = 1, 300 do
          local body = {}
          for j = 1, 40 do body[j] = 'local v' .. j .. ' = \"s' .. i .. '_' .. j .. '\"' end
          local f = assert(loadstring(table.concat(body, ' ') .. ' return ' .. i, '=chunk' .. i))
          assert(f() == i)
          local _, e = loadstring(table.concat(body, ' ') .. ' x =', '=broken' .. i)
          errs[#errs + 1] = e
          collectgarbage('step')
        end
        collectgarbage('setpause', 200)
        collectgarbage('setstepmul', 200)
        collectgarbage('collect')
        return {#errs, errs[1], errs[300]}";
    assert_eq!(
        eval(&mut c, script),
        "*3\r\n:300\r\n$41\r\nbroken1:1: unexpected symbol near '<eof>'\r\n$43\r\nbroken300:1: unexpected symbol near '<eof>'\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

/// Runs `script` past the busy threshold, checks that another client gets `busy`, kills
/// it with `kill` and returns the caller's reply.
fn kill_running(s: &TestServer, send: &[&str], kill: &str, busy: &str) -> String {
    let mut admin = s.raw(2);
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        "+OK\r\n"
    );
    let mut caller = s.raw(2);
    caller.send(send);
    assert_eq!(wait_busy(s.port), busy);
    let mut other = s.raw(2);
    assert_eq!(other.cmd(&["GET", "x"]), busy);
    assert_eq!(other.cmd(&[kill, "KILL"]), "+OK\r\n");
    let reply = caller.read_reply();
    assert_eq!(other.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(caller.cmd(&["PING"]), "+PONG\r\n");
    reply
}

#[test]
fn script_kill_stops_each_pattern_function() {
    let s = TestServer::start();
    for call in [
        format!("return string.find({SLOW_SUBJECT}, {SLOW_PATTERN})"),
        format!("return string.match({SLOW_SUBJECT}, {SLOW_PATTERN})"),
        format!("for m in string.gmatch({SLOW_SUBJECT}, {SLOW_PATTERN}) do end"),
        format!("return string.gsub({SLOW_SUBJECT}, {SLOW_PATTERN}, 'x')"),
    ] {
        let reply = kill_running(&s, &["EVAL", &call, "0"], "SCRIPT", BUSY_EVAL);
        assert_eq!(
            reply,
            format!(
                "-ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:1.\r\n",
                sha1_hex(&call)
            ),
            "{call}"
        );
    }
}

/// After a kill the script cannot go on by catching the error around the match.
#[test]
fn script_kill_stops_a_pattern_retried_under_pcall() {
    let s = TestServer::start();
    let script = format!(
        "local s, p = {SLOW_SUBJECT}, {SLOW_PATTERN}\nwhile true do\n  pcall(string.gsub, s, p, 'x')\nend\n"
    );
    let reply = kill_running(&s, &["EVAL", &script, "0"], "SCRIPT", BUSY_EVAL);
    let prefix = format!(
        "-ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:",
        sha1_hex(&script)
    );
    assert!(reply.starts_with(&prefix), "{reply}");
}

#[test]
fn function_kill_stops_a_pattern_in_fcall() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    let lib = format!(
        "#!lua name=slowlib\nredis.register_function('slow', function(keys, args) return string.find({SLOW_SUBJECT}, {SLOW_PATTERN}) end)"
    );
    assert_eq!(admin.cmd(&["FUNCTION", "LOAD", &lib]), "$7\r\nslowlib\r\n");
    let reply = kill_running(&s, &["FCALL", "slow", "0"], "FUNCTION", BUSY_FUNCTION);
    assert_eq!(
        reply,
        "-ERR Script killed by user with SCRIPT KILL... script: slow, on @user_function:2.\r\n"
    );
}

/// FUNCTION LOAD's 500 ms bound reaches library code stuck in a pattern (reached
/// through the string metatable: the `string` global is not visible at load time).
#[test]
fn function_load_times_out_in_a_pattern() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let lib = "#!lua name=stuck\n\
        local found = ('a'):rep(30000):find(('a*'):rep(30) .. 'b')\n\
        redis.register_function('f', function() return 1 end)";
    let reply = c.cmd(&["FUNCTION", "LOAD", lib]);
    assert_eq!(
        reply,
        "-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n"
    );
    assert_eq!(c.cmd(&["FUNCTION", "LIST"]), "*0\r\n");
}

/// A pattern that finishes is unaffected by the hook's counting.
#[test]
fn patterns_still_match() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["EVAL", "return {string.find('hello world', 'o w')}", "0"],
            "*2\r\n:5\r\n:7\r\n",
        ),
        (
            &["EVAL", "return string.gsub('abc', '%w', '%0%0')", "0"],
            "$6\r\naabbcc\r\n",
        ),
        (
            &["EVAL", "local n = 0 for w in string.gmatch(string.rep('ab ', 200000), '%a+') do n = n + 1 end return n", "0"],
            ":200000\r\n",
        ),
        (
            &["EVAL", "return string.match(string.rep('a', 1000) .. 'b', 'a*b') == string.rep('a', 1000) .. 'b'", "0"],
            ":1\r\n",
        ),
    ]);
}
