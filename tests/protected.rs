//! Protected configs and commands: `dir` and `dbfilename` (where the server writes
//! files) change only where `enable-protected-configs` allows it; DEBUG and MODULE
//! LOAD/LOADEX/UNLOAD run only where `enable-debug-command` / `enable-module-command`
//! allow it. All three default to `no`, take `yes` or `local` (loopback and unix-socket
//! clients), and are startup-only. `dir` must name an existing directory: nothing is
//! ever created for it.

mod common;
use common::*;
use std::process::{Command, Stdio};

const PROTECTED_DIR: &str =
    "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n";
const PROTECTED_DBFILENAME: &str = "-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config\r\n";
const DEBUG_REFUSED: &str = "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";
const MODULE_REFUSED: &str = "-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";

fn bulk_pair(name: &str, value: &str) -> String {
    format!(
        "*2\r\n${}\r\n{name}\r\n${}\r\n{value}\r\n",
        name.len(),
        value.len()
    )
}

#[test]
fn protected_configs_refused_by_default() {
    let s = TestServer::start_with(&[
        "--enable-protected-configs",
        "no",
        "--enable-debug-command",
        "no",
        "--enable-module-command",
        "no",
    ]);
    let target = temp_dir("protected-target");
    let mut c = s.raw(2);
    let before = c.cmd(&["CONFIG", "GET", "dir"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dir", &target.display().to_string()]),
        PROTECTED_DIR
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dbfilename", "authorized_keys"]),
        PROTECTED_DBFILENAME
    );
    // Nothing changed; with another config in the same call, nothing is applied either.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "1mb", "dbfilename", "x.rdb"]),
        PROTECTED_DBFILENAME
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "dir"]), before);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "dbfilename"]),
        bulk_pair("dbfilename", "dump.rdb")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]),
        bulk_pair("maxmemory", "0")
    );
    for name in [
        "enable-protected-configs",
        "enable-debug-command",
        "enable-module-command",
    ] {
        assert_eq!(c.cmd(&["CONFIG", "GET", name]), bulk_pair(name, "no"));
        assert_eq!(
            c.cmd(&["CONFIG", "SET", name, "yes"]),
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config\r\n")
        );
    }

    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), DEBUG_REFUSED);
    // Refused before it is queued: the transaction is aborted, as in Redis.
    assert_eq!(c.cmd(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), DEBUG_REFUSED);
    assert_eq!(
        c.cmd(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(c.cmd(&["MODULE", "LOAD", "/tmp/x.so"]), MODULE_REFUSED);
    assert_eq!(c.cmd(&["MODULE", "UNLOAD", "x"]), MODULE_REFUSED);
    // MODULE LIST is not protected.
    assert_eq!(c.cmd(&["MODULE", "LIST"]), "*0\r\n");
    let _ = std::fs::remove_dir_all(&target);
}

#[test]
fn protected_configs_allowed_with_yes_and_local() {
    for mode in ["yes", "local"] {
        let s = TestServer::start_with(&[
            "--enable-protected-configs",
            mode,
            "--enable-debug-command",
            mode,
            "--enable-module-command",
            mode,
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        let target = temp_dir("protected-target");
        let target_s = std::fs::canonicalize(&target)
            .unwrap()
            .display()
            .to_string();
        let mut c = s.raw(2);
        assert_eq!(c.cmd(&["CONFIG", "SET", "dir", &target_s]), "+OK\r\n");
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "dir"]),
            bulk_pair("dir", &target_s)
        );
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "dbfilename", "moved.rdb"]),
            "+OK\r\n"
        );
        assert_eq!(c.cmd(&["SET", "k", "v"]), "+OK\r\n");
        assert_eq!(c.cmd(&["SAVE"]), "+OK\r\n");
        assert!(target.join("moved.rdb").is_file(), "{mode}");
        // Our clients are on loopback: `local` lets them through.
        assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0"]), "+OK\r\n");
        assert_eq!(
            c.cmd(&["MODULE", "LOAD", "/nonexistent/module.so"]),
            "-ERR Error loading the extension. Please check the server logs.\r\n"
        );
        assert_eq!(
            c.cmd(&["MODULE", "UNLOAD", "x"]),
            "-ERR Error unloading module: no such module with that name\r\n"
        );
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "enable-protected-configs"]),
            bulk_pair("enable-protected-configs", mode)
        );
        let _ = std::fs::remove_dir_all(&target);
    }
}

#[test]
fn config_set_dir_to_a_missing_directory_fails_and_creates_nothing() {
    let s = TestServer::start_with(&["--enable-protected-configs", "yes"]);
    let base = temp_dir("protected-missing");
    let missing = base.join("a").join("b");
    let mut c = s.raw(2);
    let before = c.cmd(&["CONFIG", "GET", "dir"]);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dir", &missing.display().to_string()]),
        "-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory\r\n"
    );
    assert!(!base.join("a").exists());
    // A file is not a directory.
    let file = base.join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "dir", &file.display().to_string()]),
        "-ERR CONFIG SET failed (possibly related to argument 'dir') - Not a directory\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "dir"]), before);
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn startup_with_a_missing_dir_fails_and_creates_nothing() {
    let base = temp_dir("protected-startup");
    let missing = base.join("nope").join("deeper");
    let out = Command::new(env!("CARGO_BIN_EXE_cinnabar"))
        .args(["--port", "0", "--dir", &missing.display().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("FATAL CONFIG FILE ERROR") && text.contains("No such file or directory"),
        "{text}"
    );
    assert!(!base.join("nope").exists());
    let _ = std::fs::remove_dir_all(&base);
}
