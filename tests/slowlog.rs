//! SLOWLOG end to end: credentials are redacted in logged commands as Redis redacts
//! them, and a blocking command is logged when it is served, not when it blocks.

mod common;
use common::*;

/// The logged arguments of every entry, newest first.
fn logged_commands(c: &mut redis::Connection) -> Vec<Vec<String>> {
    let v: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(-1).query(c).unwrap();
    v.into_iter()
        .map(|e| {
            let redis::Value::Array(fields) = e else {
                panic!("entry {e:?}")
            };
            let redis::Value::Array(args) = &fields[3] else {
                panic!("args {:?}", fields[3])
            };
            args.iter()
                .map(|a| match a {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("arg {other:?}"),
                })
                .collect()
        })
        .collect()
}

#[test]
fn sensitive_arguments_are_redacted() {
    let s = TestServer::start();
    let mut c = s.client();
    run(&mut c, &["CONFIG", "SET", "slowlog-max-len", "100"]);
    run(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    run(&mut c, &["SLOWLOG", "RESET"]);
    let _ = redis::cmd("ACL")
        .arg(&["SETUSER", "slowlog test user", "+get", "+set"])
        .query::<redis::Value>(&mut c);
    run(&mut c, &["CONFIG", "SET", "masterauth", ""]);
    run(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    run(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    run(&mut c, &["ACL", "SETUSER", "u", "+get", "+set"]);
    run(&mut c, &["ACL", "GETUSER", "u"]);
    run(&mut c, &["ACL", "DELUSER", "u", "nobody"]);
    let _ = redis::cmd("AUTH")
        .arg(&["nobody", "secret"])
        .query::<redis::Value>(&mut c);
    run(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let got = logged_commands(&mut c);
    let want: Vec<Vec<&str>> = vec![
        vec!["AUTH", "(redacted)", "(redacted)"],
        vec!["ACL", "DELUSER", "(redacted)", "(redacted)"],
        vec!["ACL", "GETUSER", "(redacted)"],
        vec!["ACL", "SETUSER", "(redacted)", "(redacted)", "(redacted)"],
        vec!["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        vec!["CONFIG", "SET", "requirepass", "(redacted)"],
        vec!["CONFIG", "SET", "masterauth", "(redacted)"],
        vec!["ACL", "SETUSER", "(redacted)", "(redacted)", "(redacted)"],
        vec!["SLOWLOG", "RESET"],
    ];
    assert_eq!(got, want);
}

#[test]
fn blocking_command_is_logged_when_served() {
    let s = TestServer::start();
    let mut c = s.client();
    run(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    run(&mut c, &["SLOWLOG", "RESET"]);
    let mut blocked = s.raw(2);
    blocked.send(&["BLPOP", "mylist", "0"]);
    wait_blocked(&s, 1);
    let blpops = |c: &mut redis::Connection| {
        logged_commands(c)
            .iter()
            .filter(|e| e[0].eq_ignore_ascii_case("blpop"))
            .count()
    };
    assert_eq!(blpops(&mut c), 0);
    run(&mut c, &["LPUSH", "mylist", "1"]);
    assert_eq!(blocked.read_reply(), "*2\r\n$6\r\nmylist\r\n$1\r\n1\r\n");
    assert_eq!(blpops(&mut c), 1);
}

/// With `slowlog-max-len 0` the log is off: commands are not even numbered, so the
/// next entry logged after it is turned back on takes the next id (unit/slowlog
/// "logged entry sanity check", Redis 7.4).
#[test]
fn a_zero_length_log_numbers_nothing() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "0"]);
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    for _ in 0..10 {
        assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    }
    assert_eq!(c.cmd(&["SLOWLOG", "LEN"]), ":0\r\n");
    c.cmd(&["CONFIG", "SET", "slowlog-max-len", "10"]);
    // The CONFIG SET that turned it on is the first entry.
    let first = c.cmd(&["SLOWLOG", "GET", "1"]);
    assert!(first.starts_with("*1\r\n*6\r\n:0\r\n"), "{first}");
}
