//! The loop's two I/O-thread phases (`io-threads` above 1): the turn's first reads of
//! the connections reported readable, and the turn's writes, each spread over the
//! threads of `io_threads::IoThreads`, with what comes before and after each system
//! call done on the loop as with one thread.

use std::io;

use super::{io_threads, Net, Server, READ_BUDGET_PER_TURN, WRITE_SLICES};
use crate::exec::Executor;
use crate::keyspace::table::PREFETCH_BATCH;
use crate::protocol::{Limits, Request};

impl Server {
    /// With I/O threads: the first read of every connection reported readable this
    /// turn, spread over the threads when there are enough of them, then each
    /// connection's commands, in the order the events came, as `read_and_process`.
    pub(super) fn read_readable(&mut self) {
        let mut net = self.net.borrow_mut();
        let mut slots = std::mem::take(&mut net.readable);
        for &slot in &slots {
            if let Some(Some(conn)) = net.conns.get_mut(slot) {
                conn.read_noted = false;
            }
        }
        let threaded = net.io.as_ref().is_some_and(|io| io.worth_it(slots.len()));
        self.ex.stats.io_threads_active = threaded;
        if !threaded {
            drop(net);
            for &slot in &slots {
                self.read_and_process(slot);
            }
            io_threads::decay_unused(&mut slots);
            slots.clear();
            self.net.borrow_mut().readable = slots;
            return;
        }
        // Commands run in the order the events came, as with one thread: a client that
        // wrote first is served first. Each connection is listed once
        // (`Net::note_readable`), so it has one job.
        let mut done = std::mem::take(&mut net.io_done);
        io_threads::decay(&mut done, slots.len());
        let mut io = net.io.take().expect("checked above");
        let mut on_loop: Vec<usize> = Vec::new();
        let mut asked: Vec<(usize, usize)> = Vec::with_capacity(slots.len());
        let waited = {
            let mut phase = io.phase();
            for &slot in &slots {
                let fd = match net.conns.get(slot) {
                    Some(Some(conn)) => conn.stream.plain_fd(),
                    _ => continue,
                };
                let Some(fd) = fd else {
                    // TLS: its session reads on the loop.
                    on_loop.push(slot);
                    continue;
                };
                let Some((from, limit)) = net.read_room(slot) else {
                    continue;
                };
                let conn = net.conns[slot].as_mut().expect("looked up above");
                let thread = conn.io_thread;
                // SAFETY: the connection stays in the table, and its buffer is neither
                // moved nor resized, until `run` below returns: nothing else runs in
                // between; no other job of the phase is for this connection.
                unsafe { phase.read(thread, asked.len(), fd, &mut conn.rbuf[from..limit]) };
                asked.push((slot, limit - from));
            }
            phase.run(&mut done)
        };
        net.io = Some(io);
        self.ex.stats.io_threads_wait_ns += waited;
        self.ex.stats.io_threaded_reads_processed += done.len() as u64;
        drop(net);
        // The phase returns results by thread; each job's tag is its place in `asked`.
        done.sort_unstable_by_key(|d| d.tag);
        // Every read is taken in before any command runs: a busy script's round
        // (net/busy.rs) reads sockets itself, and must find each buffer's end where
        // its bytes end.
        let mut read: Vec<(usize, usize, bool)> = Vec::with_capacity(asked.len());
        for (&(slot, want), d) in asked.iter().zip(done.drain(..)) {
            let got = d.result;
            if matches!(&got, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
                on_loop.push(slot);
                continue;
            }
            let after = self
                .net
                .borrow_mut()
                .after_read(&mut self.ex, slot, got, want);
            if let Some((n, drained)) = after {
                read.push((slot, n, drained));
            }
        }
        // A batch of connections at a time: their first commands are parsed and their
        // keys prefetched together, so the cache misses of one command per client
        // overlap (Valkey 8's batch prefetch across clients).
        let mut batch_end = 0;
        for (i, &(slot, n, drained)) in read.iter().enumerate() {
            if i == batch_end {
                batch_end = (i + PREFETCH_BATCH).min(read.len());
                self.prefetch_first_keys(read[i..batch_end].iter().map(|r| r.0));
            }
            self.process(slot);
            if !drained {
                let budget = READ_BUDGET_PER_TURN.saturating_sub(n);
                if budget == 0 {
                    self.net.borrow_mut().pending_reads.push(slot);
                } else {
                    self.go_on_reading(slot, budget);
                }
            }
        }
        for slot in on_loop {
            self.read_and_process(slot);
        }
        let mut net = self.net.borrow_mut();
        net.io_done = done;
        io_threads::decay_unused(&mut slots);
        slots.clear();
        net.readable = slots;
    }

    /// Parses the first command of each connection of `slots` ahead of its turn
    /// (`Conn::parsed_ahead`, taken up by `run_commands`) and prefetches the keys of
    /// those commands together (`Executor::prefetch_in_db`). Only multibulk requests:
    /// an inline one would be split (and its arguments copied) twice.
    fn prefetch_first_keys(&mut self, slots: impl Iterator<Item = usize>) {
        let mut guard = self.net.borrow_mut();
        let net = &mut *guard;
        let mut found: smallvec::SmallVec<[(usize, usize, usize, usize); PREFETCH_BATCH]> =
            smallvec::SmallVec::new();
        for slot in slots {
            let Some(Some(conn)) = net.conns.get_mut(slot) else {
                continue;
            };
            if conn.parsed_ahead.is_some()
                || conn.start == conn.end
                || conn.rbuf[conn.start] != b'*'
                || !self.ex.has_client(slot)
            {
                continue;
            }
            let c = self.ex.client(slot);
            let limits = Limits {
                max_bulk_len: self.ex.config.proto_max_bulk_len,
                authenticated: c.authenticated,
            };
            match conn.parser.parse(&conn.rbuf[conn.start..conn.end], &limits) {
                Ok(Some(Request::Multibulk { consumed })) => {
                    conn.parsed_ahead = Some((consumed, limits));
                    if let Some(&(s, e)) = conn.parser.ranges().get(1) {
                        found.push((slot, c.db, conn.start + s, conn.start + e));
                    }
                }
                // Incomplete: the parser resumes where it is when more arrives.
                Ok(None) => {}
                // Empty requests and errors are parsed again when they run.
                Ok(Some(_)) | Err(_) => conn.parser.reset(),
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
    /// With I/O threads: one write each for the connections of `pending` with plain
    /// output, spread over the threads, then what follows a write on the loop. What is
    /// left in `pending` (streamed replies, TLS, nothing to write) is flushed as usual.
    pub(super) fn flush_threaded(&mut self, ex: &mut Executor, pending: &mut Vec<usize>) {
        let mut threaded: Vec<usize> = Vec::with_capacity(pending.len());
        pending.retain(|&slot| {
            let Some(Some(conn)) = self.conns.get(slot) else {
                return false;
            };
            let c = ex.client(slot);
            let plain = conn.stream.plain_fd().is_some()
                && c.stream.is_none()
                && c.pending_output() > 0
                && !c.close_asap;
            // One job per connection: a slot listed twice (its client gone and the
            // slot reused within the turn) is written once.
            if plain && std::mem::take(&mut ex.client_mut(slot).pending_write) {
                threaded.push(slot);
            }
            !plain
        });
        // Replies that wait for a failed AOF write stay (`may_write`).
        threaded.retain(|&slot| self.may_write(ex, slot));
        if threaded.is_empty() {
            return;
        }
        let mut io = self.io.take().expect("checked by the caller");
        let mut done = std::mem::take(&mut self.io_done);
        io_threads::decay(&mut done, threaded.len());
        let waited = {
            let mut phase = io.phase();
            let mut slices = Vec::with_capacity(WRITE_SLICES);
            for (tag, &slot) in threaded.iter().enumerate() {
                let conn = self.conns[slot].as_ref().expect("kept above");
                let fd = conn.stream.plain_fd().expect("kept above");
                let c = ex.client(slot);
                slices.clear();
                c.unwritten_slices(&mut slices, WRITE_SLICES);
                // SAFETY: the client's output is neither changed nor freed until `run`
                // below returns: nothing else runs in between.
                unsafe { phase.write(conn.io_thread, tag, fd, &slices) };
            }
            phase.run(&mut done)
        };
        self.io = Some(io);
        ex.stats.io_threads_wait_ns += waited;
        ex.stats.io_threaded_writes_processed += done.len() as u64;
        done.sort_unstable_by_key(|d| d.tag);
        for (&slot, d) in threaded.iter().zip(done.drain(..)) {
            if self.after_write(ex, slot, d.result) {
                self.finish_flush(ex, slot);
            }
        }
        self.io_done = done;
    }
}
