//! Redis Cluster: hash slots, the node table, the cluster bus and redirections.
//!
//! The rest of the server meets this module at three points only:
//! - the executor asks `route` whether a command may run here, or which redirection
//!   (-MOVED/-ASK/-CROSSSLOT/-TRYAGAIN/-CLUSTERDOWN) answers it (routing.rs);
//! - the network loop hands it the readiness events of its own tokens (`on_event`)
//!   and calls `before_sleep` once per turn (the cron, the state update and the
//!   nodes.conf save happen there);
//! - the CLUSTER family (commands/cluster.rs) reads and changes `Cluster`.
//!
//! With `cluster-enabled no` the executor holds no `Cluster` and each of those points
//! is a single `None` test.

pub mod bus;
pub mod debug;
pub mod failover;
pub mod gossip;
pub mod node;
pub mod nodes_conf;
pub mod routing;
pub mod slot;
pub mod wire;

use std::collections::HashMap;
use std::path::PathBuf;

use crate::exec::Executor;
use node::{Node, NodeId, NodeName};
use slot::{BITMAP_BYTES, SLOTS};

pub use routing::route;

/// Tokens at or above this value (and below the loop's listener tokens) belong to
/// the cluster bus: the listener, then one per link.
pub const TOKEN_BASE: usize = 1 << 40;
pub const TOKEN_END: usize = TOKEN_BASE + (1 << 30);

/// Work left for `before_sleep` (Redis's todo_before_sleep).
pub const TODO_HANDLE_FAILOVER: u8 = 1;
pub const TODO_UPDATE_STATE: u8 = 2;
pub const TODO_SAVE_CONFIG: u8 = 4;
pub const TODO_FSYNC_CONFIG: u8 = 8;
pub const TODO_HANDLE_MANUALFAILOVER: u8 = 16;

const WRITABLE_DELAY_MS: i64 = 2000;
const MAX_REJOIN_DELAY_MS: i64 = 5000;
const MIN_REJOIN_DELAY_MS: i64 = 500;
/// Seconds a forgotten node may not be re-added through gossip.
pub const BLACKLIST_TTL: i64 = 60;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Endpoint {
    Ip,
    Hostname,
    Unknown,
}

/// The cluster directives, read from the configuration at each cron run.
#[derive(Clone, Debug)]
pub struct Settings {
    pub node_timeout: i64,
    pub ping_interval: i64,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub allow_replica_migration: bool,
    pub replica_no_failover: bool,
    pub replica_validity_factor: i64,
    pub migration_barrier: i64,
    pub announce_ip: String,
    pub announce_hostname: String,
    pub announce_human_nodename: String,
    pub preferred_endpoint: Endpoint,
    /// Ports announced to peers: plain client port, TLS client port and bus port.
    pub port: u16,
    pub tls_port: u16,
    pub cport: u16,
    /// `tls-cluster`: the bus is TLS and the TLS port is the nodes' default client port.
    pub tls_cluster: bool,
    /// `cluster-link-sendbuf-limit` in bytes (0: no limit).
    pub link_sendbuf_limit: i64,
}

impl Settings {
    pub fn from_config(c: &crate::config::Config, tcp_port: u16) -> Settings {
        let announce_port = c.stored_i64("cluster-announce-port") as u16;
        let announce_bus_port = c.stored_i64("cluster-announce-bus-port") as u16;
        let cluster_port = c.stored_i64("cluster-port") as u16;
        let port = if announce_port != 0 {
            announce_port
        } else {
            tcp_port
        };
        let tls_port = match c.stored_i64("cluster-announce-tls-port") as u16 {
            0 => crate::tls::port(c),
            p => p,
        };
        let tls_cluster = c.stored_bool("tls-cluster");
        let cport = if announce_bus_port != 0 {
            announce_bus_port
        } else {
            bus_port(cluster_port, default_client_port(c, tcp_port))
        };
        Settings {
            node_timeout: c.stored_i64("cluster-node-timeout"),
            ping_interval: c.stored_i64("cluster-ping-interval"),
            require_full_coverage: c.stored_bool("cluster-require-full-coverage"),
            allow_reads_when_down: c.stored_bool("cluster-allow-reads-when-down"),
            allow_pubsubshard_when_down: c.stored_bool("cluster-allow-pubsubshard-when-down"),
            allow_replica_migration: c.stored_bool("cluster-allow-replica-migration"),
            replica_no_failover: c.stored_bool("cluster-replica-no-failover"),
            replica_validity_factor: c.stored_i64("cluster-replica-validity-factor"),
            migration_barrier: c.stored_i64("cluster-migration-barrier"),
            announce_ip: c.stored_str("cluster-announce-ip"),
            announce_hostname: c.stored_str("cluster-announce-hostname"),
            announce_human_nodename: c.stored_str("cluster-announce-human-nodename"),
            preferred_endpoint: match c.stored_str("cluster-preferred-endpoint-type").as_str() {
                "hostname" => Endpoint::Hostname,
                "unknown-endpoint" => Endpoint::Unknown,
                _ => Endpoint::Ip,
            },
            port,
            tls_port,
            tls_cluster,
            cport,
            link_sendbuf_limit: c.stored_i64("cluster-link-sendbuf-limit"),
        }
    }
}

/// The port clients use by default (Redis's defaultClientPort): the TLS one with
/// `tls-cluster yes`.
pub fn default_client_port(c: &crate::config::Config, tcp_port: u16) -> u16 {
    if c.stored_bool("tls-cluster") {
        crate::tls::port(c)
    } else {
        tcp_port
    }
}

/// The bus port: `cluster-port`, or the client port plus 10000.
pub fn bus_port(cluster_port: u16, tcp_port: u16) -> u16 {
    if cluster_port != 0 {
        cluster_port
    } else {
        tcp_port.wrapping_add(10000)
    }
}

pub struct Cluster {
    pub nodes: Vec<Option<Node>>,
    pub by_name: HashMap<NodeName, NodeId>,
    pub myself: NodeId,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub state_ok: bool,
    /// Masters serving at least one slot.
    pub size: usize,
    pub slots: Vec<Option<NodeId>>,
    pub migrating: HashMap<usize, NodeId>,
    pub importing: HashMap<usize, NodeId>,
    /// Slots whose owner stopped claiming them (Redis's owner_not_claiming_slot).
    pub owner_not_claiming: Box<[u8; BITMAP_BYTES]>,
    /// Slots that lost their owner since the last turn: shard channels in them are
    /// unsubscribed before sleeping (`release_shard_channels`), as Redis's
    /// clusterDelSlot removes the channels of a slot whenever its owner changes.
    released: Box<[u8; BITMAP_BYTES]>,
    any_released: bool,
    /// Forgotten nodes and the unix second until which gossip may not re-add them.
    pub blacklist: HashMap<NodeName, i64>,
    pub stats_sent: [u64; wire::TYPE_COUNT],
    pub stats_received: [u64; wire::TYPE_COUNT],
    pub stats_pfail_nodes: usize,
    pub todo: u8,
    pub bus: bus::Bus,
    pub conf_path: PathBuf,
    pub settings: Settings,
    pub failover: failover::State,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER / CLOSE-CLUSTER-LINK-ON-PACKET-DROP.
    pub packet_filter: debug::PacketFilter,
    /// Links freed for passing `cluster-link-sendbuf-limit` (CLUSTER INFO).
    pub links_buffer_limit_exceeded: u64,
    first_call_time: i64,
    among_minority_time: i64,
    pub pings_sent: u64,
    iteration: u64,
    last_cron_ms: i64,
}

pub fn now_ms() -> i64 {
    crate::keyspace::unix_ms()
}

impl Cluster {
    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes[id].as_ref().expect("live node")
    }
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes[id].as_mut().expect("live node")
    }
    pub fn me(&self) -> &Node {
        self.node(self.myself)
    }
    pub fn me_mut(&mut self) -> &mut Node {
        let id = self.myself;
        self.node_mut(id)
    }
    pub fn lookup(&self, name: &[u8]) -> Option<NodeId> {
        let n: NodeName = name.try_into().ok()?;
        self.by_name.get(&n).copied()
    }
    /// Live node ids, in table order.
    pub fn node_ids(&self) -> Vec<NodeId> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_some())
            .collect()
    }
    pub fn node_count(&self) -> usize {
        self.by_name.len()
    }

    pub fn add_node(&mut self, node: Node) -> NodeId {
        let name = node.name;
        let id = match self.nodes.iter().position(|n| n.is_none()) {
            Some(i) => {
                self.nodes[i] = Some(node);
                i
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() - 1
            }
        };
        self.by_name.insert(name, id);
        id
    }

    /// Removes a node: its slots become unassigned, its links close, and the
    /// failure reports it made disappear (Redis's clusterDelNode).
    pub fn del_node(&mut self, id: NodeId) {
        for s in 0..SLOTS {
            if self.importing.get(&s) == Some(&id) {
                self.importing.remove(&s);
            }
            if self.migrating.get(&s) == Some(&id) {
                self.migrating.remove(&s);
            }
            if self.slots[s] == Some(id) {
                self.slots[s] = None;
                self.mark_released(s);
            }
        }
        for other in self.node_ids() {
            if other == id {
                continue;
            }
            let n = self.node_mut(other);
            n.fail_reports.retain(|(r, _)| *r != id);
            n.replicas.retain(|r| *r != id);
            if n.replica_of == Some(id) {
                n.replica_of = None;
            }
        }
        let (link, inbound) = {
            let n = self.node(id);
            (n.link, n.inbound_link)
        };
        for l in [link, inbound].into_iter().flatten() {
            self.bus.free_link(l);
        }
        let name = self.node(id).name;
        self.by_name.remove(&name);
        self.nodes[id] = None;
    }

    pub fn rename_node(&mut self, id: NodeId, name: NodeName) {
        let old = self.node(id).name;
        self.by_name.remove(&old);
        self.node_mut(id).name = name;
        self.by_name.insert(name, id);
    }

    pub fn add_slot(&mut self, id: NodeId, s: usize) -> bool {
        if self.slots[s].is_some() {
            return false;
        }
        self.set_slot_bit(id, s);
        self.slots[s] = Some(id);
        slot::bit_clear(&mut self.owner_not_claiming[..], s);
        true
    }

    fn set_slot_bit(&mut self, id: NodeId, s: usize) {
        let n = self.node_mut(id);
        if !slot::bit_test(&n.slots[..], s) {
            slot::bit_set(&mut n.slots[..], s);
            n.numslots += 1;
            // A master that gets its first slot becomes a target of replica
            // migration, as Redis's clusterNodeSetSlotBit.
            if n.numslots == 1 && n.is_master() {
                n.flags |= node::MIGRATE_TO;
            }
        }
    }

    pub fn del_slot(&mut self, s: usize) -> bool {
        let Some(id) = self.slots[s] else {
            return false;
        };
        let n = self.node_mut(id);
        if slot::bit_test(&n.slots[..], s) {
            slot::bit_clear(&mut n.slots[..], s);
            n.numslots -= 1;
        }
        self.slots[s] = None;
        slot::bit_clear(&mut self.owner_not_claiming[..], s);
        self.mark_released(s);
        true
    }

    fn mark_released(&mut self, s: usize) {
        slot::bit_set(&mut self.released[..], s);
        self.any_released = true;
    }

    pub fn del_node_slots(&mut self, id: NodeId) -> usize {
        let mut n = 0;
        for s in 0..SLOTS {
            if self.slots[s] == Some(id) {
                self.del_slot(s);
                n += 1;
            }
        }
        n
    }

    pub fn move_node_slots(&mut self, from: NodeId, to: NodeId) -> usize {
        let mut n = 0;
        for s in 0..SLOTS {
            if self.slots[s] == Some(from) {
                self.del_slot(s);
                self.add_slot(to, s);
                n += 1;
            }
        }
        n
    }

    pub fn slot_unclaimed(&self, s: usize) -> bool {
        self.slots[s].is_none() || slot::bit_test(&self.owner_not_claiming[..], s)
    }

    pub fn add_replica(&mut self, master: NodeId, replica: NodeId) {
        let m = self.node_mut(master);
        if !m.replicas.contains(&replica) {
            m.replicas.push(replica);
        }
        m.flags |= node::MIGRATE_TO;
    }

    pub fn remove_replica(&mut self, master: NodeId, replica: NodeId) {
        let m = self.node_mut(master);
        m.replicas.retain(|r| *r != replica);
        if m.replicas.is_empty() {
            m.flags &= !node::MIGRATE_TO;
        }
    }

    /// Redis's clusterSetNodeAsMaster.
    pub fn set_node_as_master(&mut self, id: NodeId) {
        if self.node(id).is_master() {
            return;
        }
        if let Some(m) = self.node(id).replica_of {
            self.remove_replica(m, id);
            if id != self.myself {
                self.node_mut(id).flags |= node::MIGRATE_TO;
            }
        }
        let n = self.node_mut(id);
        n.flags &= !node::SLAVE;
        n.flags |= node::MASTER;
        n.replica_of = None;
        self.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
    }

    /// The master of `id` (itself when it is a master).
    pub fn master_of(&self, id: NodeId) -> Option<NodeId> {
        let n = self.node(id);
        if n.is_master() {
            Some(id)
        } else {
            n.replica_of
        }
    }

    pub fn max_epoch(&self) -> u64 {
        self.node_ids()
            .iter()
            .map(|&i| self.node(i).config_epoch)
            .max()
            .unwrap_or(0)
            .max(self.current_epoch)
    }

    /// Redis's clusterBumpConfigEpochWithoutConsensus: true when the epoch changed.
    pub fn bump_epoch_without_consensus(&mut self) -> bool {
        let max = self.max_epoch();
        let me = self.myself;
        if self.node(me).config_epoch == 0 || self.node(me).config_epoch != max {
            self.current_epoch += 1;
            self.node_mut(me).config_epoch = self.current_epoch;
            self.todo |= TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG;
            crate::log::notice(&format!("New configEpoch set to {}", self.current_epoch));
            true
        } else {
            false
        }
    }

    /// Redis's clusterHandleConfigEpochCollision: of two masters with one epoch, the
    /// one with the smaller name takes a new one.
    pub fn handle_epoch_collision(&mut self, sender: NodeId) {
        let me = self.myself;
        if self.node(sender).config_epoch != self.node(me).config_epoch
            || !self.node(sender).is_master()
            || !self.node(me).is_master()
        {
            return;
        }
        if self.node(sender).name <= self.node(me).name {
            return;
        }
        self.current_epoch += 1;
        self.node_mut(me).config_epoch = self.current_epoch;
        self.todo |= TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG;
        crate::log::verbose(&format!(
            "WARNING: configEpoch collision with node {}. configEpoch set to {}",
            self.node(sender).name_str(),
            self.current_epoch
        ));
    }

    /// Redis's clusterUpdateState.
    pub fn update_state(&mut self) {
        self.todo &= !TODO_UPDATE_STATE;
        let now = now_ms();
        if self.first_call_time == 0 {
            self.first_call_time = now;
        }
        if self.me().is_master() && !self.state_ok && now - self.first_call_time < WRITABLE_DELAY_MS
        {
            return;
        }
        let mut ok = true;
        if self.settings.require_full_coverage {
            ok = self
                .slots
                .iter()
                .all(|s| s.is_some_and(|id| !self.node(id).failed()));
        }
        let mut reachable = 0;
        let mut size = 0;
        for id in self.node_ids() {
            let n = self.node(id);
            if n.is_master() && n.numslots > 0 {
                size += 1;
                if n.flags & (node::FAIL | node::PFAIL) == 0 {
                    reachable += 1;
                }
            }
        }
        self.size = size;
        if reachable < self.size / 2 + 1 {
            ok = false;
            self.among_minority_time = now;
        }
        if ok != self.state_ok {
            let rejoin = self
                .settings
                .node_timeout
                .clamp(MIN_REJOIN_DELAY_MS, MAX_REJOIN_DELAY_MS);
            if ok && self.me().is_master() && now - self.among_minority_time < rejoin {
                return;
            }
            let text = if ok { "ok" } else { "fail" };
            let line = format!("Cluster state changed: {text}");
            if ok {
                crate::log::notice(&line);
            } else {
                crate::log::warning(&line);
            }
            self.state_ok = ok;
        }
    }

    /// The address clients are sent to for a node (MOVED/ASK, CLUSTER SLOTS).
    pub fn endpoint(&self, id: NodeId) -> String {
        let n = self.node(id);
        match self.settings.preferred_endpoint {
            Endpoint::Ip => n.ip.clone(),
            Endpoint::Hostname if !n.hostname.is_empty() => n.hostname.clone(),
            Endpoint::Hostname => "?".into(),
            Endpoint::Unknown => String::new(),
        }
    }

    /// One line of CLUSTER NODES (`for_file`: the nodes.conf form with aux fields).
    /// `tls`: the TLS port is the one shown (a TLS client asks, or the file of a
    /// `tls-cluster` node), the other going to the aux fields.
    pub fn describe(&self, id: NodeId, for_file: bool, tls: bool) -> String {
        let n = self.node(id);
        let mut s = format!(
            "{} {}:{}@{}",
            n.name_str(),
            n.ip,
            n.client_port(tls),
            n.cport
        );
        if !n.hostname.is_empty() {
            s.push(',');
            s.push_str(&n.hostname);
        }
        if for_file {
            if n.hostname.is_empty() {
                s.push(',');
            }
            if tls {
                s.push_str(&format!(",tcp-port={}", n.tcp_port));
            } else {
                s.push_str(&format!(",tls-port={}", n.tls_port));
            }
            if !n.human_nodename.is_empty() {
                s.push_str(&format!(",nodename={}", n.human_nodename));
            }
            s.push_str(&format!(",shard-id={}", node::name_str(&n.shard_id)));
        }
        s.push(' ');
        s.push_str(&node::flags_text(n.flags));
        s.push(' ');
        match n.replica_of {
            Some(m) => s.push_str(self.node(m).name_str()),
            None => s.push('-'),
        }
        let epoch = match (n.is_replica(), n.replica_of) {
            (true, Some(m)) => self.node(m).config_epoch,
            _ => n.config_epoch,
        };
        let connected = n.link.is_some() || n.flags & node::MYSELF != 0;
        s.push_str(&format!(
            " {} {} {} {}",
            n.ping_sent,
            n.pong_received,
            epoch,
            if connected {
                "connected"
            } else {
                "disconnected"
            }
        ));
        if n.numslots > 0 {
            for (a, b) in slot::ranges(|x| self.slots[x] == Some(id)) {
                if a == b {
                    s.push_str(&format!(" {a}"));
                } else {
                    s.push_str(&format!(" {a}-{b}"));
                }
            }
        }
        if id == self.myself {
            let mut open: Vec<(usize, String)> = self
                .migrating
                .iter()
                .map(|(s, t)| (*s, format!(" [{s}->-{}]", self.node(*t).name_str())))
                .chain(
                    self.importing
                        .iter()
                        .filter(|(s, _)| !self.migrating.contains_key(s))
                        .map(|(s, f)| (*s, format!(" [{s}-<-{}]", self.node(*f).name_str()))),
                )
                .collect();
            open.sort();
            for (_, t) in open {
                s.push_str(&t);
            }
        }
        s
    }

    /// CLUSTER NODES / nodes.conf body (handshake nodes left out of the file).
    pub fn describe_all(&self, for_file: bool, tls: bool) -> String {
        let mut out = String::new();
        for id in self.node_ids() {
            if for_file && self.node(id).in_handshake() {
                continue;
            }
            out.push_str(&self.describe(id, for_file, tls));
            out.push('\n');
        }
        out
    }

    /// Redis's clusterReset: forget every other node, drop the slots; a hard reset
    /// also takes a new name and zeroes the epochs.
    pub fn reset(&mut self, hard: bool) {
        let me = self.myself;
        self.migrating.clear();
        self.importing.clear();
        for s in 0..SLOTS {
            self.del_slot(s);
        }
        for id in self.node_ids() {
            if id != me {
                self.del_node(id);
            }
        }
        {
            let m = self.me_mut();
            m.flags = node::MYSELF | node::MASTER;
            m.replica_of = None;
            m.replicas.clear();
        }
        self.failover = failover::State::default();
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.me_mut().config_epoch = 0;
            let name = node::random_name();
            self.rename_node(me, name);
            self.me_mut().shard_id = node::random_name();
            crate::log::notice(&format!(
                "Node hard reset, now I'm {}",
                node::name_str(&name)
            ));
        }
        self.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG;
    }

    pub fn count_non_failing_replicas(&self, id: NodeId) -> usize {
        self.node(id)
            .replicas
            .iter()
            .filter(|&&r| !self.node(r).failed())
            .count()
    }

    /// Blacklists a forgotten node for `BLACKLIST_TTL` seconds.
    pub fn blacklist_add(&mut self, name: NodeName) {
        self.blacklist.insert(name, now_ms() / 1000 + BLACKLIST_TTL);
    }

    pub fn blacklist_contains(&mut self, name: &NodeName) -> bool {
        let now = now_ms() / 1000;
        self.blacklist.retain(|_, exp| *exp >= now);
        self.blacklist.contains_key(name)
    }
}

/// Creates the cluster state at startup: loads nodes.conf (or creates this node and
/// writes the file) and binds the bus port. Errors stop the server, as Redis's.
pub fn init(ex: &mut Executor, registry: mio::Registry) -> Result<(), String> {
    let settings = Settings::from_config(&ex.config, ex.tcp_port);
    if ex.config.databases == 0 {
        return Err("no databases".into());
    }
    // Only database 0 exists for cluster clients; its keys are indexed by slot.
    ex.ks.dbs[0].table.enable_slot_index();
    let conf_path = PathBuf::from(ex.config.stored_str("cluster-config-file"));
    let bind_port = bus_port(
        ex.config.stored_i64("cluster-port") as u16,
        default_client_port(&ex.config, ex.tcp_port),
    );
    let mut bus = bus::Bus::listen(&ex.config.bind, bind_port, registry)?;
    bus.tls = bus_tls(ex);
    let mut cl = Cluster {
        nodes: Vec::new(),
        by_name: HashMap::new(),
        myself: 0,
        current_epoch: 0,
        last_vote_epoch: 0,
        state_ok: false,
        size: 0,
        slots: vec![None; SLOTS],
        migrating: HashMap::new(),
        importing: HashMap::new(),
        owner_not_claiming: Box::new([0u8; BITMAP_BYTES]),
        released: Box::new([0u8; BITMAP_BYTES]),
        any_released: false,
        blacklist: HashMap::new(),
        stats_sent: [0; wire::TYPE_COUNT],
        stats_received: [0; wire::TYPE_COUNT],
        stats_pfail_nodes: 0,
        todo: 0,
        bus,
        conf_path,
        settings,
        failover: failover::State::default(),
        packet_filter: debug::PacketFilter::default(),
        links_buffer_limit_exceeded: 0,
        first_call_time: 0,
        among_minority_time: 0,
        pings_sent: 0,
        iteration: 0,
        last_cron_ms: 0,
    };
    match nodes_conf::load(&mut cl)? {
        true => {}
        false => {
            let mut me = Node::new(node::random_name(), node::MYSELF | node::MASTER, now_ms());
            me.tcp_port = cl.settings.port;
            me.tls_port = cl.settings.tls_port;
            me.cport = cl.settings.cport;
            crate::log::notice(&format!(
                "No cluster configuration found, I'm {}",
                me.name_str()
            ));
            cl.myself = cl.add_node(me);
            nodes_conf::save(&mut cl, true).map_err(|e| {
                format!(
                    "Configuration file '{}' could not be written: {e}",
                    cl.conf_path.display()
                )
            })?;
        }
    }
    // The announced ports and names always follow the configuration.
    refresh_myself(&mut cl);
    cl.update_state();
    ex.cluster = Some(Box::new(cl));
    Ok(())
}

/// Re-reads the cluster directives and applies them to this node's own entry.
pub fn apply_settings(cl: &mut Cluster, ex: &Executor) {
    cl.settings = Settings::from_config(&ex.config, ex.tcp_port);
    cl.bus.tls = bus_tls(ex);
    refresh_myself(cl);
}

/// The TLS context the bus uses with `tls-cluster yes` (CONFIG SET may replace it).
fn bus_tls(ex: &Executor) -> Option<std::sync::Arc<crate::tls::TlsContext>> {
    if ex.config.stored_bool("tls-cluster") {
        ex.tls.clone()
    } else {
        None
    }
}

/// Applies the configuration to this node's own entry (ports, announced names).
fn refresh_myself(cl: &mut Cluster) {
    let s = cl.settings.clone();
    let m = cl.me_mut();
    m.tcp_port = s.port;
    m.tls_port = s.tls_port;
    m.cport = s.cport;
    if !s.announce_ip.is_empty() {
        m.ip = s.announce_ip.clone();
    }
    m.hostname = s.announce_hostname.clone();
    m.human_nodename = s.announce_human_nodename.clone();
    let nofailover = s.replica_no_failover;
    if nofailover {
        m.flags |= node::NOFAILOVER;
    } else {
        m.flags &= !node::NOFAILOVER;
    }
}

/// A readiness event for one of the cluster's tokens.
pub fn on_event(ex: &mut Executor, token: usize, readable: bool, writable: bool) {
    let Some(mut cl) = ex.cluster.take() else {
        return;
    };
    if token == TOKEN_BASE {
        cl.bus.accept();
    } else {
        gossip::link_event(&mut cl, ex, token - TOKEN_BASE - 1, readable, writable);
    }
    ex.cluster = Some(cl);
}

/// Shard channels of slots that lost their owner: their subscribers are unsubscribed
/// (each gets `sunsubscribe`), since the slot's messages are now published elsewhere.
fn release_shard_channels(cl: &mut Cluster, ex: &mut Executor) {
    if !cl.any_released {
        return;
    }
    cl.any_released = false;
    let released = std::mem::replace(&mut cl.released, Box::new([0u8; BITMAP_BYTES]));
    if ex.pubsub.shard_channel_count() == 0 {
        return;
    }
    let channels: Vec<Vec<u8>> = ex
        .pubsub
        .active(true, None)
        .into_iter()
        .filter(|c| slot::bit_test(&released[..], crate::util::hashslot::key_slot(c) as usize))
        .collect();
    ex.drop_shard_channels(&channels);
}

/// Once per loop turn: the cron every 100 ms, then Redis's clusterBeforeSleep
/// (failover, state update, nodes.conf save) and the links' pending output.
pub fn before_sleep(ex: &mut Executor) {
    let Some(mut cl) = ex.cluster.take() else {
        return;
    };
    let now = now_ms();
    if now - cl.last_cron_ms >= 100 {
        cl.last_cron_ms = now;
        apply_settings(&mut cl, ex);
        gossip::cron(&mut cl, ex);
        cl.iteration += 1;
        routing::redirect_blocked_clients(&cl, ex);
    }
    release_shard_channels(&mut cl, ex);
    let todo = std::mem::take(&mut cl.todo);
    if todo & (TODO_HANDLE_FAILOVER | TODO_HANDLE_MANUALFAILOVER) != 0 && cl.me().is_replica() {
        failover::handle_manual(&mut cl, ex);
        failover::handle_replica_failover(&mut cl, ex);
    }
    if todo & TODO_UPDATE_STATE != 0 {
        cl.update_state();
    }
    cl.todo |= todo & (TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG);
    if cl.todo & TODO_SAVE_CONFIG != 0 {
        let fsync = cl.todo & TODO_FSYNC_CONFIG != 0;
        if let Err(e) = nodes_conf::save(&mut cl, fsync) {
            crate::log::warning(&format!("Could not save the cluster config file: {e}"));
            crate::log::warning("Fatal: can't update cluster config file.");
            std::process::exit(1);
        }
    }
    cl.bus.flush_all();
    ex.cluster = Some(cl);
}

/// INFO's mem_cluster_links (0 without cluster mode).
pub fn links_memory(ex: &Executor) -> usize {
    ex.cluster.as_ref().map_or(0, |c| c.bus.links_memory())
}

/// INFO's cluster_connections: the bus links.
pub fn connections(ex: &Executor) -> usize {
    ex.cluster.as_ref().map_or(0, |c| c.bus.link_count())
}

/// Whether `token` belongs to the cluster bus.
#[inline]
pub fn owns_token(token: usize) -> bool {
    (TOKEN_BASE..TOKEN_END).contains(&token)
}
