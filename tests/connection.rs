//! Connection commands, authentication, inline commands, pipelining and client
//! management, end to end.

mod common;
use common::*;
use std::io::{Read, Write};

#[test]
fn ping_echo_select_hello() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["PING"], "+PONG\r\n", "+PONG\r\n"),
            (&["PING", "hi"], "$2\r\nhi\r\n", "$2\r\nhi\r\n"),
            (&["ECHO", "x"], "$1\r\nx\r\n", "$1\r\nx\r\n"),
            (&["ECHO"], "-ERR wrong number of arguments for 'echo' command\r\n", "-ERR wrong number of arguments for 'echo' command\r\n"),
            (&["SELECT", "x"], "-ERR value is not an integer or out of range\r\n", "-ERR value is not an integer or out of range\r\n"),
            (&["SELECT", "16"], "-ERR DB index is out of range\r\n", "-ERR DB index is out of range\r\n"),
            (&["HELLO", "4"], "-NOPROTO unsupported protocol version\r\n", "-NOPROTO unsupported protocol version\r\n"),
            (&["HELLO", "x"], "-ERR Protocol version is not an integer or out of range\r\n", "-ERR Protocol version is not an integer or out of range\r\n"),
            (&["HELLO", "3", "foo"], "-ERR Syntax error in HELLO option 'foo'\r\n", "-ERR Syntax error in HELLO option 'foo'\r\n"),
            (&["AUTH", "x"], "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"),
            (&["AUTH", "a", "b"], "-WRONGPASS invalid username-password pair or user is disabled.\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"),
            (&["FOO", "a", "b"], "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n", "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"),
        ],
    );
    let mut c = s.raw(2);
    let hello = c.cmd(&["HELLO", "3", "SETNAME", "me"]);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.4.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"), "{hello}");
    assert!(hello.ends_with("$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"), "{hello}");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), "$2\r\nme\r\n");
    assert_eq!(c.cmd(&["GET", "nokey"]), "_\r\n");
    let hello2 = c.cmd(&["HELLO", "2"]);
    assert!(hello2.starts_with("*14\r\n"), "{hello2}");
    assert_eq!(c.cmd(&["GET", "nokey"]), "$-1\r\n");
}

#[test]
fn requirepass_and_auth() {
    let s = TestServer::start_with(&["--requirepass", "secret"]);
    let mut c = s.raw(2);
    c.check(&[
        (&["GET", "x"], "-NOAUTH Authentication required.\r\n"),
        (&["PING"], "-NOAUTH Authentication required.\r\n"),
        (&["HELLO", "3"], "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"),
        (&["AUTH", "wrong"], "-WRONGPASS invalid username-password pair or user is disabled.\r\n"),
        (&["AUTH", "secret"], "+OK\r\n"),
        (&["GET", "x"], "$-1\r\n"),
        (&["RESET"], "+RESET\r\n"),
        (&["GET", "x"], "-NOAUTH Authentication required.\r\n"),
        (&["AUTH", "default", "secret"], "+OK\r\n"),
    ]);
    let mut c3 = s.raw(2);
    let r = c3.cmd(&["HELLO", "3", "AUTH", "default", "secret"]);
    assert!(r.starts_with("%7\r\n"), "{r}");
    // Unauthenticated clients may not send big multibulk requests.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    raw.write_all(b"*20\r\n").unwrap();
    let mut buf = String::new();
    raw.read_to_string(&mut buf).unwrap();
    assert_eq!(
        buf,
        "-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
}

#[test]
fn inline_and_pipelining() {
    let s = TestServer::start();
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    raw.write_all(b"PING\r\nset x \"a b\"\r\nget x\nINCR n\r\n*1\r\n$4\r\nPING\r\nQUIT\r\n")
        .unwrap();
    let mut buf = String::new();
    raw.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "+PONG\r\n+OK\r\n$3\r\na b\r\n:1\r\n+PONG\r\n+OK\r\n");

    // A thousand pipelined commands are answered in order.
    let mut c = s.raw(2);
    for i in 0..1000 {
        c.send(&["ECHO", &i.to_string()]);
    }
    for i in 0..1000 {
        let s = i.to_string();
        assert_eq!(c.read_reply(), format!("${}\r\n{s}\r\n", s.len()));
    }
}

#[test]
fn client_subcommands() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let id = c.cmd(&["CLIENT", "ID"]);
    assert!(id.starts_with(':'));
    c.check(&[
        (
            &["CLIENT", "SETNAME", "a b"],
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
        ),
        (&["CLIENT", "SETNAME", "worker"], "+OK\r\n"),
        (&["CLIENT", "GETNAME"], "$6\r\nworker\r\n"),
        (
            &["CLIENT", "SETINFO", "lib-name", "a b"],
            "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n",
        ),
        (
            &["CLIENT", "SETINFO", "foo", "x"],
            "-ERR Unrecognized option 'foo'\r\n",
        ),
        (&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"], "+OK\r\n"),
        (&["CLIENT", "KILL", "1.2.3.4:5"], "-ERR No such client\r\n"),
        (
            &["CLIENT", "KILL", "ID", "0"],
            "-ERR client-id should be greater than 0\r\n",
        ),
        (&["CLIENT", "KILL", "ID", "99999"], ":0\r\n"),
        (&["CLIENT", "PAUSE", "-1"], "-ERR timeout is negative\r\n"),
        (
            &["CLIENT", "PAUSE", "x"],
            "-ERR timeout is not an integer or out of range\r\n",
        ),
        (
            &["CLIENT", "UNBLOCK", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["CLIENT", "UNBLOCK", "1", "foo"],
            "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
        ),
        (&["CLIENT", "REPLY", "foo"], "-ERR syntax error\r\n"),
        (&["CLIENT", "NO-EVICT", "x"], "-ERR syntax error\r\n"),
        (&["CLIENT", "NO-TOUCH", "on"], "+OK\r\n"),
        (
            &["CLIENT", "LIST", "TYPE", "foo"],
            "-ERR Unknown client type 'foo'\r\n",
        ),
        (&["CLIENT", "LIST", "ID", "x"], "-ERR Invalid client ID\r\n"),
        (
            &["CLIENT", "FOO"],
            "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n",
        ),
        (
            &["CLIENT"],
            "-ERR wrong number of arguments for 'client' command\r\n",
        ),
    ]);
    let list = c.cmd(&["CLIENT", "LIST"]);
    assert!(
        list.contains(" name=worker ")
            && list.contains(" flags=T ")
            && list.contains(" lib-name=redis-py "),
        "{list}"
    );
    let info = s.raw(3).cmd(&["CLIENT", "INFO"]);
    assert!(info.starts_with('=') && info.contains("txt:id="), "{info}");

    // CLIENT REPLY OFF silences replies until ON.
    c.send(&["CLIENT", "REPLY", "OFF"]);
    c.send(&["SET", "k", "v"]);
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "ON"]), "+OK\r\n");
    c.send(&["CLIENT", "REPLY", "SKIP"]);
    c.send(&["GET", "k"]);
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");

    // Killing another client closes its connection.
    let mut victim = s.raw(2);
    victim.cmd(&["CLIENT", "SETNAME", "victim"]);
    let vid = victim.cmd(&["CLIENT", "ID"]);
    let vid = vid.trim().trim_start_matches(':').to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &vid]), ":1\r\n");
    let mut buf = [0u8; 16];
    assert_eq!(victim.stream.read(&mut buf).unwrap_or(0), 0);

    // CLIENT PAUSE holds commands back until it expires.
    let mut p = s.raw(2);
    assert_eq!(p.cmd(&["CLIENT", "PAUSE", "200", "WRITE"]), "+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), "$1\r\nv\r\n");
    let start = std::time::Instant::now();
    assert_eq!(c.cmd(&["SET", "k", "w"]), "+OK\r\n");
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(100),
        "write ran during pause"
    );
}

#[test]
fn quit_closes_and_redis_crate_resp3() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["QUIT"]), "+OK\r\n");
    let mut buf = [0u8; 4];
    assert_eq!(c.stream.read(&mut buf).unwrap_or(0), 0);
    let mut r = s.client3();
    let v: Option<String> = redis::cmd("GET").arg("none").query(&mut r).unwrap();
    assert_eq!(v, None);
}

#[test]
fn maxclients_and_idle_timeout() {
    let s = TestServer::start_with(&["--maxclients", "2", "--timeout", "1"]);
    let mut a = s.raw(2);
    let _b = s.raw(2);
    let mut third = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut buf = String::new();
    third.read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "-ERR max number of clients reached\r\n");
    assert_eq!(a.cmd(&["PING"]), "+PONG\r\n");
    // Idle clients are closed after `timeout` seconds.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let mut b = [0u8; 8];
    assert_eq!(
        a.stream.read(&mut b).unwrap_or(0),
        0,
        "idle client should be closed"
    );
}
