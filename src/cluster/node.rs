//! A node of the cluster as this node sees it, and its one-line description (CLUSTER
//! NODES and nodes.conf share the format).

use super::slot::BITMAP_BYTES;

pub type NodeName = [u8; 40];
/// Index of a node in `Cluster::nodes`.
pub type NodeId = usize;

pub const MASTER: u16 = 1;
pub const SLAVE: u16 = 2;
pub const PFAIL: u16 = 4;
pub const FAIL: u16 = 8;
pub const MYSELF: u16 = 16;
pub const HANDSHAKE: u16 = 32;
pub const NOADDR: u16 = 64;
pub const MEET: u16 = 128;
pub const MIGRATE_TO: u16 = 256;
pub const NOFAILOVER: u16 = 512;

/// Flag names in Redis's order.
const FLAG_NAMES: &[(u16, &str)] = &[
    (MYSELF, "myself"),
    (MASTER, "master"),
    (SLAVE, "slave"),
    (PFAIL, "fail?"),
    (FAIL, "fail"),
    (HANDSHAKE, "handshake"),
    (NOADDR, "noaddr"),
    (NOFAILOVER, "nofailover"),
];

pub fn flags_text(flags: u16) -> String {
    let names: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "noflags".into()
    } else {
        names.join(",")
    }
}

pub fn flag_from_text(s: &str) -> Option<u16> {
    if s.eq_ignore_ascii_case("noflags") {
        return Some(0);
    }
    FLAG_NAMES
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(s))
        .map(|(f, _)| *f)
}

/// A random 40-hex-digit node or shard id.
pub fn random_name() -> NodeName {
    let mut n = [0u8; 40];
    for b in n.iter_mut() {
        *b = b"0123456789abcdef"[fastrand::usize(..16)];
    }
    n
}

pub fn name_str(n: &NodeName) -> &str {
    std::str::from_utf8(n).unwrap_or("")
}

/// Redis's verifyClusterNodeId: exactly 40 characters.
pub fn parse_name(s: &[u8]) -> Option<NodeName> {
    s.try_into().ok()
}

pub struct Node {
    pub name: NodeName,
    pub shard_id: NodeName,
    pub flags: u16,
    pub config_epoch: u64,
    pub slots: Box<[u8; BITMAP_BYTES]>,
    pub numslots: usize,
    pub replica_of: Option<NodeId>,
    pub replicas: Vec<NodeId>,
    pub ctime: i64,
    pub ping_sent: i64,
    pub pong_received: i64,
    pub data_received: i64,
    pub fail_time: i64,
    pub voted_time: i64,
    pub repl_offset_time: i64,
    pub orphaned_time: i64,
    pub repl_offset: u64,
    pub ip: String,
    pub hostname: String,
    pub human_nodename: String,
    pub tcp_port: u16,
    pub tls_port: u16,
    pub cport: u16,
    /// Outbound and inbound bus links (indexes into the bus's link table).
    pub link: Option<usize>,
    pub inbound_link: Option<usize>,
    /// Masters that reported this node as failing, and when.
    pub fail_reports: Vec<(NodeId, i64)>,
    pub last_in_ping_gossip: u64,
}

impl Node {
    /// The port a client is sent to: the TLS one for a TLS client (Redis's
    /// clusterNodeClientPort).
    pub fn client_port(&self, tls: bool) -> u16 {
        if tls {
            self.tls_port
        } else {
            self.tcp_port
        }
    }

    pub fn new(name: NodeName, flags: u16, now: i64) -> Node {
        Node {
            name,
            shard_id: random_name(),
            flags,
            config_epoch: 0,
            slots: Box::new([0u8; BITMAP_BYTES]),
            numslots: 0,
            replica_of: None,
            replicas: Vec::new(),
            ctime: now,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            repl_offset_time: 0,
            orphaned_time: 0,
            repl_offset: 0,
            ip: String::new(),
            hostname: String::new(),
            human_nodename: String::new(),
            tcp_port: 0,
            tls_port: 0,
            cport: 0,
            link: None,
            inbound_link: None,
            fail_reports: Vec::new(),
            last_in_ping_gossip: 0,
        }
    }

    pub fn is_master(&self) -> bool {
        self.flags & MASTER != 0
    }
    pub fn is_replica(&self) -> bool {
        self.flags & SLAVE != 0
    }
    pub fn in_handshake(&self) -> bool {
        self.flags & HANDSHAKE != 0
    }
    pub fn has_addr(&self) -> bool {
        self.flags & NOADDR == 0
    }
    pub fn timed_out(&self) -> bool {
        self.flags & PFAIL != 0
    }
    pub fn failed(&self) -> bool {
        self.flags & FAIL != 0
    }
    pub fn name_str(&self) -> &str {
        name_str(&self.name)
    }

    /// The name and human nodename as Redis's log lines show a node: `id (name)`.
    pub fn log_name(&self) -> String {
        format!("{} ({})", self.name_str(), self.human_nodename)
    }
}
