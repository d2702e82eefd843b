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

/// Under valgrind the kernel's command-line area holds valgrind's own arguments (the
/// program's argv is built elsewhere): the title must leave them alone, or valgrind
/// finds its options blanked when it reads them again at exit (cachegrind's output
/// file). Runs where valgrind is installed.
#[test]
fn title_leaves_a_loaders_arguments_alone() {
    let has_valgrind = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_valgrind {
        return;
    }
    let dir = common::temp_dir("proc-title-valgrind");
    let out = dir.join("cg.out");
    let port = common::free_port();
    let mut child = std::process::Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=no"])
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .arg(format!("--log-file={}", dir.join("vg.log").display()))
        .arg(env!("CARGO_BIN_EXE_cinnabar"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    assert_eq!(
        common::RawConn::connect(port, 2).cmd(&["PING"]),
        "+PONG\r\n"
    );
    sigterm(child.id());
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(dir.join("vg.log")).unwrap_or_default();
    assert!(status.success(), "{status:?} {log}");
    assert!(!log.contains("Bad option"), "{log}");
    assert!(out.exists(), "no cachegrind output: {log}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn sigterm(pid: u32) {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}
