//! redis-py, the most used client, running the application patterns of
//! `tests/py/patterns.py` unchanged against Cinnabar in RESP2 and RESP3 — and against
//! redis-server too when it is installed, so the expectations there stay Redis's.
//! Skipped (with a note) where python3 or redis-py is missing.

mod common;

use std::process::Command;

use common::*;

fn redis_py_available() -> bool {
    Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_patterns(port: u16, protocol: u8) -> (bool, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/patterns.py");
    let out = Command::new("python3")
        .args([script, &port.to_string(), &protocol.to_string()])
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn redis_py_patterns_run_unchanged() {
    if !redis_py_available() {
        eprintln!("redis-py is not installed: skipping");
        return;
    }
    let s = TestServer::start();
    for protocol in [2, 3] {
        let (ok, text) = run_patterns(s.port, protocol);
        assert!(
            ok,
            "redis-py patterns, RESP{protocol}, on cinnabar:\n{text}"
        );
    }
    if redis_server_available() {
        let r = RedisServer::start();
        for protocol in [2, 3] {
            let (ok, text) = run_patterns(r.port, protocol);
            assert!(
                ok,
                "redis-py patterns, RESP{protocol}, on redis-server:\n{text}"
            );
        }
    }
}
