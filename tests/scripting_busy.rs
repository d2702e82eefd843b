//! Busy scripts: `busy-reply-threshold` (alias `lua-time-limit`), BUSY for other
//! clients, the commands still served meanwhile, SCRIPT KILL / FUNCTION KILL,
//! UNKILLABLE, SHUTDOWN NOSAVE, NOTBUSY, FUNCTION STATS's running_script, and clients
//! that connect, disconnect or send garbage while a script is busy.
//!
//! Each scenario is a function of a port, so the same transcript is checked against
//! literal expectations and, when redis-server is installed, against redis-server.
//! No timing assertions: a test waits (bounded) until the server answers BUSY.

mod common;

use common::{redis_server_available, RawConn, RedisServer, TestServer};
use std::time::{Duration, Instant};

const BUSY_EVAL: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &str =
    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const NOTBUSY: &str = "-NOTBUSY No scripts in execution right now.\r\n";
const UNKILLABLE: &str = "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";

const SPIN: &str = "while true do end";
const SPIN_SHA: &str = "694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7";
const LIB: &str = "#!lua name=spinlib\nredis.register_function('spin', function(keys, args) while true do end end)";

/// Polls with PING on fresh connections until the server answers BUSY.
fn wait_busy(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = RawConn::connect(port, 2).cmd(&["PING"]);
        if r.starts_with("-BUSY") {
            return;
        }
        assert!(Instant::now() < deadline, "server never became busy");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Replaces the digits after `duration_ms` (FUNCTION STATS) with `N`.
fn mask_duration(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("duration_ms\r\n") {
        let (head, tail) = rest.split_at(i + "duration_ms\r\n".len());
        out.push_str(head);
        let end = tail.find("\r\n").unwrap();
        out.push_str(":N");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out.replace("duration_ms\r\n:N", "duration_ms:N")
}

/// EVAL past the threshold: BUSY for others, SCRIPT KILL, the caller's error.
fn eval_kill_scenario(port: u16) -> Vec<String> {
    let mut admin = RawConn::connect(port, 2);
    let mut t = vec![admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"])];
    t.push(admin.cmd(&["SCRIPT", "KILL"]));
    let mut caller = RawConn::connect(port, 2);
    caller.send(&["EVAL", SPIN, "0"]);
    wait_busy(port);
    let mut other = RawConn::connect(port, 2);
    for cmd in [
        &["PING"][..],
        &["GET", "x"],
        &["SET", "x", "1"],
        &["FUNCTION", "KILL"],
        &["FUNCTION", "STATS"],
        &["SHUTDOWN"],
        &["SHUTDOWN", "SAVE"],
        &["SCRIPT", "FLUSH"],
        &["NOSUCHCOMMAND"],
        &["GET"],
    ] {
        t.push(other.cmd(cmd));
    }
    t.push(other.cmd(&["SCRIPT", "KILL"]));
    t.push(caller.read_reply());
    t.push(other.cmd(&["SCRIPT", "KILL"]));
    t.push(other.cmd(&["PING"]));
    t.push(caller.cmd(&["PING"]));
    t
}

#[test]
fn eval_busy_then_script_kill() {
    let s = TestServer::start();
    let t = eval_kill_scenario(s.port);
    let killed = format!(
        "-ERR Script killed by user with SCRIPT KILL... script: {SPIN_SHA}, on @user_script:1.\r\n"
    );
    let want = vec![
        "+OK\r\n",
        NOTBUSY,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        BUSY_EVAL,
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n",
        "-ERR wrong number of arguments for 'get' command\r\n",
        "+OK\r\n",
        &killed,
        NOTBUSY,
        "+PONG\r\n",
        "+PONG\r\n",
    ];
    assert_eq!(t, want);
}

/// FCALL past the threshold: FUNCTION STATS shows it, SCRIPT KILL refuses,
/// FUNCTION KILL stops it.
fn function_kill_scenario(port: u16) -> Vec<String> {
    let mut admin = RawConn::connect(port, 2);
    let mut t = vec![admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"])];
    t.push(admin.cmd(&["FUNCTION", "FLUSH"]));
    t.push(admin.cmd(&["FUNCTION", "LOAD", LIB]));
    t.push(admin.cmd(&["FUNCTION", "KILL"]));
    t.push(admin.cmd(&["FUNCTION", "STATS"]));
    let mut caller = RawConn::connect(port, 2);
    caller.send(&["FCALL", "spin", "1", "k1", "a1"]);
    wait_busy(port);
    let mut other = RawConn::connect(port, 2);
    let mut other3 = RawConn::connect(port, 3);
    t.push(other.cmd(&["PING"]));
    t.push(mask_duration(&other.cmd(&["FUNCTION", "STATS"])));
    t.push(mask_duration(&other3.cmd(&["FUNCTION", "STATS"])));
    t.push(other.cmd(&["SCRIPT", "KILL"]));
    t.push(other.cmd(&["FUNCTION", "KILL"]));
    t.push(caller.read_reply());
    t.push(other.cmd(&["FUNCTION", "KILL"]));
    t.push(other.cmd(&["FUNCTION", "STATS"]));
    t
}

#[test]
fn fcall_busy_then_function_kill() {
    let s = TestServer::start();
    let t = function_kill_scenario(s.port);
    let stats_idle = "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n";
    let running2 = "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*5\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n1\r\n$2\r\nk1\r\n$2\r\na1\r\n$11\r\nduration_ms:N\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n";
    let running3 = "%2\r\n$14\r\nrunning_script\r\n%3\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*5\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n1\r\n$2\r\nk1\r\n$2\r\na1\r\n$11\r\nduration_ms:N\r\n$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n";
    let want = vec![
        "+OK\r\n",
        "+OK\r\n",
        "$7\r\nspinlib\r\n",
        NOTBUSY,
        stats_idle,
        BUSY_FUNCTION,
        running2,
        running3,
        BUSY_FUNCTION,
        "+OK\r\n",
        "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n",
        NOTBUSY,
        stats_idle,
    ];
    assert_eq!(t, want);
}

/// A script that wrote cannot be killed; transactions and connection commands are
/// still served; the queued transaction is aborted.
fn unkillable_scenario(port: u16) -> Vec<String> {
    let mut admin = RawConn::connect(port, 2);
    let mut t = vec![admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"])];
    let mut caller = RawConn::connect(port, 2);
    caller.send(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'partial') while true do end",
        "1",
        "wrote",
    ]);
    wait_busy(port);
    let mut other = RawConn::connect(port, 2);
    for cmd in [
        &["SCRIPT", "KILL"][..],
        &["FUNCTION", "KILL"],
        &["MULTI"],
        &["SET", "x", "1"],
        &["EXEC"],
        &["WATCH", "x"],
        &["UNWATCH"],
        &["DISCARD"],
        &["HELLO", "2", "SETNAME", "busyclient"],
        &["CLIENT", "SETNAME", "x"],
        &["AUTH", "nopass"],
        &["RESET"],
        &["SHUTDOWN"],
    ] {
        let r = other.cmd(cmd);
        // HELLO's map holds the server's id and version: only its shape is compared.
        t.push(if cmd[0] == "HELLO" {
            r.lines().next().unwrap().to_string()
        } else {
            r
        });
    }
    t
}

#[test]
fn write_script_is_unkillable_and_shutdown_nosave_ends_it() {
    let dir = common::temp_dir("busy-nosave");
    let mut s = TestServer::start_in(&dir, &["--appendfsync", "always"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["SET", "before", "1"]), "+OK\r\n");
    let t = unkillable_scenario(s.port);
    let want = vec![
        "+OK\r\n",
        UNKILLABLE,
        UNKILLABLE,
        "+OK\r\n",
        BUSY_EVAL,
        "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
        "+OK\r\n",
        "+OK\r\n",
        "-ERR DISCARD without MULTI\r\n",
        "*14",
        BUSY_EVAL,
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
        "+RESET\r\n",
        BUSY_EVAL,
    ];
    assert_eq!(t, want);
    // SHUTDOWN NOSAVE ends the server; the reply never comes. Once the connection
    // closes nobody can connect any more (the listeners are closed before the exit,
    // unit/scripting "SHUTDOWN NOSAVE can kill a timedout script anyway").
    let mut other = s.raw(2);
    other.send(&["SHUTDOWN", "NOSAVE"]);
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut other.reader, &mut rest);
    assert_eq!(rest, b"");
    let refused = std::net::TcpStream::connect(("127.0.0.1", s.port)).map_err(|e| e.kind());
    assert_eq!(refused.err(), Some(std::io::ErrorKind::ConnectionRefused));
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.is_running() {
        assert!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The write made before the script is durable; the script's partial write is not.
    let s2 = TestServer::start_in(&dir, &[]);
    let mut c = s2.raw(2);
    assert_eq!(c.cmd(&["GET", "before"]), "$1\r\n1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "wrote"]), ":0\r\n");
    drop(s2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exec_after_busy_rejections_is_aborted() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut tx = s.raw(2);
    let mut caller = s.raw(2);
    caller.send(&["EVAL", SPIN, "0"]);
    wait_busy(s.port);
    assert_eq!(tx.cmd(&["MULTI"]), "+OK\r\n");
    assert_eq!(tx.cmd(&["SET", "x", "1"]), BUSY_EVAL);
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), "+OK\r\n");
    assert!(caller.read_reply().starts_with("-ERR Script killed"));
    assert_eq!(
        tx.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(admin.cmd(&["EXISTS", "x"]), ":0\r\n");
}

#[test]
fn notbusy_when_idle_and_short_scripts_unaffected() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (&["SCRIPT", "KILL"], NOTBUSY),
        (&["FUNCTION", "KILL"], NOTBUSY),
        (&["CONFIG", "SET", "busy-reply-threshold", "1"], "+OK\r\n"),
        // A script that ends before a check runs is untouched by the threshold.
        (&["EVAL", "return 1", "0"], ":1\r\n"),
        // Threshold 0: never busy.
        (&["CONFIG", "SET", "busy-reply-threshold", "0"], "+OK\r\n"),
        (
            &[
                "EVAL",
                "local n = 0 for i = 1, 3000000 do n = n + 1 end return n",
                "0",
            ],
            ":3000000\r\n",
        ),
        (&["SCRIPT", "KILL"], NOTBUSY),
    ]);
}

#[test]
fn pcall_cannot_swallow_the_kill() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut caller = s.raw(2);
    caller.send(&[
        "EVAL",
        "while true do pcall(function() while true do end end) end",
        "0",
    ]);
    wait_busy(s.port);
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), "+OK\r\n");
    let r = caller.read_reply();
    assert!(
        r.starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
        "{r}"
    );
    // The next script runs with the ordinary hook again.
    assert_eq!(caller.cmd(&["EVAL", "return 'ok'", "0"]), "$2\r\nok\r\n");
}

#[test]
fn clients_connecting_disconnecting_and_sending_garbage_while_busy() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]);
    let mut caller = s.raw(2);
    // The caller pipelines a PING behind its EVAL: it is answered after the script.
    caller.send(&["EVAL", SPIN, "0"]);
    caller.send(&["PING"]);
    wait_busy(s.port);
    // Connect and vanish.
    for _ in 0..5 {
        drop(RawConn::connect(s.port, 2));
    }
    // Garbage: a protocol error, then the connection is closed.
    use std::io::{Read, Write};
    let mut g = RawConn::connect(s.port, 2);
    g.stream.write_all(b"*1\r\n$abc\r\n").unwrap();
    assert_eq!(
        g.read_reply(),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    let mut rest = Vec::new();
    assert_eq!(g.stream.read_to_end(&mut rest).unwrap(), 0);
    // A long pipeline: every command answered BUSY, in order.
    let mut p = s.raw(2);
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend_from_slice(
            format!("*2\r\n$4\r\nECHO\r\n${}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
    }
    batch.extend_from_slice(b"PING\r\n");
    p.stream.write_all(&batch).unwrap();
    for _ in 0..201 {
        assert_eq!(p.read_reply(), BUSY_EVAL);
    }
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), "+OK\r\n");
    assert!(caller.read_reply().starts_with("-ERR Script killed"));
    assert_eq!(caller.read_reply(), "+PONG\r\n");
    assert_eq!(p.cmd(&["ECHO", "after"]), "$5\r\nafter\r\n");
}

#[test]
fn lua_time_limit_is_an_alias() {
    let s = TestServer::start_with(&["--lua-time-limit", "250"]);
    let mut c = s.raw(2);
    c.check(&[
        (
            &["CONFIG", "GET", "busy-reply-threshold"],
            "*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n250\r\n",
        ),
        (
            &["CONFIG", "GET", "lua-time-limit"],
            "*2\r\n$14\r\nlua-time-limit\r\n$3\r\n250\r\n",
        ),
        (&["CONFIG", "SET", "lua-time-limit", "300"], "+OK\r\n"),
        (
            &["CONFIG", "GET", "busy-reply-threshold"],
            "*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n300\r\n",
        ),
    ]);
    let s = TestServer::start();
    assert_eq!(
        s.raw(2).cmd(&["CONFIG", "GET", "busy-reply-threshold"]),
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$4\r\n5000\r\n"
    );
}

#[test]
fn transcripts_match_redis_server() {
    if !redis_server_available() {
        return;
    }
    let ours = TestServer::start();
    let theirs = RedisServer::start();
    assert_eq!(
        eval_kill_scenario(ours.port),
        eval_kill_scenario(theirs.port)
    );
    assert_eq!(
        function_kill_scenario(ours.port),
        function_kill_scenario(theirs.port)
    );
    // Redis 7.0 has no CLIENT SETNAME row difference here; RESET/AUTH texts match.
    let a = unkillable_scenario(ours.port);
    let b = unkillable_scenario(theirs.port);
    assert_eq!(a, b);
}
