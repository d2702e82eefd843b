//! Serving other clients while a script is busy (exec/busy.rs).
//!
//! A script past `busy-reply-threshold` calls `Executor::serve_while_busy` at each
//! watchdog check; that lands here, in one non-blocking round of the loop's usual work
//! on the shared `Net`: poll with a zero timeout, accept, read, parse and execute, then
//! write. The executor answers BUSY to every command without the `allow-busy` flag, so
//! nothing touches the keyspace while the script is in the middle of its work.
//!
//! What the round leaves alone: the caller's connection (it is out of `Net::conns`
//! while its command runs; events for it are remembered in `pending_reads` and
//! `pending_writes` for the main loop), the master link and the cluster bus (their
//! events wait in `Net::deferred` for the main loop), timers, held and blocked clients, and the
//! script's own write-stream bytes (only what preceded the script is flushed to the AOF
//! before replies go out). SIGTERM is noted and honoured after the script, as Redis
//! does; SHUTDOWN NOSAVE exits here, without the script's partial effects.

use std::cell::RefCell;
use std::rc::Weak;
use std::time::Duration;

use mio::{Events, Token};

use super::{run_commands, Net, Stop, LISTENER_BASE, READ_BUDGET_PER_TURN, SIGNAL_TOKEN};
use crate::exec::busy::ServeWhileBusy;
use crate::exec::Executor;

/// The executor's handle on the loop's state (weak: the `Server` owns it).
pub(super) struct BusyServer(pub(super) Weak<RefCell<Net>>);

impl ServeWhileBusy for BusyServer {
    fn serve(&self, ex: &mut Executor) {
        let Some(net) = self.0.upgrade() else { return };
        // The loop never holds this borrow while a command runs (`Server::process`);
        // should it ever, the round is skipped rather than aliased.
        let Ok(mut net) = net.try_borrow_mut() else {
            return;
        };
        net.serve_busy(ex);
    }

    fn serve_loading(&self, ex: &mut Executor) {
        let Some(net) = self.0.upgrade() else { return };
        let Ok(mut net) = net.try_borrow_mut() else {
            return;
        };
        net.serve_loading(ex);
    }

    fn close_now(&self, ex: &mut Executor, slot: usize) -> bool {
        let Some(net) = self.0.upgrade() else {
            return false;
        };
        let Ok(mut net) = net.try_borrow_mut() else {
            return false;
        };
        if !matches!(net.conns.get(slot), Some(Some(_))) {
            return false;
        }
        net.close(ex, slot);
        true
    }
}

impl Net {
    fn serve_busy(&mut self, ex: &mut Executor) {
        let Some((caller, since)) = ex.busy.as_ref().map(|b| (b.caller, b.start)) else {
            return;
        };
        if self.busy_swept != Some(since) {
            // First round of this script: events the main loop fetched in the same
            // batch as the script's command are not processed yet, and edge-triggered
            // polling will not report them again. Look at every socket once.
            self.busy_swept = Some(since);
            for idx in 0..self.listeners.len() {
                self.accept(ex, idx);
            }
            for slot in 0..self.conns.len() {
                if matches!(self.conns.get(slot), Some(Some(_))) {
                    self.busy_read(ex, slot);
                }
            }
        }
        self.serve_events(ex, Some(caller));
        self.busy_io_results(ex);
        // Input left over from an earlier budget.
        for slot in std::mem::take(&mut self.pending_reads) {
            if matches!(self.conns.get(slot), Some(Some(_))) {
                self.busy_read(ex, slot);
            } else {
                self.pending_reads.push(slot);
            }
        }
        // Replies may announce writes made before the script: those reach the AOF
        // first; the script's own effects stay buffered.
        if let Some(pos) = ex.busy.as_ref().map(|b| b.stream_pos) {
            crate::persistence::aof::flush_before(ex, pos);
        }
        self.flush_pending_except_absent(ex);
        if ex.shutdown.is_some() && ex.persist.shutdown_prepared {
            // SHUTDOWN NOSAVE: the script never returns.
            self.exit_now(ex);
        }
    }

    /// One round while the dataset loads: accept, read and answer (commands that need
    /// the dataset get -LOADING from the executor), write. Timers and blocked clients
    /// wait for the end of the load.
    fn serve_loading(&mut self, ex: &mut Executor) {
        self.serve_events(ex, None);
        self.busy_io_results(ex);
        for slot in std::mem::take(&mut self.pending_reads) {
            if matches!(self.conns.get(slot), Some(Some(_))) {
                self.busy_read(ex, slot);
            }
        }
        // A signal shuts down without saving: the dataset is incomplete.
        crate::exec::shutdown::while_loading(ex);
        self.flush_pending_except_absent(ex);
        if ex.shutdown.is_some() {
            self.exit_now(ex);
        }
    }

    /// One non-blocking poll: accepts, signals, and reads and runs each ready client's
    /// commands. `caller` is the client whose command is running (a busy script): its
    /// connection is out of the table, so its input waits for the main loop.
    fn serve_events(&mut self, ex: &mut Executor, caller: Option<usize>) {
        let mut events = std::mem::replace(&mut self.busy_events, Events::with_capacity(0));
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_ok() {
            for ev in events.iter() {
                match ev.token() {
                    SIGNAL_TOKEN => self.on_signal(ex),
                    Token(t)
                        if crate::replication::replica::owns_token(t)
                            || crate::cluster::owns_token(t) =>
                    {
                        let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                        self.deferred.push((t, readable, ev.is_writable()));
                    }
                    Token(t) if t >= LISTENER_BASE => self.accept(ex, t - LISTENER_BASE),
                    Token(slot) => {
                        if !matches!(self.conns.get(slot), Some(Some(_))) {
                            if Some(slot) == caller {
                                if ev.is_read_closed() || ev.is_error() {
                                    self.caller_peer_closed = true;
                                }
                                // The main loop reads and writes it after the script.
                                self.pending_reads.push(slot);
                                ex.mark_pending_write(slot);
                            }
                            continue;
                        }
                        if ev.is_read_closed() || ev.is_error() {
                            self.mark_peer_closed(slot);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.busy_read(ex, slot);
                        }
                        // (Unless reading found it closed.)
                        if ev.is_writable() && matches!(self.conns.get(slot), Some(Some(_))) {
                            ex.mark_pending_write(slot);
                        }
                    }
                }
            }
        }
        self.busy_events = events;
    }

    /// Takes in the I/O threads' results (net/io_phases.rs) and runs the commands the
    /// reads completed; a socket with more to say is read here, on the loop.
    fn busy_io_results(&mut self, ex: &mut Executor) {
        self.take_io_results(ex);
        for (slot, more) in std::mem::take(&mut self.io_completed) {
            if self.busy_run(ex, slot) && more {
                self.busy_read(ex, slot);
            }
        }
    }

    /// Exits from inside a round: the pid file goes, the listeners close, and the
    /// writes handed to the I/O threads reach their sockets first.
    fn exit_now(&mut self, ex: &Executor) -> ! {
        if !ex.config.pidfile.is_empty() {
            let _ = std::fs::remove_file(&ex.config.pidfile);
        }
        self.close_listeners();
        if let Some(io) = self.io.as_mut() {
            io.wait_all_idle();
        }
        crate::log::warning("Cinnabar is now ready to exit, bye bye...");
        std::process::exit(0);
    }

    /// Reads and runs a client's commands within one turn's budget.
    fn busy_read(&mut self, ex: &mut Executor, slot: usize) {
        // A read queued on an I/O thread owns the buffer: its result comes first.
        if let Some(Some(conn)) = self.conns.get_mut(slot) {
            if conn.read_waits() {
                return;
            }
        }
        // Input already read but not run yet (the loop's batch of a turn's clients, or
        // a held pipeline), so the socket may have nothing more to say.
        if let Some(Some(conn)) = self.conns.get(slot) {
            if conn.end > conn.start && !self.busy_run(ex, slot) {
                return;
            }
        }
        let mut budget = READ_BUDGET_PER_TURN;
        while let Some((n, drained)) = self.read_some(ex, slot) {
            if !self.busy_run(ex, slot) {
                return;
            }
            if drained {
                return;
            }
            budget = budget.saturating_sub(n);
            if budget == 0 {
                self.pending_reads.push(slot);
                return;
            }
        }
    }

    /// Runs the commands in a client's buffer; false when it is to be read no further
    /// this round (closed, or its pipeline yielded to the main loop).
    fn busy_run(&mut self, ex: &mut Executor, slot: usize) -> bool {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return false;
        };
        let stop = run_commands(ex, slot, conn);
        conn.settle_rbuf(
            &mut self.spare_rbuf,
            &mut self.spare_lent,
            ex.client_mut(slot),
        );
        match stop {
            Stop::Held => self.held.push(slot),
            Stop::Yielded => {
                // The main loop goes on with it once the script is done.
                self.resume.push(slot);
                return false;
            }
            Stop::Done => {}
        }
        true
    }

    /// `flush_pending`, keeping the clients whose connection is out of the table (the
    /// script's caller) on the list for the main loop.
    fn flush_pending_except_absent(&mut self, ex: &mut Executor) {
        let pending = std::mem::take(&mut ex.pending_writes);
        let mut keep = Vec::new();
        for slot in pending {
            if let Some(Some(_)) = self.conns.get(slot) {
                ex.client_mut(slot).pending_write = false;
                self.flush(ex, slot);
            } else if slot == ex.busy.as_ref().map_or(usize::MAX, |b| b.caller) {
                keep.push(slot);
            }
        }
        ex.pending_writes.extend(keep);
    }
}
