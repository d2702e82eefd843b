//! Replica elections and manual failover, as Redis 7.4: a replica of a FAIL master
//! waits 500 ms + random 0-500 ms + 1 s per better-placed replica (rank), bumps the
//! current epoch, asks the masters for votes (FAILOVER_AUTH_REQUEST) and, with a
//! majority of ACKs, takes its master's slots with the election epoch. A master votes
//! once per epoch, saving (and fsyncing) `lastVoteEpoch` before its ACK leaves.
//! CLUSTER FAILOVER starts the manual form: MFSTART pauses the master's writers, the
//! replica waits until it has processed the master's offset, then runs the election
//! with FORCEACK.

use super::node::{self, NodeId};
use super::slot::{self, SLOTS};
use super::wire::{self, Header};
use super::{gossip, now_ms, Cluster};
use super::{TODO_FSYNC_CONFIG, TODO_HANDLE_FAILOVER, TODO_HANDLE_MANUALFAILOVER};
use super::{TODO_SAVE_CONFIG, TODO_UPDATE_STATE};
use crate::exec::Executor;

const MF_TIMEOUT: i64 = 5000;
const MF_PAUSE_MULT: i64 = 2;
const REPLICA_MIGRATION_DELAY: i64 = 5000;

#[derive(Default, Debug)]
pub struct State {
    pub auth_time: i64,
    pub auth_count: usize,
    pub auth_sent: bool,
    pub auth_rank: usize,
    pub auth_epoch: u64,
    /// Manual failover: its deadline (0: none), the replica driving it (on the
    /// master), the master's offset once paused (on the replica), and whether the
    /// replica caught up.
    pub mf_end: i64,
    pub mf_replica: Option<NodeId>,
    pub mf_master_offset: Option<u64>,
    pub mf_can_start: bool,
    /// We paused our writers for a manual failover.
    pub mf_paused: bool,
}

/// The replication offset this node has: processed from its master, or its own.
pub fn my_offset(ex: &Executor) -> u64 {
    match &ex.repl.link {
        Some(l) => l.reploff,
        None => ex.repl.offset,
    }
}

pub fn reset_manual(cl: &mut Cluster, ex: &mut Executor) {
    if cl.failover.mf_paused {
        ex.unpause(crate::exec::PausePurpose::Failover);
    }
    let f = &mut cl.failover;
    f.mf_end = 0;
    f.mf_can_start = false;
    f.mf_replica = None;
    f.mf_master_offset = None;
    f.mf_paused = false;
}

pub fn check_manual_timeout(cl: &mut Cluster, ex: &mut Executor) {
    if cl.failover.mf_end != 0 && cl.failover.mf_end < now_ms() {
        crate::log::warning("Manual failover timed out.");
        reset_manual(cl, ex);
    }
}

/// A PING from our master while paused for our manual failover carries the offset
/// we must reach.
pub fn master_offset_seen(cl: &mut Cluster, sender: NodeId, h: &Header) {
    let me = cl.myself;
    if cl.failover.mf_end != 0
        && cl.node(me).is_replica()
        && cl.node(me).replica_of == Some(sender)
        && h.mflags[0] & wire::MFLAG_PAUSED != 0
        && cl.failover.mf_master_offset.is_none()
    {
        cl.failover.mf_master_offset = Some(h.offset);
        cl.todo |= TODO_HANDLE_MANUALFAILOVER;
        crate::log::notice(&format!(
            "Received replication offset for paused master manual failover: {}",
            h.offset
        ));
    }
}

/// MFSTART from one of our replicas: pause writers for twice the manual failover
/// time and let the replica know our offset.
pub fn mfstart_received(cl: &mut Cluster, ex: &mut Executor, replica: NodeId) {
    reset_manual(cl, ex);
    let now = now_ms();
    cl.failover.mf_end = now + MF_TIMEOUT;
    cl.failover.mf_replica = Some(replica);
    cl.failover.mf_paused = true;
    ex.set_pause(
        crate::exec::PausePurpose::Failover,
        crate::exec::Pause {
            until: std::time::Instant::now()
                + std::time::Duration::from_millis((MF_TIMEOUT * MF_PAUSE_MULT) as u64),
            write_only: true,
        },
    );
    crate::log::notice(&format!(
        "Manual failover requested by replica {}.",
        cl.node(replica).name_str()
    ));
}

pub fn handle_manual(cl: &mut Cluster, ex: &mut Executor) {
    let f = &cl.failover;
    if f.mf_end == 0 || f.mf_can_start {
        return;
    }
    let Some(target) = f.mf_master_offset else {
        return;
    };
    if target == my_offset(ex) {
        cl.failover.mf_can_start = true;
        crate::log::notice("All master replication stream processed, manual failover can start.");
        cl.todo |= TODO_HANDLE_FAILOVER;
        return;
    }
    cl.todo |= TODO_HANDLE_MANUALFAILOVER;
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica.
pub fn start_manual(
    cl: &mut Cluster,
    ex: &mut Executor,
    force: bool,
    takeover: bool,
) -> Result<(), &'static str> {
    let me = cl.myself;
    if cl.node(me).is_master() {
        return Err("ERR You should send CLUSTER FAILOVER to a replica");
    }
    let Some(master) = cl.node(me).replica_of else {
        return Err("ERR I'm a replica but my master is unknown to me");
    };
    if !force && (cl.node(master).failed() || cl.node(master).link.is_none()) {
        return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
    }
    reset_manual(cl, ex);
    cl.failover.mf_end = now_ms() + MF_TIMEOUT;
    if takeover {
        crate::log::notice("Taking over the master (user request).");
        cl.bump_epoch_without_consensus();
        replace_my_master(cl, ex);
    } else if force {
        crate::log::notice("Forced failover user request accepted.");
        cl.failover.mf_can_start = true;
        cl.todo |= TODO_HANDLE_FAILOVER;
    } else {
        crate::log::notice("Manual failover user request accepted.");
        if let Some(l) = cl.node(master).link {
            let h = gossip::header(cl, ex, wire::MFSTART);
            let msg = wire::build(&h, &[]);
            cl.stats_sent[wire::MFSTART as usize] += 1;
            cl.bus.send(l, &msg);
        }
    }
    Ok(())
}

/// Our rank among our master's replicas: how many have a better offset.
fn rank(cl: &Cluster, ex: &Executor) -> usize {
    let me = cl.myself;
    let Some(m) = cl.node(me).replica_of else {
        return 0;
    };
    let mine = my_offset(ex);
    cl.node(m)
        .replicas
        .iter()
        .filter(|&&r| {
            r != me && cl.node(r).flags & node::NOFAILOVER == 0 && cl.node(r).repl_offset > mine
        })
        .count()
}

/// Redis's clusterHandleSlaveFailover.
pub fn handle_replica_failover(cl: &mut Cluster, ex: &mut Executor) {
    let now = now_ms();
    let auth_age = now - cl.failover.auth_time;
    let quorum = cl.size / 2 + 1;
    let manual = cl.failover.mf_end != 0 && cl.failover.mf_can_start;
    let timeout = cl.settings.node_timeout;
    let auth_timeout = (timeout * 2).max(2000);
    let auth_retry = auth_timeout * 2;
    let me = cl.myself;
    let Some(master) = cl.node(me).replica_of else {
        return;
    };
    if cl.node(me).is_master()
        || (!cl.node(master).failed() && !manual)
        || (cl.settings.replica_no_failover && !manual)
        || cl.node(master).numslots == 0
    {
        return;
    }
    let mut data_age = match &ex.repl.link {
        Some(l) if l.is_up() => l.last_io.elapsed().as_millis() as i64,
        Some(l) => l
            .down_since
            .map_or(0, |t| t.elapsed().as_secs() as i64 * 1000),
        None => 0,
    };
    if data_age > timeout {
        data_age -= timeout;
    }
    let factor = cl.settings.replica_validity_factor;
    if factor != 0
        && data_age > ex.config.repl_ping_replica_period as i64 * 1000 + timeout * factor
        && !manual
    {
        return;
    }
    if auth_age > auth_retry {
        let f = &mut cl.failover;
        f.auth_time = now + 500 + fastrand::i64(0..500);
        f.auth_count = 0;
        f.auth_sent = false;
        let r = rank(cl, ex);
        let f = &mut cl.failover;
        f.auth_rank = r;
        f.auth_time += r as i64 * 1000;
        if f.mf_end != 0 {
            f.auth_time = now;
            f.auth_rank = 0;
            cl.todo |= TODO_HANDLE_FAILOVER;
        }
        crate::log::notice(&format!(
            "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
            cl.failover.auth_time - now,
            cl.failover.auth_rank,
            my_offset(ex)
        ));
        gossip::broadcast_pong(cl, ex, true);
        return;
    }
    if !cl.failover.auth_sent && cl.failover.mf_end == 0 {
        let r = rank(cl, ex);
        if r > cl.failover.auth_rank {
            let added = (r - cl.failover.auth_rank) as i64 * 1000;
            cl.failover.auth_time += added;
            cl.failover.auth_rank = r;
            crate::log::notice(&format!(
                "Replica rank updated to #{r}, added {added} milliseconds of delay."
            ));
        }
    }
    if now < cl.failover.auth_time || auth_age > auth_timeout {
        return;
    }
    if !cl.failover.auth_sent {
        cl.current_epoch += 1;
        cl.failover.auth_epoch = cl.current_epoch;
        crate::log::notice(&format!(
            "Starting a failover election for epoch {}.",
            cl.current_epoch
        ));
        let mut h = gossip::header(cl, ex, wire::AUTH_REQUEST);
        if cl.failover.mf_end != 0 {
            h.mflags[0] |= wire::MFLAG_FORCEACK;
        }
        let msg = wire::build(&h, &[]);
        for id in cl.node_ids() {
            let n = cl.node(id);
            if n.flags & (node::MYSELF | node::HANDSHAKE) != 0 {
                continue;
            }
            if let Some(l) = n.link {
                cl.stats_sent[wire::AUTH_REQUEST as usize] += 1;
                cl.bus.send(l, &msg);
            }
        }
        cl.failover.auth_sent = true;
        cl.todo |= TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG;
        return;
    }
    if cl.failover.auth_count >= quorum {
        crate::log::notice("Failover election won: I'm the new master.");
        if cl.node(me).config_epoch < cl.failover.auth_epoch {
            cl.node_mut(me).config_epoch = cl.failover.auth_epoch;
            crate::log::notice(&format!(
                "configEpoch set to {} after successful failover",
                cl.failover.auth_epoch
            ));
        }
        replace_my_master(cl, ex);
    }
}

/// Redis's clusterFailoverReplaceYourMaster: become master, take the old master's
/// slots, save, tell everyone.
pub fn replace_my_master(cl: &mut Cluster, ex: &mut Executor) {
    let me = cl.myself;
    let Some(old) = cl.node(me).replica_of else {
        return;
    };
    if cl.node(me).is_master() {
        return;
    }
    cl.set_node_as_master(me);
    crate::replication::replica::stop(ex);
    for j in 0..SLOTS {
        if slot::bit_test(&cl.node(old).slots[..], j) {
            cl.del_slot(j);
            cl.add_slot(me, j);
        }
    }
    cl.update_state();
    if let Err(e) = super::nodes_conf::save(cl, true) {
        crate::log::warning(&format!("Fatal: can't update cluster config file: {e}"));
        std::process::exit(1);
    }
    gossip::broadcast_pong(cl, ex, false);
    reset_manual(cl, ex);
}

/// Redis's clusterSendFailoverAuthIfNeeded: vote for `node` when it is a replica of
/// a failed master (or FORCEACK), we did not vote this epoch, and no slot it claims
/// has a newer owner. The vote epoch reaches the disk before the ACK is sent.
pub fn send_auth_if_needed(cl: &mut Cluster, ex: &Executor, requester: NodeId, h: &Header) {
    let me = cl.myself;
    if cl.node(me).is_replica() || cl.node(me).numslots == 0 {
        return;
    }
    let name = cl.node(requester).name_str().to_string();
    if h.current_epoch < cl.current_epoch {
        crate::log::warning(&format!(
            "Failover auth denied to {name}: reqEpoch ({}) < curEpoch({})",
            h.current_epoch, cl.current_epoch
        ));
        return;
    }
    if cl.last_vote_epoch == cl.current_epoch {
        crate::log::warning(&format!(
            "Failover auth denied to {name}: already voted for epoch {}",
            cl.current_epoch
        ));
        return;
    }
    let force = h.mflags[0] & wire::MFLAG_FORCEACK != 0;
    let master = cl.node(requester).replica_of;
    let Some(master) = master.filter(|_| !cl.node(requester).is_master()) else {
        crate::log::warning(&format!(
            "Failover auth denied to {name}: it is a master node or its master is unknown"
        ));
        return;
    };
    if !cl.node(master).failed() && !force {
        crate::log::warning(&format!("Failover auth denied to {name}: its master is up"));
        return;
    }
    let now = now_ms();
    if now - cl.node(master).voted_time < cl.settings.node_timeout * 2 {
        crate::log::warning(&format!(
            "Failover auth denied to {name}: can't vote about this master before {} milliseconds",
            cl.settings.node_timeout * 2 - (now - cl.node(master).voted_time)
        ));
        return;
    }
    for j in 0..SLOTS {
        if !slot::bit_test(&h.myslots[..], j) || cl.slot_unclaimed(j) {
            continue;
        }
        let owner = cl.slots[j].expect("claimed");
        if cl.node(owner).config_epoch > h.config_epoch {
            crate::log::warning(&format!(
                "Failover auth denied to {name}: slot {j} epoch ({}) > reqEpoch ({})",
                cl.node(owner).config_epoch,
                h.config_epoch
            ));
            return;
        }
    }
    cl.last_vote_epoch = cl.current_epoch;
    cl.node_mut(master).voted_time = now;
    if let Err(e) = super::nodes_conf::save(cl, true) {
        crate::log::warning(&format!("Fatal: can't update cluster config file: {e}"));
        std::process::exit(1);
    }
    if let Some(l) = cl.node(requester).link {
        let hdr = gossip::header(cl, ex, wire::AUTH_ACK);
        let msg = wire::build(&hdr, &[]);
        cl.stats_sent[wire::AUTH_ACK as usize] += 1;
        cl.bus.send(l, &msg);
    }
    crate::log::notice(&format!(
        "Failover auth granted to {name} for epoch {}",
        cl.current_epoch
    ));
}

/// Redis's clusterHandleSlaveMigration: the replica with the smallest name among
/// the best-served master's replicas moves to an orphaned master.
pub fn handle_replica_migration(cl: &mut Cluster, ex: &mut Executor, max_replicas: usize) {
    if !cl.state_ok {
        return;
    }
    let me = cl.myself;
    let Some(mymaster) = cl.node(me).replica_of else {
        return;
    };
    let ok = cl
        .node(mymaster)
        .replicas
        .iter()
        .filter(|&&r| !cl.node(r).failed() && !cl.node(r).timed_out())
        .count();
    if ok as i64 <= cl.settings.migration_barrier {
        return;
    }
    let mut candidate = me;
    let mut target = None;
    let now = now_ms();
    for id in cl.node_ids() {
        let n = cl.node(id);
        let okr = if n.is_master() {
            cl.count_non_failing_replicas(id)
        } else {
            0
        };
        let orphaned =
            !n.is_replica() && !n.failed() && n.flags & node::MIGRATE_TO != 0 && okr == 0;
        if orphaned {
            if target.is_none() && n.numslots > 0 {
                target = Some(id);
            }
            if n.orphaned_time == 0 {
                cl.node_mut(id).orphaned_time = now;
            }
        } else {
            cl.node_mut(id).orphaned_time = 0;
        }
        if okr == max_replicas {
            for &r in &cl.node(id).replicas {
                if cl.node(r).name < cl.node(candidate).name {
                    candidate = r;
                }
            }
        }
    }
    if let Some(t) = target {
        if candidate == me && now - cl.node(t).orphaned_time > REPLICA_MIGRATION_DELAY {
            crate::log::notice(&format!(
                "Migrating to orphaned master {}",
                cl.node(t).name_str()
            ));
            gossip::set_my_master(cl, ex, t);
        }
    }
}
