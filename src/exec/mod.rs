//! The executor: owns the keyspace, the clients and the server's counters, and runs
//! commands one at a time, so every command is atomic without locks.
//!
//! It knows nothing of sockets. The network layer (and the embedded API) register
//! clients, hand it parsed commands, and write out whatever it encoded into each
//! client's output buffer. Replies to other clients (pub/sub pushes, unblocked
//! clients) go through the same buffers and the `pending_writes` list.

pub mod blocking;
pub mod busy;

/// The reply to commands refused while the dataset loads (Redis's `loadingerr`).
pub const LOADING_ERR: &str = "LOADING Redis is loading the dataset in memory";
pub mod client;
pub mod client_mem;
pub mod cmd_stats;
mod evict;
pub mod latency;
pub mod monitor;
pub mod multi;
pub mod pause;
mod prefetch;
pub mod propagate;
pub mod pubsub;
pub mod shutdown;
pub mod signals;
pub mod tracking;

use crate::util::FastMap;
use std::time::{Duration, Instant};

pub use client::{Client, ReplyMode};
pub use pause::PausePurpose;

use crate::commands::{self, flags, Command, Ctx};
use crate::config::Config;
use crate::keyspace::{unix_ms, Keyspace};
use crate::protocol::Reply;

pub use cmd_stats::CmdStat;

/// The time between cron ticks (`hz`, as CONFIG SET leaves it at the last tick).
fn cron_period(config: &Config) -> Duration {
    Duration::from_millis(1000 / config.effective_hz() as u64)
}

/// A wait in whole milliseconds, rounded up: a wait cut short by truncation would
/// wake the event loop twice per cron tick (INFO instantaneous_eventloop_cycles_per_sec
/// of an idle server is `hz`, as Redis's).
fn ceil_ms(d: Duration) -> u64 {
    (d.as_micros() as u64).div_ceil(1000)
}

/// Distinct error codes INFO ERRORSTATS tracks (Redis's ERROR_STATS_NUMBER).
const ERRORSTATS_MAX: usize = 128;

/// Server-wide counters (INFO stats).
#[derive(Default, Debug, Clone)]
pub struct Stats {
    /// Errorstats stopped tracking new error codes (more than 128 seen); CONFIG
    /// RESETSTAT turns it back on.
    pub errorstats_disabled: bool,
    /// Time memory stayed over `maxmemory` (INFO's eviction_exceeded_time fields):
    /// closed intervals, and the start of the current one.
    pub eviction_exceeded_total: Duration,
    pub eviction_exceeded_since: Option<Instant>,
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    pub total_net_input_bytes: u64,
    /// Socket reads and writes that moved data (INFO's total_reads/writes_processed).
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    /// Of those, the ones made while I/O threads were in use (`io-threads`).
    pub io_threaded_reads_processed: u64,
    pub io_threaded_writes_processed: u64,
    /// The last read or write phase used I/O threads (INFO `io_threads_active`).
    pub io_threads_active: bool,
    /// Time the loop waited for I/O threads to hand their batches back.
    pub io_threads_wait_ns: u64,
    pub total_net_output_bytes: u64,
    pub total_error_replies: u64,
    pub client_qbuf_limit_disconnections: u64,
    pub client_outbuf_limit_disconnections: u64,
    /// Errors our master's commands got here (INFO `unexpected_error_replies`).
    pub unexpected_error_replies: u64,
    /// Samples of (time, commands processed) for instantaneous_ops_per_sec.
    pub ops_samples: Vec<(Instant, u64)>,
    pub instantaneous_ops_per_sec: u64,
    /// Samples of (time, input bytes, output bytes) for instantaneous_*_kbps.
    pub net_samples: Vec<(Instant, u64, u64)>,
    pub instantaneous_input_kbps: f64,
    pub instantaneous_output_kbps: f64,
    /// Event-loop turns, their total and longest busy time (poll's wait excluded), the
    /// time spent in top-level commands, and the most commands in one turn (INFO
    /// eventloop_*).
    pub eventloop_cycles: u64,
    pub eventloop_usec: u64,
    pub eventloop_max_usec: u64,
    pub eventloop_cmd_usec: u64,
    pub eventloop_cmd_per_cycle_max: u64,
    /// Nanoseconds spent in the cron and in AOF flushes (INFO debug
    /// eventloop_duration_cron_sum / eventloop_duration_aof_sum).
    pub eventloop_cron_ns: u64,
    pub eventloop_aof_ns: u64,
    /// Samples of (time, cycles, busy usec) for the instantaneous_eventloop_* rates.
    pub eventloop_samples: Vec<(Instant, u64, u64)>,
    pub instantaneous_eventloop_cycles_per_sec: u64,
    pub instantaneous_eventloop_duration_usec: u64,
}

/// An entry of the slow log.
#[derive(Debug, Clone)]
pub struct SlowlogEntry {
    pub id: u64,
    pub time: i64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

/// Listening addresses kept and sockets newly bound (CONFIG SET port/bind).
pub type Rebind = (Vec<std::net::SocketAddr>, Vec<std::net::TcpListener>);

/// What SHUTDOWN asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownRequest {
    pub save: Option<bool>,
    /// Do not wait for lagging replicas (SHUTDOWN NOW, `shutdown-on-sig* now`).
    pub now: bool,
    /// Exit even if the final save fails (SHUTDOWN FORCE, `shutdown-on-sig* force`).
    pub force: bool,
}

/// One purpose's pause (CLIENT PAUSE, a failover): until when, and of what.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    pub until: Instant,
    /// Only write commands are paused (`WRITE` mode).
    pub write_only: bool,
}

pub struct Executor {
    pub config: Config,
    /// MIGRATE's connection cache, jobs in flight and locked keys (commands/migrate.rs).
    pub migrate: crate::commands::migrate_conn::Migrations,
    /// ACL users and log (src/acl).
    pub acl: crate::acl::Acl,
    pub ks: Keyspace,
    /// Boxed, so a slot costs 8 bytes once its client is gone.
    clients: Vec<Option<Box<Client>>>,
    free_slots: Vec<usize>,
    client_count: usize,
    next_client_id: u64,
    pub stats: Stats,
    pub cmd_stats: cmd_stats::CommandStats,
    pub error_stats: FastMap<String, u64>,
    /// Clients with new output since the network layer last flushed.
    pub pending_writes: Vec<usize>,
    /// Set once the shutdown sequence finished: the network layer exits.
    pub shutdown: Option<ShutdownRequest>,
    /// A shutdown asked for by a signal or waiting for replicas (shutdown.rs).
    pub shutdown_state: shutdown::ShutdownState,
    /// CONFIG SET port/bind: the addresses still wanted and the sockets newly bound,
    /// for the network layer to swap in.
    pub rebind: Option<Rebind>,
    /// The TCP addresses listened on.
    pub tcp_addrs: Vec<std::net::SocketAddr>,
    /// CONFIG SET tls-port (or bind): as `rebind`, for the TLS listeners.
    pub tls_rebind: Option<Rebind>,
    /// The TLS addresses listened on.
    pub tls_addrs: Vec<std::net::SocketAddr>,
    /// The TLS contexts (crate::tls), when TLS is configured; CONFIG SET of a `tls-*`
    /// file replaces them for new connections.
    pub tls: Option<std::sync::Arc<crate::tls::TlsContext>>,
    pub start_time: Instant,
    pub run_id: String,
    /// The pause each purpose holds (pause.rs); the strictest one applies.
    pub(crate) pauses: [Option<Pause>; PausePurpose::COUNT],
    /// Clients whose next command waits for the pause to end (pause.rs).
    pub postponed: std::collections::BTreeSet<usize>,
    pub slowlog: std::collections::VecDeque<SlowlogEntry>,
    pub slowlog_next_id: u64,
    /// Keyspace event classes enabled (notify-keyspace-events), as a bit set.
    pub notify_classes: u32,
    /// Keyspace notifications raised by the current command, delivered after it.
    pub pending_notifications: Vec<(u32, &'static str, usize, Vec<u8>)>,
    pub tcp_port: u16,
    /// DEBUG SET-ACTIVE-EXPIRE: whether the timer deletes expired keys.
    pub active_expire: bool,
    /// DEBUG PAUSE-CRON: the periodic tick does nothing (Redis's `pause_cron`), so
    /// tests can observe state the cron would otherwise change.
    pub cron_paused: bool,
    /// Set when a client other than the caller was marked for closing (CLIENT KILL,
    /// buffer limits, idle timeout): the network layer then sweeps for marked clients.
    pub close_pending: bool,
    /// Active-expiry time left in the current tick.
    expire_budget: Duration,
    /// When the next cron tick is due (`1 / hz` after the last one began).
    next_cron: Instant,
    /// When the last tick's work began (INFO eventloop_cron time).
    cron_began: Instant,
    /// When the event loop's current turn began (after its poll): the time of every
    /// read in the turn, as Redis stamps a client's last interaction with its cached
    /// clock rather than reading the clock per read.
    pub turn_started: Instant,
    /// Clients blocked by blocking commands and the keys they wait on.
    pub blocking: blocking::Blocking,
    /// WATCHed keys (multi.rs), pub/sub registries (pubsub.rs), client tracking
    /// (tracking.rs) and MONITOR clients (monitor.rs).
    pub watch: multi::WatchRegistry,
    pub pubsub: pubsub::PubSub,
    pub tracking: tracking::TrackingTable,
    pub monitors: Vec<usize>,
    /// The Lua scripting host, created on first use (taken out while a script runs).
    pub scripting: Option<Box<crate::scripting::Engine>>,
    /// Memory was over `maxmemory` with nothing to evict when the current top-level
    /// command was admitted (Redis's pre_command_oom_state): scripts refuse their
    /// first write that may grow memory.
    pub pre_command_oom: bool,
    /// Set by a script whose error reply is the error of a command it called, which
    /// the statistics counted already: the script's own command counts it as failed
    /// but not again in the error statistics (taken by `call`).
    pub error_reply_counted: bool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript` commands (tests).
    pub script_disable_deny: bool,
    /// Snapshot state: last save, background save in flight (persistence/snapshot.rs).
    pub persist: crate::persistence::snapshot::Persist,
    /// The write stream (propagate.rs) and the AOF that consumes it.
    pub stream: propagate::WriteStream,
    pub aof: Option<Box<crate::persistence::aof::Aof>>,
    /// The script running past `busy-reply-threshold`, and the network layer that
    /// serves other clients meanwhile (busy.rs).
    pub busy: Option<busy::BusyScript>,
    /// Commands running inside this one (EXEC's queue, a script's calls) and the
    /// time they all see: Redis 7's command time snapshot, so a key cannot expire
    /// between two commands of one transaction or script.
    call_nesting: u32,
    time_snapshot_ms: i64,
    /// The same instant in microseconds (TIME answers with it, as Redis's cached
    /// time).
    time_snapshot_us: i64,
    /// The client whose top-level command is running (Redis's `server.current_client`):
    /// commands inside EXEC or a script run for it, so tracking remembers the keys they
    /// read for it and NOLOOP compares against it.
    pub current_client: Option<usize>,
    pub busy_server: Option<std::rc::Rc<dyn busy::ServeWhileBusy>>,
    /// The same network layer, lent to the RDB loader at startup (`-LOADING`).
    pub loading_server: Option<std::rc::Rc<dyn busy::ServeWhileBusy>>,
    /// Replication state, master and replica side (src/replication).
    pub repl: crate::replication::Repl,
    /// The latency monitor's events (latency.rs).
    pub latency: latency::LatencyMonitor,
    /// Eviction state (evict.rs): the candidate pool kept across passes, whether a
    /// pass ran out of time with memory still over the limit, and the database the
    /// random policies visit next.
    pub eviction_pool: evict::EvictionPool,
    /// Client memory, maxmemory-clients and reply-buffer settings (client_mem.rs).
    pub client_mem: client_mem::ClientMemory,
    pub eviction_running: bool,
    eviction_next_db: usize,
    /// Where the volatile-key scan behind a volatile policy's missed draws goes on
    /// (`evict.rs`, `first_volatile`): each call continues the last, so a pass of
    /// evictions walks a table once rather than from its start per key.
    eviction_volatile_cursor: u64,
    /// Cluster mode's state (src/cluster); None with `cluster-enabled no`.
    pub cluster: Option<Box<crate::cluster::Cluster>>,
}

impl Executor {
    pub fn new(config: Config) -> Executor {
        let ks = Keyspace::new(config.databases);
        let now = Instant::now();
        let next_cron = now + cron_period(&config);
        let notify_classes = config.notify_keyspace_events;
        let mut acl = crate::acl::Acl::default();
        acl.sync_requirepass(&config.requirepass);
        let mut ex = Executor {
            acl,
            tcp_port: config.port,
            config,
            ks,
            clients: Vec::new(),
            free_slots: Vec::new(),
            client_count: 0,
            next_client_id: 1,
            stats: Stats::default(),
            cmd_stats: Default::default(),
            error_stats: FastMap::default(),
            pending_writes: Vec::new(),
            shutdown: None,
            shutdown_state: Default::default(),
            rebind: None,
            tcp_addrs: Vec::new(),
            tls_rebind: None,
            tls_addrs: Vec::new(),
            tls: None,
            start_time: now,
            run_id: (0..40)
                .map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0'))
                .collect(),
            active_expire: true,
            cron_paused: false,
            expire_budget: Duration::ZERO,
            close_pending: false,
            pauses: [None; PausePurpose::COUNT],
            migrate: Default::default(),
            postponed: Default::default(),
            slowlog: std::collections::VecDeque::new(),
            slowlog_next_id: 0,
            notify_classes,
            pending_notifications: Vec::new(),
            next_cron,
            cron_began: now,
            turn_started: now,
            blocking: blocking::Blocking::default(),
            watch: Default::default(),
            pubsub: Default::default(),
            tracking: Default::default(),
            monitors: Vec::new(),
            scripting: None,
            pre_command_oom: false,
            error_reply_counted: false,
            script_disable_deny: false,
            persist: Default::default(),
            stream: Default::default(),
            aof: None,
            busy: None,
            call_nesting: 0,
            time_snapshot_ms: 0,
            time_snapshot_us: 0,
            current_client: None,
            busy_server: None,
            loading_server: None,
            repl: Default::default(),
            latency: Default::default(),
            eviction_pool: Default::default(),
            client_mem: Default::default(),
            eviction_running: false,
            eviction_next_db: 0,
            eviction_volatile_cursor: 0,
            cluster: None,
        };
        ex.sync_access_policy();
        ex.sync_client_eviction_limit();
        ex
    }

    // ----- clients -----------------------------------------------------------------

    /// Registers a client and returns its slot.
    pub fn connect(&mut self, addr: String, laddr: String, fd: i64) -> usize {
        let authenticated = self.acl.default_needs_no_auth();
        let id = self.next_client_id;
        self.next_client_id += 1;
        let mut c = Client::new(id, addr, laddr, fd, authenticated);
        c.acl_free = self.acl.default_user().unrestricted();
        self.stats.total_connections_received += 1;
        self.client_count += 1;
        self.insert_client(c)
    }

    /// Registers an in-process client (the embedded API's session, the scripting
    /// engine's pseudo-client): authenticated, not counted against `maxclients` nor
    /// listed by CLIENT LIST.
    pub fn connect_internal(&mut self, name: &str) -> usize {
        let id = self.next_client_id;
        self.next_client_id += 1;
        let mut c = Client::new(id, name.to_string(), String::new(), -1, true);
        c.embedded = true;
        self.insert_client(c)
    }

    fn insert_client(&mut self, c: Client) -> usize {
        match self.free_slots.pop() {
            Some(slot) => {
                self.clients[slot] = Some(Box::new(c));
                slot
            }
            None => {
                self.clients.push(Some(Box::new(c)));
                self.clients.len() - 1
            }
        }
    }

    pub fn disconnect(&mut self, slot: usize) {
        if let Some(Some(_)) = self.clients.get(slot) {
            self.blocking.disconnect(slot);
            self.postponed.remove(&slot);
            crate::replication::disconnected(self, slot);
            self.clear_client_state(slot);
            self.forget_client_mem(slot);
            let internal = self.client(slot).embedded;
            if let Some(mut gone) = self.clients[slot].take() {
                // Reply blocks of megabytes are freed off the loop.
                for block in gone.take_big_output() {
                    self.ks.lazyfree.free_other(Box::new(block), 0);
                }
            }
            self.free_slots.push(slot);
            if !internal {
                self.client_count -= 1;
            }
        }
    }

    pub fn client(&self, slot: usize) -> &Client {
        self.clients[slot].as_ref().expect("live client slot")
    }

    pub fn client_mut(&mut self, slot: usize) -> &mut Client {
        self.clients[slot].as_mut().expect("live client slot")
    }

    pub fn client_count(&self) -> usize {
        self.client_count
    }

    /// Live clients with their slots, in slot order.
    pub fn clients(&self) -> impl Iterator<Item = (usize, &Client)> {
        self.clients
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_deref().map(|c| (i, c)))
    }

    pub fn clients_mut(&mut self) -> impl Iterator<Item = (usize, &mut Client)> {
        self.clients
            .iter_mut()
            .enumerate()
            .filter_map(|(i, c)| c.as_deref_mut().map(|c| (i, c)))
    }

    /// Marks a client as having output to flush.
    pub fn mark_pending_write(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        if !c.pending_write {
            c.pending_write = true;
            self.pending_writes.push(slot);
        }
    }

    /// Whether a client may run its next command (`args`) now: not while it is
    /// blocked, nor while CLIENT PAUSE holds the command back (pause.rs).
    #[inline(always)]
    pub fn can_run(&mut self, slot: usize, args: &[&[u8]]) -> bool {
        !self.blocking.is_blocked(slot)
            && !self.postponed_by_pause(slot, args)
            && (self.migrate.locked.is_empty() || !commands::migrate::holds(self, slot, args))
    }

    /// Whether the client waits for a blocking command or the end of a pause (INFO
    /// `blocked_clients`, CLIENT LIST flag `b`).
    pub fn is_blocked(&self, slot: usize) -> bool {
        self.blocking.is_blocked(slot) || self.postponed.contains(&slot)
    }

    /// INFO `blocked_clients`: blocked by a command, or postponed by a pause.
    pub fn blocked_clients(&self) -> usize {
        self.blocking.blocked_clients() + self.postponed.len()
    }

    // ----- execution ---------------------------------------------------------------

    /// A replica's command produced a reply: a replication link carries none, so the
    /// replica is disconnected instead, as Redis 7.2+ does (a rogue replica must not
    /// read the dataset through its link).
    fn replica_generated_reply(&mut self, slot: usize, reply: &Reply) {
        let c = self.client(slot);
        if let Reply::Error(e) = reply {
            crate::log::warning(&format!(
                "== CRITICAL == This master is sending an error to its replica: '{e}' after processing the command '{}'",
                c.last_cmd
            ));
        }
        crate::log::warning(&format!(
            "Replica generated a reply to command '{}', disconnecting it: {}",
            c.last_cmd,
            commands::connection::client_line(c, self.is_blocked(slot), c.qbuf_free)
        ));
        let c = self.client_mut(slot);
        c.argv_mem = 0;
        c.close_asap = true;
        self.close_pending = true;
    }

    /// Runs one command for `slot` and encodes its reply into the client's output
    /// buffer (honouring CLIENT REPLY).
    pub fn execute_and_reply(&mut self, slot: usize, args: &[&[u8]]) {
        // Pushes to this client raised by its own command follow the reply (pubsub.rs);
        // `call` marks the client executing, so what happens before the command runs
        // (evictions, the tracking table's limit) reaches it first, as in Redis.
        self.client_mut(slot).argv_mem = client_mem::argv_len(args);
        let reply = self.execute(slot, args);
        if self.client(slot).repl_role == Some('S') && !matches!(reply, Reply::NoReply) {
            return self.replica_generated_reply(slot, &reply);
        }
        let c = self.client_mut(slot);
        c.argv_mem = 0;
        // ASKING holds for the next command only (outside MULTI), as Redis's resetClient.
        if c.cluster_asking && c.tx.multi.is_none() && !args[0].eq_ignore_ascii_case(b"asking") {
            c.cluster_asking = false;
        }
        match c.reply_mode {
            ReplyMode::On => match reply {
                // A random-pick reply goes out as the socket drains (client.rs).
                Reply::Picks(stream) => c.start_stream(stream),
                // A big encoded body joins the reply list as it is, not copied.
                Reply::EncodedArray(n, body) if body.len() >= client::SEAL_AT => {
                    c.push_encoded_array(n, body)
                }
                // So does a big bulk string (GET of a big value): copied once, from
                // the keyspace, as Redis copies it once into its reply list.
                Reply::Bulk(value) if value.len() >= client::SEAL_AT => c.push_big_bulk(value),
                reply => {
                    c.push_reply(&reply);
                    // Most replies (integers, `+OK`) own nothing: no call to the
                    // out-of-line drop of the whole enum for them.
                    if !reply.owns_heap() {
                        std::mem::forget(reply);
                    }
                }
            },
            // Pub/Sub confirmations are pushes (Redis's CLIENT_PUSHING): CLIENT REPLY
            // OFF/SKIP silences replies, never pushes.
            ReplyMode::Off => c.push_pushes_only(&reply),
            ReplyMode::SkipNext => {
                c.push_pushes_only(&reply);
                c.reply_mode = ReplyMode::Skipping
            }
            ReplyMode::Skipping => {
                c.push_pushes_only(&reply);
                c.reply_mode = ReplyMode::On
            }
        }
        self.flush_deferred_pushes(slot);
        let c = self.client_mut(slot);
        if c.pending_output() > 0 {
            self.mark_pending_write(slot);
        }
        self.check_output_limits(slot);
        // The command's output counts for maxmemory-clients before the next one runs
        // (its reply buffer peak was noted as the reply was added).
        self.update_client_mem_if_limited(slot);
        // Keys made ready by this command (or MULTI/EXEC block, or script) wake
        // their waiters now that it has finished.
        // (Not while a script is busy: it is still in the middle of its work.)
        if self.blocking.has_ready() && self.busy.is_none() {
            blocking::handle_ready(self);
        }
    }

    /// Runs one command and returns its reply.
    pub fn execute(&mut self, slot: usize, args: &[&[u8]]) -> Reply {
        if args.is_empty() {
            return Reply::NoReply;
        }
        let Some(mut cmd) = commands::lookup(args[0]) else {
            self.flag_transaction(slot);
            return self.reject(None, unknown_command(args));
        };
        if !cmd.subcommands.is_empty() && (args.len() >= 2 || cmd.arity != -1) {
            if args.len() < 2 {
                self.flag_transaction(slot);
                return self.reject(Some(cmd), commands::wrong_arity(cmd.name));
            }
            match commands::lookup_subcommand(cmd, args[1]) {
                Some(sub) => cmd = sub,
                None => {
                    self.flag_transaction(slot);
                    return self.reject(Some(cmd), commands::unknown_subcommand(args));
                }
            }
        }
        if !commands::arity_ok(cmd.arity, args.len()) {
            self.flag_transaction(slot);
            return self.reject(Some(cmd), commands::wrong_arity(cmd.name));
        }
        if cmd.flags & flags::PROTECTED != 0 {
            if let Some(reply) = self.protected_command_refusal(slot, cmd) {
                self.flag_transaction(slot);
                return self.reject(Some(cmd), reply);
            }
        }
        {
            let c = self.client_mut(slot);
            c.last_cmd = cmd.name;
            if !c.authenticated && cmd.flags & flags::NO_AUTH == 0 {
                self.flag_transaction(slot);
                return self.reject(Some(cmd), commands::errors::NOAUTH);
            }
            // ACL: one flag test for unrestricted users (src/acl).
            if !c.acl_free {
                if let Err(d) = self.acl_check(slot, cmd, args) {
                    self.flag_transaction(slot);
                    let reply = self.acl_deny(slot, d, cmd, args);
                    return self.reject(Some(cmd), reply);
                }
            }
        }
        // Cluster mode: keys served elsewhere get a redirection (src/cluster).
        if self.cluster.is_some() {
            if let Some(reply) = crate::cluster::route(self, slot, cmd, args) {
                if cmd.name == "exec" {
                    self.discard_transaction(slot);
                } else {
                    self.flag_transaction(slot);
                }
                return self.reject(Some(cmd), reply);
            }
        }
        if self.busy.is_none() {
            self.pre_command_oom = self.config.maxmemory > 0 && !self.perform_evictions();
        }
        if self.pre_command_oom
            && self.busy.is_none()
            && self.effective_flags(slot, cmd, args) & flags::DENYOOM != 0
        {
            // EXEC of a queue holding a command that may grow memory is refused as that
            // command would be, aborting the transaction (Redis 7).
            return self.refuse(slot, cmd, crate::scripting::OOM.to_string());
        }
        // The client-tracking table is kept within its limit before each command (tracking.rs).
        let max_keys = self.config.tracking_table_max_keys;
        if max_keys != 0 && self.tracking.total_keys() as u64 > max_keys {
            self.tracking_limit_keys(Some(slot));
        }
        if let Some(text) = self.disk_error_rejection(slot, cmd, args) {
            return self.refuse(slot, cmd, text);
        }
        // READONLY and MASTERDOWN need a master link, NOREPLICAS min-replicas-to-write.
        if self.repl.link.is_some() || self.config.min_replicas_to_write != 0 {
            if let Some(text) = crate::replication::refusal(self, slot, cmd, args) {
                return self.refuse(slot, cmd, text.to_string());
            }
        }
        // A replica's link carries REPLCONF and the like: a command that reads or
        // writes the keyspace is refused (and its reply then drops the link), so a
        // replica cannot use its exemption from CLIENT PAUSE to reach the data.
        if self.client(slot).repl_role == Some('S')
            && cmd.flags & (flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) != 0
        {
            return self.refuse(
                slot,
                cmd,
                "ERR Replica can't interact with the keyspace".to_string(),
            );
        }
        // RESP2 subscriber restrictions and MULTI queueing (multi.rs).
        if let Some(reply) = self.intercept(slot, cmd, args) {
            return reply;
        }
        self.call(slot, cmd, args)
    }

    /// Refuses a command before it runs, as Redis's rejectCommand: a refused EXEC
    /// aborts its transaction naming the reason (EXECABORT), any other command inside
    /// MULTI flags the transaction so that its EXEC aborts.
    fn refuse(&mut self, slot: usize, cmd: &'static Command, text: String) -> Reply {
        if cmd.name == "exec" {
            self.discard_transaction(slot);
            let abort = format!("EXECABORT Transaction discarded because of: {text}");
            return self.reject(Some(cmd), Reply::error(abort));
        }
        self.flag_transaction(slot);
        self.reject(Some(cmd), Reply::error(text))
    }

    /// The flags `args` runs with, as Redis's getCommandFlags: EVAL and FCALL take
    /// their script's declared ones; EXEC adds those of every queued command (Redis's
    /// `mstate.cmd_flags`). Called only where a refusal may apply.
    pub(crate) fn effective_flags(
        &self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> u32 {
        if cmd.name == "exec" {
            return cmd.flags | self.queued_flags(slot).0;
        }
        crate::scripting::command_flags(self, cmd, args)
    }

    /// The flags of `slot`'s queued commands (each as `effective_flags` sees it):
    /// those any of them has, and those all of them have (Redis's `mstate.cmd_flags`
    /// and the complement of `cmd_inv_flags`). No queue: `(0, !0)`.
    pub(crate) fn queued_flags(&self, slot: usize) -> (u32, u32) {
        let Some(m) = self.client(slot).tx.multi.as_ref() else {
            return (0, !0);
        };
        m.queue.iter().fold((0, !0), |(any, all), q| {
            let qargs: Vec<&[u8]> = q.args.iter().map(Vec::as_slice).collect();
            let f = crate::scripting::command_flags(self, q.cmd, &qargs);
            (any | f, all & f)
        })
    }

    /// Calls a resolved command: the handler, then statistics, slow log and the
    /// after-command work (notifications, expired-key events).
    pub fn call(&mut self, slot: usize, cmd: &'static Command, args: &[&[u8]]) -> Reply {
        // One wall-clock read gives both the command's `now_ms` and its start time.
        // Nested calls see the outermost command's time (`time_snapshot_ms`).
        let start_us = crate::keyspace::unix_us();
        let outer_client = self.current_client;
        let now_ms = if self.call_nesting == 0 {
            self.time_snapshot_us = start_us;
            self.current_client = Some(slot);
            self.client_mut(slot).executing = true;
            self.time_snapshot_ms = start_us / 1000;
            self.time_snapshot_ms
        } else {
            self.time_snapshot_ms
        };
        // CLIENT NO-TOUCH spares every lookup of the client's commands, reads and
        // writes, except TOUCH itself. A script's commands (run by the scripting
        // client) keep the setting of the EVAL/FCALL that runs them.
        let client = self.client(slot);
        if self.call_nesting == 0 || client.in_exec {
            self.ks.no_touch = client.no_touch && cmd.name != "touch";
        }
        self.call_nesting += 1;
        let db = self.client(slot).db;
        let mark = self.stream_begin();
        let stream_pos = self.stream.position();
        let reply = {
            let mut ctx = Ctx {
                ex: self,
                client: slot,
                db,
                now_ms,
                cmd,
            };
            // A bug in one command must cost that command, never the process and every
            // other client's data: the panic becomes an error reply (and a log line).
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                (cmd.handler)(&mut ctx, args)
            })) {
                Ok(reply) => reply,
                Err(payload) => command_panicked(cmd, args, payload.as_ref()),
            }
        };
        self.call_nesting -= 1;
        self.stream_end(mark, cmd, args, &reply, db);
        let pos = self.stream.position();
        if pos != stream_pos {
            // WAIT waits for replicas to reach this client's last write, WAITAOF for
            // the AOF's fsync to pass it.
            self.client_mut(slot).woff = crate::replication::write_offset(self);
            self.client_mut(slot).aof_woff = pos;
        }
        let usec = (crate::keyspace::unix_us() - start_us).max(0) as u64;
        if self.call_nesting == 0 {
            self.stats.eventloop_cmd_usec += usec;
        }
        // A command that left its client blocked is accounted once, when it is
        // finally served, times out or is unblocked (Redis's call() skips blocked
        // clients; blocking.rs counts the other two).
        let blocked = matches!(reply, Reply::NoReply) && self.blocking.is_blocked(slot);
        // An error a script already counted (scriptCall) is not counted again.
        let counted = std::mem::take(&mut self.error_reply_counted);
        if !blocked {
            self.stats.total_commands_processed += 1;
            let st = self.cmd_stats.entry(cmd.name);
            st.calls += 1;
            st.usec += usec;
            if self.config.latency_tracking {
                st.latency
                    .get_or_insert_with(Default::default)
                    .record_usec(usec);
            }
            if let Reply::Error(e) = &reply {
                st.failed_calls += 1;
                if !counted {
                    self.count_error(e);
                }
            }
        }
        // Inside EXEC the after-command work waits for the end of the transaction
        // (multi.rs); tracking, CLIENT CACHING and MONITOR see every command (signals.rs).
        if !self.client(slot).in_exec {
            self.after_command();
        }
        self.after_call(slot, cmd, args, &reply);
        if self.call_nesting == 0 {
            self.current_client = outer_client;
            if let Some(Some(c)) = self.clients.get_mut(slot) {
                c.executing = false;
            }
        }
        // A command that blocked is logged when it is served (its re-execution comes
        // back through here), not when it blocks.
        if cmd.flags & flags::SKIP_SLOWLOG == 0 && !blocked {
            self.slowlog_maybe(slot, cmd, args, usec);
        }
        let event = if cmd.flags & flags::FAST != 0 {
            "fast-command"
        } else {
            "command"
        };
        self.latency
            .add_if_needed(self.config.latency_monitor_threshold, event, usec / 1000);
        reply
    }

    /// Work that happens after each command: keys that expired during it become
    /// events, and notifications raised are delivered.
    fn after_command(&mut self) {
        // Expired keys touch WATCH/tracking and raise `expired` (signals.rs); then the
        // notifications are published (pubsub.rs). BCAST invalidations wait for the end
        // of the event-loop turn (`tracking_flush_bcast`).
        self.drain_expired_events();
        self.deliver_notifications();
    }

    /// Records a keyspace notification if its class is enabled.
    pub fn notify(&mut self, class: u32, event: &'static str, db: usize, key: Vec<u8>) {
        if self.notify_classes & class != 0 {
            self.pending_notifications.push((class, event, db, key));
        }
    }

    /// MISCONF: while data cannot be persisted (`persistence::disk_error`), write
    /// commands, an EXEC with writes queued and PING are refused, as Redis's
    /// processCommand does after the OOM check. The master's stream is applied anyway
    /// only with replica-ignore-disk-write-errors; otherwise the replica stops, as in Redis.
    fn disk_error_rejection(
        &mut self,
        slot: usize,
        cmd: &'static Command,
        args: &[&[u8]],
    ) -> Option<String> {
        let error = crate::persistence::disk_error(self)?;
        let writes =
            cmd.name == "ping" || self.effective_flags(slot, cmd, args) & flags::WRITE != 0;
        if !writes || self.persist.loading {
            return None;
        }
        if self
            .repl
            .link
            .as_ref()
            .is_some_and(|l| l.client == Some(slot))
        {
            if !self.config.repl_ignore_disk_write_error && cmd.name != "ping" {
                crate::log::warning(
                    "Guru Meditation: Replica was unable to write command to disk.",
                );
                std::process::exit(1);
            }
            static LAST_LOG_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let now = crate::keyspace::unix_ms() as u64;
            let last = LAST_LOG_MS.load(std::sync::atomic::Ordering::Relaxed);
            if now > last + 10_000 {
                LAST_LOG_MS.store(now, std::sync::atomic::Ordering::Relaxed);
                crate::log::warning(
                    "Replica is applying a command even though it is unable to write to disk.",
                );
            }
            return None;
        }
        Some(crate::persistence::disk_error_message(error))
    }

    /// DEBUG and MODULE LOAD/LOADEX/UNLOAD are refused unless `enable-debug-command` or
    /// `enable-module-command` allows this client (`local`: loopback or unix socket).
    pub(crate) fn protected_command_refusal(&self, slot: usize, cmd: &Command) -> Option<Reply> {
        let (allowed, name, option) = if cmd.name == "debug" {
            (
                self.config.enable_debug_command,
                "DEBUG",
                "enable-debug-command",
            )
        } else {
            (
                self.config.enable_module_command,
                "MODULE",
                "enable-module-command",
            )
        };
        if allowed.allows(self.client(slot).is_local()) {
            return None;
        }
        Some(Reply::error(format!(
            "ERR {name} command not allowed. If the {option} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
        )))
    }

    /// The wall-clock time, in microseconds, at which the outermost command now
    /// running started: a script's or a transaction's commands all see the same.
    pub fn command_time_us(&self) -> i64 {
        self.time_snapshot_us
    }

    /// A command refused before it ran: counted as rejected, its error in the error
    /// statistics (also for commands refused inside scripts).
    pub fn reject(&mut self, cmd: Option<&'static Command>, reply: Reply) -> Reply {
        if let Some(c) = cmd {
            self.cmd_stats.entry(c.name).rejected_calls += 1;
        }
        if let Reply::Error(e) = &reply {
            self.count_error(e);
        }
        reply
    }

    /// Counts an error reply produced outside `call` (INFO errorstats).
    pub fn count_error_pub(&mut self, e: &str) {
        self.count_error(e);
    }

    fn count_error(&mut self, e: &str) {
        self.stats.total_error_replies += 1;
        if self.stats.errorstats_disabled {
            return;
        }
        // Redis's afterErrorReply: the code is the first word when a space ends it
        // within the error's first 32 bytes (its '-' counted), else ERR.
        let code = match e.bytes().take(31).position(|b| b == b' ') {
            Some(i) => &e[..i],
            None => "ERR",
        };
        if let Some(n) = self.error_stats.get_mut(code) {
            *n += 1;
            return;
        }
        if self.error_stats.len() < ERRORSTATS_MAX {
            self.error_stats.insert(code.to_string(), 1);
            return;
        }
        // Too many distinct codes (a script's error_reply with made-up prefixes): as
        // Redis, say so once, drop the table and stop until CONFIG RESETSTAT.
        let mut codes: Vec<&str> = self.error_stats.keys().map(|k| k.as_str()).collect();
        codes.sort_unstable();
        crate::log::warning(
            "Errorstats stopped adding new errors because the number of errors reached the limit, may be misuse of lua error_reply, please check INFO ERRORSTATS, this can be re-enabled via CONFIG RESETSTAT.",
        );
        crate::log::warning(&format!("Current errors code list: {}", codes.join(", ")));
        self.drop_error_stats();
        self.error_stats.insert("ERRORSTATS_DISABLED".into(), 1);
        self.stats.errorstats_disabled = true;
    }

    /// Empties the error table as Redis's resetErrorTableStats: a table of more than
    /// LAZYFREE_THRESHOLD codes is freed in the background, counted per code.
    fn drop_error_stats(&mut self) {
        let table = std::mem::take(&mut self.error_stats);
        let n = table.len();
        if n > crate::keyspace::lazyfree::LAZYFREE_THRESHOLD {
            self.ks.lazyfree.free_other(Box::new(table), n as u64);
        }
    }

    #[inline]
    pub(crate) fn slowlog_maybe(&mut self, slot: usize, cmd: &Command, args: &[&[u8]], usec: u64) {
        let threshold = self.config.slowlog_log_slower_than;
        // A zero-length log is off: entries are not even numbered (Redis 7.4).
        if threshold < 0 || (usec as i64) < threshold || self.config.slowlog_max_len == 0 {
            return;
        }
        self.slowlog_add(slot, cmd, args, usec);
    }

    #[inline(never)]
    fn slowlog_add(&mut self, slot: usize, cmd: &Command, args: &[&[u8]], usec: u64) {
        let max_args = 32;
        let mut saved: Vec<Vec<u8>> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i == max_args - 1 && args.len() > max_args {
                saved.push(
                    format!("... ({} more arguments)", args.len() - max_args + 1).into_bytes(),
                );
                break;
            }
            if monitor::redacted(cmd, args, i) {
                // Credentials never reach the slow log (Redis redacts them in argv).
                saved.push(b"(redacted)".to_vec());
            } else if a.len() > 128 {
                let mut v = a[..128].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                saved.push(v);
            } else {
                saved.push(a.to_vec());
            }
        }
        let c = self.client(slot);
        let entry = SlowlogEntry {
            id: self.slowlog_next_id,
            time: unix_ms() / 1000,
            duration_us: usec,
            args: saved,
            addr: c.addr.clone(),
            name: c.name.clone().unwrap_or_default(),
        };
        self.slowlog_next_id += 1;
        self.slowlog.push_front(entry);
        while self.slowlog.len() > self.config.slowlog_max_len.max(0) as usize {
            self.slowlog.pop_back();
        }
    }

    /// Applies `client-output-buffer-limit` (`normal`, `replica` for replicas, or
    /// `pubsub` for subscribers) to a client.
    #[inline(always)]
    pub(crate) fn check_output_limits(&mut self, slot: usize) {
        // Nearly every command: no replicas, an ordinary client, and the `normal`
        // class unlimited (its default).
        if self.repl.peers.is_empty() {
            let normal = self.config.client_output_buffer_limit[0];
            if normal.hard == 0 && normal.soft == 0 && !self.client(slot).is_pubsub() {
                return;
            }
        }
        self.apply_output_limits(slot);
    }

    /// `check_output_limits` once a limit may apply.
    #[inline(never)]
    fn apply_output_limits(&mut self, slot: usize) {
        // Replicas count what `replication::output_usage` says (never their image).
        let (class, used) = match crate::replication::output_usage(self, slot) {
            Some(used) => (1, used),
            None => {
                let c = self.client(slot);
                // Subscribed clients are held to the `pubsub` class.
                let class = if c.is_pubsub() { 2 } else { 0 };
                let limit = self.config.client_output_buffer_limit[class];
                if limit.hard == 0 && limit.soft == 0 {
                    return;
                }
                (class, c.output_limit_usage() as u64)
            }
        };
        let mut limit = self.config.client_output_buffer_limit[class];
        // A replica's hard limit is at least the backlog's size, as Redis: a partial
        // resynchronization may hand it that much, which it shares with the backlog.
        if class == 1 && limit.hard > 0 {
            limit.hard = limit.hard.max(self.config.repl_backlog_size);
        }
        let c = self.client_mut(slot);
        if limit.hard == 0 && limit.soft == 0 {
            return;
        }
        let mut over = limit.hard > 0 && used >= limit.hard;
        if limit.soft > 0 && used >= limit.soft {
            // As Redis: the soft limit counts once it has held for more than
            // `soft_seconds` whole seconds of the clock since it was first seen.
            let now = unix_ms() / 1000;
            match c.soft_limit_since {
                None => c.soft_limit_since = Some(now),
                Some(since) => over |= now - since > limit.soft_seconds as i64,
            }
        } else {
            c.soft_limit_since = None;
        }
        if over {
            self.close_for_output_limit(slot);
        }
    }

    /// Bytes a reply being built for `slot` may still take before the client's
    /// output-buffer hard limit would close it; `usize::MAX` without a hard limit.
    pub(crate) fn reply_room(&self, slot: usize) -> usize {
        let c = self.client(slot);
        if c.embedded {
            // Scripts' and the master link's pseudo-clients have no buffer limit.
            return usize::MAX;
        }
        let class = if c.is_pubsub() { 2 } else { 0 };
        match self.config.client_output_buffer_limit[class].hard {
            0 => usize::MAX,
            // The unwritten part of the reply buffer does not count (check_output_limits).
            hard => {
                let buffer_room = c.reply_buf_size.saturating_sub(c.pending_output());
                (hard as usize).saturating_sub(c.output_limit_usage()) + buffer_room
            }
        }
    }

    /// Whether a reply for `slot` may be written a piece at a time as its socket
    /// drains (`Reply::Picks`) rather than built whole: only for a socket client
    /// running a command of its own (not EXEC's, not a script's, not a replica's or
    /// the master link's) with its reply on, while nothing measures its memory (no
    /// output-buffer limit for its class, no maxmemory-clients), so that streaming
    /// changes nothing a limit would have seen.
    pub(crate) fn reply_streamable(&self, slot: usize) -> bool {
        let c = self.client(slot);
        if c.embedded
            || c.script
            || c.in_exec
            || c.monitor
            || c.repl_role.is_some()
            || c.reply_mode != ReplyMode::On
            || self.busy.is_some()
            || self.client_mem.limit != usize::MAX
        {
            return false;
        }
        let class = if c.is_pubsub() { 2 } else { 0 };
        let limit = self.config.client_output_buffer_limit[class];
        limit.hard == 0 && limit.soft == 0
    }

    /// Schedules a client past its output-buffer limit to be closed, as Redis does.
    pub(crate) fn close_for_output_limit(&mut self, slot: usize) {
        let c = self.client_mut(slot);
        if c.close_asap {
            return;
        }
        c.close_asap = true;
        crate::log::warning(&format!(
            "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            c.id, c.addr
        ));
        self.close_pending = true;
        self.stats.client_outbuf_limit_disconnections += 1;
    }

    // ----- timers ------------------------------------------------------------------

    /// Milliseconds from `now` (the end of the loop's last turn) until the next cron
    /// tick, or a blocked client's, a replication timer's or the snapshot walk's turn, is due.
    pub fn ms_until_cron(&self, now: Instant) -> u64 {
        let walk = if self.persist.walking() { 1 } else { u64::MAX };
        ceil_ms(self.next_cron.saturating_duration_since(now))
            .min(self.blocking.ms_until_deadline(now))
            .min(crate::replication::ms_until_due(self, now))
            .min(walk)
    }

    /// When the last cron tick began its work.
    pub fn cron_started(&self) -> Instant {
        self.cron_began
    }

    /// Periodic work: rehashing, idle-client timeouts, ops sampling, and the active
    /// expiry budget for the tick. Returns whether a tick ran.
    pub fn cron(&mut self) -> bool {
        self.cron_at(Instant::now())
    }

    /// `cron` at `now`: the event loop passes its turn's start, read once per turn,
    /// so a turn without a tick costs no clock read here; ticks stay `1 / hz` apart.
    pub fn cron_at(&mut self, now: Instant) -> bool {
        if now < self.next_cron {
            return false;
        }
        let period = cron_period(&self.config);
        self.next_cron = now + period;
        self.cron_began = Instant::now();
        // An elapsed CLIENT PAUSE ends here too, so expiry resumes with no client asking.
        self.current_pause();
        crate::crash::arm_watchdog(self.config.stored_i64("watchdog-period"));
        if self.cron_paused {
            return false;
        }
        self.ks.housekeeping();
        // Redis's active expiry may take up to 25% of each tick at effort 1.
        let effort = self.config.active_expire_effort.clamp(1, 10) as u32;
        self.expire_budget = period * (25 + 2 * (effort - 1)) / 100;
        // Fields of hashes with per-field TTLs (HEXPIRE) expire in their own 1 ms slice.
        // A replica's keys expire by its master's DELs only.
        if self.active_expire
            && self.ks.effective_expire_mode() == crate::keyspace::ExpireMode::Delete
        {
            crate::commands::hashes::active_expire_fields(
                self,
                unix_ms(),
                Duration::from_millis(1),
            );
            self.after_command();
        }
        // A writable replica expires the keys its own clients gave a TTL.
        if self.ks.expire_mode == crate::keyspace::ExpireMode::Hide
            && !self.ks.expire_paused
            && self.ks.expire_replica_keys(unix_ms()) > 0
        {
            self.after_command();
        }
        self.sample_ops();
        crate::scripting::ldb::reap_children();
        self.close_idle_clients();
        self.tracking_limit_keys(None);
        crate::persistence::snapshot::cron(self);
        crate::persistence::aof::cron(self);
        shutdown::cron(self);
        true
    }

    /// One slice of active expiry (at most 1 ms), run once per event-loop turn while
    /// the tick's budget lasts: an expiry storm is spread over many short slices with
    /// clients served in between, never one long pause.
    pub fn expire_slice(&mut self) {
        if !self.active_expire
            || self.ks.effective_expire_mode() != crate::keyspace::ExpireMode::Delete
            || self.expire_budget.is_zero()
            || self.ks.dbs.iter().all(|d| d.volatile == 0)
        {
            self.expire_budget = Duration::ZERO;
            return;
        }
        let slice = self.expire_budget.min(Duration::from_millis(1));
        let start = Instant::now();
        self.ks.active_expire_cycle(unix_ms(), slice);
        let spent = start.elapsed();
        let threshold = self.config.latency_monitor_threshold;
        self.latency
            .add_if_needed(threshold, "expire-cycle", spent.as_millis() as u64);
        self.expire_budget = self
            .expire_budget
            .saturating_sub(spent.max(Duration::from_micros(100)));
        if !self.ks.expire_backlog {
            self.expire_budget = Duration::ZERO;
        }
        self.after_command();
    }

    /// Whether timer work is pending that wants the loop to come back at once.
    pub fn has_pending_timer_work(&self) -> bool {
        !self.expire_budget.is_zero()
            || self.persist.wants_turn()
            || self.tracking.has_pending_broadcast()
            || self.eviction_running
            || self.migrate.serializing()
    }

    /// Ends one event-loop turn that began at `start` with `commands_before` commands
    /// processed; returns the time it ended (the loop's next sleep is measured from it).
    pub fn record_eventloop_cycle(&mut self, start: Instant, commands_before: u64) -> Instant {
        let end = Instant::now();
        let st = &mut self.stats;
        let usec = end.saturating_duration_since(start).as_micros() as u64;
        st.eventloop_cycles += 1;
        st.eventloop_usec += usec;
        st.eventloop_max_usec = st.eventloop_max_usec.max(usec);
        st.eventloop_cmd_per_cycle_max = st
            .eventloop_cmd_per_cycle_max
            .max(st.total_commands_processed.saturating_sub(commands_before));
        end
    }

    fn sample_ops(&mut self) {
        let now = Instant::now();
        let st = &mut self.stats;
        st.eventloop_samples
            .push((now, st.eventloop_cycles, st.eventloop_usec));
        if st.eventloop_samples.len() > 16 {
            st.eventloop_samples.remove(0);
        }
        if let (Some(a), Some(b)) = (st.eventloop_samples.first(), st.eventloop_samples.last()) {
            let dt = b.0.duration_since(a.0).as_secs_f64();
            let cycles = b.1.saturating_sub(a.1);
            if dt > 0.0 {
                st.instantaneous_eventloop_cycles_per_sec = (cycles as f64 / dt) as u64;
                // The mean busy time of a turn over the sampled period.
                st.instantaneous_eventloop_duration_usec =
                    b.2.saturating_sub(a.2).checked_div(cycles).unwrap_or(0);
            }
        }
        st.net_samples
            .push((now, st.total_net_input_bytes, st.total_net_output_bytes));
        if st.net_samples.len() > 16 {
            st.net_samples.remove(0);
        }
        if let (Some(a), Some(b)) = (st.net_samples.first(), st.net_samples.last()) {
            let dt = b.0.duration_since(a.0).as_secs_f64();
            if dt > 0.0 {
                st.instantaneous_input_kbps = b.1.saturating_sub(a.1) as f64 / dt / 1024.0;
                st.instantaneous_output_kbps = b.2.saturating_sub(a.2) as f64 / dt / 1024.0;
            }
        }
        let total = self.stats.total_commands_processed;
        self.stats.ops_samples.push((now, total));
        if self.stats.ops_samples.len() > 16 {
            self.stats.ops_samples.remove(0);
        }
        if let (Some(first), Some(last)) = (
            self.stats.ops_samples.first(),
            self.stats.ops_samples.last(),
        ) {
            let dt = last.0.duration_since(first.0).as_secs_f64();
            if dt > 0.0 {
                self.stats.instantaneous_ops_per_sec = ((last.1 - first.1) as f64 / dt) as u64;
            }
        }
    }

    fn close_idle_clients(&mut self) {
        let timeout = self.config.timeout;
        if timeout == 0 {
            return;
        }
        let mut any = false;
        let blocking = &self.blocking;
        for (slot, c) in self.clients.iter_mut().enumerate() {
            let Some(c) = c.as_mut() else { continue };
            // Blocked clients wait as long as their own timeout says, as in Redis.
            if blocking.is_blocked(slot) {
                continue;
            }
            if !c.embedded && c.last_interaction.elapsed().as_secs() > timeout {
                c.close_asap = true;
                any = true;
            }
        }
        self.close_pending |= any;
    }

    /// Applies side effects of a configuration change (CONFIG SET).
    pub fn apply_config(&mut self) {
        if let Some(aof) = self.aof.as_mut() {
            aof.fsync = crate::persistence::aof::fsync_mode(&self.config.appendfsync);
            aof.timestamps = self.config.stored_bool("aof-timestamp-enabled");
        }
        self.sync_access_policy();
        self.sync_client_eviction_limit();
        if self.config.maxmemory > 0 && crate::alloc::used_memory() > self.config.maxmemory as usize
        {
            // As Redis's startEvictionTimeProc: a lowered limit starts evicting at
            // once, not with the next command.
            self.eviction_running = true;
        }
        crate::keyspace::table::set_grow_limit(self.config.maxmemory as usize);
        if self.config.maxmemory == 0 {
            // No limit: no pass will run to close an over-the-limit interval.
            self.eviction_running = false;
            self.eviction_exceeded(false);
        }
        self.notify_classes = self.config.notify_keyspace_events;
        self.acl_sync_requirepass();
        let _ = crate::log::configure(&self.config.loglevel, &self.config.logfile);
        // Announced names, ports and the preferred endpoint show at once.
        if let Some(mut cl) = self.cluster.take() {
            crate::cluster::apply_settings(&mut cl, self);
            self.cluster = Some(cl);
        }
    }

    /// Keeps the keyspace's access-field policy (LRU clock or LFU counter and its
    /// parameters) in step with maxmemory-policy, lfu-log-factor and lfu-decay-time.
    /// Switching between LRU and LFU leaves existing fields as they are: they are read
    /// under the new meaning until touched, as in Redis.
    pub fn sync_access_policy(&mut self) {
        // Not an access policy, but kept in step at the same moments.
        self.ks.lazy_server_del = self.config.lazyfree_lazy_server_del;
        self.ks.lazy_expire = self.config.lazyfree_lazy_expire;
        self.ks.replica_read_only = self.config.replica_read_only;
        self.ks.lfu = self.config.maxmemory_policy.ends_with("lfu");
        self.ks.lfu_params = crate::keyspace::LfuParams {
            log_factor: self.config.lfu_log_factor.clamp(0, u32::MAX as i64) as u32,
            decay_minutes: self.config.lfu_decay_time.clamp(0, u32::MAX as i64) as u32,
        };
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
        self.client_mem.evicted = 0;
        self.client_mem.shrinks = 0;
        self.client_mem.expands = 0;
        self.ks.lazyfree.reset_freed();
        self.cmd_stats.clear();
        self.drop_error_stats();
        self.slowlog.clear();
        let ks = &mut self.ks.stats;
        *ks = Default::default();
        let r = &mut self.repl;
        (r.sync_full, r.sync_partial_ok, r.sync_partial_err) = (0, 0, 0);
        self.persist.snapshot_starts = 0;
        self.persist.latest_start_us = 0;
        if let Some(e) = self.scripting.as_mut() {
            e.evicted_scripts = 0;
        }
    }

    /// Uptime in seconds.
    pub fn uptime(&self) -> u64 {
        self.start_time.elapsed().as_secs()
    }
}

/// `ERR unknown command 'x', with args beginning with: 'a' 'b' ` exactly as Redis
/// builds it (arguments listed while the list is under 128 bytes).
fn unknown_command(args: &[&[u8]]) -> Reply {
    let mut listed = String::new();
    for a in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let s = String::from_utf8_lossy(a);
        let s: String = s.chars().take(room).collect();
        listed.push_str(&format!("'{s}' "));
    }
    let name: String = String::from_utf8_lossy(args[0]).chars().take(128).collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// The reply and log entry for a command whose handler panicked (the panic hook has
/// already logged where). The command's effects up to the panic stay, as they would
/// after an error part-way through a Redis command.
fn command_panicked(cmd: &Command, args: &[&[u8]], payload: &(dyn std::any::Any + Send)) -> Reply {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let shown: Vec<String> = args
        .iter()
        .take(8)
        .map(|a| String::from_utf8_lossy(&a[..a.len().min(64)]).into_owned())
        .collect();
    crate::log::warning(&format!(
        "Internal error running command '{}' ({}): {what}",
        cmd.name,
        shown.join(" ")
    ));
    Reply::error(format!(
        "ERR Internal error running command '{}', the command was aborted (see the server log)",
        cmd.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_waits_round_up_to_whole_milliseconds() {
        assert_eq!(ceil_ms(Duration::from_micros(99_400)), 100);
        assert_eq!(ceil_ms(Duration::from_micros(100_000)), 100);
        assert_eq!(ceil_ms(Duration::from_micros(1)), 1);
        assert_eq!(ceil_ms(Duration::ZERO), 0);
    }
}
