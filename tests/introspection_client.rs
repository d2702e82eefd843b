//! CLIENT KILL argument errors, CLIENT LIST's query and reply buffer fields, MONITOR
//! showing a blocked command once, COMMAND GETKEYSANDFLAGS for SORT ... STORE, and
//! CLIENT KILL never reaching the scripts' pseudo-client.

mod common;
use common::*;

#[test]
fn client_kill_argument_errors() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    r.check(&[
        (
            &["CLIENT", "KILL", "USER", "wrong_user"],
            "-ERR No such user 'wrong_user'\r\n",
        ),
        (
            &["CLIENT", "KILL", "MAXAGE", "str"],
            "-ERR maxage is not an integer or out of range\r\n",
        ),
        (
            &["CLIENT", "KILL", "MAXAGE", "9999999999999999999"],
            "-ERR maxage is not an integer or out of range\r\n",
        ),
        (
            &["CLIENT", "KILL", "MAXAGE", "-1"],
            "-ERR maxage should be greater than 0\r\n",
        ),
    ]);
    // The harness's readiness probe may not have been closed yet: this client must
    // be the only one.
    wait_until(|| r.cmd(&["CLIENT", "LIST"]).matches("id=").count() == 1);
    r.check(&[(&["CLIENT", "KILL", "USER", "default"], ":0\r\n")]);
}

#[test]
fn client_list_shows_the_running_command_in_the_query_buffer() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    let info = r.cmd(&["CLIENT", "INFO"]);
    // `*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n` is 26 bytes; nothing past the reply buffer.
    assert!(info.contains(" qbuf=26 "), "{info}");
    assert!(info.contains(" obl=0 oll=0 omem=0 "), "{info}");
}

#[test]
fn monitor_shows_a_blocked_command_once() {
    let s = TestServer::start();
    let mut m = s.raw(2);
    let mut b = s.raw(2);
    let mut r = s.raw(2);
    assert_eq!(m.cmd(&["MONITOR"]), "+OK\r\n");
    b.send(&["BLPOP", "mylist", "0"]);
    wait_blocked(&s, 1);
    r.cmd(&["LPUSH", "mylist", "1"]);
    assert_eq!(b.read_reply(), "*2\r\n$6\r\nmylist\r\n$1\r\n1\r\n");
    r.cmd(&["LPUSH", "mylist", "2"]);
    let mut lines = Vec::new();
    while lines.len() < 3 {
        let l = m.read_reply();
        if !l.contains("\"INFO\"") {
            lines.push(l);
        }
    }
    assert!(lines[0].contains("\"BLPOP\" \"mylist\" \"0\""), "{lines:?}");
    assert!(lines[1].contains("\"LPUSH\" \"mylist\" \"1\""), "{lines:?}");
    assert!(lines[2].contains("\"LPUSH\" \"mylist\" \"2\""), "{lines:?}");
}

#[test]
fn getkeysandflags_finds_sorts_store_key() {
    let s = TestServer::start();
    let mut r = s.raw(2);
    r.check(&[
        (
            &["COMMAND", "GETKEYSANDFLAGS", "sort", "k1", "store", "k2"],
            "*2\r\n*2\r\n$2\r\nk1\r\n*2\r\n+RO\r\n+access\r\n*2\r\n$2\r\nk2\r\n*2\r\n+OW\r\n+update\r\n",
        ),
        // LIMIT takes two arguments, BY and GET one; the last STORE wins.
        (
            &["COMMAND", "GETKEYS", "sort", "k1", "limit", "store", "x", "by", "store", "store", "a", "store", "b"],
            "*2\r\n$2\r\nk1\r\n$1\r\nb\r\n",
        ),
    ]);
}

#[test]
fn client_kill_leaves_the_scripts_pseudo_client_alone() {
    let s = TestServer::start();
    let mut me = s.raw(2);
    // The first script creates the scripts' pseudo-client, which is no connection.
    assert_eq!(
        me.cmd(&["EVAL", "return redis.call('ping')", "0"]),
        "+PONG\r\n"
    );
    // A round trip each: the server has taken both connections in before the kill
    // (with I/O threads a turn's accepts come after its commands).
    let mut a = s.raw(2);
    let mut b = s.raw(2);
    assert_eq!(a.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(b.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(me.cmd(&["CLIENT", "KILL", "SKIPME", "yes"]), ":2\r\n");
    assert_eq!(
        me.cmd(&["EVAL", "return redis.call('ping')", "0"]),
        "+PONG\r\n"
    );
    assert_eq!(
        me.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no"]),
        ":1\r\n"
    );
}
