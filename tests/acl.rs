//! ACL end to end: users and rules, AUTH/HELLO with users, enforcement of commands,
//! keys and channels (top level, MULTI/EXEC, scripts), the ACL log, the ACL file,
//! and differential checks against redis-server where 7.0 and 7.4 agree.

mod common;
use common::*;

const NOPERM_GET: &str = "-NOPERM User bob has no permissions to run the 'get' command\r\n";
const NOPERM_KEY: &str = "-NOPERM No permissions to access a key\r\n";
const NOPERM_CHANNEL: &str = "-NOPERM No permissions to access a channel\r\n";
const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn authed(s: &TestServer, proto: u8, user: &str, pass: &str) -> RawConn {
    let mut c = s.raw(2);
    if proto == 3 {
        let r = c.cmd(&["HELLO", "3", "AUTH", user, pass]);
        assert!(r.starts_with('%'), "{r}");
    } else {
        assert_eq!(c.cmd(&["AUTH", user, pass]), "+OK\r\n");
    }
    c
}

#[test]
fn setuser_getuser_list() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (
                &["ACL", "SETUSER", "bob", "on", ">pass", "~foo*", "%R~bar*", "&chan*", "+get", "+@hash", "-hset", "+config|get", "+select|0"],
                "+OK\r\n",
                "+OK\r\n",
            ),
            (
                &["ACL", "GETUSER", "bob"],
                "*12\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$16\r\nsanitize-payload\r\n$9\r\npasswords\r\n*1\r\n$64\r\nd74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1\r\n$8\r\ncommands\r\n$45\r\n-@all +get +@hash -hset +config|get +select|0\r\n$4\r\nkeys\r\n$13\r\n~foo* %R~bar*\r\n$8\r\nchannels\r\n$6\r\n&chan*\r\n$9\r\nselectors\r\n*0\r\n",
                "%6\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$16\r\nsanitize-payload\r\n$9\r\npasswords\r\n*1\r\n$64\r\nd74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1\r\n$8\r\ncommands\r\n$45\r\n-@all +get +@hash -hset +config|get +select|0\r\n$4\r\nkeys\r\n$13\r\n~foo* %R~bar*\r\n$8\r\nchannels\r\n$6\r\n&chan*\r\n$9\r\nselectors\r\n*0\r\n",
            ),
            (&["ACL", "GETUSER", "nobody"], "$-1\r\n", "_\r\n"),
            (&["ACL", "USERS"], "*2\r\n$3\r\nbob\r\n$7\r\ndefault\r\n", "*2\r\n$3\r\nbob\r\n$7\r\ndefault\r\n"),
            (&["ACL", "WHOAMI"], "$7\r\ndefault\r\n", "$7\r\ndefault\r\n"),
            (
                &["ACL", "SETUSER", "bob", "+nosuch"],
                "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
                "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
            ),
            (
                &["ACL", "SETUSER", "bob", "(~x", "+get"],
                "-ERR Unmatched parenthesis in acl selector starting at '(~x'.\r\n",
                "-ERR Unmatched parenthesis in acl selector starting at '(~x'.\r\n",
            ),
            (&["ACL", "DELUSER", "default"], "-ERR The 'default' user cannot be removed\r\n", "-ERR The 'default' user cannot be removed\r\n"),
        ],
    );
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["ACL", "LIST"]),
        "*2\r\n$175\r\nuser bob on sanitize-payload #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~foo* %R~bar* resetchannels &chan* -@all +get +@hash -hset +config|get +select|0\r\n$51\r\nuser default on nopass sanitize-payload ~* &* +@all\r\n"
    );
    // A failed SETUSER changes nothing.
    c.cmd(&["ACL", "SETUSER", "carol", "on", "+get", "bogus"]);
    assert_eq!(c.cmd(&["ACL", "GETUSER", "carol"]), "$-1\r\n");
    // Selectors.
    assert_eq!(
        c.cmd(&[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            "nopass",
            "(~a*",
            "+get)",
            "(%W~b* +set)"
        ]),
        "+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["ACL", "LIST"]).split("\r\n").find(|l| l.starts_with("user sel")).unwrap(),
        "user sel on nopass sanitize-payload resetchannels -@all (~a* resetchannels -@all +get) (%W~b* resetchannels -@all +set)"
    );
    assert_eq!(c.cmd(&["ACL", "DELUSER", "bob", "sel", "nobody"]), ":2\r\n");
}

#[test]
fn auth_and_hello() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["ACL", "SETUSER", "bob", "on", ">pw", "~*", "+@all"]);
    admin.cmd(&["ACL", "SETUSER", "off1", "off", ">pw", "+@all"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["AUTH", "bob", "bad"]), WRONGPASS);
    assert_eq!(c.cmd(&["AUTH", "nobody", "pw"]), WRONGPASS);
    assert_eq!(c.cmd(&["AUTH", "off1", "pw"]), WRONGPASS);
    assert_eq!(
        c.cmd(&["AUTH", "pw"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "bob", "pw"]), "+OK\r\n");
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), "$3\r\nbob\r\n");
    assert!(c.cmd(&["CLIENT", "INFO"]).contains(" user=bob "));
    let mut c3 = s.raw(2);
    assert_eq!(c3.cmd(&["HELLO", "3", "AUTH", "bob", "nope"]), WRONGPASS);
    assert!(c3
        .cmd(&["HELLO", "3", "AUTH", "bob", "pw"])
        .starts_with('%'));
    assert_eq!(c3.cmd(&["ACL", "WHOAMI"]), "$3\r\nbob\r\n");
    // RESET goes back to the default user.
    assert_eq!(c3.cmd(&["RESET"]), "+RESET\r\n");
    assert_eq!(c3.cmd(&["ACL", "WHOAMI"]), "$7\r\ndefault\r\n");
    // Failed AUTHs are logged with reason auth.
    let log = admin.cmd(&["ACL", "LOG", "1"]);
    assert!(log.contains("$6\r\nreason\r\n$4\r\nauth\r\n"), "{log}");
    assert!(log.contains("$6\r\nobject\r\n$5\r\nHELLO\r\n"), "{log}");
    assert!(log.contains("$8\r\nusername\r\n$3\r\nbob\r\n"), "{log}");
}

#[test]
fn requirepass_mirrors_default_user() {
    let s = TestServer::start_with(&["--requirepass", "secret"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["GET", "k"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(c.cmd(&["AUTH", "wrong"]), WRONGPASS);
    assert_eq!(c.cmd(&["AUTH", "secret"]), "+OK\r\n");
    let list = c.cmd(&["ACL", "LIST"]);
    // sha256("secret")
    assert!(list.contains("user default on sanitize-payload #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all"), "{list}");
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", ""]), "+OK\r\n");
    assert!(c
        .cmd(&["ACL", "LIST"])
        .contains("user default on nopass sanitize-payload ~* &* +@all"));
    let mut fresh = s.raw(2);
    assert_eq!(fresh.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", "p2"]), "+OK\r\n");
    let mut fresh = s.raw(2);
    assert_eq!(fresh.cmd(&["PING"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(fresh.cmd(&["AUTH", "default", "p2"]), "+OK\r\n");
}

#[test]
fn enforcement_resp2_and_resp3() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&[
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">pw",
        "~a*",
        "%R~r*",
        "%W~w*",
        "&ch*",
        "+set",
        "+incr",
        "+getrange",
        "+publish",
        "+subscribe",
        "+psubscribe",
        "+ping",
        "+multi",
        "+exec",
        "+eval",
        "+config|get",
        "+select|0",
        "+acl|whoami",
    ]);
    for proto in [2u8, 3] {
        let mut c = authed(&s, proto, "bob", "pw");
        c.check(&[
            (&["GET", "a1"], NOPERM_GET),
            (&["SET", "a1", "v"], "+OK\r\n"),
            (&["SET", "x", "v"], NOPERM_KEY),
            (&["SET", "r1", "v"], NOPERM_KEY),
            (&["SET", "w1", "v"], "+OK\r\n"),
            (&["GETRANGE", "r1", "0", "1"], "$0\r\n\r\n"),
            (&["GETRANGE", "w1", "0", "1"], NOPERM_KEY),
            (&["INCR", "w1"], NOPERM_KEY),
            (
                &["CONFIG", "GET", "maxmemory"],
                if proto == 2 {
                    "*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
                } else {
                    "%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
                },
            ),
            (
                &["CONFIG", "SET", "maxmemory", "0"],
                "-NOPERM User bob has no permissions to run the 'config|set' command\r\n",
            ),
            (&["SELECT", "0"], "+OK\r\n"),
            (
                &["SELECT", "1"],
                "-NOPERM User bob has no permissions to run the 'select' command\r\n",
            ),
            (&["PUBLISH", "chan", "m"], ":0\r\n"),
            (&["PUBLISH", "other", "m"], NOPERM_CHANNEL),
            (&["PSUBSCRIBE", "chx*"], NOPERM_CHANNEL),
            (&["AUTH", "bob", "pw"], "+OK\r\n"),
            (&["ACL", "WHOAMI"], "$3\r\nbob\r\n"),
        ]);
    }
    let log = admin.cmd(&["ACL", "LOG", "1"]);
    assert!(log.starts_with("*1\r\n*20\r\n$5\r\ncount\r\n"), "{log}");
    assert!(log.contains("$6\r\nreason\r\n$7\r\nchannel\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$4\r\nchx*\r\n$8\r\nusername\r\n$3\r\nbob\r\n$11\r\nage-seconds\r\n"), "{log}");
    assert!(log.contains("cmd=psubscribe user=bob "), "{log}");
    for f in [
        "entry-id",
        "timestamp-created",
        "timestamp-last-updated",
        "client-info",
    ] {
        assert!(log.contains(f), "{f}");
    }
    let log3 = s.raw(3).cmd(&["ACL", "LOG", "1"]);
    assert!(log3.starts_with("*1\r\n%10\r\n"), "{log3}");
    assert!(log3.contains("$11\r\nage-seconds\r\n,"), "{log3}");
    let info = admin.cmd(&["INFO", "stats"]);
    assert!(info.contains("acl_access_denied_cmd:6\r\n"), "{info}");
    assert!(info.contains("acl_access_denied_key:8\r\n"), "{info}");
    assert!(info.contains("acl_access_denied_channel:4\r\n"), "{info}");
    assert_eq!(admin.cmd(&["ACL", "LOG", "RESET"]), "+OK\r\n");
    assert_eq!(admin.cmd(&["ACL", "LOG"]), "*0\r\n");
}

#[test]
fn multi_exec_and_scripts() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["ACL", "SETUSER", "bob", "on", ">pw", "~a*", "&*", "+@all"]);
    let mut c = authed(&s, 2, "bob", "pw");
    // Refused while queueing: the transaction aborts.
    c.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["GET", "b"], NOPERM_KEY),
        (
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        ),
    ]);
    let log = admin.cmd(&["ACL", "LOG", "1"]);
    assert!(log.contains("$7\r\ncontext\r\n$5\r\nmulti\r\n"), "{log}");
    // Rules changed after queueing: refused at EXEC.
    c.check(&[
        (&["MULTI"], "+OK\r\n"),
        (&["GET", "a"], "+QUEUED\r\n"),
        (&["SET", "a", "1"], "+QUEUED\r\n"),
    ]);
    admin.cmd(&["ACL", "SETUSER", "bob", "-get"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        "*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n+OK\r\n"
    );
    // Scripts: calls are checked against the caller's user.
    let r = c.cmd(&["EVAL", "return redis.call('set','b','1')", "0"]);
    assert!(
        r.starts_with("-ERR ACL failure in script: No permissions to access a key script: "),
        "{r}"
    );
    let r = c.cmd(&["EVAL", "return redis.call('get','a')", "0"]);
    assert!(r.starts_with("-ERR ACL failure in script: User bob has no permissions to run the 'get' command script: "), "{r}");
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('set','a','2')", "0"]),
        "+OK\r\n"
    );
    let r = c.cmd(&["EVAL", "return redis.pcall('get','a')", "0"]);
    assert_eq!(
        r,
        "-ERR ACL failure in script: User bob has no permissions to run the 'get' command\r\n"
    );
    let log = admin.cmd(&["ACL", "LOG", "1"]);
    assert!(log.contains("$7\r\ncontext\r\n$3\r\nlua\r\n"), "{log}");
}

#[test]
fn deluser_disconnects_clients() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*", "&*"]);
    let mut c = authed(&s, 2, "bob", "x");
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "bob"]), ":1\r\n");
    c.send(&["PING"]);
    let mut buf = [0u8; 16];
    let n = std::io::Read::read(&mut c.reader, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the client of a deleted user is disconnected");
    // A subscriber whose channels are revoked is disconnected too.
    admin.cmd(&[
        "ACL", "SETUSER", "sub", "on", "nopass", "+@all", "~*", "&news",
    ]);
    let mut c = authed(&s, 2, "sub", "x");
    assert!(c.cmd(&["SUBSCRIBE", "news"]).starts_with("*3\r\n"));
    admin.cmd(&["ACL", "SETUSER", "sub", "resetchannels", "&other"]);
    let n = std::io::Read::read(&mut c.reader, &mut buf).unwrap_or(0);
    assert_eq!(n, 0);
}

#[test]
fn cat_genpass_dryrun() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let cats = c.cmd(&["ACL", "CAT"]);
    assert!(
        cats.starts_with("*21\r\n$8\r\nkeyspace\r\n$4\r\nread\r\n"),
        "{cats}"
    );
    assert_eq!(
        c.cmd(&["ACL", "CAT", "nope"]),
        "-ERR Unknown category 'nope'\r\n"
    );
    let p = c.cmd(&["ACL", "GENPASS"]);
    assert!(p.starts_with("$64\r\n"), "{p}");
    assert!(c.cmd(&["ACL", "GENPASS", "5"]).starts_with("$2\r\n"));
    assert_eq!(
        c.cmd(&["ACL", "GENPASS", "0"]),
        "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n"
    );
    c.cmd(&["ACL", "SETUSER", "bob", "on", "~a*", "+get", "+publish"]);
    c.check(&[
        (&["ACL", "DRYRUN", "bob", "get", "a"], "+OK\r\n"),
        (&["ACL", "DRYRUN", "bob", "get", "b"], "$49\r\nUser bob has no permissions to access the 'b' key\r\n"),
        (&["ACL", "DRYRUN", "bob", "set", "a", "1"], "$52\r\nUser bob has no permissions to run the 'set' command\r\n"),
        (&["ACL", "DRYRUN", "bob", "publish", "ch", "1"], "$54\r\nUser bob has no permissions to access the 'ch' channel\r\n"),
        (&["ACL", "DRYRUN", "nobody", "get", "a"], "-ERR User 'nobody' not found\r\n"),
        (&["ACL", "DRYRUN", "bob", "nocmd"], "-ERR Command 'nocmd' not found\r\n"),
        (&["ACL", "DRYRUN", "bob", "get"], "-ERR wrong number of arguments for 'get' command\r\n"),
        (&["ACL", "LOAD"], "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n"),
    ]);
}

#[test]
fn aclfile_load_and_save() {
    let dir = temp_dir("aclfile");
    let file = dir.join("users.acl");
    std::fs::write(
        &file,
        "user alice on #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~a* resetchannels -@all +get\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let s = TestServer::start_in(&dir, &["--aclfile", &f]);
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        "*2\r\n$5\r\nalice\r\n$7\r\ndefault\r\n"
    );
    let mut a = authed(&s, 2, "alice", "pass");
    assert_eq!(a.cmd(&["GET", "a"]), "$-1\r\n");
    c.cmd(&[
        "ACL", "SETUSER", "zed", "on", "nopass", "+@read", "-get", "~z*",
    ]);
    assert_eq!(c.cmd(&["ACL", "SAVE"]), "+OK\r\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "user alice on sanitize-payload #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~a* resetchannels -@all +get\nuser default on nopass sanitize-payload ~* &* +@all\nuser zed on nopass sanitize-payload ~z* resetchannels -@all +@read -get\n"
    );
    std::fs::write(&file, "user alice on nopass +nosuch\n").unwrap();
    let err = c.cmd(&["ACL", "LOAD"]);
    assert_eq!(err, format!("-ERR {f}:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n"));
    std::fs::write(&file, "user bob on nopass ~* +@all\n").unwrap();
    assert_eq!(c.cmd(&["ACL", "LOAD"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        "*2\r\n$3\r\nbob\r\n$7\r\ndefault\r\n"
    );
    // alice's connection went away with her user.
    a.send(&["PING"]);
    let mut buf = [0u8; 16];
    assert_eq!(std::io::Read::read(&mut a.reader, &mut buf).unwrap_or(0), 0);
}

#[test]
fn user_directives_in_config() {
    let s = TestServer::start_with(&["--user", "bob", "on", ">pw", "~*", "+@all"]);
    let mut c = s.raw(2);
    assert_eq!(c.cmd(&["AUTH", "bob", "pw"]), "+OK\r\n");
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), "$3\r\nbob\r\n");
}

#[test]
fn same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    assert_same_as_redis(
        &s,
        &r,
        &[
            &[
                "ACL",
                "SETUSER",
                "u1",
                "skip-sanitize-payload",
                "on",
                ">p1",
                ">p2",
                "<p1",
                "~k*",
                "%R~r*",
                "&c*",
                "+get",
            ],
            &["ACL", "GETUSER", "u1"],
            &["ACL", "SETUSER", "u2", "reset"],
            &["ACL", "GETUSER", "u2"],
            &[
                "ACL",
                "SETUSER",
                "u3",
                "skip-sanitize-payload",
                "on",
                "nopass",
                "allkeys",
                "allchannels",
                "allcommands",
            ],
            &["ACL", "GETUSER", "u3"],
            &["ACL", "SETUSER", "u3", "-get"],
            &["ACL", "GETUSER", "u3"],
            &[
                "ACL",
                "SETUSER",
                "u4",
                "skip-sanitize-payload",
                "%RW~a",
                "%R~b",
                "%W~c",
                "resetkeys",
                "~d",
            ],
            &["ACL", "GETUSER", "u4"],
            &["ACL", "SETUSER", "u5", "#abc"],
            &[
                "ACL",
                "SETUSER",
                "u5",
                "!d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1",
            ],
            &["ACL", "SETUSER", "u5", "<nope"],
            &["ACL", "SETUSER", "u5", "allkeys", "~x"],
            &["ACL", "SETUSER", "u5", "allchannels", "&x"],
            &["ACL", "SETUSER", "u5", "%X~a"],
            &["ACL", "SETUSER", "u5", "+@nope"],
            &["ACL", "SETUSER", "u5", "+config|get|x"],
            &["ACL", "SETUSER", "u5", "+get|"],
            &["ACL", "SETUSER", "u5", "wat"],
            &["ACL", "SETUSER", "u 5"],
            &["ACL", "USERS"],
            &["ACL", "DELUSER", "u1", "u2", "nobody"],
            &["ACL", "DELUSER", "default"],
            &["ACL", "CAT"],
            &["ACL", "CAT", "nope"],
            &["ACL", "WHOAMI"],
            &["ACL", "GENPASS", "-1"],
            &["ACL", "GENPASS", "x"],
            &["ACL", "LOG", "x"],
            &["ACL", "DRYRUN", "nobody", "get", "x"],
            &["ACL", "DRYRUN", "u3", "set", "x", "1"],
            &["ACL", "DRYRUN", "u3", "nosuch"],
            &["ACL", "SAVE"],
            &["ACL", "HELP"],
            &["ACL", "NOPE"],
            &["AUTH", "u3", "whatever"],
            &["AUTH", "nobody", "x"],
        ],
    );
}

/// Every command both servers have belongs to the same categories (ACL CAT).
#[test]
fn categories_same_as_redis() {
    if !redis_server_available() {
        return;
    }
    let s = TestServer::start();
    let r = RedisServer::start();
    let mut ours = s.client();
    let mut theirs = r.client();
    let names = |c: &mut redis::Connection, args: &[&str]| -> std::collections::BTreeSet<String> {
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(*a);
        }
        cmd.query::<Vec<String>>(c).unwrap().into_iter().collect()
    };
    let common_cmds: std::collections::BTreeSet<String> = {
        let a = names(&mut ours, &["COMMAND", "LIST"]);
        let b = names(&mut theirs, &["COMMAND", "LIST"]);
        a.intersection(&b).cloned().collect()
    };
    let cats = names(&mut theirs, &["ACL", "CAT"]);
    assert_eq!(cats, names(&mut ours, &["ACL", "CAT"]));
    for cat in &cats {
        let a = names(&mut ours, &["ACL", "CAT", cat]);
        let b = names(&mut theirs, &["ACL", "CAT", cat]);
        let top = |s: &std::collections::BTreeSet<String>| -> std::collections::BTreeSet<String> {
            s.iter()
                .filter(|n| common_cmds.contains(n.split('|').next().unwrap()))
                .cloned()
                .collect()
        };
        let (a, b) = (top(&a), top(&b));
        let only_ours: Vec<_> = a.difference(&b).collect();
        let only_theirs: Vec<_> = b.difference(&a).collect();
        // Subcommands one server lacks are not a category difference.
        let sub_missing = |n: &&String, other: &std::collections::BTreeSet<String>| {
            n.contains('|') && !other.iter().any(|o| o == *n)
        };
        let only_ours: Vec<_> = only_ours
            .into_iter()
            .filter(|n| !sub_missing(n, &all_names(&mut theirs, cat)))
            .collect();
        let only_theirs: Vec<_> = only_theirs
            .into_iter()
            .filter(|n| !sub_missing(n, &all_names(&mut ours, cat)))
            .collect();
        assert!(
            only_ours.is_empty() && only_theirs.is_empty(),
            "@{cat}: only ours {only_ours:?}, only redis {only_theirs:?}"
        );
    }
}

/// Every command and subcommand name a server knows (from all categories).
fn all_names(c: &mut redis::Connection, _cat: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let cats: Vec<String> = redis::cmd("ACL").arg("CAT").query(c).unwrap();
    for cat in cats {
        let v: Vec<String> = redis::cmd("ACL").arg("CAT").arg(&cat).query(c).unwrap();
        out.extend(v);
    }
    out
}

/// Redis 7.4 details: shard channels are checked as channels (not keys), a BITFIELD
/// that writes needs read and write key access, a subcommand with the wrong argument
/// count gets the subcommand syntax error, and a blocked command is checked again
/// when it is served (permissions may have changed while it waited).
#[test]
fn shard_channels_bitfield_subcommand_errors_and_reprocessed_blocked_commands() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&[
        "ACL",
        "SETUSER",
        "ps",
        "on",
        ">pw",
        "+@all",
        "~*",
        "resetchannels",
    ]);
    let mut ps = authed(&s, 2, "ps", "pw");
    assert_eq!(ps.cmd(&["SPUBLISH", "foo", "bar"]), NOPERM_CHANNEL);
    assert_eq!(ps.cmd(&["SSUBSCRIBE", "foo"]), NOPERM_CHANNEL);
    c.cmd(&["ACL", "SETUSER", "ps", "&foo", "resetkeys"]);
    assert_eq!(ps.cmd(&["SPUBLISH", "foo", "bar"]), ":0\r\n");

    c.cmd(&["ACL", "SETUSER", "w", "on", ">pw", "+@all", "%W~write*"]);
    let mut w = authed(&s, 2, "w", "pw");
    for op in [
        &["GET", "u4", "0"][..],
        &["SET", "u4", "0", "1"],
        &["INCRBY", "u4", "0", "1"],
    ] {
        let mut args = vec!["BITFIELD", "writestr"];
        args.extend_from_slice(op);
        assert_eq!(w.cmd(&args), NOPERM_KEY, "{op:?}");
    }
    c.cmd(&["ACL", "SETUSER", "w", "%R~write*"]);
    assert_eq!(
        w.cmd(&["BITFIELD", "writestr", "SET", "u4", "0", "1"]),
        "*1\r\n:0\r\n"
    );

    assert_eq!(
        c.cmd(&["ACL", "CAT", "NON_EXISTS", "NON_EXISTS2"]),
        "-ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.\r\n"
    );
    assert_eq!(
        c.cmd(&["ACL", "GENPASS", "1", "2"]),
        "-ERR unknown subcommand or wrong number of arguments for 'GENPASS'. Try ACL HELP.\r\n"
    );

    c.cmd(&["CONFIG", "RESETSTAT"]);
    c.cmd(&[
        "ACL", "SETUSER", "bl", "reset", "on", "nopass", "+@all", "allkeys",
    ]);
    let mut bl = authed(&s, 2, "bl", "x");
    bl.send(&["BLPOP", "list1", "0"]);
    wait_blocked(&s, 1);
    c.cmd(&["ACL", "SETUSER", "bl", "resetkeys"]);
    assert_eq!(c.cmd(&["LPUSH", "list1", "foo"]), ":1\r\n");
    assert_eq!(bl.read_reply(), NOPERM_KEY);
    assert_eq!(c.cmd(&["LLEN", "list1"]), ":1\r\n");
    let stats = c.cmd(&["INFO", "commandstats"]);
    let blpop = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_blpop:"))
        .unwrap();
    assert!(
        blpop.starts_with("cmdstat_blpop:calls=0,usec=0,"),
        "{blpop}"
    );
    assert!(
        blpop.ends_with(",rejected_calls=1,failed_calls=0"),
        "{blpop}"
    );
}

/// ACL LOAD keeps the clients of users the file still defines, unless they are
/// subscribed to channels they may no longer use; `user` lines of the config may
/// not repeat a name (default included).
#[test]
fn acl_load_disconnects_only_affected_clients_and_config_users_are_unique() {
    let dir = temp_dir("acl-load-affected");
    let file = dir.join("users.acl");
    let users = "user alice on >alice &test* +@all ~*\nuser doug on >doug &test* +@all ~*\n";
    std::fs::write(&file, users).unwrap();
    let f = file.display().to_string();
    let s = TestServer::start_in(&dir, &["--aclfile", &f]);
    let mut c = s.raw(2);
    let mut alice = authed(&s, 2, "alice", "alice");
    let mut doug = authed(&s, 2, "doug", "doug");
    for sub in [&mut alice, &mut doug] {
        assert_eq!(
            sub.cmd(&["SUBSCRIBE", "test1"]),
            "*3\r\n$9\r\nsubscribe\r\n$5\r\ntest1\r\n:1\r\n"
        );
    }
    let users = "user alice on >alice &test* +@all ~*\nuser doug on >doug resetchannels +@all ~*\n";
    std::fs::write(&file, users).unwrap();
    assert_eq!(c.cmd(&["ACL", "LOAD"]), "+OK\r\n");
    assert_eq!(c.cmd(&["PUBLISH", "test1", "m"]), ":1\r\n");
    assert_eq!(
        alice.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$5\r\ntest1\r\n$1\r\nm\r\n"
    );
    let mut buf = [0u8; 16];
    assert_eq!(
        std::io::Read::read(&mut doug.reader, &mut buf).unwrap_or(0),
        0
    );

    for name in ["foo", "default"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cinnabar"))
            .args(["--port", "0", "--user", name, "--user", name])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            text.contains("Duplicate user found. A user can only be defined once in config files"),
            "{text}"
        );
    }
}

/// SORT's BY and GET patterns may name any key, so they need read access to every
/// key (unit/acl-v2 "Test sort with ACL permissions").
#[test]
fn sort_patterns_need_every_key_readable() {
    let s = TestServer::start();
    let mut admin = s.raw(2);
    admin.cmd(&["SET", "v1", "1"]);
    admin.cmd(&["LPUSH", "mylist", "1"]);
    const BY: &str = "-ERR BY option of SORT denied due to insufficient ACL permissions.\r\n";
    const GET: &str = "-ERR GET option of SORT denied due to insufficient ACL permissions.\r\n";
    let mut c = {
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "sorter",
            "on",
            "nopass",
            "(+sort ~mylist)",
        ]);
        authed(&s, 2, "sorter", "x")
    };
    for (rules, allowed) in [
        ("~v*", false),
        ("%W~*", false),
        ("%R~*", true),
        ("allkeys", true),
    ] {
        admin.cmd(&["ACL", "SETUSER", "sorter", "resetkeys", "~mylist"]);
        // Rules go into the selector the user was given.
        admin.cmd(&["ACL", "SETUSER", "sorter", "clearselectors"]);
        admin.cmd(&[
            "ACL",
            "SETUSER",
            "sorter",
            &format!("(+sort ~mylist {rules})"),
        ]);
        if allowed {
            assert_eq!(c.cmd(&["SORT", "mylist", "BY", "v*"]), "*1\r\n$1\r\n1\r\n");
            assert_eq!(c.cmd(&["SORT", "mylist", "GET", "v*"]), "*1\r\n$1\r\n1\r\n");
        } else {
            assert_eq!(c.cmd(&["SORT", "mylist", "BY", "v*"]), BY, "{rules}");
            assert_eq!(c.cmd(&["SORT", "mylist", "GET", "v*"]), GET, "{rules}");
            assert_eq!(c.cmd(&["SORT", "mylist", "GET", "#"]), GET, "{rules}");
        }
        // A BY without `*` names no key: always allowed.
        assert_eq!(
            c.cmd(&["SORT", "mylist", "BY", "nosort"]),
            "*1\r\n$1\r\n1\r\n"
        );
    }
}

/// GEORADIUS's STORE and STOREDIST destinations are keys it writes (unit/acl-v2 "Test
/// various odd commands for key permissions").
#[test]
fn georadius_store_destinations_are_checked_for_writing() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.cmd(&[
        "ACL",
        "SETUSER",
        "geo",
        "+@all",
        "%R~read*",
        "%W~write*",
        "%RW~rw*",
    ]);
    let denied = |k: &str| {
        let text = format!("User geo has no permissions to access the '{k}' key");
        format!("${}\r\n{text}\r\n", text.len())
    };
    for word in ["STORE", "STOREDIST"] {
        let dry = |c: &mut RawConn, src: &str, dst: &str| {
            c.cmd(&[
                "ACL",
                "DRYRUN",
                "geo",
                "GEORADIUS",
                src,
                "0",
                "0",
                "1",
                "M",
                word,
                dst,
            ])
        };
        assert_eq!(dry(&mut c, "read", "write"), "+OK\r\n");
        assert_eq!(dry(&mut c, "read1", "read2"), denied("read2"));
        assert_eq!(dry(&mut c, "write1", "write2"), denied("write1"));
        assert_eq!(
            c.cmd(&[
                "ACL",
                "DRYRUN",
                "geo",
                "GEORADIUSBYMEMBER",
                "read",
                "m",
                "1",
                "M",
                word,
                "read2"
            ]),
            denied("read2")
        );
    }
    assert_eq!(
        c.cmd(&[
            "COMMAND",
            "GETKEYS",
            "GEORADIUS",
            "src",
            "0",
            "0",
            "1",
            "M",
            "STORE",
            "a",
            "STOREDIST",
            "b"
        ]),
        "*3\r\n$3\r\nsrc\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
}
