//! Cluster test helpers: Cinnabar nodes in cluster mode (each with its own bus
//! port), redis-cli's cluster manager, and waiting for the nodes to agree.

use super::{free_port, temp_dir, RawConn, TestServer};
use std::process::Command;
use std::time::{Duration, Instant};

/// A node in cluster mode on ephemeral client and bus ports, in its own directory.
pub fn start_node(extra: &[&str]) -> TestServer {
    let dir = temp_dir("cluster");
    start_node_in(&dir, extra)
}

pub fn start_node_in(dir: &std::path::Path, extra: &[&str]) -> TestServer {
    start_node_on(dir, None, None, extra)
}

/// Starts a node on `port` with bus port `cport` (free ones when None): a node
/// restarted on its directory comes back where its peers know it. A fresh bus port is
/// drawn for each attempt, since another test may bind the one drawn first before
/// this node does; `bus_port` tells the caller which one the node got.
pub fn start_node_on(
    dir: &std::path::Path,
    port: Option<u16>,
    cport: Option<u16>,
    extra: &[&str],
) -> TestServer {
    let log = dir.join("node.log").display().to_string();
    for _attempt in 0..5 {
        let bus = cport.unwrap_or_else(free_port).to_string();
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            bus.as_str(),
            "--cluster-node-timeout",
            "2000",
            "--appendonly",
            "no",
            "--save",
            "",
            "--loglevel",
            "notice",
            "--logfile",
            log.as_str(),
        ];
        args.extend_from_slice(extra);
        let started = match port {
            Some(p) => TestServer::try_start_on_port(dir, p, &args),
            None => TestServer::try_start_in(dir, &args),
        };
        if let Some(server) = started {
            return server;
        }
    }
    panic!("cinnabar did not start in cluster mode (see {log})")
}

/// The bus port a node listens on.
pub fn bus_port(port: u16) -> u16 {
    let reply = RawConn::connect(port, 2).cmd(&["CONFIG", "GET", "cluster-port"]);
    reply
        .lines()
        .nth(4)
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("cluster-port of {port}: {reply:?}"))
}

pub fn redis_cli_available() -> bool {
    Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `redis-cli` with `args`; returns (success, stdout + stderr).
pub fn redis_cli(args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg("redis-cli")
        .args(args)
        .output()
        .expect("run redis-cli");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// `redis-cli --cluster create` over the given client ports.
pub fn cluster_create(ports: &[u16], replicas: usize) -> String {
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut args: Vec<&str> = vec!["--cluster", "create"];
    args.extend(addrs.iter().map(|s| s.as_str()));
    let r = replicas.to_string();
    args.extend(["--cluster-replicas", r.as_str(), "--cluster-yes"]);
    let (ok, out) = redis_cli(&args);
    assert!(ok, "cluster create failed: {out}");
    out
}

/// The value of a CLUSTER INFO field.
pub fn cluster_info_field(port: u16, field: &str) -> String {
    let mut c = RawConn::connect(port, 2);
    let info = c.cmd(&["CLUSTER", "INFO"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Waits (bounded) until `f` holds.
pub fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until every node says cluster_state:ok.
pub fn wait_ok(ports: &[u16]) {
    wait_for("cluster_state:ok", 60, || {
        ports
            .iter()
            .all(|&p| cluster_info_field(p, "cluster_state") == "ok")
    });
}

/// The node id of the node on `port`.
pub fn myid(port: u16) -> String {
    let mut c = RawConn::connect(port, 2);
    let r = c.cmd(&["CLUSTER", "MYID"]);
    r.lines().nth(1).unwrap_or("").to_string()
}
