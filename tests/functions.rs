//! Redis Functions end to end: FUNCTION LOAD's metadata and registration errors, FCALL
//! and FCALL_RO, LIST/STATS/DELETE/FLUSH, and DUMP/RESTORE payloads byte for byte
//! against redis-server 7.0 when it is installed.

mod common;
use common::*;

const LIB: &str = "#!lua name=c\nredis.register_function{function_name='h', callback=function(keys, args) return {keys, args} end, flags={'no-writes','allow-oom'}, description='d'}\nredis.register_function('w', function(keys, args) return redis.call('set', keys[1], args[1]) end)";

fn load(body: &str) -> Vec<&str> {
    vec!["FUNCTION", "LOAD", body]
}

#[test]
fn load_fcall_list_and_errors() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&load("return 1"), "-ERR Missing library metadata\r\n", "-ERR Missing library metadata\r\n"),
            (&load("#!lua name=a"), "-ERR Invalid library metadata\r\n", "-ERR Invalid library metadata\r\n"),
            (&load("#!lua\nx"), "-ERR Library name was not given\r\n", "-ERR Library name was not given\r\n"),
            (&load("#!luax name=a\nx"), "-ERR Engine 'luax' not found\r\n", "-ERR Engine 'luax' not found\r\n"),
            (&load("#!lua name=a\nreturn 1"), "-ERR No functions registered\r\n", "-ERR No functions registered\r\n"),
            (&["FUNCTION", "LOAD", "REPLACE", LIB], "$1\r\nc\r\n", "$1\r\nc\r\n"),
            (&["FCALL", "h", "1", "k", "a"], "*2\r\n*1\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n", "*2\r\n*1\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n"),
            (
                &["FCALL_RO", "w", "1", "k", "v"],
                "-ERR Can not execute a script with write flag using *_ro command.\r\n",
                "-ERR Can not execute a script with write flag using *_ro command.\r\n",
            ),
            (&["FCALL", "w", "1", "k", "v"], "+OK\r\n", "+OK\r\n"),
            (&["FCALL", "nope", "0"], "-ERR Function not found\r\n", "-ERR Function not found\r\n"),
            (&["FCALL", "h", "x"], "-ERR Bad number of keys provided\r\n", "-ERR Bad number of keys provided\r\n"),
            (
                &["FUNCTION", "LIST", "LIBRARYNAME", "c"],
                "*1\r\n*6\r\n$12\r\nlibrary_name\r\n$1\r\nc\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n*6\r\n$4\r\nname\r\n$1\r\nh\r\n$11\r\ndescription\r\n$1\r\nd\r\n$5\r\nflags\r\n*2\r\n+no-writes\r\n+allow-oom\r\n*6\r\n$4\r\nname\r\n$1\r\nw\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n",
                "*1\r\n%3\r\n$12\r\nlibrary_name\r\n$1\r\nc\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n%3\r\n$4\r\nname\r\n$1\r\nh\r\n$11\r\ndescription\r\n$1\r\nd\r\n$5\r\nflags\r\n~2\r\n+no-writes\r\n+allow-oom\r\n%3\r\n$4\r\nname\r\n$1\r\nw\r\n$11\r\ndescription\r\n_\r\n$5\r\nflags\r\n~0\r\n",
            ),
            (
                &["FUNCTION", "STATS"],
                "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n",
                "%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n",
            ),
            (&["FUNCTION", "KILL"], "-NOTBUSY No scripts in execution right now.\r\n", "-NOTBUSY No scripts in execution right now.\r\n"),
            (&["FUNCTION", "DELETE", "nope"], "-ERR Library not found\r\n", "-ERR Library not found\r\n"),
            // Library code that loops is stopped after 500 ms; the server stays up.
            (
                &load("#!lua name=t\nwhile true do end"),
                "-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n",
                "-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n",
            ),
        ],
    );
    if !redis_server_available() {
        return;
    }
    let r = RedisServer::start();
    let bodies = [
        "#!lua foo=b\nx",
        "#!lua name=a name=b\nx",
        "#! lua name=z\nx",
        "#!lua name=\nx",
        "#!lua name=b-x\nx",
        "#!lua name=a\nredis.register_function('f', function() return 1 end)",
        "#!lua name=a\nredis.register_function('f', function() return 2 end)",
        "#!lua name=b\nredis.register_function('f', function() return 1 end)",
        "#!lua name=b\nredis.register_function('f-1', function() return 1 end)",
        "#!lua name=b\nredis.register_function{function_name='h', callback=function() end, flags={'bad'}}",
        "#!lua name=b\nredis.register_function{function_name='h', callback=function() end, foo=1}",
        "#!lua name=b\nredis.register_function{function_name='h', callback=function() end, flags='no-writes'}",
        "#!lua name=b\nredis.register_function{callback=function() end}",
        "#!lua name=b\nredis.register_function{function_name='x', callback=1}",
        "#!lua name=b\nredis.register_function('h')",
        "#!lua name=b\nredis.register_function('h', 1)",
        "#!lua name=b\nredis.register_function()",
        "#!lua name=b\nredis.call('ping')",
        "#!lua name=b\nredis.setresp(3)",
        "#!lua name=b\nredis.register_function('h', function() end) redis.register_function('h', function() end)",
        "#!lua name=b\nx = 1",
        "#!lua name=b\nreturn y",
        "#!lua name=b\nreturn 1 +",
        "#!lua name=d\nlocal function helper() return redis.call('ping') end\nredis.register_function('hh', function() return helper() end)\nredis.register_function('e', function() error('x') end)\nredis.register_function('e2', function() return redis.call('nope') end)\nredis.register_function{function_name='e3', callback=function() return redis.call('set','a','b') end, flags={'no-writes'}}",
    ];
    let mut cmds: Vec<Vec<&str>> = vec![vec!["FUNCTION", "FLUSH"]];
    cmds.extend(bodies.iter().map(|b| load(b)));
    for f in ["hh", "e", "e2", "e3"] {
        cmds.push(vec!["FCALL", f, "0"]);
    }
    cmds.extend([
        vec!["FCALL", "hh", "-1"],
        vec!["FCALL", "hh", "5"],
        vec!["FUNCTION", "LIST", "LIBRARYNAME"],
        vec!["FUNCTION", "LIST", "foo"],
        vec!["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "a"],
        vec!["FUNCTION", "FLUSH", "bad"],
        vec!["FUNCTION", "RESTORE", "x"],
        vec!["FUNCTION", "RESTORE", "x", "y"],
        vec!["EVAL", "return redis.call('fcall','hh',0)", "0"],
        vec!["FUNCTION", "DELETE", "d"],
        vec!["FUNCTION", "LIST"],
    ]);
    let refs: Vec<&[&str]> = cmds.iter().map(|v| v.as_slice()).collect();
    assert_same_as_redis(&s, &r, &refs);
}

#[test]
fn dump_and_restore_match_redis() {
    let s = TestServer::start();
    let mut c = s.client();
    // Long enough for LZF: the payload is compared byte for byte with redis-server's.
    let long = format!(
        "#!lua name=big\n-- {}\nredis.register_function('big', function() return 'big' end)",
        "padding".repeat(40)
    );
    let short = "#!lua name=a\nredis.register_function('f', function() return 1 end)";
    let ours = |c: &mut redis::Connection, body: &str| -> Vec<u8> {
        let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(c).unwrap();
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(body)
            .query(c)
            .unwrap();
        redis::cmd("FUNCTION").arg("DUMP").query(c).unwrap()
    };
    let dump_short = ours(&mut c, short);
    // Opcode 245, raw string, RDB version 10, CRC64.
    assert_eq!(dump_short[0], 245);
    assert_eq!(
        &dump_short[dump_short.len() - 10..dump_short.len() - 8],
        &[10, 0]
    );
    let dump_long = ours(&mut c, &long);
    assert_eq!(&dump_long[..2], &[245, 0xc3]);

    // RESTORE policies.
    let restore =
        |c: &mut redis::Connection, p: &[u8], policy: Option<&str>| -> redis::RedisResult<String> {
            let mut cmd = redis::cmd("FUNCTION");
            cmd.arg("RESTORE").arg(p);
            if let Some(pol) = policy {
                cmd.arg(pol);
            }
            cmd.query(c)
        };
    let e = restore(&mut c, &dump_long, None).unwrap_err();
    assert!(e.to_string().contains("Library big already exists"), "{e}");
    assert_eq!(restore(&mut c, &dump_long, Some("REPLACE")).unwrap(), "OK");
    assert_eq!(restore(&mut c, &dump_short, None).unwrap(), "OK");
    let n: i64 = redis::cmd("FCALL").arg("f").arg(0).query(&mut c).unwrap();
    assert_eq!(n, 1);
    assert_eq!(restore(&mut c, &dump_long, Some("FLUSH")).unwrap(), "OK");
    let e = redis::cmd("FCALL")
        .arg("f")
        .arg(0)
        .query::<i64>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("Function not found"), "{e}");
    let mut bad = dump_short.clone();
    bad[3] ^= 1;
    let e = restore(&mut c, &bad, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("DUMP payload version or checksum are wrong"),
        "{e}"
    );

    if !redis_server_available() {
        return;
    }
    let r = RedisServer::start();
    let mut rc = redis::Client::open(format!("redis://127.0.0.1:{}/", r.port))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(ours(&mut rc, short), dump_short, "short library payload");
    assert_eq!(ours(&mut rc, &long), dump_long, "LZF library payload");
    // Each side restores the other's payload.
    let theirs = ours(&mut rc, short);
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
    assert_eq!(restore(&mut c, &theirs, None).unwrap(), "OK");
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut rc).unwrap();
    assert_eq!(restore(&mut rc, &dump_long, None).unwrap(), "OK");
    let v: String = redis::cmd("FCALL")
        .arg("big")
        .arg(0)
        .query(&mut rc)
        .unwrap();
    assert_eq!(v, "big");
}

/// Over maxmemory: a function or flagged script that may write is refused before it
/// runs; `no-writes` and `allow-oom` ones run; a script without a shebang fails at its
/// first write that may grow memory.
#[test]
fn scripts_and_functions_over_maxmemory() {
    let s = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut c = s.raw(2);
    let lib = "#!lua name=oomlib\n\
        redis.register_function('w', function() return redis.call('set', 'x', '1') end)\n\
        redis.register_function{function_name='r', callback=function() return 'hello' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='a', callback=function() return redis.call('set', 'y', '1') end, flags={'allow-oom'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), "$6\r\noomlib\r\n");
    c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    assert_eq!(c.cmd(&["FCALL", "w", "0"]), oom);
    assert_eq!(c.cmd(&["FCALL", "r", "0"]), "$5\r\nhello\r\n");
    assert_eq!(c.cmd(&["FCALL", "a", "0"]), "+OK\r\n");
    assert_eq!(
        c.cmd(&["EVAL", "#!lua\nreturn redis.call('set','z','1')", "0"]),
        oom
    );
    let compat = c.cmd(&["EVAL", "return redis.call('set','z','1')", "0"]);
    assert!(
        compat.starts_with("-OOM command not allowed when used memory > 'maxmemory'."),
        "{compat}"
    );
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('get','y')", "0"]),
        "$1\r\n1\r\n"
    );
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(c.cmd(&["FCALL", "w", "0"]), "+OK\r\n");
}

#[test]
fn function_names_are_case_insensitive() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let lib = "#!lua name=ci\nredis.register_function('test', function() return 'hello1' end)";
    assert_eq!(c.cmd(&load(lib)), "$2\r\nci\r\n");
    assert_eq!(c.cmd(&["FCALL", "TEST", "0"]), "$6\r\nhello1\r\n");
    assert_eq!(c.cmd(&["FCALL", "tEsT", "0"]), "$6\r\nhello1\r\n");
    // Another library cannot take the name in another case.
    let other = "#!lua name=other\nredis.register_function('TEST', function() return 2 end)";
    assert_eq!(c.cmd(&load(other)), "-ERR Function TEST already exists\r\n");
}

#[test]
fn library_metadata_is_split_as_redis_splits_arguments() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let quoted = "#!lua name=\"foo\"\nredis.register_function('foo', function() return 1 end)";
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", "REPLACE", quoted]),
        "$3\r\nfoo\r\n"
    );
    let upper = "#!LUA name=bar\nredis.register_function('bar', function() return 1 end)";
    assert_eq!(c.cmd(&load(upper)), "$3\r\nbar\r\n");
    let unbalanced = "#!lua name=\"foo\nredis.register_function('x', function() return 1 end)";
    assert_eq!(
        c.cmd(&load(unbalanced)),
        "-ERR Invalid library metadata\r\n"
    );
}

#[test]
fn flush_and_restore_argument_errors() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    c.check(&[
        (
            &["FUNCTION", "FLUSH", "bad_arg"],
            "-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
        ),
        (
            &["FUNCTION", "flush", "sync", "extra_arg"],
            "-ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.\r\n",
        ),
        (
            &["function", "restore", "arg1", "args2", "arg3"],
            "-ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.\r\n",
        ),
    ]);
}

#[test]
fn library_code_sees_only_the_library_api() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    for (global, code) in [
        ("math", "return math.random()"),
        ("getmetatable", "mt = getmetatable(_G)"),
        ("pairs", "for k in pairs({}) do end"),
    ] {
        let r = c.cmd(&load(&format!("#!lua name=lib\n{code}")));
        assert!(
            r.starts_with("-ERR Error registering functions: ")
                && r.contains(&format!(
                    "Script attempted to access nonexistent global variable '{global}'"
                )),
            "{global}: {r}"
        );
    }
    // The functions themselves run with every global.
    let lib = "#!lua name=lib\nredis.register_function('f', function() return {type(math.random), type(pairs)} end)";
    assert_eq!(c.cmd(&load(lib)), "$3\r\nlib\r\n");
    assert_eq!(
        c.cmd(&["FCALL", "f", "0"]),
        "*2\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n"
    );
}

#[test]
fn register_function_only_while_loading() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let lib = "#!lua name=lib1\nlocal lib = redis\nlib.register_function('f2', function() lib.register_function('f1', function() return 1 end) end)";
    assert_eq!(c.cmd(&load(lib)), "$4\r\nlib1\r\n");
    let r = c.cmd(&["FCALL", "f2", "0"]);
    assert!(
        r.starts_with("-ERR redis.register_function can only be called on FUNCTION LOAD command"),
        "{r}"
    );
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), "-ERR Function not found\r\n");
}

/// On a replica whose master is down and that serves no stale data, a function or a
/// shebang script runs only with `allow-stale`, and then only commands allowed there
/// (unit/functions "FUNCTION - allow stale").
#[test]
fn allow_stale_decides_on_a_stale_replica() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let lib = "#!lua name=test\n\
        redis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}\n\
        redis.register_function{function_name='f2', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='f3', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}\n\
        redis.register_function{function_name='f4', callback=function() return #redis.call('time') end, flags={'allow-stale', 'no-writes'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), "$4\r\ntest\r\n");
    c.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"]);
    // Port 1: nothing listens, the link stays down.
    assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", "1"]), "+OK\r\n");
    let masterdown =
        "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n";
    c.check(&[
        (&["FCALL", "f1", "0"], masterdown),
        (&["FCALL", "f2", "0"], "$5\r\nhello\r\n"),
        (
            &["FCALL", "f3", "1", "x"],
            "-ERR Can not execute the command on a stale replica script: f3, on @user_function:4.\r\n",
        ),
        (&["FCALL", "f4", "0"], ":2\r\n"),
        (&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"], masterdown),
        (&["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0"], ":1\r\n"),
        // A script without a shebang never runs there (unit/scripting "allow-stale
        // shebang flag").
        (&["EVAL", "return redis.call('get','x')", "0"], masterdown),
        (&["EVAL", "return 1", "0"], masterdown),
        (&["REPLICAOF", "NO", "ONE"], "+OK\r\n"),
        (&["FCALL", "f1", "0"], "$5\r\nhello\r\n"),
    ]);
}
