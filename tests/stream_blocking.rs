//! Clients blocked in XREADGROUP when their stream or group goes away, as Redis 7.2+
//! does it: the blocked command is re-run once the key is signalled, so deleting the
//! key, FLUSHDB/FLUSHALL, XGROUP DESTROY and SWAPDB answer NOGROUP, a type change
//! answers WRONGTYPE, and a stream recreated with its group serves the first waiter.

mod common;

use common::*;

const NOGROUP: &str =
    "-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n";
const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Blocks `n` clients in XREADGROUP on `s`/`g`, runs `action` on another connection,
/// and returns each blocked client's reply in blocking order.
fn blocked_then(s: &TestServer, n: usize, action: &[&[&str]]) -> Vec<String> {
    let mut c = s.raw(2);
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["XADD", "s", "1-1", "a", "1"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    let mut waiters = Vec::new();
    for i in 0..n {
        let mut w = s.raw(2);
        let name = format!("c{i}");
        w.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            &name,
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]);
        wait_blocked(s, i + 1);
        waiters.push(w);
    }
    for a in action {
        c.cmd(a);
    }
    waiters.iter_mut().map(|w| w.read_reply()).collect()
}

#[test]
fn deleting_the_stream_answers_nogroup() {
    let s = TestServer::start();
    for action in [
        vec![&["DEL", "s"][..]],
        vec![&["UNLINK", "s"][..]],
        vec![&["FLUSHDB"][..]],
        vec![&["FLUSHALL"][..]],
        vec![&["FLUSHALL", "ASYNC"][..]],
        vec![&["XGROUP", "DESTROY", "s", "g"][..]],
        vec![&["SWAPDB", "0", "1"][..]],
        // Recreated in the same transaction without the group.
        vec![
            &["MULTI"][..],
            &["DEL", "s"],
            &["XADD", "s", "5-5", "a", "b"],
            &["EXEC"],
        ],
    ] {
        let replies = blocked_then(&s, 3, &action);
        assert_eq!(replies, vec![NOGROUP; 3], "{action:?}");
        assert_eq!(clients_info_field(&s, "blocked_clients"), "0");
    }
}

#[test]
fn changing_the_type_answers_wrongtype() {
    let s = TestServer::start();
    for action in [
        vec![&["SET", "s", "x"][..]],
        vec![
            &["MULTI"][..],
            &["DEL", "s"],
            &["SADD", "s", "e1"],
            &["EXEC"],
        ],
    ] {
        let replies = blocked_then(&s, 3, &action);
        assert_eq!(replies, vec![WRONGTYPE; 3], "{action:?}");
    }
}

#[test]
fn recreated_with_the_group_serves_the_first_waiter() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&["XADD", "s", "1-1", "a", "1"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    let mut w1 = s.raw(2);
    w1.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&s, 1);
    let mut w2 = s.raw(2);
    w2.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c2",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&s, 2);
    c.cmd(&["MULTI"]);
    c.cmd(&["DEL", "s"]);
    c.cmd(&["XADD", "s", "5-5", "a", "b"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["EXEC"]);
    assert_eq!(
        w1.read_reply(),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-5\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    // The second stays blocked: nothing newer for the group.
    wait_blocked(&s, 1);
    c.cmd(&["DEL", "s"]);
    assert_eq!(w2.read_reply(), NOGROUP);
}

/// The same scenarios against redis-server when it is installed. It is 7.0, which
/// answers `-UNBLOCKED the stream key no longer exists` where 7.2+ re-runs the
/// command, so only the cases both versions agree on are compared.
#[test]
fn blocked_clients_on_a_surviving_stream_match_redis() {
    if !redis_server_available() {
        return;
    }
    let redis = RedisServer::start();
    let s = TestServer::start();
    for srv in [redis.port, s.port] {
        let mut c = RawConn::connect(srv, 2);
        c.cmd(&["XADD", "s", "1-1", "a", "1"]);
        c.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
        let mut w = RawConn::connect(srv, 2);
        w.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]);
        wait_until(|| {
            c.cmd(&["INFO", "clients"])
                .contains("blocked_clients:1\r\n")
        });
        c.cmd(&["XADD", "s", "2-2", "k", "v"]);
        assert_eq!(
            w.read_reply(),
            "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-2\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
        );
    }
}
