//! The loop's side of the I/O threads (`io-threads` above 1, net/io_threads.rs): each
//! turn it queues the reads of the connections reported readable and, at its end, the
//! writes of those with new output, on their workers, without waiting for them; it
//! takes their results in when they come, runs the commands a read completed, and
//! does what follows a write (freeing written blocks, writability interest, the close
//! that waited for the last reply).
//!
//! What keeps a job's memory still while it is queued (`Conn::read_queued`,
//! `Conn::write_queued`):
//! - A queued read owns `rbuf[end..]` and its parser (`Conn::lent`), and reads
//!   `rbuf[start..end]`: the connection's commands are not run
//!   (`Server::process`, `Net::busy_read`), nor its buffer resized (`read_room`,
//!   `resize_query_buffer`), until its result is in.
//! - A queued write reads sealed output blocks (`Client::seal` moves every reply into
//!   them first): new replies go to a fresh output buffer meanwhile, and written blocks
//!   are freed only when the result is in.
//! - A connection is closed only once its worker has run its jobs (`Net::close`
//!   waits), so no descriptor is reused under a queued job.
//!
//! Results for a connection that is out of the table (a busy script's caller, while
//! its command runs) wait in `Net::io_later` for the main loop.

use std::io;

use super::io_threads::Kind;
use super::{Net, Server, WRITE_SLICES};
use crate::exec::Executor;
use crate::keyspace::table::PREFETCH_BATCH;
use crate::protocol::Limits;

impl Server {
    /// With I/O threads, after the turn's events: queues a read for every connection
    /// reported readable (or reads it here, when the turn is too small for the threads
    /// or the connection is TLS), then takes in the results the workers posted.
    pub(super) fn io_turn(&mut self) {
        let mut guard = self.net.borrow_mut();
        let net = &mut *guard;
        let mut slots = std::mem::take(&mut net.readable);
        let mut on_loop: Vec<usize> = Vec::new();
        if !slots.is_empty() {
            let io = net.io.as_ref().expect("called with I/O threads");
            let threaded = io.worth_it(slots.len());
            self.ex.stats.io_threads_active = threaded;
            for &slot in &slots {
                let Some(Some(conn)) = net.conns.get_mut(slot) else {
                    continue;
                };
                conn.read_noted = false;
                if conn.read_waits() {
                    // Read again once the queued read is in: it may have come before
                    // the bytes this event announced.
                    continue;
                }
                let Some(fd) = conn.stream.plain_fd().filter(|_| threaded) else {
                    // TLS (its session reads on the loop), or too few reads this turn.
                    on_loop.push(slot);
                    continue;
                };
                let Some((from, limit)) = net.read_room(slot) else {
                    continue;
                };
                let conn = net.conns[slot].as_mut().expect("looked up above");
                // The worker parses what it reads, with the connection's parser, unless
                // a command parsed ahead still waits to run.
                let waiting = conn.lent.as_ref().is_some_and(|l| l.has_first());
                let ahead = (!waiting && self.ex.has_client(slot)).then(|| {
                    let mut lent = conn.lent.take().unwrap_or_default();
                    std::mem::swap(&mut lent.parser, &mut conn.parser);
                    lent.limits = Limits {
                        max_bulk_len: self.ex.config.proto_max_bulk_len,
                        authenticated: self.ex.client(slot).authenticated,
                    };
                    lent
                });
                let before = from - conn.start;
                let io = net.io.as_mut().expect("called with I/O threads");
                // SAFETY: `read_queued` keeps the buffer unmoved and unwritten from
                // `start` on, and the descriptor open, until the result is taken in
                // (this module's contract).
                unsafe {
                    io.read(
                        conn.io_thread,
                        slot,
                        conn.id,
                        fd,
                        &mut conn.rbuf[from..limit],
                        before,
                        ahead,
                    )
                };
                conn.read_queued = true;
            }
            net.io.as_mut().expect("checked").submit();
        }
        super::io_threads::decay_unused(&mut slots);
        slots.clear();
        net.readable = slots;
        drop(guard);
        for slot in on_loop {
            self.read_and_process(slot);
        }
        self.take_io_results();
    }

    /// Takes in the workers' results: writes as `flush` would have, reads as
    /// `read_and_process` would have, their commands run a batch of connections at a
    /// time, the first command of each parsed and its keys prefetched together
    /// (Valkey 8's batch prefetch across clients). A read that filled its room is
    /// queued again next turn.
    pub(super) fn take_io_results(&mut self) {
        let mut completed = {
            let mut net = self.net.borrow_mut();
            net.take_io_results(&mut self.ex);
            std::mem::take(&mut net.io_completed)
        };
        let mut batch_end = 0;
        for (i, &(slot, _)) in completed.iter().enumerate() {
            if i == batch_end {
                batch_end = (i + PREFETCH_BATCH).min(completed.len());
                self.prefetch_first_keys(completed[i..batch_end].iter().map(|r| r.0));
            }
            self.process(slot);
        }
        let mut net = self.net.borrow_mut();
        for &(slot, more) in &completed {
            if more {
                net.note_readable(slot);
            }
        }
        if net.io_completed.is_empty() {
            // Back, for its capacity.
            completed.clear();
            net.io_completed = completed;
        }
    }

    /// Prefetches together the keys of the first commands of `slots`, parsed by the
    /// I/O threads that read them (`Conn::lent`), before any of them runs
    /// (`Executor::prefetch_in_db`).
    fn prefetch_first_keys(&mut self, slots: impl Iterator<Item = usize>) {
        let net = self.net.borrow();
        let mut found: smallvec::SmallVec<[(usize, usize, usize, usize); PREFETCH_BATCH]> =
            smallvec::SmallVec::new();
        for slot in slots {
            let Some(Some(conn)) = net.conns.get(slot) else {
                continue;
            };
            let Some(lent) = conn.lent.as_ref().filter(|l| l.has_first()) else {
                continue;
            };
            if conn.read_queued || !self.ex.has_client(slot) {
                continue;
            }
            // The first command's ranges come first (a batch's follow).
            let args = lent
                .batch
                .first()
                .map_or(conn.parser.all_ranges().len(), |b| b.3);
            if args > 1 {
                let (s, e) = conn.parser.all_ranges()[1];
                found.push((
                    slot,
                    self.ex.client(slot).db,
                    conn.start + s,
                    conn.start + e,
                ));
            }
        }
        if found.len() < 2 {
            return;
        }
        let conns = &net.conns;
        let key = |&(slot, _, s, e): &(usize, usize, usize, usize)| -> &[u8] {
            &conns[slot].as_ref().expect("found above").rbuf[s..e]
        };
        // Clients mostly share a database: one batch for the first one's, the rest
        // one by one.
        let db = found[0].1;
        self.ex
            .prefetch_in_db(db, found.iter().filter(|f| f.1 == db).map(key));
        for f in found.iter().filter(|f| f.1 != db) {
            self.ex.prefetch_in_db(f.1, std::iter::once(key(f)));
        }
    }
}

impl Net {
    /// Waits for the reads queued so far and takes every result in; the commands of
    /// those reads run at the loop's next look (`io_completed`).
    pub(super) fn take_queued_reads(&mut self, ex: &mut Executor) {
        if let Some(io) = self.io.as_mut() {
            ex.stats.io_threads_wait_ns += io.wait_all_idle();
        }
        self.take_io_results(ex);
    }

    /// Takes in the results the workers posted (and those kept for a connection that
    /// was out of the table). Lists in `io_completed` the connections whose commands
    /// are to run now, in the order their reads were taken in, each with whether its
    /// socket may have more to read.
    pub(super) fn take_io_results(&mut self, ex: &mut Executor) {
        let Some(io) = self.io.as_mut() else {
            return;
        };
        if !io.has_done() && self.io_later.is_empty() {
            return;
        }
        let mut done = std::mem::take(&mut self.io_done);
        done.append(&mut self.io_later);
        io.take_done(&mut done);
        let mut completed = std::mem::take(&mut self.io_completed);
        for d in done.drain(..) {
            let slot = d.slot;
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                // Out of the table while its command runs (a busy script's caller):
                // the main loop takes this in once it is back. Otherwise gone.
                if ex.has_client(slot) && ex.client(slot).id == d.id {
                    self.io_later.push(d);
                }
                continue;
            };
            if conn.id != d.id {
                // The slot's connection closed (its jobs waited for) and another
                // took it.
                continue;
            }
            match d.kind {
                Kind::Read => {
                    conn.read_queued = false;
                    if let Some(mut lent) = d.ahead {
                        std::mem::swap(&mut lent.parser, &mut conn.parser);
                        conn.lent = Some(lent);
                    }
                    let again = std::mem::take(&mut conn.read_again);
                    ex.stats.io_threaded_reads_processed += 1;
                    let (result, asked) = (d.result, d.asked);
                    if matches!(&result, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                        completed.push((slot, true));
                        continue;
                    }
                    match self.after_read(ex, slot, result, asked) {
                        Some((_, drained)) => completed.push((slot, !drained || again)),
                        // Nothing read: commands held back while the read was queued
                        // still run.
                        None if matches!(self.conns.get(slot), Some(Some(_))) => {
                            completed.push((slot, again))
                        }
                        None => {}
                    }
                }
                Kind::Write => {
                    conn.write_queued = false;
                    let again = std::mem::take(&mut conn.write_again);
                    ex.stats.io_threaded_writes_processed += 1;
                    let whole = matches!(&d.result, Ok(n) if *n == d.asked);
                    if self.after_write(ex, slot, d.result) {
                        // Short: the socket is full, and its writable event says when
                        // to go on, unless it came while the write was queued. Whole:
                        // what came meanwhile goes out this turn.
                        self.finish_flush_left(ex, slot, Some(!whole));
                        if (whole || again)
                            && ex.has_client(slot)
                            && (ex.client(slot).pending_output() > 0
                                || ex.client(slot).stream.is_some())
                        {
                            ex.mark_pending_write(slot);
                        }
                    }
                }
            }
        }
        self.io_done = done;
        self.io_completed = completed;
    }

    /// With I/O threads: queues one write for each connection of `pending` with plain
    /// output on its worker. What is left in `pending` (streamed replies, TLS) is
    /// flushed as usual; a connection whose last write is still queued is written
    /// again once its result is in.
    pub(super) fn flush_threaded(&mut self, ex: &mut Executor, pending: &mut Vec<usize>) {
        let mut threaded = std::mem::take(&mut self.io_writes);
        threaded.clear();
        pending.retain(|&slot| {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                return false;
            };
            let c = ex.client(slot);
            let plain = conn.stream.plain_fd().is_some() && c.stream.is_none() && !c.close_asap;
            if !plain {
                return true;
            }
            // One job per connection: a slot listed twice (its client gone and the
            // slot reused within the turn) is written once.
            if std::mem::take(&mut ex.client_mut(slot).pending_write) {
                if conn.write_queued {
                    conn.write_again = true;
                } else if ex.client(slot).pending_output() > 0 {
                    threaded.push(slot);
                }
            }
            false
        });
        // Replies that wait for a failed AOF write stay (`may_write`).
        threaded.retain(|&slot| self.may_write(ex, slot));
        if threaded.is_empty() {
            self.io_writes = threaded;
            return;
        }
        // Every pending reply into the sealed blocks the write reads: new output goes
        // to a fresh buffer while it is queued.
        for &slot in &threaded {
            ex.client_mut(slot).seal();
        }
        for &slot in &threaded {
            let conn = self.conns[slot].as_mut().expect("kept above");
            let fd = conn.stream.plain_fd().expect("kept above");
            let slices = ex.client(slot).unwritten().take(WRITE_SLICES);
            let io = self.io.as_mut().expect("called with I/O threads");
            // SAFETY: `write_queued` keeps the sealed blocks unchanged and alive
            // (`consume_written` runs on the result), and the descriptor open, until
            // the result is taken in (this module's contract).
            unsafe { io.write(conn.io_thread, slot, conn.id, fd, slices) };
            conn.write_queued = true;
        }
        self.io.as_mut().expect("checked").submit();
        super::io_threads::decay_unused(&mut threaded);
        self.io_writes = threaded;
    }
}
