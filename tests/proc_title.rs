//! `proc-title-template`: the process title `ps` shows, and the template's checks.

mod common;

use common::TestServer;

/// The command line the kernel shows for `pid`, NUL padding dropped, NULs between
/// arguments shown as spaces (as `ps` does).
fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let text: String = String::from_utf8_lossy(&raw).replace('\0', " ");
    text.trim_end().to_string()
}

#[test]
fn title_follows_the_template() {
    let s = TestServer::start();
    let bin = env!("CARGO_BIN_EXE_cinnabar");
    let port = s.port;
    // The default template, set at startup.
    assert_eq!(cmdline(s.pid()), format!("{bin} 127.0.0.1:{port}"));
    let mut c = s.raw(2);
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "proc-title-template",
            "TEST {title} {listen-addr} {port} {tls-port} {config-file} {{x}",
        ]),
        "+OK\r\n"
    );
    assert_eq!(
        cmdline(s.pid()),
        format!("TEST {bin} 127.0.0.1:{port} {port} 0 - {{x}}")
    );
    // Longer than the original arguments: the environment's memory is used too.
    let long = "y".repeat(400);
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "proc-title-template",
            &format!("{{title}} {long}")
        ]),
        "+OK\r\n"
    );
    assert_eq!(cmdline(s.pid()), format!("{bin} {long}"));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "proc-title-template"]),
        format!(
            "*2\r\n$19\r\nproc-title-template\r\n${}\r\n{{title}} {long}\r\n",
            long.len() + 8
        )
    );
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn bad_templates_are_refused() {
    let s = TestServer::start();
    let mut c = s.raw(2);
    let err = "-ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - template format is invalid or contains unknown variables\r\n";
    for bad in ["{invalid-var}", "{title}", "", "  ", "x {title", "x {"] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "proc-title-template", bad]),
            err,
            "{bad:?}"
        );
    }
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "proc-title-template"]),
        "*2\r\n$19\r\nproc-title-template\r\n$35\r\n{title} {listen-addr} {server-mode}\r\n"
    );
}
