//! I/O threads (`io-threads N`): socket reads and writes, and the parsing of what was
//! read, handed to N - 1 worker threads while commands run one at a time on the loop's
//! thread, which makes no read or write system call for a connection the workers serve
//! and parses none of its commands that the worker could.
//!
//! The shape is Valkey 8's and Redis 8's asynchronous hand-off, without a barrier: the
//! loop queues a connection's read (into the connection's own buffer) or its write
//! (from its sealed output blocks) on the connection's worker and goes on with its
//! turn; the worker makes the system call, parses what a read completed with the
//! connection's parser (lent with the job: net/batch.rs) and queues the result back;
//! the loop takes the results in at its next look, runs the commands a read completed
//! and queues the replies. A worker posting a result to a sleeping loop wakes it (`mio::Waker`).
//!
//! Nothing a command can see is shared: a job only names a descriptor and memory the
//! loop leaves alone until the job's result is taken in (net/io_phases.rs keeps that
//! promise: a connection has at most one read and one write queued, and is neither
//! parsed, resized nor closed while its read is, nor has its written blocks freed
//! while its write is). So ordering per connection, MULTI/EXEC, scripts and every reply
//! stay exactly as with one thread.
//!
//! Threads are used in a turn only when it has at least two jobs per thread (Redis's
//! rule: with fewer, handing a job over costs more than it saves); `io-threads-always-
//! active yes` (a test switch, as Valkey's) uses them for any job.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::batch::ParseAhead;

/// How long a worker that ran a batch keeps spinning for the next one before it
/// sleeps: a busy loop hands it work every few tens of microseconds, and a sleeping
/// thread takes longer than that to wake.
const WORKER_SPIN: Duration = Duration::from_micros(50);

/// One system call for a connection. `Read` fills `len` bytes at `buf` at most;
/// `Write` writes the `iov` entries `iov_from..iov_from + iov_count` of its batch.
#[derive(Clone, Copy)]
enum Op {
    Read { buf: *mut u8, len: usize },
    Write { iov_from: usize, iov_count: usize },
}

struct Job {
    fd: RawFd,
    op: Op,
    /// A read's parsing: the connection's parser, lent with it, parses what the read
    /// completes (net/batch.rs). `head` is the connection's first unconsumed byte,
    /// `before` how many of them precede the read's room.
    ahead: Option<Box<ParseAhead>>,
    head: *const u8,
    before: usize,
    /// The connection's slot and its client's id: a result for a slot since reused
    /// by another connection is recognised and dropped.
    slot: usize,
    id: u64,
    /// Bytes the job asked to move.
    asked: usize,
    /// Reads are numbered in the order they were queued (`IoThreads::take_done`).
    seq: u64,
    /// Bytes moved, or the negated `errno`.
    result: isize,
}

#[derive(Default)]
struct Batch {
    jobs: Vec<Job>,
    iov: Vec<libc::iovec>,
}

// SAFETY: a batch's raw pointers are only dereferenced by the worker that runs it,
// while the loop leaves the memory they point to alone (the module's contract).
unsafe impl Send for Batch {}

impl Batch {
    fn clear(&mut self) {
        self.clear_after(self.jobs.len());
    }

    /// `clear`, for a batch whose `jobs_used` jobs were taken out already.
    fn clear_after(&mut self, jobs_used: usize) {
        decay(&mut self.jobs, jobs_used);
        decay_unused(&mut self.iov);
        self.jobs.clear();
        self.iov.clear();
    }

    fn run(&mut self) {
        for job in &mut self.jobs {
            // SAFETY: the loop built this job from a live descriptor and from buffers
            // it neither moves, resizes nor frees until it has taken in the job's
            // result (the contract of `IoThreads::read` and `IoThreads::write`), and a
            // connection has one read and one write queued at most, on one worker,
            // so no buffer is read and written at once.
            let r = unsafe {
                match job.op {
                    Op::Read { buf, len } => libc::read(job.fd, buf.cast(), len),
                    Op::Write {
                        iov_from,
                        iov_count,
                    } => libc::writev(
                        job.fd,
                        self.iov.as_ptr().add(iov_from),
                        iov_count as libc::c_int,
                    ),
                }
            };
            // The errno first, before anything else can change it.
            job.result = if r < 0 {
                -(std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO) as isize)
            } else {
                r
            };
            if let Some(ahead) = job.ahead.as_mut() {
                ahead.forget();
                if r > 0 {
                    // SAFETY: `head..` the read's room is the connection's unconsumed
                    // bytes, which the loop leaves alone as it does the room (the
                    // contract of `IoThreads::read`), and the read filled `r` more.
                    let buf =
                        unsafe { std::slice::from_raw_parts(job.head, job.before + r as usize) };
                    super::batch::parse_read(ahead, buf);
                }
            }
        }
    }
}

/// `decay` by the vector's own length (before it is cleared).
pub(super) fn decay_unused<T>(v: &mut Vec<T>) {
    let used = v.len();
    decay(v, used);
}

/// Shrinks a reused vector when its last use (`used` entries) took under an eighth of
/// it, so a burst of thousands of connections does not leave its buffers behind.
pub(super) fn decay<T>(v: &mut Vec<T>, used: usize) {
    if used < v.capacity() / 8 {
        v.shrink_to(used * 2);
    }
}

/// What a worker and the loop share: the batches queued for it and those it ran.
#[derive(Default)]
struct Queues {
    todo: VecDeque<Batch>,
    done: Vec<Batch>,
}

struct Shared {
    queues: Mutex<Queues>,
    /// Batches queued and batches run (and posted to `done`), for spinning and
    /// parking without the lock.
    queued: AtomicU64,
    finished: AtomicU64,
    /// The worker is parked, or about to be: a new batch unparks it.
    parked: AtomicBool,
}

/// What every worker shares with the loop: whether the loop may be asleep in its
/// poll, and how to wake it.
struct LoopBell {
    sleeping: AtomicBool,
    /// A worker posted results the loop has not taken in.
    rung: AtomicBool,
    waker: mio::Waker,
}

impl LoopBell {
    fn ring(&self) {
        self.rung.store(true, Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }
}

struct Worker {
    shared: Arc<Shared>,
    thread: std::thread::Thread,
    /// The batch the loop is filling for this worker.
    filling: Batch,
    /// Batches queued so far (`Shared::finished` reaching it means the worker is idle).
    queued: u64,
}

/// Whether a job read or wrote.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Read,
    Write,
}

/// The result of one job, handed back to the loop.
pub(super) struct Done {
    seq: u64,
    pub slot: usize,
    pub id: u64,
    pub kind: Kind,
    pub asked: usize,
    /// Bytes moved, or the error.
    pub result: std::io::Result<usize>,
    /// A read's parser, given back with what it parsed.
    pub ahead: Option<Box<ParseAhead>>,
}

pub(super) struct IoThreads {
    workers: Vec<Worker>,
    bell: Arc<LoopBell>,
    /// Emptied batches, to be filled again.
    spare: Vec<Batch>,
    always_active: bool,
    /// The next worker a new connection is given (round robin).
    next: usize,
    /// Reads queued so far, and the next one whose result is to be handed back; the
    /// results that came before it wait in `early`.
    reads_queued: u64,
    reads_handed: u64,
    early: Vec<Done>,
    /// The batches a worker posted, swapped out of its queue (kept for its capacity).
    posted: Vec<Batch>,
}

impl IoThreads {
    /// `total` threads, the loop's own included: `total - 1` workers are started;
    /// `waker` wakes the loop's poll.
    pub fn start(
        total: usize,
        always_active: bool,
        waker: mio::Waker,
    ) -> std::io::Result<IoThreads> {
        let bell = Arc::new(LoopBell {
            sleeping: AtomicBool::new(false),
            rung: AtomicBool::new(false),
            waker,
        });
        let mut workers = Vec::with_capacity(total.saturating_sub(1));
        for n in 1..total.max(2) {
            let shared = Arc::new(Shared {
                queues: Mutex::new(Queues::default()),
                queued: AtomicU64::new(0),
                finished: AtomicU64::new(0),
                parked: AtomicBool::new(false),
            });
            let theirs = shared.clone();
            let bell = bell.clone();
            let handle = std::thread::Builder::new()
                .name(format!("io_thd_{n}"))
                .spawn(move || {
                    crate::affinity::pin_current(crate::affinity::ThreadRole::Server);
                    work(&theirs, &bell)
                })?;
            workers.push(Worker {
                shared,
                thread: handle.thread().clone(),
                filling: Batch::default(),
                queued: 0,
            });
        }
        Ok(IoThreads {
            workers,
            bell,
            spare: Vec::new(),
            always_active,
            next: 0,
            reads_queued: 0,
            reads_handed: 0,
            early: Vec::new(),
            posted: Vec::new(),
        })
    }

    /// Threads in all, the loop's own included (`io-threads`).
    pub fn total(&self) -> usize {
        self.workers.len() + 1
    }

    /// The worker a new connection's I/O goes to (CLIENT LIST `io-thread`, 1 and up:
    /// 0 is the loop's own thread).
    pub fn assign(&mut self) -> usize {
        let t = self.next;
        self.next = (self.next + 1) % self.workers.len();
        t + 1
    }

    /// Whether a turn of `jobs` reads (or writes) is worth handing to the threads.
    pub fn worth_it(&self, jobs: usize) -> bool {
        self.always_active || jobs >= 2 * self.total()
    }

    fn filling(&mut self, thread: usize) -> &mut Batch {
        let w = thread.saturating_sub(1).min(self.workers.len() - 1);
        &mut self.workers[w].filling
    }

    /// Queues a read of up to `buf.len()` bytes into `buf` on `thread`'s worker (sent
    /// with `submit`). With `ahead`, the worker then parses the `before` bytes that
    /// precede `buf` and those it read (`batch::parse_read`), and gives the parser
    /// back with the result.
    ///
    /// # Safety
    /// `buf` and the `before` bytes in front of it must stay valid, unmoved and
    /// unwritten, and `fd` open, until the job's result has been taken in
    /// (`take_done`) or the worker waited for (`wait_idle`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn read(
        &mut self,
        thread: usize,
        slot: usize,
        id: u64,
        fd: RawFd,
        buf: &mut [u8],
        before: usize,
        ahead: Option<Box<ParseAhead>>,
    ) {
        let op = Op::Read {
            buf: buf.as_mut_ptr(),
            len: buf.len(),
        };
        // SAFETY: the caller says `before` bytes precede `buf` in one allocation.
        let head = unsafe { buf.as_ptr().sub(before) };
        let seq = self.reads_queued;
        self.reads_queued += 1;
        self.filling(thread).jobs.push(Job {
            fd,
            op,
            ahead,
            head,
            before,
            slot,
            id,
            asked: buf.len(),
            seq,
            result: 0,
        });
    }

    /// Queues a vectored write of `slices` on `thread`'s worker (sent with `submit`).
    ///
    /// # Safety
    /// The memory `slices` points to must stay valid and unchanged, and `fd` open,
    /// until the job's result has been taken in or the worker waited for.
    pub unsafe fn write<'a>(
        &mut self,
        thread: usize,
        slot: usize,
        id: u64,
        fd: RawFd,
        slices: impl Iterator<Item = &'a [u8]>,
    ) {
        let batch = self.filling(thread);
        let iov_from = batch.iov.len();
        let mut asked = 0;
        batch.iov.extend(slices.map(|s| {
            asked += s.len();
            libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            }
        }));
        let iov_count = batch.iov.len() - iov_from;
        batch.jobs.push(Job {
            fd,
            op: Op::Write {
                iov_from,
                iov_count,
            },
            ahead: None,
            head: std::ptr::null(),
            before: 0,
            slot,
            id,
            asked,
            seq: 0,
            result: 0,
        });
    }

    /// Hands every worker the batch filled for it, waking the sleeping ones.
    pub fn submit(&mut self) {
        for w in &mut self.workers {
            if w.filling.jobs.is_empty() {
                continue;
            }
            let next = self.spare.pop().unwrap_or_default();
            let batch = std::mem::replace(&mut w.filling, next);
            w.shared
                .queues
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .todo
                .push_back(batch);
            w.queued += 1;
            w.shared.queued.store(w.queued, Ordering::SeqCst);
            if w.shared.parked.load(Ordering::SeqCst) {
                w.thread.unpark();
            }
        }
    }

    /// Whether a worker posted results not taken in yet.
    pub fn has_done(&self) -> bool {
        self.bell.rung.load(Ordering::SeqCst)
    }

    /// Takes in the results the workers posted: every write's, and the reads' in the
    /// order the reads were queued, as far as they have all come. The loop queues a
    /// turn's reads in the order their events came, so clients are served in the
    /// order they sent, as with one thread, whichever worker is quicker.
    pub fn take_done(&mut self, out: &mut Vec<Done>) {
        if !self.bell.rung.swap(false, Ordering::SeqCst) {
            return;
        }
        let IoThreads {
            workers,
            spare,
            early,
            posted,
            ..
        } = self;
        for w in workers.iter() {
            {
                let mut q = w.shared.queues.lock().unwrap_or_else(|e| e.into_inner());
                if q.done.is_empty() {
                    continue;
                }
                // Swapped, not taken: both vectors keep their capacity.
                std::mem::swap(&mut q.done, posted);
            }
            for mut batch in posted.drain(..) {
                let used = batch.jobs.len();
                for j in batch.jobs.drain(..) {
                    let d = Done {
                        seq: j.seq,
                        slot: j.slot,
                        id: j.id,
                        kind: match j.op {
                            Op::Read { .. } => Kind::Read,
                            Op::Write { .. } => Kind::Write,
                        },
                        asked: j.asked,
                        result: if j.result < 0 {
                            Err(std::io::Error::from_raw_os_error(-j.result as i32))
                        } else {
                            Ok(j.result as usize)
                        },
                        ahead: j.ahead,
                    };
                    if d.kind == Kind::Read {
                        early.push(d);
                    } else {
                        out.push(d);
                    }
                }
                batch.clear_after(used);
                if spare.len() < 2 * workers.len() {
                    spare.push(batch);
                }
            }
        }
        self.early
            .sort_unstable_by_key(|d| std::cmp::Reverse(d.seq));
        while self
            .early
            .last()
            .is_some_and(|d| d.seq == self.reads_handed)
        {
            out.extend(self.early.pop());
            self.reads_handed += 1;
        }
    }

    /// Waits until `thread`'s worker has run every batch queued for it (its results
    /// stay posted); says how long that took, in ns.
    pub fn wait_idle(&mut self, thread: usize) -> u64 {
        let w = thread.saturating_sub(1).min(self.workers.len() - 1);
        let start = Instant::now();
        let w = &self.workers[w];
        let mut spins = 0u32;
        while w.shared.finished.load(Ordering::Acquire) != w.queued {
            spins += 1;
            if spins < 1 << 10 {
                std::hint::spin_loop();
            } else {
                // The worker lost its CPU (more runnable threads than cores): let it
                // have ours.
                std::thread::yield_now();
            }
        }
        start.elapsed().as_nanos() as u64
    }

    /// `wait_idle` for every worker.
    pub fn wait_all_idle(&mut self) -> u64 {
        (1..=self.workers.len()).map(|t| self.wait_idle(t)).sum()
    }

    /// Before the loop's poll: false when results are waiting (poll without
    /// sleeping); otherwise a worker posting one from now on wakes the poll.
    pub fn may_sleep(&self) -> bool {
        self.bell.sleeping.store(true, Ordering::SeqCst);
        if self.bell.rung.load(Ordering::SeqCst) {
            self.bell.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// After the loop's poll.
    pub fn awake(&self) {
        self.bell.sleeping.store(false, Ordering::SeqCst);
    }

    /// Shrinks the spare batches and the waiting results (the cron, between bursts).
    pub fn trim(&mut self) {
        decay_unused(&mut self.early);
        decay_unused(&mut self.posted);
        for b in &mut self.spare {
            b.clear();
        }
        for w in &mut self.workers {
            w.filling.clear();
        }
    }
}

/// A worker's life: take the next batch (spinning a little after each one, then
/// sleeping), run it, post it back and ring the loop.
fn work(shared: &Shared, bell: &LoopBell) {
    let mut last = Instant::now();
    let mut finished = 0u64;
    loop {
        let mut spins = 0u32;
        while shared.queued.load(Ordering::SeqCst) == finished {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || last.elapsed() < WORKER_SPIN {
                std::hint::spin_loop();
                continue;
            }
            shared.parked.store(true, Ordering::SeqCst);
            // A batch queued between the check and the mark is seen here; one queued
            // after the mark unparks us (an unpark that came first makes `park`
            // return at once).
            if shared.queued.load(Ordering::SeqCst) == finished {
                std::thread::park();
            }
            shared.parked.store(false, Ordering::SeqCst);
        }
        let batch = shared
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .todo
            .pop_front();
        let Some(mut batch) = batch else {
            continue;
        };
        batch.run();
        shared
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .done
            .push(batch);
        finished += 1;
        shared.finished.store(finished, Ordering::Release);
        bell.ring();
        last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn threads(n: usize) -> (IoThreads, mio::Poll) {
        let poll = mio::Poll::new().unwrap();
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
        (IoThreads::start(n, true, waker).unwrap(), poll)
    }

    /// Waits for `n` results, sleeping in the poll as the loop does.
    fn collect(io: &mut IoThreads, poll: &mut mio::Poll, n: usize) -> Vec<Done> {
        let mut done = Vec::new();
        let mut events = mio::Events::with_capacity(4);
        while done.len() < n {
            if io.may_sleep() {
                poll.poll(&mut events, Some(Duration::from_secs(5)))
                    .unwrap();
                io.awake();
            }
            io.take_done(&mut done);
        }
        done
    }

    /// Reads and writes on pairs of sockets spread over three workers land where they
    /// should, with each result matched to its connection, and the loop is woken for
    /// them.
    #[test]
    fn jobs_move_the_bytes_of_every_connection() {
        let (mut io, mut poll) = threads(4);
        let pairs: Vec<(UnixStream, UnixStream)> =
            (0..10).map(|_| UnixStream::pair().unwrap()).collect();
        let thread_of: Vec<usize> = (0..pairs.len()).map(|_| io.assign()).collect();
        assert_eq!(&thread_of[..4], &[1, 2, 3, 1]);
        for round in 0..50u32 {
            // Writes: two slices each, from buffers the test keeps alive.
            let heads: Vec<Vec<u8>> = (0..pairs.len())
                .map(|i| format!("r{round}c{i}:").into_bytes())
                .collect();
            let tail = vec![b'x'; 1000];
            for (i, (a, _)) in pairs.iter().enumerate() {
                let slices = [&heads[i][..], &tail[..]];
                // SAFETY: `heads` and `tail` outlive the results collected below.
                unsafe {
                    io.write(
                        thread_of[i],
                        i,
                        100 + i as u64,
                        a.as_raw_fd(),
                        slices.into_iter(),
                    )
                };
            }
            io.submit();
            let done = collect(&mut io, &mut poll, pairs.len());
            assert_eq!(done.len(), pairs.len());
            for d in &done {
                assert_eq!(d.kind, Kind::Write);
                assert_eq!(d.id, 100 + d.slot as u64);
                assert_eq!(d.asked, heads[d.slot].len() + 1000);
                assert_eq!(*d.result.as_ref().unwrap(), d.asked);
            }
            // Reads on the other ends.
            let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; 4096]; pairs.len()];
            for (i, (_, b)) in pairs.iter().enumerate() {
                // SAFETY: `bufs` is not touched before the results are collected.
                unsafe { io.read(thread_of[i], i, 7, b.as_raw_fd(), &mut bufs[i], 0, None) };
            }
            io.submit();
            for d in collect(&mut io, &mut poll, pairs.len()) {
                assert_eq!(d.kind, Kind::Read);
                let n = *d.result.as_ref().unwrap();
                let mut want = heads[d.slot].clone();
                want.extend_from_slice(&tail);
                assert_eq!(&bufs[d.slot][..n], &want[..]);
            }
        }
        // An error comes back as the errno: a read on a non-blocking empty socket. The
        // parser lent with it comes back without the command its last read found.
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 8];
        let mut lent = Box::<ParseAhead>::default();
        lent.first = Some(22);
        lent.batch.push((0, 22, 0, 2));
        // SAFETY: `buf` outlives the wait below.
        unsafe { io.read(2, 9, 1, a.as_raw_fd(), &mut buf, 0, Some(lent)) };
        io.submit();
        io.wait_idle(2);
        let mut done = Vec::new();
        io.take_done(&mut done);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].slot, 9);
        assert_eq!(
            done[0].result.as_ref().unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        let lent = done.pop().unwrap().ahead.unwrap();
        assert_eq!((lent.first, lent.batch.len()), (None, 0));
        // A read that completes a command: the worker parses it, the bytes already
        // there (`before`) included.
        let (c, mut d) = UnixStream::pair().unwrap();
        let mut rbuf = b"*2\r\n$3\r\nGE".to_vec();
        rbuf.resize(64, 0);
        d.write_all(b"T\r\n$1\r\nk\r\n*1\r\n").unwrap();
        // SAFETY: `rbuf` outlives the wait below.
        unsafe { io.read(1, 3, 2, c.as_raw_fd(), &mut rbuf[10..], 10, Some(lent)) };
        io.submit();
        io.wait_idle(1);
        let mut done = Vec::new();
        io.take_done(&mut done);
        assert_eq!(*done[0].result.as_ref().unwrap(), 14);
        let lent = done.pop().unwrap().ahead.unwrap();
        assert_eq!((lent.first, lent.batch.len()), (Some(20), 0));
        assert_eq!(lent.parser.all_ranges(), &[(8, 11), (17, 18)]);
        io.wait_all_idle();
        b.write_all(b"end").unwrap();
        let mut a = a;
        a.set_nonblocking(false).unwrap();
        let mut got = [0u8; 3];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"end");
    }
}
