//! What bus messages mean: the handshake, PING/PONG/MEET with their gossip section
//! and extensions, failure detection (PFAIL, reports, FAIL by a majority of masters),
//! slot ownership by config epoch (and UPDATE for stale owners), PUBLISH, and the
//! cron that keeps links up and pings nodes. Follows Redis 7.4's cluster_legacy.c.

use super::node::{self, Node, NodeId, NodeName};
use super::slot::{self, BITMAP_BYTES, SLOTS};
use super::wire::{self, Header};
use super::{now_ms, Cluster};
use super::{TODO_FSYNC_CONFIG, TODO_HANDLE_FAILOVER, TODO_SAVE_CONFIG, TODO_UPDATE_STATE};
use crate::exec::Executor;

const FAIL_REPORT_VALIDITY_MULT: i64 = 2;
const FAIL_UNDO_TIME_MULT: i64 = 2;

/// The header every message this node sends starts with (Redis's
/// clusterBuildMessageHdr).
pub fn header(cl: &Cluster, ex: &Executor, typ: u16) -> Header {
    let (port, pport) = wire_ports(
        cl.settings.tls_cluster,
        cl.settings.port,
        cl.settings.tls_port,
    );
    let me = cl.me();
    let master = match (me.is_replica(), me.replica_of) {
        (true, Some(m)) => cl.node(m),
        _ => me,
    };
    let mut mflags = [0u8; 3];
    if me.is_master() && cl.failover.mf_end != 0 {
        mflags[0] |= wire::MFLAG_PAUSED;
    }
    Header {
        totlen: 0,
        ver: wire::PROTO_VER,
        port,
        typ,
        count: 0,
        current_epoch: cl.current_epoch,
        config_epoch: master.config_epoch,
        offset: super::failover::my_offset(ex),
        sender: me.name,
        myslots: master.slots.clone(),
        slaveof: me.replica_of.map_or([0u8; 40], |m| cl.node(m).name),
        myip: cl.settings.announce_ip.clone(),
        extensions: 0,
        pport,
        cport: cl.settings.cport,
        flags: me.flags,
        state: if cl.state_ok { 0 } else { 1 },
        mflags,
    }
}

fn send(cl: &mut Cluster, link: usize, msg: &[u8]) {
    let typ = u16::from_be_bytes([msg[12], msg[13]]) as usize;
    if typ < wire::TYPE_COUNT {
        cl.stats_sent[typ] += 1;
    }
    cl.bus.send(link, msg);
}

fn broadcast(cl: &mut Cluster, msg: &[u8]) {
    for id in cl.node_ids() {
        let n = cl.node(id);
        if n.flags & (node::MYSELF | node::HANDSHAKE) != 0 {
            continue;
        }
        if let Some(l) = n.link {
            send(cl, l, msg);
        }
    }
}

/// A node's (plain, TLS) client ports as the wire carries them: `port` is the port
/// clients use by default — the TLS one with `tls-cluster yes` — and `pport` the other,
/// as Redis's header and gossip entries. The same swap decodes them.
pub fn wire_ports(tls_cluster: bool, tcp: u16, tls: u16) -> (u16, u16) {
    if tls_cluster {
        (tls, tcp)
    } else {
        (tcp, tls)
    }
}

fn gossip_entry(n: &Node, tls_cluster: bool) -> wire::Gossip {
    let (port, pport) = wire_ports(tls_cluster, n.tcp_port, n.tls_port);
    wire::Gossip {
        name: n.name,
        ping_sent: (n.ping_sent / 1000) as u32,
        pong_received: (n.pong_received / 1000) as u32,
        ip: n.ip.clone(),
        port,
        cport: n.cport,
        flags: n.flags,
        pport,
    }
}

/// Sends a PING, PONG or MEET with a gossip section (a tenth of the nodes, at least
/// three, plus every node in PFAIL) and this node's extensions.
pub fn send_ping(cl: &mut Cluster, ex: &Executor, link: usize, typ: u16) {
    cl.pings_sent += 1;
    let pings = cl.pings_sent;
    let link_node = cl.bus.link(link).and_then(|l| l.node);
    let inbound = cl.bus.link(link).is_none_or(|l| l.inbound);
    if !inbound && typ == wire::PING {
        if let Some(n) = link_node {
            cl.node_mut(n).ping_sent = now_ms();
        }
    }
    let total = cl.node_count();
    let mut freshnodes = total as i64 - 2;
    let wanted = ((total / 10).max(3) as i64).min(freshnodes.max(0));
    let ids = cl.node_ids();
    let mut entries: Vec<wire::Gossip> = Vec::new();
    let tls_cluster = cl.settings.tls_cluster;
    let mut iterations = wanted * 3;
    while freshnodes > 0 && (entries.len() as i64) < wanted && iterations > 0 {
        iterations -= 1;
        let id = ids[fastrand::usize(..ids.len())];
        if id == cl.myself || Some(id) == link_node {
            continue;
        }
        let n = cl.node(id);
        if n.flags & node::PFAIL != 0 {
            continue;
        }
        if n.flags & (node::HANDSHAKE | node::NOADDR) != 0 || (n.link.is_none() && n.numslots == 0)
        {
            freshnodes -= 1;
            continue;
        }
        if n.last_in_ping_gossip == pings {
            continue;
        }
        entries.push(gossip_entry(n, tls_cluster));
        cl.node_mut(id).last_in_ping_gossip = pings;
        freshnodes -= 1;
    }
    for id in ids {
        let n = cl.node(id);
        if n.flags & (node::HANDSHAKE | node::NOADDR) == 0 && n.flags & node::PFAIL != 0 {
            entries.push(gossip_entry(n, tls_cluster));
        }
    }
    let mut h = header(cl, ex, typ);
    h.count = entries.len() as u16;
    let mut body = vec![0u8; entries.len() * wire::GOSSIP_LEN];
    for (i, g) in entries.iter().enumerate() {
        g.write(&mut body[i * wire::GOSSIP_LEN..(i + 1) * wire::GOSSIP_LEN]);
    }
    let mut exts = 0u16;
    let me = cl.me();
    if !me.hostname.is_empty() {
        wire::push_ext(&mut body, wire::EXT_HOSTNAME, &nul_terminated(&me.hostname));
        exts += 1;
    }
    if !me.human_nodename.is_empty() {
        wire::push_ext(
            &mut body,
            wire::EXT_HUMAN_NODENAME,
            &nul_terminated(&me.human_nodename),
        );
        exts += 1;
    }
    let now_s = now_ms() / 1000;
    let forgotten: Vec<(NodeName, i64)> = cl
        .blacklist
        .iter()
        .filter(|(_, &exp)| exp >= now_s)
        .map(|(n, &e)| (*n, e))
        .collect();
    for (name, exp) in forgotten {
        let mut p = name.to_vec();
        p.extend_from_slice(&((exp - now_s) as u64).to_be_bytes());
        wire::push_ext(&mut body, wire::EXT_FORGOTTEN_NODE, &p);
        exts += 1;
    }
    wire::push_ext(&mut body, wire::EXT_SHARDID, &cl.me().shard_id);
    exts += 1;
    h.extensions = exts;
    h.mflags[0] |= wire::MFLAG_EXT_DATA;
    let msg = wire::build(&h, &body);
    send(cl, link, &msg);
}

fn nul_terminated(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// PONG to every connected node (after a failover or an epoch change).
pub fn broadcast_pong(cl: &mut Cluster, ex: &Executor, local_replicas_only: bool) {
    let me = cl.myself;
    for id in cl.node_ids() {
        let n = cl.node(id);
        let Some(l) = n.link else { continue };
        if id == me || n.in_handshake() {
            continue;
        }
        if local_replicas_only {
            let my_master = cl.master_of(me);
            if !(n.is_replica() && n.replica_of.is_some() && n.replica_of == my_master) {
                continue;
            }
        }
        send_ping(cl, ex, l, wire::PONG);
    }
}

pub fn send_fail(cl: &mut Cluster, ex: &Executor, name: &NodeName) {
    let h = header(cl, ex, wire::FAIL);
    let msg = wire::build(&h, &wire::fail_body(name));
    broadcast(cl, &msg);
}

fn send_update(cl: &mut Cluster, ex: &Executor, link: Option<usize>, about: NodeId) {
    let Some(link) = link else { return };
    let h = header(cl, ex, wire::UPDATE);
    let n = cl.node(about);
    let body = wire::update_body(n.config_epoch, &n.name, &n.slots);
    let msg = wire::build(&h, &body);
    send(cl, link, &msg);
}

/// PUBLISH / SPUBLISH on this node reach the others (SPUBLISH only this shard).
pub fn propagate_publish(ex: &mut Executor, channel: &[u8], message: &[u8], sharded: bool) {
    let Some(mut cl) = ex.cluster.take() else {
        return;
    };
    let typ = if sharded {
        wire::PUBLISHSHARD
    } else {
        wire::PUBLISH
    };
    let h = header(&cl, ex, typ);
    let msg = wire::build(&h, &wire::publish_body(channel, message));
    if sharded {
        let me = cl.myself;
        let shard = cl.master_of(me);
        for id in cl.node_ids() {
            if id == me || cl.master_of(id) != shard || shard.is_none() {
                continue;
            }
            if let Some(l) = cl.node(id).link {
                send(&mut cl, l, &msg);
            }
        }
    } else {
        broadcast(&mut cl, &msg);
    }
    ex.cluster = Some(cl);
}

/// A readiness event on a link.
pub fn link_event(
    cl: &mut Cluster,
    ex: &mut Executor,
    link: usize,
    readable: bool,
    writable: bool,
) {
    let Some(l) = cl.bus.link(link) else { return };
    if l.connecting {
        match cl.bus.check_connected(link) {
            Some(true) => connected(cl, ex, link),
            Some(false) => return,
            None => {
                cl.bus.close(link);
                detach_closed(cl);
                return;
            }
        }
    }
    if writable {
        cl.bus.flush(link);
    }
    if readable {
        match cl.bus.read_messages(link) {
            Some(msgs) => {
                for m in msgs {
                    if cl.bus.link(link).is_none() {
                        break;
                    }
                    if !process_packet(cl, ex, link, &m) {
                        break;
                    }
                }
            }
            None => cl.bus.close(link),
        }
    }
    cl.bus.flush(link);
    detach_closed(cl);
}

/// Forgets links the bus closed: an inbound link's node loses its inbound link; an
/// outbound link's node gets reconnected by the cron.
pub fn detach_closed(cl: &mut Cluster) {
    for (id, node, _inbound) in std::mem::take(&mut cl.bus.closed) {
        if let Some(n) = node
            .and_then(|n| cl.nodes.get_mut(n))
            .and_then(|n| n.as_mut())
        {
            if n.link == Some(id) {
                n.link = None;
            }
            if n.inbound_link == Some(id) {
                n.inbound_link = None;
            }
        }
    }
}

pub(crate) fn free_link(cl: &mut Cluster, link: usize) {
    cl.bus.close(link);
    detach_closed(cl);
}

/// An outbound link connected: PING (or MEET) right away.
fn connected(cl: &mut Cluster, ex: &Executor, link: usize) {
    let Some(node) = cl.bus.link(link).and_then(|l| l.node) else {
        return;
    };
    if cl.nodes.get(node).is_none_or(|n| n.is_none()) {
        return;
    }
    let old_ping_sent = cl.node(node).ping_sent;
    let typ = if cl.node(node).flags & node::MEET != 0 {
        wire::MEET
    } else {
        wire::PING
    };
    send_ping(cl, ex, link, typ);
    if old_ping_sent != 0 {
        cl.node_mut(node).ping_sent = old_ping_sent;
    }
    cl.node_mut(node).flags &= !node::MEET;
}

/// Redis's clusterProcessPacket: false when the link was freed.
pub fn process_packet(cl: &mut Cluster, ex: &mut Executor, link: usize, msg: &[u8]) -> bool {
    if msg.len() < wire::HEADER_LEN {
        return true;
    }
    let mut h = Header::parse(msg);
    // From here on `port` is the plain port and `pport` the TLS one.
    (h.port, h.pport) = wire_ports(cl.settings.tls_cluster, h.port, h.pport);
    if (h.typ as usize) < wire::TYPE_COUNT {
        cl.stats_received[h.typ as usize] += 1;
    }
    if h.ver == wire::PROTO_VER && cl.packet_filter.drops(h.typ) {
        crate::log::warning("Dropping packet that matches debug drop filter");
        if cl.packet_filter.close_link {
            free_link(cl, link);
            return false;
        }
        return true;
    }
    if let Err(e) = wire::expected_len(msg) {
        crate::log::warning(&format!("Received {e}"));
        return true;
    }
    let now = now_ms();
    let (link_node, inbound) = {
        let l = cl.bus.link(link).expect("live link");
        (l.node, l.inbound)
    };
    // The sender: the link's node unless still in handshake, else by name.
    let sender = match link_node {
        Some(n) if !cl.node(n).in_handshake() => Some(n),
        _ => {
            let s = cl.lookup(&h.sender);
            if let (Some(s), None) = (s, link_node) {
                if let Some(old) = cl.node(s).inbound_link {
                    if old != link {
                        free_link(cl, old);
                    }
                }
                cl.node_mut(s).inbound_link = Some(link);
                if let Some(l) = cl.bus.link_mut(link) {
                    l.node = Some(s);
                }
            }
            s
        }
    };
    if let Some(s) = sender {
        cl.node_mut(s).data_received = now;
    }
    if let Some(s) = sender.filter(|&s| !cl.node(s).in_handshake()) {
        if h.current_epoch > cl.current_epoch {
            cl.current_epoch = h.current_epoch;
        }
        if h.config_epoch > cl.node(s).config_epoch {
            cl.node_mut(s).config_epoch = h.config_epoch;
            cl.todo |= TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG;
        }
        cl.node_mut(s).repl_offset = h.offset;
        cl.node_mut(s).repl_offset_time = now;
        super::failover::master_offset_seen(cl, s, &h);
    }

    let is_ping_like = matches!(h.typ, wire::PING | wire::PONG | wire::MEET);
    if h.typ == wire::PING || h.typ == wire::MEET {
        if (h.typ == wire::MEET || cl.me().ip.is_empty()) && cl.settings.announce_ip.is_empty() {
            if let Some(ip) = cl.bus.local_ip(link) {
                if ip != cl.me().ip {
                    crate::log::notice(&format!("IP address for this node updated to {ip}"));
                    cl.me_mut().ip = ip;
                    cl.todo |= TODO_SAVE_CONFIG;
                }
            }
        }
        if sender.is_none() && h.typ == wire::MEET {
            let mut n = Node::new(node::random_name(), node::HANDSHAKE, now);
            n.ip = if h.myip.is_empty() {
                cl.bus.peer_ip(link).unwrap_or_default()
            } else {
                h.myip.clone()
            };
            n.tcp_port = h.port;
            n.tls_port = h.pport;
            n.cport = h.cport;
            cl.add_node(n);
            cl.todo |= TODO_SAVE_CONFIG;
            process_gossip_section(cl, ex, link, msg, &h, None);
        }
        send_ping(cl, ex, link, wire::PONG);
    }

    if is_ping_like {
        if !inbound {
            let ln = link_node.expect("outbound link has a node");
            if cl.node(ln).in_handshake() {
                if let Some(s) = sender {
                    crate::log::verbose(&format!(
                        "Handshake: we already know node {}, updating the address if needed.",
                        cl.node(s).name_str()
                    ));
                    if update_address_if_needed(cl, ex, s, link, &h) {
                        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
                    }
                    cl.del_node(ln);
                    return false;
                }
                cl.rename_node(ln, h.sender);
                let n = cl.node_mut(ln);
                n.flags &= !node::HANDSHAKE;
                n.flags |= h.flags & (node::MASTER | node::SLAVE);
                cl.todo |= TODO_SAVE_CONFIG;
            } else if cl.node(ln).name != h.sender {
                let n = cl.node_mut(ln);
                n.flags |= node::NOADDR;
                n.ip.clear();
                n.tcp_port = 0;
                n.tls_port = 0;
                n.cport = 0;
                free_link(cl, link);
                cl.todo |= TODO_SAVE_CONFIG;
                return false;
            }
        }
        // The sender may have been renamed into existence just above.
        let sender = sender.or_else(|| cl.lookup(&h.sender));
        if let Some(s) = sender {
            let n = cl.node_mut(s);
            n.flags = (n.flags & !node::NOFAILOVER) | (h.flags & node::NOFAILOVER);
        }
        if let Some(s) = sender {
            if h.typ == wire::PING
                && !cl.node(s).in_handshake()
                && update_address_if_needed(cl, ex, s, link, &h)
            {
                cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
            }
        }
        if !inbound && h.typ == wire::PONG {
            if let Some(ln) = cl.bus.link(link).and_then(|l| l.node) {
                let n = cl.node_mut(ln);
                n.pong_received = now;
                n.ping_sent = 0;
                if n.timed_out() {
                    n.flags &= !node::PFAIL;
                    cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
                } else if n.failed() {
                    clear_failure_if_needed(cl, ln);
                }
            }
        }
        let Some(s) = sender else {
            return true;
        };
        if cl.node(s).in_handshake() {
            return true;
        }
        role_switch(cl, ex, s, &h);

        let sender_master = cl.master_of(s);
        let dirty_slots = sender_master.is_some_and(|m| cl.node(m).slots[..] != h.myslots[..]);
        if cl.node(s).is_master() && dirty_slots {
            update_slots_config_with(cl, ex, s, h.config_epoch, &h.myslots);
        }
        if dirty_slots {
            for j in 0..SLOTS {
                if !slot::bit_test(&h.myslots[..], j) {
                    continue;
                }
                if cl.slots[j] == Some(s) || cl.slot_unclaimed(j) {
                    continue;
                }
                let owner = cl.slots[j].expect("claimed slot");
                if cl.node(owner).config_epoch > h.config_epoch {
                    crate::log::verbose(&format!(
                        "Node {} has old slots configuration, sending an UPDATE message about {}",
                        cl.node(s).name_str(),
                        cl.node(owner).name_str()
                    ));
                    let l = cl.node(s).link;
                    send_update(cl, ex, l, owner);
                    break;
                }
            }
        }
        let me = cl.myself;
        if cl.node(me).is_master()
            && cl.node(s).is_master()
            && h.config_epoch == cl.node(me).config_epoch
        {
            cl.handle_epoch_collision(s);
        }
        process_gossip_section(cl, ex, link, msg, &h, Some(s));
        process_extensions(cl, s, msg, &h);
    } else if h.typ == wire::FAIL {
        let about: NodeName = msg[wire::HEADER_LEN..wire::HEADER_LEN + 40]
            .try_into()
            .expect("40 bytes");
        match sender {
            Some(_) => {
                if let Some(f) = cl.lookup(&about) {
                    if cl.node(f).flags & (node::FAIL | node::MYSELF) == 0 {
                        crate::log::notice(&format!(
                            "FAIL message received from {} about {}",
                            node::name_str(&h.sender),
                            node::name_str(&about)
                        ));
                        let n = cl.node_mut(f);
                        n.flags |= node::FAIL;
                        n.fail_time = now;
                        n.flags &= !node::PFAIL;
                        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
                    }
                }
            }
            None => crate::log::notice(&format!(
                "Ignoring FAIL message from unknown node {} about {}",
                node::name_str(&h.sender),
                node::name_str(&about)
            )),
        }
    } else if h.typ == wire::PUBLISH || h.typ == wire::PUBLISHSHARD {
        if sender.is_none() {
            return true;
        }
        let (channel, message) = wire::parse_publish(msg);
        if h.typ == wire::PUBLISH {
            ex.publish(channel, message);
        } else {
            ex.spublish(channel, message);
        }
    } else if h.typ == wire::AUTH_REQUEST {
        let Some(s) = sender else { return true };
        super::failover::send_auth_if_needed(cl, ex, s, &h);
    } else if h.typ == wire::AUTH_ACK {
        let Some(s) = sender else { return true };
        let n = cl.node(s);
        if n.is_master() && n.numslots > 0 && h.current_epoch >= cl.failover.auth_epoch {
            cl.failover.auth_count += 1;
            cl.todo |= TODO_HANDLE_FAILOVER;
        }
    } else if h.typ == wire::MFSTART {
        let Some(s) = sender else { return true };
        if cl.node(s).replica_of != Some(cl.myself) {
            return true;
        }
        super::failover::mfstart_received(cl, ex, s);
        send_ping(cl, ex, link, wire::PING);
    } else if h.typ == wire::UPDATE {
        if sender.is_none() {
            return true;
        }
        let (epoch, name, slots) = wire::parse_update(msg);
        let Some(n) = cl.lookup(&name) else {
            return true;
        };
        if cl.node(n).config_epoch >= epoch {
            return true;
        }
        if cl.node(n).is_replica() {
            cl.set_node_as_master(n);
        }
        cl.node_mut(n).config_epoch = epoch;
        cl.todo |= TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG;
        update_slots_config_with(cl, ex, n, epoch, &slots);
    } else if h.typ != wire::MODULE {
        crate::log::warning(&format!("Received unknown packet type: {}", h.typ));
    }
    true
}

/// The sender's role as its header states it (master, or replica of a named
/// master), applied to our view.
fn role_switch(cl: &mut Cluster, ex: &mut Executor, s: NodeId, h: &Header) {
    if h.slaveof == [0u8; 40] {
        cl.set_node_as_master(s);
        return;
    }
    let master = cl.lookup(&h.slaveof);
    if cl.node(s).is_master() {
        match master {
            Some(m) if cl.node(m).shard_id == cl.node(s).shard_id => {
                if cl.node(s).config_epoch > h.config_epoch {
                    crate::log::notice(&format!(
                        "Ignore stale message from {} in shard {}; gossip config epoch: {}, current config epoch: {}",
                        cl.node(s).name_str(),
                        node::name_str(&cl.node(s).shard_id),
                        h.config_epoch,
                        cl.node(s).config_epoch
                    ));
                } else {
                    let moved = cl.move_node_slots(s, m);
                    cl.set_node_as_master(m);
                    cl.node_mut(m).config_epoch = h.config_epoch;
                    crate::log::notice(&format!(
                        "A failover occurred in shard {}; node {} lost {moved} slot(s) to node {} with a config epoch of {}",
                        node::name_str(&cl.node(s).shard_id),
                        cl.node(s).name_str(),
                        cl.node(m).name_str(),
                        h.config_epoch
                    ));
                }
            }
            _ => {
                let removed = cl.del_node_slots(s);
                crate::log::notice(&format!(
                    "Node {} is no longer master of shard {}; removed all {removed} slot(s) it used to own",
                    cl.node(s).name_str(),
                    node::name_str(&cl.node(s).shard_id)
                ));
            }
        }
        let n = cl.node_mut(s);
        n.flags &= !(node::MASTER | node::MIGRATE_TO);
        n.flags |= node::SLAVE;
        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE;
    }
    if let Some(m) = master {
        if cl.node(s).replica_of != Some(m) {
            if let Some(old) = cl.node(s).replica_of {
                cl.remove_replica(old, s);
            }
            cl.add_replica(m, s);
            cl.node_mut(s).replica_of = Some(m);
            let shard = cl.node(m).shard_id;
            update_shard_id(cl, ex, s, shard);
            cl.todo |= TODO_SAVE_CONFIG;
        }
    }
}

/// Redis's updateShardId: a node's shard follows its master's, and our own shard
/// follows our master's.
fn update_shard_id(cl: &mut Cluster, _ex: &mut Executor, id: NodeId, shard: NodeName) {
    if cl.node(id).shard_id == shard {
        return;
    }
    cl.node_mut(id).shard_id = shard;
    cl.todo |= TODO_SAVE_CONFIG;
    let me = cl.myself;
    if id != me && cl.node(me).replica_of == Some(id) {
        cl.node_mut(me).shard_id = shard;
    }
}

/// Redis's nodeUpdateAddressIfNeeded.
fn update_address_if_needed(
    cl: &mut Cluster,
    ex: &mut Executor,
    id: NodeId,
    link: usize,
    h: &Header,
) -> bool {
    if cl.node(id).link == Some(link) {
        return false;
    }
    let ip = if h.myip.is_empty() {
        match cl.bus.peer_ip(link) {
            Some(ip) => ip,
            None => return false,
        }
    } else {
        h.myip.clone()
    };
    {
        let n = cl.node(id);
        if n.tcp_port == h.port && n.cport == h.cport && n.tls_port == h.pport && n.ip == ip {
            return false;
        }
    }
    let old = cl.node(id).link;
    {
        let n = cl.node_mut(id);
        n.ip = ip;
        n.tcp_port = h.port;
        n.tls_port = h.pport;
        n.cport = h.cport;
        n.flags &= !node::NOADDR;
    }
    if let Some(l) = old {
        free_link(cl, l);
    }
    crate::log::notice(&format!(
        "Address updated for node {}, now {}:{}",
        cl.node(id).name_str(),
        cl.node(id).ip,
        cl.node(id).tcp_port
    ));
    let me = cl.myself;
    if cl.node(me).is_replica() && cl.node(me).replica_of == Some(id) {
        let (ip, port) = (cl.node(id).ip.clone(), replication_port(cl.node(id), ex));
        replicate_from(ex, ip, port);
    }
    true
}

/// The port a replica connects to its master at: the TLS one with `tls-replication
/// yes` (Redis's getNodeDefaultReplicationPort).
fn replication_port(n: &Node, ex: &Executor) -> u16 {
    n.client_port(ex.config.stored_bool("tls-replication"))
}

/// Follows a master through the replication code (no-op if already following it).
pub fn replicate_from(ex: &mut Executor, ip: String, port: u16) {
    if let Some(l) = &ex.repl.link {
        if l.host == ip && l.port == port {
            return;
        }
    }
    crate::replication::replica::start(ex, ip, port);
}

fn process_gossip_section(
    cl: &mut Cluster,
    _ex: &mut Executor,
    link: usize,
    msg: &[u8],
    h: &Header,
    sender: Option<NodeId>,
) {
    let tls_cluster = cl.settings.tls_cluster;
    let entries: Vec<wire::Gossip> = wire::gossip_entries(msg, h.count)
        .map(|mut g| {
            (g.port, g.pport) = wire_ports(tls_cluster, g.port, g.pport);
            g
        })
        .collect();
    let invalid = entries.iter().filter(|g| g.name.contains(&0)).count();
    if invalid > 0 {
        crate::log::warning(&format!("Node gossiped {invalid} nodes with invalid IDs."));
        return;
    }
    let sender = sender.or_else(|| cl.bus.link(link).and_then(|l| l.node));
    let now = now_ms();
    for g in entries {
        match cl.lookup(&g.name) {
            Some(n) if n == cl.myself => {}
            Some(n) => {
                if let Some(s) = sender.filter(|&s| cl.node(s).is_master()) {
                    if g.flags & (node::FAIL | node::PFAIL) != 0 {
                        if add_failure_report(cl, n, s) {
                            crate::log::verbose(&format!(
                                "Node {} reported node {} as not reachable.",
                                cl.node(s).log_name(),
                                cl.node(n).log_name()
                            ));
                        }
                        mark_failing_if_needed(cl, _ex, n);
                    } else if del_failure_report(cl, n, s) {
                        crate::log::verbose(&format!(
                            "Node {} reported node {} is back online.",
                            cl.node(s).log_name(),
                            cl.node(n).log_name()
                        ));
                    }
                }
                if g.flags & (node::FAIL | node::PFAIL) == 0
                    && cl.node(n).ping_sent == 0
                    && failure_reports_count(cl, n) == 0
                {
                    let pongtime = g.pong_received as i64 * 1000;
                    if pongtime <= now + 500 && pongtime > cl.node(n).pong_received {
                        cl.node_mut(n).pong_received = pongtime;
                    }
                }
                let nn = cl.node(n);
                if nn.flags & (node::FAIL | node::PFAIL) != 0
                    && g.flags & node::NOADDR == 0
                    && g.flags & (node::FAIL | node::PFAIL) == 0
                    && (!nn.ip.eq_ignore_ascii_case(&g.ip)
                        || nn.tcp_port != g.port
                        || nn.tls_port != g.pport
                        || nn.cport != g.cport)
                {
                    if let Some(l) = nn.link {
                        free_link(cl, l);
                    }
                    let nn = cl.node_mut(n);
                    nn.ip = g.ip.clone();
                    nn.tcp_port = g.port;
                    nn.tls_port = g.pport;
                    nn.cport = g.cport;
                    nn.flags &= !node::NOADDR;
                }
            }
            None => {
                if sender.is_some()
                    && g.flags & node::NOADDR == 0
                    && !cl.blacklist_contains(&g.name)
                {
                    let mut n = Node::new(g.name, g.flags, now);
                    n.ip = g.ip.clone();
                    n.tcp_port = g.port;
                    n.tls_port = g.pport;
                    n.cport = g.cport;
                    cl.add_node(n);
                }
            }
        }
    }
}

fn process_extensions(cl: &mut Cluster, s: NodeId, msg: &[u8], h: &Header) {
    let mut hostname = String::new();
    let mut human = String::new();
    let mut shard = None;
    for ext in wire::extensions(msg, h) {
        match ext.typ {
            wire::EXT_HOSTNAME => hostname = wire::c_str(ext.data),
            wire::EXT_HUMAN_NODENAME => human = wire::c_str(ext.data),
            wire::EXT_FORGOTTEN_NODE if ext.data.len() >= 48 => {
                let name: NodeName = ext.data[..40].try_into().expect("40 bytes");
                let ttl = u64::from_be_bytes(ext.data[40..48].try_into().expect("8 bytes"));
                if let Some(n) = cl.lookup(&name) {
                    let me = cl.myself;
                    if n != me && !(cl.node(me).is_replica() && cl.node(me).replica_of == Some(n)) {
                        let ttl = ttl.min(i64::MAX as u64 / 2) as i64;
                        cl.blacklist.insert(name, now_ms() / 1000 + ttl);
                        cl.del_node(n);
                        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
                    }
                }
            }
            wire::EXT_SHARDID if ext.data.len() >= 40 => {
                shard = Some(<NodeName>::try_from(&ext.data[..40]).expect("40 bytes"));
            }
            t => crate::log::warning(&format!("Received unknown extension type {t}")),
        }
    }
    if cl.nodes.get(s).is_none_or(|n| n.is_none()) {
        return;
    }
    let n = cl.node_mut(s);
    if n.hostname != hostname {
        n.hostname = hostname;
        cl.todo |= TODO_SAVE_CONFIG;
    }
    let n = cl.node_mut(s);
    if n.human_nodename != human {
        n.human_nodename = human;
        cl.todo |= TODO_SAVE_CONFIG;
    }
    let shard = shard.unwrap_or_else(|| {
        let m = cl.master_of(s).unwrap_or(s);
        cl.node(m).shard_id
    });
    if cl.node(s).shard_id != shard {
        cl.node_mut(s).shard_id = shard;
        cl.todo |= TODO_SAVE_CONFIG;
        let me = cl.myself;
        if cl.node(me).replica_of == Some(s) {
            cl.node_mut(me).shard_id = shard;
        }
    }
}

/// Redis's clusterUpdateSlotsConfigWith: slots the sender claims with a newer
/// config epoch become its; if we lose all our slots to it we follow it.
pub fn update_slots_config_with(
    cl: &mut Cluster,
    ex: &mut Executor,
    sender: NodeId,
    sender_epoch: u64,
    slots: &[u8; BITMAP_BYTES],
) {
    let me = cl.myself;
    if sender == me {
        crate::log::notice("Discarding UPDATE message about myself.");
        return;
    }
    let curmaster = cl.master_of(me);
    let mut newmaster = None;
    let mut dirty: Vec<usize> = Vec::new();
    let mut sender_slots = 0;
    let mut migrated_our_slots = 0;
    for j in 0..SLOTS {
        if slot::bit_test(slots, j) {
            sender_slots += 1;
            if cl.slots[j] == Some(sender) {
                slot::bit_clear(&mut cl.owner_not_claiming[..], j);
                continue;
            }
            if cl.importing.contains_key(&j) {
                continue;
            }
            if cl.slot_unclaimed(j)
                || cl.slots[j].is_some_and(|o| cl.node(o).config_epoch < sender_epoch)
            {
                if cl.slots[j] == Some(me) && count_keys_in_slot(ex, j) > 0 {
                    dirty.push(j);
                }
                if cl.slots[j].is_some() && cl.slots[j] == curmaster {
                    newmaster = Some(sender);
                    migrated_our_slots += 1;
                }
                cl.del_slot(j);
                cl.add_slot(sender, j);
                cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG;
            }
        } else if cl.slots[j] == Some(sender) {
            slot::bit_set(&mut cl.owner_not_claiming[..], j);
        }
    }
    let cur_slots = curmaster.map_or(0, |m| cl.node(m).numslots);
    if newmaster.is_some()
        && cur_slots == 0
        && (cl.settings.allow_replica_migration || sender_slots == migrated_our_slots)
    {
        crate::log::notice(&format!(
            "Configuration change detected. Reconfiguring myself as a replica of {}",
            cl.node(sender).name_str()
        ));
        set_my_master(cl, ex, sender);
        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG;
    } else if let Some(grand) = cl
        .node(me)
        .replica_of
        .and_then(|m| cl.node(m).replica_of)
        .filter(|&g| g != me)
    {
        crate::log::notice(&format!(
            "I'm a sub-replica! Reconfiguring myself as a replica of grandmaster {}",
            cl.node(grand).name_str()
        ));
        set_my_master(cl, ex, grand);
        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG;
    } else {
        for j in dirty {
            delete_keys_in_slot(ex, j);
        }
    }
}

/// Redis's clusterSetMaster: this node becomes a replica of `m` and replicates
/// from it.
pub fn set_my_master(cl: &mut Cluster, ex: &mut Executor, m: NodeId) {
    let me = cl.myself;
    if cl.node(me).is_master() {
        let n = cl.node_mut(me);
        n.flags &= !(node::MASTER | node::MIGRATE_TO);
        n.flags |= node::SLAVE;
        cl.migrating.clear();
        cl.importing.clear();
    } else if let Some(old) = cl.node(me).replica_of {
        cl.remove_replica(old, me);
    }
    cl.node_mut(me).replica_of = Some(m);
    cl.add_replica(m, me);
    // Shard channels of the slots the new master does not serve are unsubscribed
    // (Redis's removeAllNotOwnedShardChannelSubscriptions): their messages are now
    // published in another shard.
    if ex.pubsub.shard_channel_count() > 0 {
        for s in 0..super::SLOTS {
            if cl.slots[s] != Some(m) {
                cl.mark_released(s);
            }
        }
    }
    let shard = cl.node(m).shard_id;
    cl.node_mut(me).shard_id = shard;
    let (ip, port) = (cl.node(m).ip.clone(), replication_port(cl.node(m), ex));
    if !ip.is_empty() {
        replicate_from(ex, ip, port);
    }
    super::failover::reset_manual(cl, ex);
}

/// Keys of database 0 in slot `s` (the per-slot index: O(1)).
pub fn count_keys_in_slot(ex: &Executor, s: usize) -> usize {
    ex.ks.dbs.first().map_or(0, |db| {
        db.table
            .slot_key_count(s)
            .expect("cluster mode indexes database 0 by slot")
    })
}

/// Up to `max` keys of database 0 hashing to slot `s`, found through the per-slot
/// index (the cost is the slot's keys, not the keyspace's).
pub fn keys_in_slot(ex: &Executor, s: usize, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(db) = ex.ks.dbs.first() {
        db.table.slot_keys(s, max, |k| out.push(k.to_vec()));
    }
    out
}

/// Deletes the keys of a slot this node lost (Redis's delKeysInSlot), propagating
/// each deletion.
pub fn delete_keys_in_slot(ex: &mut Executor, s: usize) -> usize {
    let keys = keys_in_slot(ex, s, usize::MAX);
    let n = keys.len();
    for k in keys {
        if ex.ks.delete(0, &k) {
            ex.ks.dirty += 1;
            ex.signal_modified_key(None, 0, &k);
            if ex.stream.enabled {
                ex.stream.append(0, &[b"DEL", &k]);
            }
        }
    }
    n
}

fn add_failure_report(cl: &mut Cluster, failing: NodeId, sender: NodeId) -> bool {
    let now = now_ms();
    let n = cl.node_mut(failing);
    if let Some(r) = n.fail_reports.iter_mut().find(|(s, _)| *s == sender) {
        r.1 = now;
        return false;
    }
    n.fail_reports.push((sender, now));
    true
}

fn cleanup_failure_reports(cl: &mut Cluster, id: NodeId) {
    let maxtime = cl.settings.node_timeout * FAIL_REPORT_VALIDITY_MULT;
    let now = now_ms();
    cl.node_mut(id)
        .fail_reports
        .retain(|(_, t)| now - t <= maxtime);
}

fn del_failure_report(cl: &mut Cluster, id: NodeId, sender: NodeId) -> bool {
    let n = cl.node_mut(id);
    let before = n.fail_reports.len();
    n.fail_reports.retain(|(s, _)| *s != sender);
    let removed = n.fail_reports.len() != before;
    cleanup_failure_reports(cl, id);
    removed
}

pub fn failure_reports_count(cl: &mut Cluster, id: NodeId) -> usize {
    cleanup_failure_reports(cl, id);
    cl.node(id).fail_reports.len()
}

/// PFAIL becomes FAIL when a majority of masters (us included when we are one)
/// agree; the FAIL is then broadcast.
fn mark_failing_if_needed(cl: &mut Cluster, ex: &Executor, id: NodeId) {
    let quorum = cl.size / 2 + 1;
    if !cl.node(id).timed_out() || cl.node(id).failed() {
        return;
    }
    let mut failures = failure_reports_count(cl, id);
    if cl.me().is_master() {
        failures += 1;
    }
    if failures < quorum {
        return;
    }
    crate::log::notice(&format!(
        "Marking node {} as failing (quorum reached).",
        cl.node(id).log_name()
    ));
    let n = cl.node_mut(id);
    n.flags &= !node::PFAIL;
    n.flags |= node::FAIL;
    n.fail_time = now_ms();
    let name = n.name;
    send_fail(cl, ex, &name);
    cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
}

fn clear_failure_if_needed(cl: &mut Cluster, id: NodeId) {
    let now = now_ms();
    let n = cl.node(id);
    if n.is_replica() || n.numslots == 0 {
        crate::log::notice(&format!(
            "Clear FAIL state for node {}:{} is reachable again.",
            n.name_str(),
            if n.is_replica() {
                "replica"
            } else {
                "master without slots"
            }
        ));
        cl.node_mut(id).flags &= !node::FAIL;
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
    }
    let n = cl.node(id);
    if n.is_master()
        && n.numslots > 0
        && now - n.fail_time > cl.settings.node_timeout * FAIL_UNDO_TIME_MULT
    {
        crate::log::notice(&format!(
            "Clear FAIL state for node {}: is reachable again and nobody is serving its slots after some time.",
            n.name_str()
        ));
        cl.node_mut(id).flags &= !node::FAIL;
        cl.todo |= TODO_UPDATE_STATE | TODO_SAVE_CONFIG;
    }
}

/// CLUSTER MEET: a handshake node that the cron connects to with a MEET; false for
/// an invalid address.
pub fn start_handshake(cl: &mut Cluster, ip: &str, port: u16, cport: u16) -> bool {
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    if port == 0 || cport == 0 {
        return false;
    }
    let norm = ip.to_string();
    // The port given is the default client port: the TLS one with `tls-cluster yes`.
    let tls_cluster = cl.settings.tls_cluster;
    let in_progress = cl.node_ids().into_iter().any(|id| {
        let n = cl.node(id);
        n.in_handshake()
            && n.ip.eq_ignore_ascii_case(&norm)
            && n.client_port(tls_cluster) == port
            && n.cport == cport
    });
    if in_progress {
        return true;
    }
    let mut n = Node::new(node::random_name(), node::HANDSHAKE | node::MEET, now_ms());
    n.ip = norm;
    if tls_cluster {
        n.tls_port = port;
    } else {
        n.tcp_port = port;
    }
    n.cport = cport;
    cl.add_node(n);
    true
}

/// Redis's clusterCron, run every 100 ms.
/// Frees a link to or from `id` whose send queue passed `cluster-link-sendbuf-limit`
/// (Redis's clusterNodeCronFreeLinkOnBufferLimitReached); the cron reconnects the
/// outbound one right after.
fn free_links_over_limit(cl: &mut Cluster, id: NodeId) {
    let limit = cl.settings.link_sendbuf_limit;
    if limit <= 0 {
        return;
    }
    let n = cl.node(id);
    for l in [n.link, n.inbound_link].into_iter().flatten() {
        let over = cl
            .bus
            .link(l)
            .is_some_and(|link| link.send_buffer_allocated() > limit as usize);
        if over {
            cl.links_buffer_limit_exceeded += 1;
            crate::log::warning(&format!(
                "Freeing cluster link({} node {}, used memory: {}) due to exceeding send buffer memory limit.",
                if cl.bus.link(l).is_some_and(|x| x.inbound) { "from" } else { "to" },
                cl.node(id).name_str(),
                cl.bus.link(l).map_or(0, |x| x.send_buffer_allocated()),
            ));
            free_link(cl, l);
        }
    }
}

pub fn cron(cl: &mut Cluster, ex: &mut Executor) {
    let now = now_ms();
    let timeout = cl.settings.node_timeout;
    let handshake_timeout = timeout.max(1000);
    cl.stats_pfail_nodes = 0;
    detach_closed(cl);
    for id in cl.node_ids() {
        if cl.nodes[id].is_none() {
            continue;
        }
        let flags = cl.node(id).flags;
        if flags & (node::MYSELF | node::NOADDR) != 0 {
            continue;
        }
        if flags & node::PFAIL != 0 {
            cl.stats_pfail_nodes += 1;
        }
        free_links_over_limit(cl, id);
        let n = cl.node(id);
        if n.in_handshake() && now - n.ctime > handshake_timeout {
            cl.del_node(id);
            continue;
        }
        if n.link.is_none() {
            let (ip, cport) = (n.ip.clone(), n.cport);
            match cl
                .bus
                .connect(id, &ip, cport, &ex.config.stored_str("bind-source-addr"))
            {
                Some(l) => cl.node_mut(id).link = Some(l),
                None => {
                    if cl.node(id).ping_sent == 0 {
                        cl.node_mut(id).ping_sent = now_ms();
                    }
                }
            }
        }
    }
    // Every second, ping the node with the oldest pong among five random ones.
    if cl.iteration.is_multiple_of(10) {
        let ids = cl.node_ids();
        let mut best: Option<(NodeId, i64)> = None;
        for _ in 0..5 {
            let id = ids[fastrand::usize(..ids.len())];
            let n = cl.node(id);
            if n.link.is_none()
                || n.ping_sent != 0
                || n.flags & (node::MYSELF | node::HANDSHAKE) != 0
            {
                continue;
            }
            if best.is_none_or(|(_, p)| p > n.pong_received) {
                best = Some((id, n.pong_received));
            }
        }
        if let Some((id, _)) = best {
            if let Some(l) = cl.node(id).link {
                send_ping(cl, ex, l, wire::PING);
            }
        }
    }
    let mut orphaned = 0;
    let mut max_replicas = 0;
    let mut this_replicas = 0;
    let mut update_state = false;
    let me = cl.myself;
    for id in cl.node_ids() {
        if cl.nodes[id].is_none() {
            continue;
        }
        let now = now_ms();
        let n = cl.node(id);
        if n.flags & (node::MYSELF | node::NOADDR | node::HANDSHAKE) != 0 {
            continue;
        }
        if cl.node(me).is_replica() && n.is_master() && !n.failed() {
            let ok = cl.count_non_failing_replicas(id);
            if ok == 0 && n.numslots > 0 && n.flags & node::MIGRATE_TO != 0 {
                orphaned += 1;
            }
            max_replicas = max_replicas.max(ok);
            if cl.node(me).replica_of == Some(id) {
                this_replicas = ok;
            }
        }
        let n = cl.node(id);
        let ping_delay = now - n.ping_sent;
        let data_delay = now - n.data_received;
        if let Some(l) = n.link {
            let link_age = cl.bus.link(l).map_or(0, |x| now - x.ctime);
            if link_age > timeout
                && n.ping_sent != 0
                && ping_delay > timeout / 2
                && data_delay > timeout / 2
            {
                free_link(cl, l);
            }
        }
        let interval = if cl.settings.ping_interval > 0 {
            cl.settings.ping_interval
        } else {
            timeout / 2
        };
        let n = cl.node(id);
        if let Some(l) = n.link {
            if n.ping_sent == 0 && now - n.pong_received > interval {
                send_ping(cl, ex, l, wire::PING);
                continue;
            }
        }
        if cl.failover.mf_end != 0 && cl.node(me).is_master() && cl.failover.mf_replica == Some(id)
        {
            if let Some(l) = cl.node(id).link {
                send_ping(cl, ex, l, wire::PING);
                continue;
            }
        }
        let n = cl.node(id);
        if n.ping_sent == 0 {
            continue;
        }
        let node_delay = ping_delay.min(data_delay);
        if node_delay > timeout && n.flags & (node::PFAIL | node::FAIL) == 0 {
            cl.node_mut(id).flags |= node::PFAIL;
            update_state = true;
            if cl.node(me).is_master() && cl.size == 1 {
                mark_failing_if_needed(cl, ex, id);
            } else {
                crate::log::debug(&format!(
                    "*** NODE {} possibly failing",
                    cl.node(id).name_str()
                ));
            }
        }
    }
    // A replica whose replication link went away reconnects to its master.
    if cl.node(me).is_replica() && ex.repl.link.is_none() {
        if let Some(m) = cl.node(me).replica_of.filter(|&m| cl.node(m).has_addr()) {
            let (ip, port) = (cl.node(m).ip.clone(), replication_port(cl.node(m), ex));
            if !ip.is_empty() {
                replicate_from(ex, ip, port);
            }
        }
    }
    super::failover::check_manual_timeout(cl, ex);
    if cl.node(me).is_replica() {
        super::failover::handle_manual(cl, ex);
        super::failover::handle_replica_failover(cl, ex);
        if orphaned > 0
            && max_replicas >= 2
            && this_replicas == max_replicas
            && cl.settings.allow_replica_migration
        {
            super::failover::handle_replica_migration(cl, ex, max_replicas);
        }
    }
    if update_state || !cl.state_ok {
        cl.update_state();
    }
}
