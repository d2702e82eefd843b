//! Migrations interrupted by kill -9 and repaired by `redis-cli --cluster fix`: the
//! resharding redis-cli killed in the middle of a slot, and the slot's source node
//! killed in the middle of it and restarted from its AOF and nodes.conf. Afterwards
//! every key is present exactly once and the nodes agree on the slots.

mod common;
use common::cluster::{
    bus_port, cluster_create, myid, redis_cli, redis_cli_available, start_node_on, wait_for,
    wait_ok,
};
use common::{temp_dir, RawConn, TestServer};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

const DURABLE: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];
/// Keys in the slot that is being moved when the kill comes: enough MIGRATE round
/// trips (one key each) that the slot is open for a while.
const HOT_KEYS: usize = 3000;
const OTHER_KEYS: usize = 300;

struct Node {
    server: TestServer,
    dir: PathBuf,
    cport: u16,
}

impl Node {
    fn start() -> Node {
        let dir = temp_dir("cluster-kill9");
        let server = start_node_on(&dir, None, None, DURABLE);
        let cport = bus_port(server.port);
        Node { server, dir, cport }
    }

    fn port(&self) -> u16 {
        self.server.port
    }

    /// kill -9, then a restart on the same port, directory and bus port.
    fn kill_and_restart(&mut self) {
        let port = self.port();
        self.server.kill9();
        self.server = start_node_on(&self.dir, Some(port), Some(self.cport), DURABLE);
    }
}

fn keyslot(port: u16, key: &str) -> u16 {
    let r = RawConn::connect(port, 2).cmd(&["CLUSTER", "KEYSLOT", key]);
    r.trim().trim_start_matches(':').parse().unwrap()
}

fn owner_of_slot_0(ports: &[u16]) -> u16 {
    *ports
        .iter()
        .find(|&&p| {
            let nodes = RawConn::connect(p, 2).cmd(&["CLUSTER", "NODES"]);
            nodes
                .lines()
                .find(|l| l.contains("myself"))
                .is_some_and(|l| l.split(' ').skip(8).any(|r| r.starts_with("0-")))
        })
        .expect("a node owns slot 0")
}

/// A hash tag whose slot is among the 100 lowest (all owned by the slot-0 owner, so
/// `reshard --cluster-slots 100` moves it).
fn low_tag(port: u16) -> (String, u16) {
    (0..)
        .map(|i| format!("t{i}"))
        .map(|t| {
            let s = keyslot(port, &t);
            (t, s)
        })
        .find(|(_, s)| *s < 100)
        .unwrap()
}

struct Setup {
    nodes: Vec<Node>,
    src: usize,
    dst: usize,
    tag: String,
    hot: u16,
}

fn setup() -> Setup {
    let nodes: Vec<Node> = (0..3).map(|_| Node::start()).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port()).collect();
    cluster_create(&ports, 0);
    wait_ok(&ports);
    let src_port = owner_of_slot_0(&ports);
    let src = ports.iter().position(|&p| p == src_port).unwrap();
    let dst = (src + 1) % 3;
    let (tag, hot) = low_tag(src_port);
    // The hot slot's keys, pipelined on their owner.
    let mut c = RawConn::connect(src_port, 2);
    for i in 0..HOT_KEYS {
        c.send(&["SET", &format!("{{{tag}}}{i}"), &i.to_string()]);
    }
    for _ in 0..HOT_KEYS {
        assert_eq!(c.read_reply(), "+OK\r\n");
    }
    // Keys all over the keyspace, through each key's owner.
    for i in 0..OTHER_KEYS {
        let k = format!("other{i}");
        let r = set_anywhere(&ports, &k, &i.to_string());
        assert_eq!(r, "+OK\r\n");
    }
    Setup {
        nodes,
        src,
        dst,
        tag,
        hot,
    }
}

/// SET through whichever node owns the key (following one MOVED).
fn set_anywhere(ports: &[u16], key: &str, value: &str) -> String {
    let r = RawConn::connect(ports[0], 2).cmd(&["SET", key, value]);
    if let Some(rest) = r.strip_prefix("-MOVED ") {
        let port: u16 = rest.trim().rsplit(':').next().unwrap().parse().unwrap();
        return RawConn::connect(port, 2).cmd(&["SET", key, value]);
    }
    r
}

/// GET through the owner (following MOVED and ASK).
fn get_anywhere(ports: &[u16], key: &str) -> String {
    let mut port = ports[0];
    for _ in 0..5 {
        let mut c = RawConn::connect(port, 2);
        let r = c.cmd(&["GET", key]);
        if let Some(rest) = r.strip_prefix("-MOVED ") {
            port = rest.trim().rsplit(':').next().unwrap().parse().unwrap();
        } else if let Some(rest) = r.strip_prefix("-ASK ") {
            port = rest.trim().rsplit(':').next().unwrap().parse().unwrap();
            let mut a = RawConn::connect(port, 2);
            a.cmd(&["ASKING"]);
            return a.cmd(&["GET", key]);
        } else {
            return r;
        }
    }
    panic!("too many redirections for {key}");
}

fn reshard(s: &Setup) -> Child {
    let src = s.nodes[s.src].port();
    let (from, to) = (myid(src), myid(s.nodes[s.dst].port()));
    Command::new("redis-cli")
        .args(["--cluster", "reshard", &format!("127.0.0.1:{src}")])
        .args(["--cluster-from", &from, "--cluster-to", &to])
        .args(["--cluster-slots", "100", "--cluster-yes"])
        .args(["--cluster-pipeline", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-cli")
}

fn countkeysinslot(port: u16, slot: u16) -> usize {
    let r = RawConn::connect(port, 2).cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    r.trim().trim_start_matches(':').parse().unwrap()
}

/// Waits until the hot slot is open on its source and some of its keys have moved.
fn wait_mid_slot(s: &Setup) {
    let (src, dst) = (s.nodes[s.src].port(), s.nodes[s.dst].port());
    let open = format!("[{}->-", s.hot);
    wait_for("the hot slot half moved", 120, || {
        let nodes = RawConn::connect(src, 2).cmd(&["CLUSTER", "NODES"]);
        nodes.contains(&open) && countkeysinslot(dst, s.hot) > 0
    });
}

/// `--cluster fix`, then agreement with no open slot, then every key once.
fn fix_and_verify(s: &Setup) {
    let ports: Vec<u16> = s.nodes.iter().map(|n| n.port()).collect();
    let any = format!("127.0.0.1:{}", ports[0]);
    let (_, out) = redis_cli(&["--cluster", "check", &any]);
    assert!(
        out.contains(&format!(
            "[WARNING] The following slots are open: {}",
            s.hot
        )),
        "{out}"
    );
    let (ok, out) = redis_cli(&["--cluster", "fix", &any, "--cluster-yes"]);
    assert!(ok, "fix failed: {out}");
    wait_for("agreement after fix", 60, || {
        let (ok, out) = redis_cli(&["--cluster", "check", &any]);
        ok && out.contains("[OK] All nodes agree about slots configuration.")
            && out.contains("[OK] All 16384 slots covered.")
            && !out.contains("[WARNING]")
    });
    wait_ok(&ports);
    for i in 0..HOT_KEYS {
        let k = format!("{{{}}}{i}", s.tag);
        assert_eq!(
            get_anywhere(&ports, &k),
            format!("${}\r\n{i}\r\n", i.to_string().len())
        );
    }
    for i in 0..OTHER_KEYS {
        let k = format!("other{i}");
        assert_eq!(
            get_anywhere(&ports, &k),
            format!("${}\r\n{i}\r\n", i.to_string().len())
        );
    }
    let total: usize = ports
        .iter()
        .map(|&p| {
            let r = RawConn::connect(p, 2).cmd(&["DBSIZE"]);
            r.trim().trim_start_matches(':').parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(total, HOT_KEYS + OTHER_KEYS);
}

#[test]
fn fix_repairs_a_reshard_whose_redis_cli_was_killed_mid_slot() {
    if !redis_cli_available() {
        return;
    }
    let s = setup();
    let mut cli = reshard(&s);
    wait_mid_slot(&s);
    cli.kill().unwrap();
    cli.wait().unwrap();
    fix_and_verify(&s);
}

#[test]
fn fix_repairs_a_migration_whose_source_node_was_killed_mid_slot() {
    if !redis_cli_available() {
        return;
    }
    let mut s = setup();
    let mut cli = reshard(&s);
    wait_mid_slot(&s);
    s.nodes[s.src].kill_and_restart();
    // redis-cli fails on the lost connection; stop it if it has not exited.
    let _ = cli.kill();
    cli.wait().unwrap();
    let ports: Vec<u16> = s.nodes.iter().map(|n| n.port()).collect();
    wait_ok(&ports);
    // nodes.conf kept the open slot across the restart, as Redis's does.
    let nodes = RawConn::connect(s.nodes[s.src].port(), 2).cmd(&["CLUSTER", "NODES"]);
    assert!(nodes.contains(&format!("[{}->-", s.hot)), "{nodes}");
    fix_and_verify(&s);
}
