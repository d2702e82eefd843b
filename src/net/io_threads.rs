//! I/O threads (`io-threads N`): the turn's socket reads and writes spread over N
//! threads, the loop's own thread included, while commands still run one at a time on
//! the loop's thread.
//!
//! The shape is Redis 6–7.4's threaded I/O: each phase (the turn's reads, then the
//! turn's writes) hands every thread a batch of system calls on buffers the loop
//! owns, the loop does its own batch, then waits for the others before it touches any
//! client again. Nothing a command can see is shared: a worker only calls `read` or
//! `writev` on a descriptor, into or from memory the loop leaves alone until the
//! phase ends. So ordering, MULTI/EXEC, scripts and every reply stay exactly as with
//! one thread; what moves off the loop is the system-call time, the biggest part of
//! an unpipelined request.
//!
//! Threads are used in a turn only when it has at least two jobs per thread (Redis's
//! rule: with fewer, waking a thread costs more than it saves); `io-threads-always-
//! active yes` (a test switch, as Valkey's) uses them for any job.

use std::cell::UnsafeCell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A worker's batch belongs to the loop's thread.
const LOOP_OWNS: u8 = 0;
/// A worker's batch is handed to it, to be run.
const WORKER_OWNS: u8 = 1;

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

#[derive(Clone, Copy)]
struct Job {
    fd: RawFd,
    op: Op,
    /// The caller's name for the job, handed back with its result.
    tag: usize,
    /// Bytes moved, or the negated `errno`.
    result: isize,
}

#[derive(Default)]
struct Batch {
    jobs: Vec<Job>,
    iov: Vec<libc::iovec>,
}

impl Batch {
    fn clear(&mut self) {
        decay_unused(&mut self.jobs);
        decay_unused(&mut self.iov);
        self.jobs.clear();
        self.iov.clear();
    }

    fn run(&mut self) {
        for job in &mut self.jobs {
            // SAFETY: the loop built this job from a live descriptor and from buffers
            // it neither moves, resizes nor frees until `Phase::run` has every batch
            // back (the contract of `Phase::read` and `Phase::write`), and no two jobs
            // of a phase share a connection, so no buffer is read and written at once.
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
            job.result = if r < 0 {
                -(std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO) as isize)
            } else {
                r
            };
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

/// A worker's mailbox: its batch, and who owns the batch now.
struct Mailbox {
    owner: AtomicU8,
    batch: UnsafeCell<Batch>,
}

// SAFETY: `batch` is only touched by the side `owner` names, and ownership changes
// hands with Release stores answered by Acquire loads, so the two threads never use
// it at once. The raw pointers in a batch stay valid while the worker owns it (see
// `Batch::run`).
unsafe impl Sync for Mailbox {}
// SAFETY: as above; the batch's pointers are only dereferenced by its current owner.
unsafe impl Send for Mailbox {}

struct Worker {
    mailbox: Arc<Mailbox>,
    thread: std::thread::Thread,
}

/// The result of one connection's job, handed back to the loop.
pub(super) struct Done {
    pub tag: usize,
    /// Bytes moved, or the error.
    pub result: std::io::Result<usize>,
}

pub(super) struct IoThreads {
    workers: Vec<Worker>,
    /// The loop's own batch (thread 0's).
    own: Batch,
    always_active: bool,
    /// The next thread a new connection is given (round robin over all of them).
    next: usize,
}

impl IoThreads {
    /// `total` threads, the loop's own included: `total - 1` workers are started.
    pub fn start(total: usize, always_active: bool) -> std::io::Result<IoThreads> {
        let mut workers = Vec::with_capacity(total.saturating_sub(1));
        for n in 1..total.max(1) {
            let mailbox = Arc::new(Mailbox {
                owner: AtomicU8::new(LOOP_OWNS),
                batch: UnsafeCell::new(Batch::default()),
            });
            let theirs = mailbox.clone();
            let handle = std::thread::Builder::new()
                .name(format!("io_thd_{n}"))
                .spawn(move || work(&theirs))?;
            workers.push(Worker {
                mailbox,
                thread: handle.thread().clone(),
            });
        }
        Ok(IoThreads {
            workers,
            own: Batch::default(),
            always_active,
            next: 0,
        })
    }

    /// Threads in all, the loop's own included (`io-threads`).
    pub fn total(&self) -> usize {
        self.workers.len() + 1
    }

    /// The thread a new connection's I/O goes to (CLIENT LIST `io-thread`).
    pub fn assign(&mut self) -> usize {
        let t = self.next;
        self.next = (self.next + 1) % self.total();
        t
    }

    /// Whether a phase of `jobs` connections is worth spreading over the threads.
    pub fn worth_it(&self, jobs: usize) -> bool {
        !self.workers.is_empty() && (self.always_active || jobs >= 2 * self.total())
    }

    /// Starts building a phase.
    pub fn phase(&mut self) -> Phase<'_> {
        self.clear();
        Phase { threads: self }
    }

    /// Empties every batch, shrinking those the last phase used little of; the cron
    /// calls it too, since turns under the threads' bar build no phase.
    pub fn clear(&mut self) {
        self.own.clear();
        for w in &self.workers {
            debug_assert_eq!(w.mailbox.owner.load(Ordering::Acquire), LOOP_OWNS);
            // SAFETY: the loop owns every idle mailbox (`run` waits for each one back).
            unsafe { (*w.mailbox.batch.get()).clear() };
        }
    }
}

/// One phase's jobs, given out by thread, then run with `run`.
pub(super) struct Phase<'a> {
    threads: &'a mut IoThreads,
}

impl Phase<'_> {
    fn batch(&mut self, thread: usize) -> &mut Batch {
        match thread.checked_sub(1) {
            Some(w) if w < self.threads.workers.len() => {
                // SAFETY: the loop owns the mailbox until `run` hands it over.
                unsafe { &mut *self.threads.workers[w].mailbox.batch.get() }
            }
            _ => &mut self.threads.own,
        }
    }

    /// A read of up to `buf.len()` bytes into `buf`, on `thread`.
    ///
    /// # Safety
    /// `buf` must stay valid and untouched until `run` returns.
    pub unsafe fn read(&mut self, thread: usize, tag: usize, fd: RawFd, buf: &mut [u8]) {
        let op = Op::Read {
            buf: buf.as_mut_ptr(),
            len: buf.len(),
        };
        self.batch(thread).jobs.push(Job {
            fd,
            op,
            tag,
            result: 0,
        });
    }

    /// A vectored write of `slices`, on `thread`.
    ///
    /// # Safety
    /// The memory `slices` points to must stay valid and unchanged until `run` returns.
    pub unsafe fn write(
        &mut self,
        thread: usize,
        tag: usize,
        fd: RawFd,
        slices: &[std::io::IoSlice<'_>],
    ) {
        let batch = self.batch(thread);
        let iov_from = batch.iov.len();
        // IoSlice is ABI-compatible with iovec on Unix; the fields are rebuilt here
        // rather than transmuted.
        batch.iov.extend(slices.iter().map(|s| libc::iovec {
            iov_base: s.as_ptr() as *mut libc::c_void,
            iov_len: s.len(),
        }));
        batch.jobs.push(Job {
            fd,
            op: Op::Write {
                iov_from,
                iov_count: slices.len(),
            },
            tag,
            result: 0,
        });
    }

    /// Hands each worker its batch, runs the loop's own, waits for the workers, and
    /// returns every job's result (the loop's batch first, then each worker's,
    /// each in the order given); says how long it waited for the workers, in ns.
    pub fn run(self, done: &mut Vec<Done>) -> u64 {
        let threads = self.threads;
        for w in &threads.workers {
            // SAFETY: still the loop's until the store below.
            if unsafe { (*w.mailbox.batch.get()).jobs.is_empty() } {
                continue;
            }
            w.mailbox.owner.store(WORKER_OWNS, Ordering::Release);
            w.thread.unpark();
        }
        threads.own.run();
        collect(&threads.own, done);
        let waiting = Instant::now();
        for w in &threads.workers {
            let mut spins = 0u32;
            while w.mailbox.owner.load(Ordering::Acquire) != LOOP_OWNS {
                spins += 1;
                if spins < 1 << 12 {
                    std::hint::spin_loop();
                } else {
                    // The worker lost its CPU (more runnable threads than cores):
                    // let it have ours.
                    std::thread::yield_now();
                }
            }
            // SAFETY: the worker handed the batch back (the Acquire load above).
            collect(unsafe { &*w.mailbox.batch.get() }, done);
        }
        waiting.elapsed().as_nanos() as u64
    }
}

fn collect(batch: &Batch, done: &mut Vec<Done>) {
    done.extend(batch.jobs.iter().map(|j| Done {
        tag: j.tag,
        result: if j.result < 0 {
            Err(std::io::Error::from_raw_os_error(-j.result as i32))
        } else {
            Ok(j.result as usize)
        },
    }));
}

/// A worker's life: wait for a batch (spinning a little after each one, then
/// sleeping), run it, hand it back.
fn work(mailbox: &Mailbox) {
    let mut last = Instant::now();
    loop {
        let mut spins = 0u32;
        while mailbox.owner.load(Ordering::Acquire) != WORKER_OWNS {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || last.elapsed() < WORKER_SPIN {
                std::hint::spin_loop();
            } else {
                // An unpark that came first makes this return at once.
                std::thread::park();
            }
        }
        // SAFETY: the loop handed the batch over (the Acquire load above) and does not
        // touch it until the Release store below.
        unsafe { (*mailbox.batch.get()).run() };
        mailbox.owner.store(LOOP_OWNS, Ordering::Release);
        last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{IoSlice, Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Reads and writes on pairs of sockets spread over four threads land where they
    /// should, every phase, with the results matched to their slots.
    #[test]
    fn phases_move_the_bytes_of_every_connection() {
        let mut threads = IoThreads::start(4, true).unwrap();
        let pairs: Vec<(UnixStream, UnixStream)> =
            (0..10).map(|_| UnixStream::pair().unwrap()).collect();
        let thread_of: Vec<usize> = (0..pairs.len()).map(|_| threads.assign()).collect();
        let mut done = Vec::new();
        for round in 0..50u32 {
            // Writes: two slices each, from buffers the test keeps alive.
            let heads: Vec<Vec<u8>> = (0..pairs.len())
                .map(|i| format!("r{round}c{i}:").into_bytes())
                .collect();
            let tail = vec![b'x'; 1000];
            let mut phase = threads.phase();
            for (i, (a, _)) in pairs.iter().enumerate() {
                let slices = [IoSlice::new(&heads[i]), IoSlice::new(&tail)];
                // SAFETY: `heads` and `tail` outlive `run` below.
                unsafe { phase.write(thread_of[i], i, a.as_raw_fd(), &slices) };
            }
            done.clear();
            phase.run(&mut done);
            assert_eq!(done.len(), pairs.len());
            for d in &done {
                assert_eq!(*d.result.as_ref().unwrap(), heads[d.tag].len() + 1000);
            }
            // Reads on the other ends.
            let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; 4096]; pairs.len()];
            let mut phase = threads.phase();
            for (i, (_, b)) in pairs.iter().enumerate() {
                // SAFETY: `bufs` outlives `run` and is not touched before it returns.
                unsafe { phase.read(thread_of[i], i, b.as_raw_fd(), &mut bufs[i]) };
            }
            done.clear();
            phase.run(&mut done);
            for d in &done {
                let n = *d.result.as_ref().unwrap();
                let mut want = heads[d.tag].clone();
                want.extend_from_slice(&tail);
                assert_eq!(&bufs[d.tag][..n], &want[..]);
            }
        }
        // An error comes back as the errno: a read on a non-blocking empty socket.
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 8];
        let mut phase = threads.phase();
        // SAFETY: `buf` outlives `run`.
        unsafe { phase.read(1, 7, a.as_raw_fd(), &mut buf) };
        done.clear();
        phase.run(&mut done);
        assert_eq!(done[0].tag, 7);
        assert_eq!(
            done[0].result.as_ref().unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock
        );
        b.write_all(b"end").unwrap();
        let mut a = a;
        a.set_nonblocking(false).unwrap();
        let mut got = [0u8; 3];
        a.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"end");
    }
}
