//! redis-cli against Cinnabar, as operators use it: plain commands, `-3` (RESP3),
//! `--eval` of script files (the owner-checked unlock and a sliding-window rate
//! limiter), and `--pipe` mass insertion. Skipped where redis-cli is not installed.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;

fn redis_cli_available() -> bool {
    Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    assert!(out.status.success(), "{args:?}: {:?}", out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_commands_resp3_and_eval_scripts() {
    if !redis_cli_available() {
        eprintln!("redis-cli is not installed: skipping");
        return;
    }
    let s = TestServer::start();
    let p = s.port;
    assert_eq!(cli(p, &["SET", "greeting", "hello"]), "OK\n");
    assert_eq!(cli(p, &["GET", "greeting"]), "hello\n");
    assert_eq!(cli(p, &["HSET", "h", "a", "1", "b", "2"]), "2\n");
    // RESP3 types as redis-cli -3 prints them.
    assert_eq!(
        cli(p, &["--no-raw", "-3", "HGETALL", "h"]),
        "1# \"a\" => \"1\"\n2# \"b\" => \"2\"\n"
    );
    assert_eq!(
        cli(p, &["--no-raw", "-3", "ZADD", "z", "1.5", "m"]),
        "(integer) 1\n"
    );
    assert_eq!(
        cli(p, &["--no-raw", "-3", "ZSCORE", "z", "m"]),
        "(double) 1.5\n"
    );
    assert_eq!(
        cli(p, &["--no-raw", "-3", "SISMEMBER", "nope", "x"]),
        "(integer) 0\n"
    );

    let dir = temp_dir("redis-cli");
    let unlock = dir.join("unlock.lua");
    std::fs::write(
        &unlock,
        "if redis.call('get', KEYS[1]) == ARGV[1] then\n  return redis.call('del', KEYS[1])\nelse\n  return 0\nend\n",
    )
    .unwrap();
    let unlock = unlock.to_str().unwrap();
    assert_eq!(
        cli(p, &["SET", "lock:job", "owner-1", "NX", "PX", "30000"]),
        "OK\n"
    );
    assert_eq!(
        cli(p, &["--eval", unlock, "lock:job", ",", "owner-2"]),
        "0\n"
    );
    assert_eq!(
        cli(p, &["--eval", unlock, "lock:job", ",", "owner-1"]),
        "1\n"
    );
    assert_eq!(cli(p, &["EXISTS", "lock:job"]), "0\n");

    let limiter = dir.join("limiter.lua");
    std::fs::write(
        &limiter,
        "local now = tonumber(ARGV[1])\n\
         redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - tonumber(ARGV[2]))\n\
         if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then\n\
           redis.call('ZADD', KEYS[1], now, ARGV[4])\n\
           redis.call('PEXPIRE', KEYS[1], ARGV[2])\n\
           return 1\n\
         end\n\
         return 0\n",
    )
    .unwrap();
    let limiter = limiter.to_str().unwrap();
    let allowed: Vec<String> = (0..4)
        .map(|i| {
            let now = (1000 + i).to_string();
            let id = format!("req{i}");
            cli(p, &["--eval", limiter, "rl", ",", &now, "1000", "3", &id])
        })
        .collect();
    assert_eq!(allowed, ["1\n", "1\n", "1\n", "0\n"]);
    // A script error comes back with Redis's text (redis-cli prints errors raw when
    // its output is not a terminal).
    let bad = dir.join("bad.lua");
    std::fs::write(&bad, "return redis.call('nosuchcommand')\n").unwrap();
    let out = cli(p, &["--eval", bad.to_str().unwrap()]);
    assert!(
        out.starts_with("ERR Unknown Redis command called from script script: "),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_cli_pipe_mass_insertion() {
    if !redis_cli_available() {
        eprintln!("redis-cli is not installed: skipping");
        return;
    }
    let s = TestServer::start();
    let mut input = Vec::new();
    for i in 0..10_000 {
        let k = format!("key:{i}");
        let v = format!("value:{i}");
        input.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("errors: 0, replies: 10000"),
        "redis-cli --pipe said: {text}"
    );
    assert_eq!(cli(s.port, &["DBSIZE"]), "10000\n");
    assert_eq!(cli(s.port, &["GET", "key:9999"]), "value:9999\n");
}

/// `redis-cli --ldb` (a forked session: changes rolled back) and `--ldb-sync-mode`
/// (changes kept), driven from standard input as a terminal user would type.
#[test]
fn redis_cli_lua_debugger() {
    if !redis_cli_available() {
        eprintln!("redis-cli is not installed: skipping");
        return;
    }
    let s = TestServer::start();
    let dir = temp_dir("redis-cli-ldb");
    let script = dir.join("set.lua");
    std::fs::write(
        &script,
        "redis.call('set', KEYS[1], ARGV[1])\nreturn redis.call('get', KEYS[1])\n",
    )
    .unwrap();
    let debug = |mode: &str, input: &str| -> String {
        let mut child = Command::new("redis-cli")
            .args(["-p", &s.port.to_string(), mode, "--eval"])
            .arg(&script)
            .args(["mykey", ",", "myval"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("redis-cli runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        // Without the terminal colours.
        let text = String::from_utf8_lossy(&out.stdout);
        let mut plain = String::new();
        let mut in_escape = false;
        for ch in text.chars() {
            match (in_escape, ch) {
                (false, '\x1b') => in_escape = true,
                (true, 'm') => in_escape = false,
                (true, _) => {}
                (false, c) => plain.push(c),
            }
        }
        plain
    };
    let out = debug("--ldb", "n\np\nc\n");
    assert!(
        out.contains(
            "* Stopped at 1, stop reason = step over\n-> 1   redis.call('set', KEYS[1], ARGV[1])\n<redis> set mykey myval\n<reply> \"+OK\"\n* Stopped at 2, stop reason = step over\n-> 2   return redis.call('get', KEYS[1])\nNo local variables in the current context.\n\n\"myval\"\n\n(Lua debugging session ended -- dataset changes rolled back)\n"
        ),
        "{out}"
    );
    assert_eq!(cli(s.port, &["EXISTS", "mykey"]), "0\n");
    let out = debug("--ldb-sync-mode", "c\n");
    assert!(
        out.contains("\n\"myval\"\n\n(Lua debugging session ended)\n"),
        "{out}"
    );
    assert_eq!(cli(s.port, &["GET", "mykey"]), "myval\n");
}
