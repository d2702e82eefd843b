//! CLIENT TRACKING end to end: default mode (keys read, invalidated once on write,
//! NOLOOP, OPTIN/OPTOUT with CLIENT CACHING), BCAST with prefixes, RESP2 redirection
//! through `__redis__:invalidate`, FLUSHALL, and the option errors.

mod common;
use common::*;

fn inv(keys: &[&str]) -> String {
    let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        s.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    s
}

#[test]
fn default_mode_invalidates_keys_read() {
    let s = TestServer::start();
    let mut t = s.raw(3);
    let mut w = s.raw(2);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    t.cmd(&["MGET", "a", "b", "c"]);
    w.cmd(&["MSET", "a", "1", "c", "2"]);
    assert_eq!(t.read_reply(), inv(&["a"]));
    assert_eq!(t.read_reply(), inv(&["c"]));
    // Invalidated once: a second write sends nothing until the key is read again.
    w.cmd(&["SET", "a", "3"]);
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    // Its own write invalidates too, after the reply.
    t.cmd(&["GET", "b"]);
    assert_eq!(t.cmd(&["SET", "b", "1"]), "+OK\r\n");
    assert_eq!(t.read_reply(), inv(&["b"]));
    // Keys are names, whatever the database.
    t.cmd(&["GET", "q"]);
    w.cmd(&["SELECT", "5"]);
    w.cmd(&["SET", "q", "1"]);
    assert_eq!(t.read_reply(), inv(&["q"]));
    // FLUSHALL: a null payload.
    t.cmd(&["GET", "q"]);
    w.cmd(&["FLUSHALL"]);
    assert_eq!(t.read_reply(), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    let info = w.cmd(&["INFO", "clients"]);
    assert!(info.contains("tracking_clients:1\r\n"), "{info}");
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "off"]), "+OK\r\n");
    t.cmd(&["GET", "z"]);
    w.cmd(&["SET", "z", "1"]);
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn noloop_optin_optout() {
    let s = TestServer::start();
    let mut w = s.raw(2);
    let mut t = s.raw(3);
    t.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    t.cmd(&["GET", "x"]);
    assert_eq!(t.cmd(&["SET", "x", "1"]), "+OK\r\n");
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    t.cmd(&["CLIENT", "TRACKING", "off"]);

    t.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    t.cmd(&["GET", "a"]);
    assert_eq!(t.cmd(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKINGINFO"]),
        "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"
    );
    t.cmd(&["GET", "b"]);
    t.cmd(&["GET", "c"]); // CACHING applied to one command only
    w.cmd(&["MSET", "a", "1", "b", "1", "c", "1"]);
    assert_eq!(t.read_reply(), inv(&["b"]));
    assert_eq!(t.cmd(&["PING"]), "+PONG\r\n");
    t.cmd(&["CLIENT", "TRACKING", "off"]);

    t.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    t.cmd(&["CLIENT", "CACHING", "no"]);
    t.cmd(&["GET", "a"]);
    t.cmd(&["GET", "b"]);
    w.cmd(&["MSET", "a", "2", "b", "2"]);
    assert_eq!(t.read_reply(), inv(&["b"]));
}

#[test]
fn bcast_prefixes() {
    let s = TestServer::start();
    let mut b = s.raw(3);
    let mut w = s.raw(2);
    assert_eq!(
        b.cmd(&[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "obj:", "NOLOOP"
        ]),
        "+OK\r\n"
    );
    assert_eq!(b.cmd(&["SET", "user:self", "x"]), "+OK\r\n");
    w.cmd(&["MSET", "user:1", "a", "other", "b", "user:2", "c"]);
    assert_eq!(b.read_reply(), inv(&["user:1", "user:2"]));
    // A transaction's keys arrive together, after EXEC.
    w.cmd(&["MULTI"]);
    w.cmd(&["SET", "obj:1", "1"]);
    w.cmd(&["SET", "obj:2", "1"]);
    w.cmd(&["EXEC"]);
    assert_eq!(b.read_reply(), inv(&["obj:1", "obj:2"]));
    assert_eq!(
        b.cmd(&["CLIENT", "TRACKINGINFO"]),
        "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\nbcast\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*2\r\n$4\r\nobj:\r\n$5\r\nuser:\r\n"
    );
    let list = w.cmd(&["CLIENT", "LIST"]);
    assert!(list.contains("flags=tB"), "{list}");
    // BCAST with no prefix covers every key.
    let mut all = s.raw(3);
    all.cmd(&["CLIENT", "TRACKING", "on", "BCAST"]);
    w.cmd(&["SET", "anything", "1"]);
    assert_eq!(all.read_reply(), inv(&["anything"]));
}

#[test]
fn resp2_redirect_through_invalidate_channel() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    let id = r.cmd(&["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut t = s.raw(2);
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]),
        "+OK\r\n"
    );
    assert_eq!(t.cmd(&["CLIENT", "GETREDIR"]), format!(":{id}\r\n"));
    t.cmd(&["GET", "k"]);
    let mut w = s.raw(2);
    w.cmd(&["SET", "k", "1"]);
    assert_eq!(
        r.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
    );
    w.cmd(&["FLUSHALL"]);
    assert_eq!(
        r.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
    // The redirect target goes away: the redirect is broken.
    drop(r);
    std::thread::sleep(std::time::Duration::from_millis(100));
    t.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "2"]);
    let info = t.cmd(&["CLIENT", "TRACKINGINFO"]);
    assert!(info.contains("broken_redirect"), "{info}");
}

#[test]
fn option_errors() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["CLIENT", "GETREDIR"], ":-1\r\n", ":-1\r\n"),
            (&["CLIENT", "CACHING", "yes"], "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"),
            (&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"], "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n", "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"),
            (&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"], "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n", "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"),
            (&["CLIENT", "TRACKING", "on", "PREFIX", "a"], "-ERR PREFIX option requires BCAST mode to be enabled\r\n", "-ERR PREFIX option requires BCAST mode to be enabled\r\n"),
            (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab"], "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n", "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n"),
            (&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"], "-ERR The client ID you want redirect to does not exist\r\n", "-ERR The client ID you want redirect to does not exist\r\n"),
            (&["CLIENT", "TRACKING", "on", "foo"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (&["CLIENT", "TRACKING", "maybe"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (&["CLIENT", "TRACKINGINFO"], "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n", "%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"),
            (&["CLIENT", "TRACKING", "on"], "+OK\r\n", "+OK\r\n"),
            (&["CLIENT", "GETREDIR"], ":0\r\n", ":0\r\n"),
            (&["CLIENT", "TRACKING", "on", "BCAST"], "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n", "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"),
            (&["CLIENT", "CACHING", "no"], "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
            (&["CLIENT", "TRACKING", "off"], "+OK\r\n", "+OK\r\n"),
            (&["CLIENT", "TRACKING", "on", "OPTIN"], "+OK\r\n", "+OK\r\n"),
            (&["CLIENT", "TRACKING", "on", "OPTOUT"], "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n", "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"),
            (&["CLIENT", "CACHING", "maybe"], "-ERR syntax error\r\n", "-ERR syntax error\r\n"),
            (&["CLIENT", "TRACKING", "off"], "+OK\r\n", "+OK\r\n"),
        ],
    );
}

#[test]
fn monitor_line_format() {
    let s = TestServer::start();
    let mut m = s.raw(2);
    assert_eq!(m.cmd(&["MONITOR"]), "+OK\r\n");
    let mut w = s.raw(2);
    w.cmd(&["SET", "k", "a\"b\\c\n\u{1} "]);
    w.cmd(&["MULTI"]);
    w.cmd(&["GET", "k"]);
    w.cmd(&["EXEC"]);
    w.cmd(&["CONFIG", "GET", "x"]); // admin: not shown
    w.cmd(&["AUTH", "secret"]);
    let strip = |l: String| -> String {
        // "+<secs>.<usecs> [0 addr] args" → "[db] args"
        let rest = l.split_once(' ').unwrap().1;
        let (db, rest) = rest.split_once(' ').unwrap();
        let args = rest.split_once("] ").unwrap().1;
        format!("{db}] {args}")
    };
    assert_eq!(
        strip(m.read_reply()),
        "[0] \"SET\" \"k\" \"a\\\"b\\\\c\\n\\x01 \"\r\n"
    );
    assert_eq!(strip(m.read_reply()), "[0] \"MULTI\"\r\n");
    assert_eq!(strip(m.read_reply()), "[0] \"GET\" \"k\"\r\n");
    assert_eq!(strip(m.read_reply()), "[0] \"EXEC\"\r\n");
    assert_eq!(strip(m.read_reply()), "[0] \"AUTH\" \"(redacted)\"\r\n");
    w.cmd(&["PING"]);
    let line = m.read_reply();
    assert!(
        line.starts_with('+') && line.contains(" [0 127.0.0.1:"),
        "{line}"
    );
}

/// MONITOR lines of `commands` run on a fresh connection, with the timestamp and the
/// client's address masked: `[db addr]` becomes `[db client]`, `[db lua]` stays.
fn monitor_transcript(port: u16, commands: &[&[&str]]) -> Vec<String> {
    let mut m = RawConn::connect(port, 2);
    assert_eq!(m.cmd(&["MONITOR"]), "+OK\r\n");
    let mut w = RawConn::connect(port, 2);
    for args in commands {
        w.cmd(args);
    }
    w.cmd(&["ECHO", "end"]);
    let mut lines = Vec::new();
    loop {
        let l = m.read_reply();
        let rest = l.split_once(' ').unwrap().1;
        let (db, rest) = rest.split_once(' ').unwrap();
        let (who, args) = rest.split_once("] ").unwrap();
        let who = if who == "lua" { "lua" } else { "client" };
        let line = format!("{db} {who}] {}", args.trim_end());
        if args.starts_with("\"ECHO\" \"end\"") {
            return lines;
        }
        lines.push(line);
    }
}

#[test]
fn monitor_shows_scripting_commands_before_the_commands_they_run() {
    let lib = "#!lua name=mlib\nredis.register_function('mf', function(keys, args) return redis.call('incr', keys[1]) end)";
    let ro = "return redis.call('get', KEYS[1])";
    let sha = "4e6d8fc8bb01276962cce5371fa795a7763657ae";
    let commands: &[&[&str]] = &[
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], ARGV[1])",
            "1",
            "k",
            "v",
        ],
        &["SCRIPT", "LOAD", ro],
        &["EVALSHA", sha, "1", "k"],
        &["EVALSHA_RO", sha, "1", "k"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &["EVAL", "return 1", "-1"],
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "mf", "1", "n"],
        &["FCALL", "nosuch", "0"],
        &["SELECT", "2"],
        &["MULTI"],
        &["EVAL_RO", ro, "1", "k"],
        &["FCALL", "mf", "1", "n"],
        &["EXEC"],
    ];
    let s = TestServer::start();
    let ours = monitor_transcript(s.port, commands);
    let want = [
        "[0 client] \"EVAL\" \"return redis.call('set', KEYS[1], ARGV[1])\" \"1\" \"k\" \"v\"",
        "[0 lua] \"set\" \"k\" \"v\"",
        "[0 client] \"SCRIPT\" \"LOAD\" \"return redis.call('get', KEYS[1])\"",
        "[0 client] \"EVALSHA\" \"4e6d8fc8bb01276962cce5371fa795a7763657ae\" \"1\" \"k\"",
        "[0 lua] \"get\" \"k\"",
        "[0 client] \"EVALSHA_RO\" \"4e6d8fc8bb01276962cce5371fa795a7763657ae\" \"1\" \"k\"",
        "[0 lua] \"get\" \"k\"",
        "[0 client] \"EVALSHA\" \"ffffffffffffffffffffffffffffffffffffffff\" \"0\"",
        "[0 client] \"EVAL\" \"return 1\" \"-1\"",
        "[0 client] \"FUNCTION\" \"LOAD\" \"#!lua name=mlib\\nredis.register_function('mf', function(keys, args) return redis.call('incr', keys[1]) end)\"",
        "[0 client] \"FCALL\" \"mf\" \"1\" \"n\"",
        "[0 lua] \"incr\" \"n\"",
        "[0 client] \"FCALL\" \"nosuch\" \"0\"",
        "[2 client] \"SELECT\" \"2\"",
        "[2 client] \"MULTI\"",
        "[2 client] \"EVAL_RO\" \"return redis.call('get', KEYS[1])\" \"1\" \"k\"",
        "[2 lua] \"get\" \"k\"",
        "[2 client] \"FCALL\" \"mf\" \"1\" \"n\"",
        "[2 lua] \"incr\" \"n\"",
        "[2 client] \"EXEC\"",
    ];
    assert_eq!(ours, want);
    if redis_server_available() {
        let r = RedisServer::start();
        assert_eq!(monitor_transcript(r.port, commands), want);
    }
}
