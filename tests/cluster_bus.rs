//! Three Cinnabar masters joined by `redis-cli --cluster create`: the bus handshake
//! and gossip, slot agreement, redirections with Redis's texts, the `redis` crate's
//! cluster client, resharding state (ASK/TRYAGAIN), PUBLISH over the bus, and
//! malformed bus packets that must not hurt a node.

mod common;
use common::cluster::{
    cluster_create, cluster_info_field, myid, redis_cli, redis_cli_available, start_node, wait_for,
    wait_ok,
};
use common::{RawConn, TestServer};
use std::io::{Read, Write};

fn three_masters() -> Vec<TestServer> {
    let nodes: Vec<TestServer> = (0..3).map(|_| start_node(&[])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    cluster_create(&ports, 0);
    wait_ok(&ports);
    nodes
}

/// The port of the node serving `slot`.
fn owner_port(nodes: &[TestServer], key: &str) -> u16 {
    for n in nodes {
        let mut c = n.raw(2);
        let r = c.cmd(&["GET", key]);
        if !r.starts_with("-MOVED") {
            return n.port;
        }
    }
    panic!("no owner for {key}");
}

fn bus_port(node: &TestServer) -> u16 {
    let mut c = node.raw(2);
    let nodes = c.cmd(&["CLUSTER", "NODES"]);
    let line = nodes.lines().find(|l| l.contains("myself")).unwrap();
    let addr = line.split(' ').nth(1).unwrap();
    addr.split('@')
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn create_check_route_and_client() {
    if !redis_cli_available() {
        return;
    }
    let nodes = three_masters();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    for &p in &ports {
        assert_eq!(cluster_info_field(p, "cluster_known_nodes"), "3");
        assert_eq!(cluster_info_field(p, "cluster_size"), "3");
        assert_eq!(cluster_info_field(p, "cluster_slots_ok"), "16384");
    }
    let (ok, out) = redis_cli(&["--cluster", "check", &format!("127.0.0.1:{}", ports[0])]);
    assert!(ok && out.contains("[OK] All 16384 slots covered."), "{out}");
    assert!(
        out.contains("[OK] All nodes agree about slots configuration."),
        "{out}"
    );

    // MOVED names the owner with Redis's exact text.
    let owner = owner_port(&nodes, "foo");
    let other = nodes.iter().find(|n| n.port != owner).unwrap();
    let mut c = other.raw(2);
    assert_eq!(
        c.cmd(&["SET", "foo", "bar"]),
        format!("-MOVED 12182 127.0.0.1:{owner}\r\n")
    );
    assert_eq!(
        c.cmd(&["MGET", "a", "b"]),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    // Commands without keys run anywhere.
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    // redis-cli -c follows redirections.
    let (ok, out) = redis_cli(&["-c", "-p", &other.port.to_string(), "SET", "foo", "bar"]);
    assert!(ok && out.trim() == "OK", "{out}");
    let (ok, out) = redis_cli(&["-c", "-p", &other.port.to_string(), "GET", "foo"]);
    assert!(ok && out.trim() == "bar", "{out}");

    // The redis crate's cluster client: a keyed workload across all slots.
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut conn = client.get_connection().unwrap();
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("key:{i}"))
            .arg(i)
            .query(&mut conn)
            .unwrap();
    }
    for i in 0..300 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("key:{i}"))
            .query(&mut conn)
            .unwrap();
        assert_eq!(v, i);
    }
    let total: usize = ports
        .iter()
        .map(|&p| {
            let mut c = RawConn::connect(p, 2);
            let r = c.cmd(&["DBSIZE"]);
            r.trim_start_matches(':').trim().parse::<usize>().unwrap()
        })
        .sum();
    assert_eq!(total, 301);
    // Every node holds only keys of its own slots.
    for n in &nodes {
        let mut c = n.raw(2);
        let r = c.cmd(&["RANDOMKEY"]);
        let key = r.lines().nth(1).unwrap().to_string();
        assert!(!c.cmd(&["GET", &key]).starts_with("-MOVED"));
    }
    // redis-cli --cluster info counts every key and slot.
    let (ok, out) = redis_cli(&["--cluster", "info", &format!("127.0.0.1:{}", ports[0])]);
    assert!(ok, "{out}");
    assert!(out.contains("[OK] 301 keys in 3 masters."), "{out}");
    // redis-py's RedisCluster, in RESP2 and RESP3, unchanged.
    let py_ok = std::process::Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .output()
        .is_ok_and(|o| o.status.success());
    if py_ok {
        let script = r#"
import sys
from redis.cluster import RedisCluster
rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), protocol=int(sys.argv[2]))
for i in range(200):
    rc.set(f"py:{i}", i)
assert [int(rc.get(f"py:{i}")) for i in range(200)] == list(range(200))
assert rc.mget_nonatomic([f"py:{i}" for i in range(50)]) == [str(i).encode() for i in range(50)]
rc.hset("{tag}h", mapping={"a": 1, "b": 2})
assert rc.hgetall("{tag}h") == {b"a": b"1", b"b": b"2"}
assert rc.delete(*[f"py:{i}" for i in range(200)]) == 200
print("ok")
"#;
        for protocol in ["2", "3"] {
            let out = std::process::Command::new("python3")
                .args(["-c", script, &ports[1].to_string(), protocol])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && text.trim() == "ok",
                "RESP{protocol}: {text}"
            );
        }
    }
}

#[test]
fn ask_during_migration_and_pubsub() {
    if !redis_cli_available() {
        return;
    }
    let nodes = three_masters();
    let src_port = owner_port(&nodes, "foo");
    let src = nodes.iter().find(|n| n.port == src_port).unwrap();
    let dst = nodes.iter().find(|n| n.port != src_port).unwrap();
    let (src_id, dst_id) = (myid(src.port), myid(dst.port));
    let mut s = src.raw(2);
    let mut d = dst.raw(2);
    assert_eq!(s.cmd(&["SET", "{foo}1", "v"]), "+OK\r\n");
    assert_eq!(
        d.cmd(&["CLUSTER", "SETSLOT", "12182", "IMPORTING", &src_id]),
        "+OK\r\n"
    );
    assert_eq!(
        s.cmd(&["CLUSTER", "SETSLOT", "12182", "MIGRATING", &dst_id]),
        "+OK\r\n"
    );
    let nodes_txt = s.cmd(&["CLUSTER", "NODES"]);
    assert!(
        nodes_txt.contains(&format!("[12182->-{dst_id}]")),
        "{nodes_txt}"
    );
    // Existing keys are served by the source; missing ones are sent to the target.
    assert_eq!(s.cmd(&["GET", "{foo}1"]), "$1\r\nv\r\n");
    assert_eq!(
        s.cmd(&["GET", "{foo}2"]),
        format!("-ASK 12182 127.0.0.1:{}\r\n", dst.port)
    );
    assert_eq!(
        s.cmd(&["MGET", "{foo}1", "{foo}2"]),
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    );
    // The target serves the slot only after ASKING, for one command.
    assert_eq!(
        d.cmd(&["GET", "{foo}2"]),
        format!("-MOVED 12182 127.0.0.1:{}\r\n", src.port)
    );
    assert_eq!(d.cmd(&["ASKING"]), "+OK\r\n");
    assert_eq!(d.cmd(&["SET", "{foo}2", "w"]), "+OK\r\n");
    assert_eq!(
        d.cmd(&["GET", "{foo}2"]),
        format!("-MOVED 12182 127.0.0.1:{}\r\n", src.port)
    );
    // Finish the move: the slot and its keys end on the target, everyone agrees.
    assert_eq!(s.cmd(&["DEL", "{foo}1"]), ":1\r\n");
    assert_eq!(
        d.cmd(&["CLUSTER", "SETSLOT", "12182", "NODE", &dst_id]),
        "+OK\r\n"
    );
    assert_eq!(
        s.cmd(&["CLUSTER", "SETSLOT", "12182", "NODE", &dst_id]),
        "+OK\r\n"
    );
    wait_for("slot 12182 moved everywhere", 30, || {
        nodes.iter().all(|n| {
            let mut c = n.raw(2);
            let r = c.cmd(&["GET", "{foo}2"]);
            r == "$1\r\nw\r\n" || r == format!("-MOVED 12182 127.0.0.1:{}\r\n", dst.port)
        })
    });

    // PUBLISH on one node reaches subscribers of another through the bus.
    let mut sub = RawConn::connect(nodes[2].port, 2);
    sub.cmd(&["SUBSCRIBE", "news"]);
    let mut p = nodes[0].raw(2);
    assert_eq!(p.cmd(&["PUBLISH", "news", "hello"]), ":0\r\n");
    assert_eq!(
        sub.read_reply(),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n"
    );
}

/// Sends bytes to a node's bus port, then closes.
fn send_bus(port: u16, bytes: &[u8]) {
    if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.write_all(bytes);
        let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(50)));
        let mut buf = [0u8; 64];
        let _ = s.read(&mut buf);
    }
}

#[test]
fn malformed_bus_packets_never_hurt_a_node() {
    let mut node = start_node(&[]);
    let bus = bus_port(&node);
    let mut rng = 0x2545F4914F6CDD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // A valid-looking header to mutate: signature, length, version 1.
    let mut base = vec![0u8; 2256];
    base[0..4].copy_from_slice(b"RCmb");
    base[4..8].copy_from_slice(&2256u32.to_be_bytes());
    base[8..10].copy_from_slice(&1u16.to_be_bytes());
    for round in 0..300 {
        let mut pkt = base.clone();
        match round % 5 {
            0 => {
                // Random bytes anywhere past the signature.
                for _ in 0..20 {
                    let at = 8 + (next() as usize % (pkt.len() - 8));
                    pkt[at] = next() as u8;
                }
            }
            1 => {
                // Truncated.
                pkt.truncate(next() as usize % pkt.len());
            }
            2 => {
                // Lying lengths, counts and extension numbers for each type.
                let typ = (next() % 12) as u16;
                pkt[12..14].copy_from_slice(&typ.to_be_bytes());
                pkt[14..16].copy_from_slice(&((next() % 70000) as u16).to_be_bytes());
                pkt[2214..2216].copy_from_slice(&((next() % 5) as u16).to_be_bytes());
                pkt[2253] = (next() % 8) as u8;
                let extra = (next() % 400) as usize;
                pkt.resize(2256 + extra, (next() % 256) as u8);
                let len = pkt.len() as u32;
                pkt[4..8].copy_from_slice(&len.to_be_bytes());
            }
            3 => {
                // Pure noise.
                pkt = (0..(next() % 5000)).map(|_| next() as u8).collect();
            }
            _ => {
                // A MEET from nowhere with a gossip entry of garbage.
                pkt[12..14].copy_from_slice(&2u16.to_be_bytes());
                pkt[14..16].copy_from_slice(&1u16.to_be_bytes());
                pkt.resize(2256 + 104, b'x');
                pkt[4..8].copy_from_slice(&(2360u32).to_be_bytes());
                for b in &mut pkt[40..80] {
                    *b = b'a' + (next() % 6) as u8;
                }
            }
        }
        send_bus(bus, &pkt);
    }
    assert!(node.is_running());
    let mut c = node.raw(2);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
    let info = c.cmd(&["CLUSTER", "INFO"]);
    assert!(info.contains("cluster_state:"), "{info}");
}

/// A PUBLISH, PUBLISHSHARD or MODULE message with no room for its body's lengths
/// (reading them panicked the node). Found by fuzzing.
#[test]
fn bus_messages_too_short_for_their_body_lengths() {
    let mut node = start_node(&[]);
    let bus = bus_port(&node);
    for (typ, body) in [(4u16, 0usize), (10, 4), (9, 0), (9, 11)] {
        let mut pkt = vec![0u8; 2256 + body];
        pkt[0..4].copy_from_slice(b"RCmb");
        let len = pkt.len() as u32;
        pkt[4..8].copy_from_slice(&len.to_be_bytes());
        pkt[8..10].copy_from_slice(&1u16.to_be_bytes());
        pkt[12..14].copy_from_slice(&typ.to_be_bytes());
        send_bus(bus, &pkt);
    }
    assert!(node.is_running());
    let mut c = node.raw(2);
    assert_eq!(c.cmd(&["PING"]), "+PONG\r\n");
}
