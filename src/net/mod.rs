//! Layer 6: the network event loop on mio (epoll, edge-triggered).
//!
//! One thread accepts, reads, parses and hands whole commands to the executor, then
//! writes each client's encoded replies with one `write` per connection per loop turn.
//! A connection owns only its socket, read buffer and parser state; everything a
//! command can see lives in the executor. Reads are bounded per turn so one client
//! pipelining megabytes cannot starve the others.

mod batch;
mod busy;
mod io_phases;
mod io_threads;
pub(crate) mod socket;

pub use socket::bind_tcp;
use socket::{Listener, Stream};

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::config::Config;
use crate::exec::Executor;
use crate::protocol::{Limits, Request, RequestParser};
use busy::BusyServer;

/// Bytes read per `read` call at most, and per connection per loop turn at most: a
/// client pipelining megabytes gets one 64 KB slice of work per turn, like Redis's
/// 16 KB reads, so a PING from another client waits for at most about a millisecond.
const READ_CHUNK: usize = 64 * 1024;
const READ_BUDGET_PER_TURN: usize = 64 * 1024;
/// Written output at the front of a buffer that a slow reader leaves behind is
/// dropped once it is this big and at least half of the buffer.
const OUT_KEEP: usize = 64 * 1024;
/// Output one connection's commands may produce per loop turn before the rest of its
/// pipeline waits for the next turn, as the read budget bounds input: a pipeline of
/// a thousand 1 MB GETs no longer holds every other client for a second.
const OUTPUT_BUDGET_PER_TURN: usize = 1024 * 1024;
/// Blocks of a reply list handed to one vectored write at most.
const WRITE_SLICES: usize = 64;
/// Pieces (`exec::client::STREAM_CHUNK` each) of a streamed reply written per
/// connection per loop turn while its socket keeps taking them: other clients are
/// served between such turns.
const STREAM_PIECES_PER_TURN: usize = 4;
/// A recently active client's own query buffer (Redis's PROTO_IOBUF_LEN): kept until
/// the client has been idle for `QBUF_IDLE_SECS`, then freed by `clients_cron`.
const QBUF_PRIVATE: usize = 16 * 1024;
/// Announced bulks from this size on get room for the whole argument at once (Redis's
/// PROTO_MBULK_BIG_ARG), up to `READ_CHUNK * 16`.
const QBUF_BIG_ARG: usize = 32 * 1024;
/// Above this a buffer much larger than its recent peak is trimmed (Redis's
/// PROTO_RESIZE_THRESHOLD).
const QBUF_RESIZE_THRESHOLD: usize = 32 * 1024;
const QBUF_IDLE_SECS: u64 = 2;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
/// An I/O thread posted results while the loop slept (net/io_threads.rs).
const IO_WAKE_TOKEN: Token = Token(usize::MAX - 67);
const LISTENER_BASE: usize = usize::MAX - 64;

struct Conn {
    stream: Stream,
    /// Read buffer: bytes `start..end` are received but not yet consumed. Empty while
    /// nothing is pending: reads then borrow the loop's shared buffer (`Net::spare_rbuf`).
    rbuf: Vec<u8>,
    /// `rbuf` is the shared buffer, borrowed for this read (see `settle_rbuf`).
    rbuf_borrowed: bool,
    /// The most bytes pending since the last `clients_cron` (Redis's
    /// querybuf_peak).
    qbuf_peak: usize,
    start: usize,
    end: usize,
    parser: RequestParser,
    /// Owned arguments of an inline command (multibulk arguments are borrowed).
    inline: Vec<Vec<u8>>,
    /// Registered for writability: only while output is left after a write. Always
    /// registering would have the kernel queue a readiness event on every ACK that
    /// frees send-buffer space, a cost every request paid in system time.
    wants_write: bool,
    /// The peer's FIN was reported: a short read no longer means the socket is drained,
    /// since the end of stream is still to be read and no new edge will announce it.
    peer_closed: bool,
    /// TLS with `tls-auth-clients-user CN`: the certificate's user is still to be
    /// looked at (`Net::authenticate_by_cert`, after the handshake).
    cn_auth: bool,
    /// A TLS connection refused at accept: the text it gets once its handshake is
    /// done (`Net::refuse_after_handshake`).
    refusal: Option<&'static [u8]>,
    /// The I/O thread its reads and writes go to (`io-threads`; 0 is the loop's).
    io_thread: usize,
    /// Listed in `Net::readable` this turn: one read job per connection per phase.
    read_noted: bool,
    /// With I/O threads: the box the parser travels in to the worker that reads for
    /// the connection (`batch::ParseAhead`), kept between reads. Back home it says
    /// what the worker parsed: the first command in the buffer (its ranges are the
    /// parser's), under which limits, and the batch behind it.
    lent: Option<Box<batch::ParseAhead>>,
    /// Its client's id: an I/O thread's result names the connection by slot and id.
    id: u64,
    /// With I/O threads: a read into `rbuf`, or a write of the sealed output, is queued
    /// on the connection's worker (net/io_phases.rs says what that keeps still).
    read_queued: bool,
    write_queued: bool,
    /// Readable again while a read was queued: read once more after its result.
    read_again: bool,
    /// Asked to write while a write was queued: write once more after its result
    /// (the writable event it may have been is not repeated).
    write_again: bool,
}

/// Everything the loop owns besides the executor. It sits behind `Rc<RefCell>` so a
/// script past `busy-reply-threshold` can borrow it from inside its command to serve
/// other clients (`serve_busy`); the connection whose command is running is taken out
/// of `conns` meanwhile (`Server::process`), so that round never touches it.
struct Net {
    poll: Poll,
    listeners: Vec<Listener>,
    /// Boxed, so a slot costs 8 bytes once its connection is gone.
    conns: Vec<Option<Box<Conn>>>,
    signals: mio::net::UnixStream,
    /// Set by SIGINT (both signals wake the loop through `signals`).
    sigint: Arc<AtomicBool>,
    /// Connections with unread input left over from the last turn's budget.
    pending_reads: Vec<usize>,
    /// The shared read buffer (Redis 7.4's reusable query buffer): an idle connection
    /// owns no read buffer, so thousands of idle clients cost no 64 KB each.
    spare_rbuf: Vec<u8>,
    /// A connection holds the shared buffer (`Conn::rbuf_borrowed`) until its commands
    /// ran: with I/O threads, other connections read at the same time.
    spare_lent: bool,
    /// The slot the next cron tick's share of clients starts at (`clients_cron`).
    cron_cursor: usize,
    /// The running command's connection saw its peer close during a busy script's round.
    caller_peer_closed: bool,
    /// Connections whose next command is held back (CLIENT PAUSE).
    held: Vec<usize>,
    /// Event buffer of the busy-script rounds, and the start of the busy script whose
    /// first round looked at every socket (net/busy.rs).
    busy_events: Events,
    busy_swept: Option<std::time::Instant>,
    /// Events for the master link and the cluster bus that a busy script's or a
    /// load's round polled: (token, readable, writable). Those rounds serve clients
    /// only, and edge-triggered polling will not report these again, so the main
    /// loop dispatches them at its next turn.
    deferred: Vec<(usize, bool, bool)>,
    /// Connections whose output waits for a failed AOF write to succeed
    /// (`aof::reply_waits_for_write`); looked at again every turn.
    aof_held: Vec<usize>,
    /// Connections whose streamed reply (`Client::stream`) the socket took to the last
    /// byte this turn: written again next turn, as no writable event will come.
    streaming: Vec<usize>,
    /// Connections whose pipeline goes on next turn: their streamed reply just ended,
    /// or their commands spent the turn's output budget (`OUTPUT_BUDGET_PER_TURN`).
    resume: Vec<usize>,
    /// `io-threads` above 1: the threads the turn's reads and writes are spread over.
    io: Option<io_threads::IoThreads>,
    /// With I/O threads: connections reported readable this turn, read together, and
    /// listeners with connections to accept after them.
    readable: Vec<usize>,
    accepting: Vec<usize>,
    /// Results of the I/O threads being taken in (kept for its capacity), those for a
    /// connection out of the table when they came, and connections whose read is in
    /// but whose commands wait for the loop (net/io_phases.rs).
    io_done: Vec<io_threads::Done>,
    io_later: Vec<io_threads::Done>,
    io_completed: Vec<(usize, bool)>,
    /// The connections whose writes a turn queues (`flush_threaded`), kept for its
    /// capacity.
    io_writes: Vec<usize>,
}

pub struct Server {
    net: Rc<RefCell<Net>>,
    pub ex: Executor,
}

impl Server {
    /// Binds the configured addresses and prepares the loop.
    pub fn bind(mut config: Config) -> io::Result<Server> {
        config.maxclients =
            crate::util::fdlimit::adjust(config.maxclients).map_err(io::Error::other)?;
        let poll = Poll::new()?;
        crate::commands::install_renames(&config.renamed_commands)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tls = if crate::tls::needed(&config) {
            let ctx = crate::tls::build(&config).map_err(|_| {
                io::Error::other("Failed to configure TLS. Check logs for more info.")
            })?;
            Some(std::sync::Arc::new(ctx))
        } else {
            None
        };
        let (tcp, tcp_addrs) = bind_tcp(&config.bind, config.port, config.tcp_backlog, &[])?;
        let mut listeners: Vec<Listener> = tcp
            .into_iter()
            .map(|l| Listener::Tcp(TcpListener::from_std(l)))
            .collect();
        let tls_port = crate::tls::port(&config);
        let (tls_listeners, tls_addrs) = bind_tcp(&config.bind, tls_port, config.tcp_backlog, &[])?;
        listeners.extend(
            tls_listeners
                .into_iter()
                .map(|l| Listener::Tls(TcpListener::from_std(l))),
        );
        let unixsocket = config.stored_str("unixsocket");
        if !unixsocket.is_empty() {
            let perm = u32::from_str_radix(&config.stored_str("unixsocketperm"), 8).unwrap_or(0);
            listeners.push(socket::bind_unix(&unixsocket, perm, config.tcp_backlog)?);
        }
        if listeners.is_empty() {
            return Err(io::Error::other(
                "Configured to not listen anywhere, exiting.",
            ));
        }
        for (i, l) in listeners.iter_mut().enumerate() {
            poll.registry()
                .register(l, Token(LISTENER_BASE + i), Interest::READABLE)?;
        }
        let (sig_read, sig_write) = std::os::unix::net::UnixStream::pair()?;
        sig_read.set_nonblocking(true)?;
        sig_write.set_nonblocking(true)?;
        let sigint = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, sigint.clone())?;
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::low_level::pipe::register(sig, sig_write.try_clone()?)?;
        }
        crate::process::install_signal_marks()?;
        let mut signals = mio::net::UnixStream::from_std(sig_read);
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        let io_thread_count = config.stored_i64("io-threads").max(1) as usize;
        let io = if io_thread_count > 1 {
            let always = config.stored_bool("io-threads-always-active");
            let waker = mio::Waker::new(poll.registry(), IO_WAKE_TOKEN)?;
            Some(io_threads::IoThreads::start(
                io_thread_count,
                always,
                waker,
            )?)
        } else {
            None
        };
        let mut ex = Executor::new(config);
        ex.tcp_addrs = tcp_addrs;
        ex.tls_addrs = tls_addrs;
        ex.tls = tls;
        crate::alloc::mark_startup();
        let net = Rc::new(RefCell::new(Net {
            poll,
            listeners,
            conns: Vec::new(),
            signals,
            sigint,
            pending_reads: Vec::new(),
            spare_rbuf: Vec::new(),
            spare_lent: false,
            cron_cursor: 0,
            caller_peer_closed: false,
            held: Vec::new(),
            busy_events: Events::with_capacity(256),
            deferred: Vec::new(),
            busy_swept: None,
            aof_held: Vec::new(),
            streaming: Vec::new(),
            resume: Vec::new(),
            io,
            readable: Vec::new(),
            accepting: Vec::new(),
            io_done: Vec::new(),
            io_later: Vec::new(),
            io_completed: Vec::new(),
            io_writes: Vec::new(),
        }));
        Ok(Server { net, ex })
    }

    /// Loads the ACL file and the data (AOF or RDB), then connects to a configured
    /// master. Separate from `bind` so that, as in Redis, the startup banner and
    /// "Server initialized" are logged before loading, which may fail.
    pub fn load_data(&mut self) -> io::Result<()> {
        let ex = &mut self.ex;
        if ex.config.stored_bool("cluster-enabled") {
            let registry = self.net.borrow().poll.registry().try_clone()?;
            crate::cluster::init(ex, registry).map_err(io::Error::other)?;
        }
        crate::acl::load_at_startup(ex).map_err(io::Error::other)?;
        // The RDB loader serves clients between keys (they get -LOADING).
        ex.loading_server = Some(Rc::new(BusyServer(Rc::downgrade(&self.net))));
        // Partial files of snapshots a crash interrupted (the working directory is `dir`).
        let appenddir = std::path::PathBuf::from(&ex.config.appenddirname);
        let stale =
            crate::persistence::snapshot::remove_stale_temp_files(std::path::Path::new("."))
                + crate::persistence::snapshot::remove_stale_temp_files(&appenddir);
        if stale > 0 {
            crate::log::notice(&format!(
                "Removed {stale} temporary snapshot file(s) left by a previous run"
            ));
        }
        let loaded = crate::persistence::aof::load_at_startup(ex);
        ex.loading_server = None;
        loaded.map_err(io::Error::other)?;
        // Only once loaded: a slow script replayed from the AOF serves no clients.
        ex.set_busy_server(Rc::new(BusyServer(Rc::downgrade(&self.net))));
        ex.repl.registry = Some(self.net.borrow().poll.registry().try_clone()?);
        if let Some((host, port)) = ex.config.replicaof.clone() {
            crate::replication::replica::start(ex, host, port);
        }
        Ok(())
    }

    /// The addresses actually bound.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.net
            .borrow()
            .listeners
            .iter()
            .filter_map(|l| l.tcp_addr())
            .collect()
    }

    /// Runs until SHUTDOWN or a termination signal.
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        {
            let net = self.net.borrow();
            if net.listeners.iter().any(|l| l.is_tcp()) {
                crate::log::notice("Ready to accept connections tcp");
            }
            if net
                .listeners
                .iter()
                .any(|l| matches!(l, Listener::Unix(..)))
            {
                crate::log::notice("Ready to accept connections unix");
            }
            if net.listeners.iter().any(|l| l.is_tls()) {
                crate::log::notice("Ready to accept connections tls");
            }
        }
        crate::process::notify_ready(&self.ex.config, self.ex.repl.is_replica());
        // The clock is read twice a turn: at its start (the turn's time, and the cron's)
        // and at its end (its duration, and the next sleep's length).
        let mut turn_end = std::time::Instant::now();
        loop {
            // Pipelines that yielded last turn go on after this turn's events, so the
            // clients those events are for are served first.
            let resuming = std::mem::take(&mut self.net.borrow_mut().resume);
            let timeout = {
                let net = self.net.borrow();
                if self.ex.has_pending_timer_work()
                    || !net.streaming.is_empty()
                    || !resuming.is_empty()
                    || !net.deferred.is_empty()
                    || !net.readable.is_empty()
                    || !net.io_later.is_empty()
                    || !net.io_completed.is_empty()
                    || net.io.as_ref().is_some_and(|io| !io.may_sleep())
                {
                    Duration::ZERO
                } else if net.pending_reads.is_empty()
                    && net.held.is_empty()
                    && !crate::replication::replica::held(&self.ex)
                    && !crate::persistence::aof::write_postponed(&self.ex)
                {
                    Duration::from_millis(self.ex.ms_until_cron(turn_end).max(1))
                } else if net.pending_reads.is_empty() {
                    Duration::from_millis(1)
                } else {
                    Duration::ZERO
                }
            };
            let polled = self.net.borrow_mut().poll.poll(&mut events, Some(timeout));
            if let Some(io) = &self.net.borrow().io {
                io.awake();
            }
            if let Err(e) = polled {
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            let turn_start = std::time::Instant::now();
            self.ex.turn_started = turn_start;
            let commands_before = self.ex.stats.total_commands_processed;
            let deferred = std::mem::take(&mut self.net.borrow_mut().deferred);
            for (token, readable, writable) in deferred {
                if crate::replication::replica::owns_token(token) {
                    crate::replication::replica::on_token(&mut self.ex, token);
                } else {
                    crate::cluster::on_event(&mut self.ex, token, readable, writable);
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    SIGNAL_TOKEN => self.net.borrow_mut().on_signal(&mut self.ex),
                    // Results are taken in below (`io_turn`).
                    IO_WAKE_TOKEN => {}
                    Token(crate::commands::migrate_conn::WAKE_TOKEN) => {}
                    Token(t) if crate::replication::replica::owns_token(t) => {
                        crate::replication::replica::on_token(&mut self.ex, t)
                    }
                    Token(t) if crate::cluster::owns_token(t) => crate::cluster::on_event(
                        &mut self.ex,
                        t,
                        ev.is_readable() || ev.is_read_closed() || ev.is_error(),
                        ev.is_writable(),
                    ),
                    Token(t) if t >= LISTENER_BASE => {
                        let mut net = self.net.borrow_mut();
                        if net.io.is_some() {
                            // After the turn's reads, as one thread serves them: a
                            // client that closed is gone before a new one counts
                            // against maxclients.
                            net.accepting.push(t - LISTENER_BASE);
                        } else {
                            net.accept(&mut self.ex, t - LISTENER_BASE);
                        }
                    }
                    Token(slot) => {
                        if ev.is_read_closed() || ev.is_error() {
                            self.net.borrow_mut().mark_peer_closed(slot);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            let mut net = self.net.borrow_mut();
                            if net.io.is_some() {
                                // Read together after the events (`io_turn`), in
                                // the order the events came.
                                net.note_readable(slot);
                            } else {
                                drop(net);
                                self.read_and_process(slot);
                            }
                        }
                        if ev.is_writable() {
                            let mut net = self.net.borrow_mut();
                            if net.io.is_some() {
                                // Written with the turn's other output, by the
                                // threads when it is worth it.
                                if let Some(Some(_)) = net.conns.get(slot) {
                                    self.ex.mark_pending_write(slot);
                                }
                            } else if self.ex.stream.buf.is_empty() {
                                net.flush(&mut self.ex, slot);
                            } else if let Some(Some(_)) = net.conns.get(slot) {
                                // Writes of this turn are not in the AOF yet: the
                                // reply waits for flush_pending, after the AOF flush.
                                self.ex.mark_pending_write(slot);
                            }
                        }
                    }
                }
            }
            if self.net.borrow().io.is_some() {
                self.io_turn();
            }
            let accepting = std::mem::take(&mut self.net.borrow_mut().accepting);
            for idx in accepting {
                self.net.borrow_mut().accept(&mut self.ex, idx);
            }
            let pending = std::mem::take(&mut self.net.borrow_mut().pending_reads);
            for slot in pending {
                self.read_and_process(slot);
            }
            let held = std::mem::take(&mut self.net.borrow_mut().held);
            for slot in held {
                self.process(slot);
            }
            crate::replication::replica::resume_held(&mut self.ex);
            // Pipelines that yielded last turn (a streamed reply ended, or the output
            // budget was spent) go on; a streamed reply the socket keeps draining is
            // written again this turn.
            for slot in resuming {
                self.process(slot);
            }
            for slot in std::mem::take(&mut self.net.borrow_mut().streaming) {
                if self.ex.has_client(slot) {
                    self.ex.mark_pending_write(slot);
                }
            }
            // MIGRATEs serializing big keys take their slice; those whose transfer
            // finished are answered (commands/migrate.rs).
            if self.ex.migrate.serializing() {
                crate::commands::migrate::serialize_slice(&mut self.ex);
            }
            if self.ex.migrate.busy() {
                crate::commands::migrate::collect(&mut self.ex);
            }
            crate::exec::blocking::tick(&mut self.ex);
            loop {
                let resumed = self.ex.blocking.take_resumed();
                if resumed.is_empty() {
                    break;
                }
                for slot in resumed {
                    self.process(slot);
                }
            }
            // Replication timers, WAIT wake-ups, GETACK and pings (src/replication).
            crate::replication::tick(&mut self.ex);
            // The cluster bus: cron, state, nodes.conf, queued messages (src/cluster).
            if self.ex.cluster.is_some() {
                crate::cluster::before_sleep(&mut self.ex);
            }
            // Timers (Redis's time events) come before the turn's output goes out, as
            // Redis's beforeSleep follows them: what they queue (invalidations and DELs
            // of expired or evicted keys) is written now, not left to count against
            // maxmemory when the next command's eviction pass begins.
            if self.ex.cron_at(turn_start) {
                self.ex.close_pending = true;
                self.net.borrow_mut().clients_cron(&mut self.ex);
                self.ex.evict_if_over();
                // The tick's start is when `cron` began it.
                self.ex.stats.eventloop_cron_ns +=
                    self.ex.cron_started().elapsed().as_nanos() as u64;
            }
            self.ex.expire_slice();
            self.ex.eviction_slice();
            // BCAST invalidations, collected over the turn, go out once (Redis's beforeSleep).
            self.ex.tracking_flush_bcast();
            // The turn's writes reach the AOF (and, with appendfsync always, the disk)
            // before any reply announcing them is written; under everysec the write
            // may wait up to 2 s for a slow fsync in flight (aof::flush_turn).
            if self.ex.aof.is_some() {
                let aof_start = std::time::Instant::now();
                crate::persistence::aof::flush_turn(&mut self.ex);
                self.ex.stats.eventloop_aof_ns += aof_start.elapsed().as_nanos() as u64;
            } else {
                crate::persistence::aof::flush(&mut self.ex);
            }
            // WAITAOF clients whose writes the flush (or a finished fsync) made durable.
            if self.ex.blocking.has_ready() {
                crate::exec::blocking::handle_ready(&mut self.ex);
            }
            // Listeners CONFIG SET port/bind/tls-port replaced are swapped before its
            // reply goes out, so a client that read +OK finds the new ones.
            if let Some(new) = self.ex.rebind.take() {
                self.net.borrow_mut().replace_tcp_listeners(new, false);
            }
            if let Some(new) = self.ex.tls_rebind.take() {
                self.net.borrow_mut().replace_tcp_listeners(new, true);
            }
            self.net.borrow_mut().flush_pending(&mut self.ex);
            // Output that other clients' commands queued counts now (Redis's
            // beforeSleep eviction).
            self.ex.evict_if_over();
            if std::mem::take(&mut self.ex.close_pending) {
                self.net.borrow_mut().close_marked(&mut self.ex);
            }
            // The snapshot walker's slice comes after the turn's replies are out, so a
            // command that arrived during the last slice waits for that slice only,
            // not for its own turn's too. What finishing a snapshot queues (replies
            // to waiting clients, a replica's next step) goes out at once.
            crate::persistence::snapshot::tick(&mut self.ex);
            if !self.ex.pending_writes.is_empty() {
                self.net.borrow_mut().flush_pending(&mut self.ex);
            }
            // Replicas a failed image disconnects.
            if std::mem::take(&mut self.ex.close_pending) {
                self.net.borrow_mut().close_marked(&mut self.ex);
            }
            turn_end = self.ex.record_eventloop_cycle(turn_start, commands_before);
            // The shutdown sequence finished (exec/shutdown.rs): last output, then exit.
            if self.ex.shutdown.is_some() {
                crate::persistence::aof::flush(&mut self.ex);
                self.net.borrow_mut().flush_pending(&mut self.ex);
                // The last replies the I/O threads were given reach their sockets.
                if let Some(io) = self.net.borrow_mut().io.as_mut() {
                    io.wait_all_idle();
                }
                self.net.borrow_mut().close_listeners();
                crate::process::notify_stopping(&self.ex.config);
                crate::log::warning("Cinnabar is now ready to exit, bye bye...");
                return Ok(());
            }
        }
    }

    /// Reads what the socket has (within this turn's budget) and runs complete commands.
    fn read_and_process(&mut self, slot: usize) {
        self.go_on_reading(slot, READ_BUDGET_PER_TURN);
    }

    fn go_on_reading(&mut self, slot: usize, mut budget: usize) {
        loop {
            let got = self.net.borrow_mut().read_some(&mut self.ex, slot);
            let Some((n, drained)) = got else { return };
            self.process(slot);
            if drained {
                return;
            }
            budget = budget.saturating_sub(n);
            if budget == 0 {
                self.net.borrow_mut().pending_reads.push(slot);
                return;
            }
        }
    }

    /// Runs every complete command in the connection's buffer. The connection is out
    /// of the table meanwhile, so a busy script's round (`Net::serve_busy`) cannot
    /// touch it, and the table is not borrowed while commands run.
    fn process(&mut self, slot: usize) {
        let taken = self
            .net
            .borrow_mut()
            .conns
            .get_mut(slot)
            .filter(|c| c.as_ref().is_some_and(|c| !c.read_queued))
            .and_then(|c| c.take());
        // (A connection whose read is queued runs its commands once the read is in.)
        let Some(mut conn) = taken else { return };
        let stop = run_commands(&mut self.ex, slot, &mut conn);
        let mut guard = self.net.borrow_mut();
        let net = &mut *guard;
        conn.settle_rbuf(
            &mut net.spare_rbuf,
            &mut net.spare_lent,
            self.ex.client_mut(slot),
        );
        // A FIN reported while a busy script's round served others.
        conn.peer_closed |= std::mem::take(&mut net.caller_peer_closed);
        net.conns[slot] = Some(conn);
        match stop {
            Stop::Held => net.held.push(slot),
            Stop::Yielded => net.resume.push(slot),
            Stop::Done => {}
        }
        drop(guard);
        // The query buffer as it is now counts for maxmemory-clients.
        self.ex.update_client_mem_if_limited(slot);
        self.ex.evict_if_over();
        if self.ex.has_client(slot) && self.ex.client(slot).evicted {
            self.net.borrow_mut().close(&mut self.ex, slot);
        }
    }
}

/// Runs the complete commands in `conn`'s buffer; says why it stopped short of the
/// end, if it did (CLIENT PAUSE holds the client, or the turn's output budget is spent).
fn run_commands(ex: &mut Executor, slot: usize, conn: &mut Conn) -> Stop {
    let mut stop = Stop::Done;
    let output_at_start = ex.client(slot).pending_output();
    loop {
        if conn.start == conn.end {
            conn.start = 0;
            conn.end = 0;
            break;
        }
        {
            let c = ex.client(slot);
            // A streamed reply still being written holds the rest of the pipeline.
            if c.close_after_reply || c.close_asap || c.stream.is_some() {
                break;
            }
        }
        let limits = Limits {
            max_bulk_len: ex.config.proto_max_bulk_len,
            authenticated: ex.client(slot).authenticated,
        };
        let buf = &conn.rbuf[conn.start..conn.end];
        // The first command (and the batch behind it) may have been parsed already,
        // by the I/O thread that read it, under the limits that still hold.
        let ahead = conn.lent.as_mut().and_then(|l| l.take_first(&limits));
        let parsed = match ahead {
            Some(consumed) => Ok(Some(Request::Multibulk { consumed })),
            None => conn.parser.parse(buf, &limits),
        };
        match parsed {
            Ok(None) => break,
            Ok(Some(Request::Empty { consumed })) => conn.start += consumed,
            Ok(Some(Request::Multibulk { consumed })) => {
                // More commands wait behind this one: run them as a batch whose keys
                // are prefetched together.
                if conn.start + consumed < conn.end && limits.authenticated {
                    match batch::run_pipeline(
                        ex,
                        slot,
                        conn,
                        consumed,
                        &limits,
                        output_at_start,
                        ahead.is_some(),
                    ) {
                        Some(s) => {
                            stop = s;
                            break;
                        }
                        None => continue,
                    }
                }
                let (mut stack, mut heap) = ([&[][..]; ARGS_ON_STACK], Vec::new());
                let args = args_at(&mut stack, &mut heap, buf, conn.parser.ranges());
                if !ex.can_run(slot, args) {
                    // Blocked clients resume through `blocking.take_resumed`.
                    if !ex.blocking.is_blocked(slot) {
                        stop = Stop::Held;
                    }
                    break;
                }
                conn.report_qbuf(ex.client_mut(slot));
                if evicted_before_command(ex, slot) {
                    break;
                }
                ex.execute_and_reply(slot, args);
                conn.start += consumed;
                conn.parser.release_args();
                if spent_output_budget(ex, slot, output_at_start) {
                    stop = Stop::Yielded;
                    break;
                }
            }
            Ok(Some(Request::Inline { consumed, args })) => {
                conn.inline = args;
                let args: smallvec::SmallVec<[&[u8]; 8]> =
                    conn.inline.iter().map(|a| a.as_slice()).collect();
                if !ex.can_run(slot, &args) {
                    // Blocked clients resume through `blocking.take_resumed`.
                    if !ex.blocking.is_blocked(slot) {
                        stop = Stop::Held;
                    }
                    break;
                }
                conn.report_qbuf(ex.client_mut(slot));
                if evicted_before_command(ex, slot) {
                    break;
                }
                ex.execute_and_reply(slot, &args);
                conn.start += consumed;
                if spent_output_budget(ex, slot, output_at_start) {
                    stop = Stop::Yielded;
                    break;
                }
            }
            Err(e) => {
                crate::log::verbose(&format!(
                    "Protocol error ({}) from client: {}",
                    e.0,
                    ex.client(slot).addr
                ));
                let c = ex.client_mut(slot);
                c.push_reply(&crate::protocol::Reply::error(format!("ERR {}", e.0)));
                c.close_after_reply = true;
                ex.mark_pending_write(slot);
                break;
            }
        }
    }
    stop
}

/// Arguments kept on the stack by `args_at` (nearly every command has no more).
const ARGS_ON_STACK: usize = 8;

/// A command's arguments: slices of the read buffer at the parser's ranges, in `stack`
/// when they fit, else in `heap` (both the caller's, so nothing is moved).
#[inline(always)]
fn args_at<'b, 'a>(
    stack: &'b mut [&'a [u8]; ARGS_ON_STACK],
    heap: &'b mut Vec<&'a [u8]>,
    buf: &'a [u8],
    ranges: &[(usize, usize)],
) -> &'b [&'a [u8]] {
    if ranges.len() <= ARGS_ON_STACK {
        for (arg, &(s, e)) in stack.iter_mut().zip(ranges) {
            *arg = &buf[s..e];
        }
        &stack[..ranges.len()]
    } else {
        heap.extend(ranges.iter().map(|&(s, e)| &buf[s..e]));
        heap
    }
}

/// What `Net::flush_whole` did.
enum Whole {
    /// The output went out in one write and the connection is settled.
    Written,
    /// A write was made and did not take everything (or failed): its result, for
    /// `after_write`.
    Short(io::Result<usize>),
    /// Not the usual case: nothing was written.
    NotThisCase,
}

/// Why `run_commands` stopped short of the end of the buffer, if it did.
enum Stop {
    /// Every complete command ran (or the client is blocked, or closing).
    Done,
    /// CLIENT PAUSE holds the next command back.
    Held,
    /// The turn's output budget is spent: the rest runs next turn.
    Yielded,
}

/// Whether the commands run for `slot` this turn produced `OUTPUT_BUDGET_PER_TURN` of
/// output: a pipeline of big replies then lets the other clients be served before it
/// goes on (its output is written meanwhile).
#[inline]
fn spent_output_budget(ex: &Executor, slot: usize, at_start: usize) -> bool {
    ex.client(slot).pending_output().saturating_sub(at_start) >= OUTPUT_BUDGET_PER_TURN
}

/// Redis's evictClients at the start of processCommand: clients over
/// maxmemory-clients go before the next command runs; true when that command's own
/// client went (it must not run).
fn evicted_before_command(ex: &mut Executor, slot: usize) -> bool {
    if ex.client_mem_over_limit() {
        ex.evict_clients();
        return ex.client(slot).evicted;
    }
    false
}

impl Conn {
    /// Whether a read is queued on an I/O thread: this one then waits, and is made
    /// once the queued one's result is in (the event it answers is not repeated).
    /// Adds `n` bytes just read to the unprocessed ones, and counts the read.
    #[inline]
    fn take_in_read(&mut self, n: usize, stats: &mut crate::exec::Stats) {
        self.end += n;
        self.qbuf_peak = self.qbuf_peak.max(self.end - self.start);
        stats.total_net_input_bytes += n as u64;
        stats.total_reads_processed += 1;
    }

    fn read_waits(&mut self) -> bool {
        if self.read_queued {
            self.read_again = true;
        }
        self.read_queued
    }

    /// The query buffer's length as Redis shows it (CLIENT LIST `qbuf`, the
    /// query-buffer limit): the unprocessed bytes, except that once a big argument
    /// (32 KB or more) is announced, what precedes its data is no longer counted,
    /// since Redis then trims its buffer to hold the argument alone.
    fn query_len(&self) -> usize {
        let pending = self.end - self.start;
        match self.parser.pending_bulk_end() {
            Some((end, len)) if len >= QBUF_BIG_ARG => pending.saturating_sub(end - len - 2),
            _ => pending,
        }
    }

    /// CLIENT LIST's `qbuf`/`qbuf-free` while a command runs: the unprocessed bytes,
    /// the running command's included, as Redis's query buffer holds them then.
    fn report_qbuf(&self, c: &mut crate::exec::Client) {
        c.qbuf = self.query_len();
        c.qbuf_free = self.rbuf.len() - self.end;
    }

    /// After a read's commands ran, as Redis 7.4's private query buffers: the client
    /// keeps a buffer of its own — the one it read into, or, after a read into the
    /// shared buffer (which goes back), a new one of 16 KB, larger for a pending
    /// command's tail or an announced big argument — until `clients_cron`
    /// frees it once the client has been idle for two seconds. Idle clients own none.
    fn settle_rbuf(&mut self, spare: &mut Vec<u8>, lent: &mut bool, c: &mut crate::exec::Client) {
        let pending = self.end - self.start;
        if pending == 0 {
            self.start = 0;
            self.end = 0;
            // The usual case: every command ran, in a buffer of the client's own.
            if !self.rbuf_borrowed {
                c.qbuf = 0;
                c.qbuf_free = self.rbuf.len();
                return;
            }
        }
        // A big argument announced: room for all of it (as far as one turn's reads
        // would reserve anyway), as Redis sizes its buffer for a big bulk.
        let (big_arg, bulk_end) = match self.parser.pending_bulk_end() {
            Some((end, len)) if len >= QBUF_BIG_ARG => (end.min(pending + READ_CHUNK * 16), end),
            _ => (0, 0),
        };
        if self.rbuf_borrowed {
            *lent = false;
            let mut own = vec![0u8; QBUF_PRIVATE.max(pending).max(big_arg)];
            own[..pending].copy_from_slice(&self.rbuf[self.start..self.end]);
            let shared = std::mem::replace(&mut self.rbuf, own);
            self.start = 0;
            self.end = pending;
            if spare.is_empty() && shared.len() <= READ_CHUNK * 2 {
                *spare = shared;
            }
        } else if self.rbuf.len() - self.start < big_arg {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = pending;
            // Geometric growth up to the argument's end: growing by one turn's reads
            // at a time copied the whole buffer each turn (a 400 MB SET took 2.7 s).
            let size = big_arg.max(self.rbuf.len() * 3 / 2).min(bulk_end);
            self.rbuf
                .reserve_exact(size.saturating_sub(self.rbuf.len()));
            self.rbuf.resize(size, 0);
        }
        self.rbuf_borrowed = false;
        c.qbuf = self.query_len();
        c.qbuf_free = self.rbuf.len() - self.end;
    }

    /// Redis's clientsCronResizeQueryBuffer, once per cron tick: a buffer wasting more
    /// than 4 KB is freed (or cut to its pending bytes) when the client has been idle
    /// for more than two seconds, or, above 32 KB, trimmed to its recent peak when
    /// that is under half its size. The peak then restarts from what is pending.
    fn resize_query_buffer(&mut self, c: &mut crate::exec::Client, big: &mut Vec<Vec<u8>>) {
        if self.rbuf_borrowed {
            return;
        }
        let pending = self.end - self.start;
        // A pending bulk keeps room up to its end (its header and data included).
        let bulk = self.parser.pending_bulk_end().map_or(0, |(end, _)| end);
        let size = self.rbuf.len();
        if size - pending > 4 * 1024 {
            let target = if c.last_interaction.elapsed().as_secs() > QBUF_IDLE_SECS {
                Some(pending)
            } else if size > QBUF_RESIZE_THRESHOLD && size / 2 > self.qbuf_peak {
                Some(pending.max(self.qbuf_peak).max(bulk))
            } else {
                None
            };
            if let Some(target) = target {
                if self.rbuf.capacity() >= crate::exec::client::BIG_BLOCK {
                    // A new buffer with the pending bytes; the big one is freed off
                    // the loop.
                    let mut small = vec![0u8; target];
                    small[..pending].copy_from_slice(&self.rbuf[self.start..self.end]);
                    big.push(std::mem::replace(&mut self.rbuf, small));
                } else {
                    self.rbuf.copy_within(self.start..self.end, 0);
                    if target == 0 {
                        self.rbuf = Vec::new();
                    } else {
                        self.rbuf.truncate(target);
                        self.rbuf.shrink_to_fit();
                    }
                }
                self.start = 0;
                self.end = pending;
            }
        }
        self.qbuf_peak = pending.max(bulk);
        c.qbuf = self.query_len();
        c.qbuf_free = self.rbuf.len() - self.end;
    }
}

impl Net {
    fn on_signal(&mut self, ex: &mut Executor) {
        let mut buf = [0u8; 64];
        while let Ok(n) = self.signals.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        // Noted here, acted on by the cron (exec/shutdown.rs), as Redis's
        // `shutdown_asap`; the signal handler itself only marks it
        // (`process::install_signal_marks`).
        let (sig, name) = if self.sigint.swap(false, Ordering::SeqCst) {
            (libc::SIGINT, "SIGINT")
        } else {
            (libc::SIGTERM, "SIGTERM")
        };
        if ex.persist.serving_while_loading || ex.persist.loading {
            crate::log::warning("Received shutdown signal during loading, scheduling shutdown.");
        } else {
            crate::log::warning(&format!("Received {name} scheduling shutdown..."));
        }
        ex.shutdown_state.signal = Some(sig);
    }

    /// CONFIG SET port/bind (or tls-port) bound new sockets: they replace the TCP
    /// (or TLS) listeners; the others stay.
    fn replace_tcp_listeners(&mut self, (keep, new): crate::exec::Rebind, tls: bool) {
        for l in &mut self.listeners {
            let _ = self.poll.registry().deregister(l);
        }
        self.listeners.retain(|l| {
            let addr = if tls { l.tls_addr() } else { l.tcp_addr() };
            addr.is_none_or(|a| keep.contains(&a))
        });
        self.listeners.extend(new.into_iter().map(|l| {
            let l = TcpListener::from_std(l);
            if tls {
                Listener::Tls(l)
            } else {
                Listener::Tcp(l)
            }
        }));
        for (i, l) in self.listeners.iter_mut().enumerate() {
            let _ = self
                .poll
                .registry()
                .register(l, Token(LISTENER_BASE + i), Interest::READABLE);
        }
    }

    /// The last step before exit, as Redis's closeListeningSockets: the unix socket
    /// file is removed and every listener closed now, so that no client connects in
    /// the moment the kernel takes to tear the process down (its memory is released
    /// before its files are closed).
    fn close_listeners(&mut self) {
        for l in &self.listeners {
            if let Listener::Unix(_, shown) = l {
                crate::log::notice("Removing the unix socket file.");
                let _ = std::fs::remove_file(shown.trim_end_matches(":0"));
            }
        }
        self.listeners.clear();
    }

    fn accept(&mut self, ex: &mut Executor, idx: usize) {
        loop {
            let Some(listener) = self.listeners.get(idx) else {
                return;
            };
            let tls = listener.is_tls();
            let accepted = match listener.accept() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    crate::log::warning(&format!("Accepting client connection: {e}"));
                    return;
                }
            };
            let socket::Accepted {
                mut stream,
                addr,
                laddr,
                remote_tcp,
            } = accepted;
            let mut cn_auth = false;
            if tls {
                match self.wrap_tls(ex, stream) {
                    Some(s) => stream = s,
                    None => continue,
                }
                cn_auth = ex.config.stored_str("tls-auth-clients-user") == "CN";
            }
            if ex.client_count() >= ex.config.maxclients && self.io.is_some() {
                // At the limit: the reads the turn queued are taken in first, so a
                // client that closed is gone before a new one counts against
                // maxclients, as when one thread reads them in the same turn.
                self.take_queued_reads(ex);
            }
            let refusal: Option<&'static [u8]> = if ex.client_count() >= ex.config.maxclients {
                Some(b"-ERR max number of clients reached\r\n")
            } else if ex.config.protected_mode && ex.acl.default_needs_no_auth() && remote_tcp {
                Some(PROTECTED_MODE_ERROR.as_bytes())
            } else {
                None
            };
            if let Some(text) = refusal {
                ex.stats.rejected_connections += 1;
                // Over TLS the text can only go after the handshake, as Redis sends it:
                // the connection is set up and refused then (`refuse_after_handshake`).
                if !tls {
                    let _ = stream.write_all(text);
                    continue;
                }
            }
            let fd = match &stream {
                Stream::Tcp(s) => {
                    let _ = s.set_nodelay(true);
                    set_keepalive(s, ex.config.tcp_keepalive);
                    s.as_raw_fd()
                }
                Stream::Unix(s) => s.as_raw_fd(),
                Stream::Tls(s) => {
                    let _ = s.tcp().set_nodelay(true);
                    set_keepalive(s.tcp(), ex.config.tcp_keepalive);
                    s.tcp().as_raw_fd()
                }
            } as i64;
            let peer = addr.clone();
            let slot = ex.connect(addr, laddr, fd);
            ex.client_mut(slot).tls = tls;
            let io_thread = self.io.as_mut().map_or(0, |io| io.assign());
            ex.client_mut(slot).io_thread = io_thread as u8;
            if let Err(e) =
                self.poll
                    .registry()
                    .register(&mut stream, Token(slot), Interest::READABLE)
            {
                crate::log::warning(&format!("Registering client: {e}"));
                ex.disconnect(slot);
                continue;
            }
            if self.conns.len() <= slot {
                self.conns.resize_with(slot + 1, || None);
            }
            self.conns[slot] = Some(Box::new(Conn {
                stream,
                rbuf: Vec::new(),
                rbuf_borrowed: false,
                qbuf_peak: 0,
                start: 0,
                end: 0,
                parser: RequestParser::new(),
                inline: Vec::new(),
                wants_write: false,
                peer_closed: false,
                cn_auth,
                refusal,
                io_thread,
                read_noted: false,
                lent: None,
                id: ex.client(slot).id,
                read_queued: false,
                write_queued: false,
                read_again: false,
                write_again: false,
            }));
            crate::log::verbose(&format!("Accepted {peer}"));
        }
    }

    /// The server side of TLS around an accepted socket, with the configuration of the
    /// current `tls-auth-clients` mode; None when it cannot be served (then the socket
    /// is dropped, as a failed handshake would).
    fn wrap_tls(&mut self, ex: &mut Executor, stream: Stream) -> Option<Stream> {
        let Stream::Tcp(tcp) = stream else {
            return None;
        };
        let auth = crate::tls::ClientAuth::of(&ex.config);
        let Some(config) = ex.tls.as_ref().and_then(|t| t.server(auth)) else {
            crate::log::warning(
                "Error accepting a client connection: TLS is not configured for tls-auth-clients",
            );
            return None;
        };
        match crate::tls::TlsStream::accept(tcp, config) {
            Ok(s) => Some(Stream::Tls(Box::new(s))),
            Err(e) => {
                crate::log::warning(&format!("Error accepting a client connection: {e}"));
                None
            }
        }
    }

    /// A TLS connection refused at accept (maxclients, protected mode): once its
    /// handshake is done, it gets the refusal's text and is closed; what it sent is
    /// dropped. True when that happened (or the handshake is still going on).
    fn refuse_after_handshake(ex: &mut Executor, slot: usize, conn: &mut Conn) -> bool {
        let Some(text) = conn.refusal else {
            return false;
        };
        if let Stream::Tls(s) = &conn.stream {
            if s.is_handshaking() {
                return true;
            }
        }
        conn.refusal = None;
        conn.start = 0;
        conn.end = 0;
        let c = ex.client_mut(slot);
        c.out.extend_from_slice(text);
        c.close_after_reply = true;
        ex.mark_pending_write(slot);
        true
    }

    /// `tls-auth-clients-user CN`: once the handshake is done, a client whose
    /// certificate's Common Name names an existing, enabled ACL user is authenticated
    /// as that user.
    fn authenticate_by_cert(ex: &mut Executor, slot: usize, conn: &mut Conn) {
        let Stream::Tls(s) = &conn.stream else {
            conn.cn_auth = false;
            return;
        };
        if s.is_handshaking() {
            return;
        }
        conn.cn_auth = false;
        let Some(cn) = s.peer_common_name() else {
            return;
        };
        let free = match ex.acl.user(&cn) {
            Some(u) if u.enabled => u.unrestricted(),
            _ => {
                crate::log::verbose(&format!(
                    "TLS client certificate CN '{cn}' names no enabled user"
                ));
                return;
            }
        };
        let c = ex.client_mut(slot);
        c.authenticated = true;
        c.user = cn;
        c.acl_free = free;
    }

    fn mark_peer_closed(&mut self, slot: usize) {
        if let Some(Some(conn)) = self.conns.get_mut(slot) {
            conn.peer_closed = true;
        }
    }

    /// One `read` into the connection's buffer: `Some((bytes, drained))` when data
    /// arrived, `None` when there is nothing more now (or the connection was closed).
    ///
    /// `drained` is a short read: the socket's receive queue was emptied, so the caller
    /// need not read again until the next readiness event. Epoll (edge-triggered, as
    /// mio registers) reports every later arrival of data or FIN as a new event, so
    /// this saves the `EAGAIN` read that would otherwise follow every request.
    fn read_some(&mut self, ex: &mut Executor, slot: usize) -> Option<(usize, bool)> {
        if let Some(Some(conn)) = self.conns.get_mut(slot) {
            if conn.read_waits() {
                return None;
            }
        }
        loop {
            let (from, limit) = self.read_room(slot)?;
            let conn = self.conns.get_mut(slot).and_then(|c| c.as_mut())?;
            let got = conn.stream.read(&mut conn.rbuf[from..limit]);
            if matches!(&got, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                continue;
            }
            // The usual read: bytes on a plain socket of a client past its handshake,
            // within the query-buffer limit. Taken in as `after_read` would, without
            // its lookups; anything else goes there.
            if let Ok(n) = got {
                let qbuf_limit = ex.config.client_query_buffer_limit as usize;
                if n > 0
                    && conn.refusal.is_none()
                    && !conn.cn_auth
                    && conn.stream.drains_on_short_read()
                {
                    let now = ex.turn_started;
                    let c = ex.client_mut(slot);
                    // (Counted before the bytes join, so never more lenient than
                    // `after_read`'s check, which an over-limit read goes to.)
                    if conn.query_len() + n + c.multi_mem() <= qbuf_limit {
                        c.last_interaction = now;
                        conn.take_in_read(n, &mut ex.stats);
                        return Some((n, n < limit - from && !conn.peer_closed));
                    }
                }
            }
            return self.after_read(ex, slot, got, limit - from);
        }
    }

    /// Lists a connection for the turn's threaded reads, once.
    fn note_readable(&mut self, slot: usize) {
        if let Some(Some(conn)) = self.conns.get_mut(slot) {
            if !std::mem::replace(&mut conn.read_noted, true) {
                self.readable.push(slot);
            }
        }
    }

    /// Makes room in the connection's buffer for its next read and says where it is
    /// (`rbuf[from..limit]`); None when the connection is gone.
    fn read_room(&mut self, slot: usize) -> Option<(usize, usize)> {
        let conn = self.conns.get_mut(slot).and_then(|c| c.as_mut())?;
        // The usual case: between commands, in a buffer of the client's own at least
        // the private size: the whole buffer is the room (what the general rules
        // below come to then).
        if conn.end == 0 && !conn.rbuf_borrowed && conn.rbuf.len() >= QBUF_PRIVATE {
            return Some((0, conn.rbuf.len()));
        }
        if conn.rbuf.is_empty() {
            if self.spare_lent {
                // Lent to another connection of this turn's threaded reads: this one
                // reads into a buffer of its own, as Redis's I/O threads do.
                conn.rbuf = vec![0; QBUF_PRIVATE];
            } else {
                conn.rbuf = std::mem::take(&mut self.spare_rbuf);
                conn.rbuf_borrowed = true;
                self.spare_lent = true;
            }
        }
        // Grow only by what is about to be read, never by an announced size.
        let want = conn.parser.bytes_wanted().unwrap_or(0).min(READ_CHUNK * 16);
        // The shared buffer takes a 64 KB read; a client's own buffer reads what
        // it has room for (at least 16 KB, as Redis's reads), so it keeps its size.
        let chunk = if conn.rbuf_borrowed {
            READ_CHUNK
        } else {
            QBUF_PRIVATE.max(conn.rbuf.len() - conn.end)
        };
        let mut room = chunk.max(want.saturating_sub(conn.end - conn.start));
        // While a big argument arrives, read up to its end only (Redis reads
        // exactly what the argument lacks), so its buffer ends where it does.
        if let Some((bulk_end, len)) = conn.parser.pending_bulk_end() {
            let left = (conn.start + bulk_end).saturating_sub(conn.end);
            if len >= QBUF_BIG_ARG && left > 0 {
                room = room.min(left);
            }
        }
        if conn.rbuf.len() - conn.end < room {
            // The parser's positions are relative to `start`, so the unconsumed
            // tail can move even mid-command. Without this, a client streaming
            // pipelined commands (always mid-command at a read's end) grew the
            // buffer for as long as it kept sending.
            if conn.start > 0 && conn.end - conn.start < conn.rbuf.len() / 2 {
                conn.rbuf.copy_within(conn.start..conn.end, 0);
                conn.end -= conn.start;
                conn.start = 0;
            }
            if conn.rbuf.len() - conn.end < room {
                let mut new_len = (conn.end + room).max(conn.rbuf.len() * 3 / 2);
                // A big argument's buffer ends where the argument does, as
                // Redis sizes it, so equal commands cost equal memory.
                if let Some((bulk_end, len)) = conn.parser.pending_bulk_end() {
                    let bulk_end = conn.start + bulk_end;
                    if len >= QBUF_BIG_ARG && bulk_end >= conn.end + room {
                        new_len = new_len.min(bulk_end);
                    }
                }
                conn.rbuf
                    .reserve_exact(new_len.saturating_sub(conn.rbuf.len()));
                conn.rbuf.resize(new_len, 0);
            }
        }
        let limit = (conn.end + room).min(conn.rbuf.len());
        Some((conn.end, limit))
    }

    /// Takes in what a read of `asked` bytes into `read_room`'s room returned (on this
    /// thread or an I/O thread): as `read_some`.
    fn after_read(
        &mut self,
        ex: &mut Executor,
        slot: usize,
        got: io::Result<usize>,
        asked: usize,
    ) -> Option<(usize, bool)> {
        let qbuf_limit = ex.config.client_query_buffer_limit as usize;
        let conn = self.conns.get_mut(slot).and_then(|c| c.as_mut())?;
        match got {
            Ok(0) => {
                self.close(ex, slot);
                None
            }
            Ok(n) => {
                if conn.refusal.is_some() && Self::refuse_after_handshake(ex, slot, conn) {
                    return None;
                }
                if conn.cn_auth {
                    Self::authenticate_by_cert(ex, slot, conn);
                }
                conn.take_in_read(n, &mut ex.stats);
                // Idle time counts from the last read, as in Redis.
                ex.client_mut(slot).last_interaction = ex.turn_started;
                // Queued MULTI commands count too, as in Redis.
                if conn.query_len() + ex.client(slot).multi_mem() > qbuf_limit {
                    crate::log::warning("Closing client that reached max query buffer length");
                    ex.stats.client_qbuf_limit_disconnections += 1;
                    self.close(ex, slot);
                    return None;
                }
                let drained = n < asked && !conn.peer_closed && conn.stream.drains_on_short_read();
                if conn.stream.wants_write() {
                    ex.mark_pending_write(slot);
                }
                Some((n, drained))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if conn.refusal.is_some() {
                    Self::refuse_after_handshake(ex, slot, conn);
                }
                // A TLS handshake's records the socket had no room for.
                if conn.stream.wants_write() {
                    ex.mark_pending_write(slot);
                }
                None
            }
            Err(_) => {
                self.close(ex, slot);
                None
            }
        }
    }

    /// Redis's clientsCron: query buffers of idle clients go, oversized ones shrink
    /// (`resize_query_buffer`); then the executor's part (`Executor::client_cron`:
    /// soft output limits, reply buffer, memory). As in Redis, each tick takes the
    /// next `clients / hz` clients (at least 5), so every client is seen once a
    /// second and a tick's cost does not grow with the number of clients: with
    /// 10,000 connections a pass over all of them held every tick for 1.4 ms.
    fn clients_cron(&mut self, ex: &mut Executor) {
        const MIN_ITERATIONS: usize = 5;
        let now_ms = crate::keyspace::unix_ms();
        let live = ex.client_count();
        let hz = ex.config.effective_hz() as usize;
        let mut left = (live / hz).max(live.min(MIN_ITERATIONS));
        if let Some(io) = &mut self.io {
            io.trim();
            // Empty between turns: what a burst of connections grew goes.
            self.readable.shrink_to(self.readable.len());
            self.io_done.shrink_to(0);
            self.io_later.shrink_to(self.io_later.len());
            self.io_completed.shrink_to(self.io_completed.len());
        }
        let slots = self.conns.len();
        let mut looked = 0;
        while left > 0 && looked < slots {
            let slot = self.cron_cursor % slots;
            self.cron_cursor = slot + 1;
            looked += 1;
            if let Some(conn) = self.conns[slot].as_deref_mut() {
                let mut big = Vec::new();
                if !conn.read_queued {
                    conn.resize_query_buffer(ex.client_mut(slot), &mut big);
                }
                for buf in big {
                    ex.ks.lazyfree.free_other(Box::new(buf), 0);
                }
                ex.client_cron(slot, now_ms);
                left -= 1;
            }
        }
    }

    /// Writes every client with new output once.
    fn flush_pending(&mut self, ex: &mut Executor) {
        for slot in std::mem::take(&mut self.aof_held) {
            if let Some(Some(_)) = self.conns.get(slot) {
                ex.mark_pending_write(slot);
            }
        }
        let mut pending = std::mem::take(&mut ex.pending_writes);
        if let Some(io) = &self.io {
            ex.stats.io_threads_active = io.worth_it(pending.len());
            if ex.stats.io_threads_active {
                self.flush_threaded(ex, &mut pending);
            }
        }
        for &slot in &pending {
            if let Some(Some(_)) = self.conns.get(slot) {
                ex.client_mut(slot).pending_write = false;
                self.flush(ex, slot);
            }
        }
        // Back, for its capacity, unless the writes listed more.
        if ex.pending_writes.is_empty() {
            io_threads::decay_unused(&mut pending);
            pending.clear();
            ex.pending_writes = pending;
        }
    }

    /// Whether the connection's output may be written now: not when it is closing
    /// (it is closed here) or when its replies wait for a failed AOF write.
    fn may_write(&mut self, ex: &mut Executor, slot: usize) -> bool {
        if !matches!(self.conns.get(slot), Some(Some(_))) {
            return false;
        }
        if ex.client(slot).close_asap {
            self.close(ex, slot);
            return false;
        }
        if crate::persistence::aof::reply_waits_for_write(ex, slot) {
            if !self.aof_held.contains(&slot) {
                self.aof_held.push(slot);
            }
            return false;
        }
        true
    }

    fn flush(&mut self, ex: &mut Executor, slot: usize) {
        // A write queued on an I/O thread goes first; what follows it is written
        // when its result is in (`take_io_results`).
        if let Some(Some(conn)) = self.conns.get_mut(slot) {
            if conn.write_queued {
                conn.write_again = true;
                return;
            }
            match Self::flush_whole(ex, slot, conn) {
                Whole::Written => return,
                Whole::Short(written) => {
                    if self.after_write(ex, slot, written) {
                        self.finish_flush(ex, slot);
                    }
                    return;
                }
                Whole::NotThisCase => {}
            }
        }
        if !self.may_write(ex, slot) {
            return;
        }
        let streamed = ex.client(slot).stream.is_some();
        let mut pieces = 0;
        loop {
            let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                return;
            };
            let c = ex.client_mut(slot);
            let streaming = streamed && c.fill_stream();
            if c.pending_output() > 0 || conn.stream.wants_write() {
                let written = if c.sealed.is_empty() {
                    conn.stream.write(&c.out[c.out_pos..])
                } else {
                    let mut slices = Vec::with_capacity(WRITE_SLICES);
                    c.unwritten_slices(&mut slices, WRITE_SLICES);
                    conn.stream.write_vectored(&slices)
                };
                if !self.after_write(ex, slot, written) {
                    return;
                }
            }
            if !streamed {
                break;
            }
            let c = ex.client_mut(slot);
            if !streaming {
                // Complete: the pipeline behind it runs next turn.
                self.resume.push(slot);
                break;
            }
            if c.pending_output() > 0 {
                // The socket is full: its writable event resumes the stream.
                break;
            }
            c.out.clear();
            c.out_pos = 0;
            pieces += 1;
            if pieces == STREAM_PIECES_PER_TURN {
                self.streaming.push(slot);
                break;
            }
        }
        self.finish_flush(ex, slot);
    }

    /// `flush` of the usual case, the replies of a turn in one buffer that one write
    /// takes whole: nothing closing, streamed, sealed, held for the AOF or owed to
    /// TLS, no writability interest to drop, no buffer to shrink. What `after_write`
    /// and `finish_flush` would then do is done here, without their lookups.
    #[inline]
    fn flush_whole(ex: &mut Executor, slot: usize, conn: &mut Conn) -> Whole {
        if conn.wants_write
            || conn.stream.wants_write()
            || crate::persistence::aof::reply_waits_for_write(ex, slot)
        {
            return Whole::NotThisCase;
        }
        let c = ex.client_mut(slot);
        if c.close_asap
            || c.close_after_reply
            || c.stream.is_some()
            || !c.sealed.is_empty()
            || c.out.capacity() > c.reply_buf_size
            || c.out.capacity() >= crate::exec::client::BIG_BLOCK
            || c.out_pos >= c.out.len()
        {
            return Whole::NotThisCase;
        }
        let out = &c.out[c.out_pos..];
        match conn.stream.write(out) {
            Ok(n) if n == out.len() => {
                c.out.clear();
                c.out_pos = 0;
                ex.stats.total_net_output_bytes += n as u64;
                ex.stats.total_writes_processed += 1;
                ex.update_client_mem_if_limited(slot);
                Whole::Written
            }
            written => Whole::Short(written),
        }
    }

    /// Takes in what a write of the connection's output returned (on this thread or
    /// an I/O thread); false when that closed the connection.
    fn after_write(&mut self, ex: &mut Executor, slot: usize, written: io::Result<usize>) -> bool {
        match written {
            Ok(n) => {
                let mut big = Vec::new();
                ex.client_mut(slot).consume_written(n, &mut big);
                for block in big {
                    ex.ks.lazyfree.free_other(Box::new(block), 0);
                }
                ex.stats.total_net_output_bytes += n as u64;
                ex.stats.total_writes_processed += 1;
                true
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                true
            }
            Err(_) => {
                self.close(ex, slot);
                false
            }
        }
    }

    /// After a connection's writes of the turn: writability interest, the output
    /// buffer's trimming, and the close that waited for the last reply.
    fn finish_flush(&mut self, ex: &mut Executor, slot: usize) {
        self.finish_flush_left(ex, slot, None);
    }

    /// `finish_flush`; `short` says whether the write stopped short of what it was
    /// given (writability is then waited for), when that is not what is left.
    fn finish_flush_left(&mut self, ex: &mut Executor, slot: usize, short: Option<bool>) {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        let c = ex.client_mut(slot);
        let left = c.pending_output() > 0 || conn.stream.wants_write();
        let wait_writable = short.unwrap_or(left) && left;
        if wait_writable != conn.wants_write {
            // Edge-triggered: registering for writability reports the socket at once
            // if it already has room, so no wake-up is lost.
            let interest = if wait_writable {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, Token(slot), interest)
                .is_err()
            {
                self.close(ex, slot);
                return;
            }
            conn.wants_write = wait_writable;
        }
        let c = ex.client_mut(slot);
        if c.pending_output() == 0 {
            c.out.clear();
            c.out_pos = 0;
            // What written output leaves allocated is the reply buffer's size, as
            // Redis keeps its buffer and frees its reply list: the capacity counts in
            // used_memory, which eviction sees. A big buffer is freed off the loop.
            let closing = c.close_after_reply && !left && c.stream.is_none();
            if c.out.capacity() >= crate::exec::client::BIG_BLOCK {
                let fresh = Vec::with_capacity(c.reply_buf_size);
                let old = std::mem::replace(&mut c.out, fresh);
                ex.ks.lazyfree.free_other(Box::new(old), 0);
            } else if c.out.capacity() > c.reply_buf_size {
                c.out.shrink_to(c.reply_buf_size);
            }
            if closing {
                self.close(ex, slot);
                return;
            }
        } else if c.out_pos >= OUT_KEEP && c.out_pos >= c.out.len() / 2 {
            // A reader that never catches up must not grow the buffer for ever: the
            // written half goes (Redis frees written reply blocks).
            let written = c.out_pos;
            c.out.drain(..written);
            c.out_pos = 0;
        }
        // The reply buffer's peak was noted when the reply was added.
        ex.update_client_mem_if_limited(slot);
    }

    /// Closes clients the executor marked (CLIENT KILL, idle timeout, buffer limits).
    fn close_marked(&mut self, ex: &mut Executor) {
        let marked: Vec<usize> = ex
            .clients()
            .filter(|(_, c)| {
                c.close_asap
                    || (c.close_after_reply && c.pending_output() == 0 && c.stream.is_none())
            })
            .map(|(s, _)| s)
            .collect();
        for slot in marked {
            self.close(ex, slot);
        }
    }

    fn close(&mut self, ex: &mut Executor, slot: usize) {
        if let Some(mut conn) = self.conns.get_mut(slot).and_then(|c| c.take()) {
            if conn.read_queued || conn.write_queued {
                // Its worker runs its jobs before the descriptor and buffers go;
                // their results are dropped (the slot's id no longer matches).
                if let Some(io) = self.io.as_mut() {
                    ex.stats.io_threads_wait_ns += io.wait_idle(conn.io_thread);
                }
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if conn.rbuf_borrowed {
                self.spare_lent = false;
                if self.spare_rbuf.is_empty() {
                    self.spare_rbuf = std::mem::take(&mut conn.rbuf);
                }
            }
            // A big query buffer is freed off the loop (big reply blocks are, in
            // `Executor::disconnect`).
            if conn.rbuf.capacity() >= crate::exec::client::BIG_BLOCK {
                ex.ks
                    .lazyfree
                    .free_other(Box::new(std::mem::take(&mut conn.rbuf)), 0);
            }
            ex.disconnect(slot);
        }
    }
}

/// Applies `tcp-keepalive` (seconds of idleness before probes; 0 disables).
fn set_keepalive(stream: &TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let fd = stream.as_raw_fd();
    let on: libc::c_int = 1;
    let idle = secs.min(i32::MAX as u64) as libc::c_int;
    let interval = (idle / 3).max(1);
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt on a socket we own, with pointers to live c_int values and their
    // exact size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            &on as *const _ as *const libc::c_void,
            size,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            &idle as *const _ as *const libc::c_void,
            size,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            &interval as *const _ as *const libc::c_void,
            size,
        );
    }
}

const PROTECTED_MODE_ERROR: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";
