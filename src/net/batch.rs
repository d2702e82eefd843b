//! Commands parsed ahead of their turn and run as batches.
//!
//! When more bytes wait behind a command, the complete commands behind it are parsed
//! too (up to `PREFETCH_BATCH`), their keys prefetched together so that their cache
//! misses overlap (`KeyTable::prefetch`, Valkey 8's batch prefetch), and they run one
//! by one with the checks a single command gets.
//!
//! With I/O threads the parsing is done by the worker that read the bytes
//! (`parse_read`, net/io_threads.rs): the connection's parser travels with its read
//! job and comes back with the first command and the batch behind it parsed, so the
//! loop only executes. Whatever the worker leaves (an inline or malformed command, a
//! limit that changed since) is parsed on the loop as before.

use super::{args_at, evicted_before_command, spent_output_budget, Conn, Stop, ARGS_ON_STACK};
use crate::exec::Executor;
use crate::keyspace::table::PREFETCH_BATCH;
use crate::protocol::{Limits, Request, RequestParser};

/// A command of a batch: its offset from the first one's start, its length, and where
/// its argument ranges are in the parser's `all_ranges` (relative to its own start).
pub(super) type BatchCmd = (usize, usize, usize, usize);

/// The commands of a batch, on the stack.
struct Pipeline {
    cmds: [BatchCmd; PREFETCH_BATCH],
    len: usize,
}

impl Pipeline {
    fn new() -> Pipeline {
        Pipeline {
            cmds: [(0, 0, 0, 0); PREFETCH_BATCH],
            len: 0,
        }
    }

    /// Adds a command; one beyond `PREFETCH_BATCH` (which `parse_batch` never
    /// makes) would be left out of the batch and parsed again after it.
    fn push(&mut self, cmd: BatchCmd) {
        if let Some(slot) = self.cmds.get_mut(self.len) {
            *slot = cmd;
            self.len += 1;
        }
    }

    fn as_slice(&self) -> &[BatchCmd] {
        &self.cmds[..self.len]
    }
}

/// The most arguments a batch parses ahead: a batch is for many small commands.
const PIPELINE_MAX_ARGS: usize = 1024;

/// A connection's parsing state, lent to the I/O thread that reads for it (boxed and
/// kept by the connection between reads, so a job moves a pointer).
#[derive(Default)]
pub(super) struct ParseAhead {
    pub parser: RequestParser,
    /// The batch found behind the first command, the first one included (empty when
    /// nothing complete follows it).
    pub batch: Vec<BatchCmd>,
    /// What the client may send (proto-max-bulk-len, authenticated) when the read was
    /// queued: what is parsed under other limits is parsed again on the loop.
    pub limits: Limits,
    /// The length of the first command, when it was found complete.
    pub first: Option<usize>,
}

impl ParseAhead {
    /// Forgets what the last read found: a read that brings nothing parses nothing
    /// (the box is kept between reads, so its last result would otherwise stand).
    pub fn forget(&mut self) {
        self.first = None;
        self.batch.clear();
    }

    /// Whether a command parsed ahead waits to run (the worker then gets no parser).
    pub fn has_first(&self) -> bool {
        self.first.is_some()
    }

    /// The length of the first command parsed ahead, once, if it was parsed under
    /// `limits` (otherwise it is forgotten, and parsed again under the new ones). Its
    /// batch stays for `run_pipeline`.
    pub fn take_first(&mut self, limits: &Limits) -> Option<usize> {
        match self.first.take() {
            Some(n) if self.limits == *limits => Some(n),
            _ => {
                self.batch.clear();
                None
            }
        }
    }
}

/// After a read, on the I/O thread: parses the first command of `buf` (the
/// connection's unconsumed bytes) and, for an authenticated client, the complete
/// multibulk commands behind it, as `run_commands` and `run_pipeline` would. Inline,
/// empty and malformed requests are left to the loop (an error is replied to there).
pub(super) fn parse_read(ahead: &mut ParseAhead, buf: &[u8]) {
    ahead.forget();
    if buf.first() != Some(&b'*') {
        return;
    }
    match ahead.parser.parse(buf, &ahead.limits) {
        Ok(Some(Request::Multibulk { consumed })) => {
            ahead.first = Some(consumed);
            if consumed < buf.len() && ahead.limits.authenticated {
                let batch = &mut ahead.batch;
                parse_batch(&mut ahead.parser, buf, consumed, &ahead.limits, |c| {
                    batch.push(c)
                });
                if batch.len() == 1 {
                    batch.clear();
                }
            }
        }
        // Incomplete: the parser resumes where it is when more arrives.
        Ok(None) => {}
        Ok(Some(_)) | Err(_) => ahead.parser.reset(),
    }
}

/// Parses the complete multibulk commands that follow the first one in `buf` (`first`
/// bytes long, its ranges the parser's), up to `PREFETCH_BATCH` commands and
/// `PIPELINE_MAX_ARGS` arguments, handing each to `push`, the first one included. An
/// incomplete, inline, empty or malformed command ends the batch and is forgotten:
/// the loop parses it again.
fn parse_batch(
    parser: &mut RequestParser,
    buf: &[u8],
    first: usize,
    limits: &Limits,
    mut push: impl FnMut(BatchCmd),
) {
    push((0, first, 0, parser.all_ranges().len()));
    let mut parsed = first;
    let mut count = 1;
    while count < PREFETCH_BATCH
        && parsed < buf.len()
        && parser.all_ranges().len() < PIPELINE_MAX_ARGS
    {
        let from = parser.all_ranges().len();
        match parser.parse_next(&buf[parsed..], limits) {
            Ok(Some(Request::Multibulk { consumed })) => {
                push((parsed, consumed, from, parser.all_ranges().len()));
                parsed += consumed;
                count += 1;
            }
            _ => {
                parser.reset();
                break;
            }
        }
    }
}

/// A pipeline waits behind the command just parsed (`first` bytes long): the batch
/// behind it — parsed by the I/O thread that read it (`ahead`), or here — has its
/// keys prefetched together and runs one command at a time as `run_commands` runs
/// them. `Some` stops `run_commands`; `None` goes on with what follows the batch, or
/// with what the batch left when the parsing limits changed under it (AUTH, CONFIG
/// SET proto-max-bulk-len): that is parsed again.
pub(super) fn run_pipeline(
    ex: &mut Executor,
    slot: usize,
    conn: &mut Conn,
    first: usize,
    limits: &Limits,
    output_at_start: usize,
    ahead: bool,
) -> Option<Stop> {
    let base = conn.start;
    let mut batch = Pipeline::new();
    let parsed_ahead = conn.lent.as_mut().filter(|l| ahead && !l.batch.is_empty());
    if let Some(lent) = parsed_ahead {
        debug_assert_eq!(lent.batch[0].1, first);
        for c in lent.batch.drain(..) {
            batch.push(c);
        }
    } else {
        parse_batch(
            &mut conn.parser,
            &conn.rbuf[base..conn.end],
            first,
            limits,
            |c| batch.push(c),
        );
    }
    let cmds = batch.as_slice();
    if cmds.len() > 1 {
        let ranges = conn.parser.all_ranges();
        let buf = &conn.rbuf[base..];
        ex.prefetch_batch(slot, cmds.len(), |i, j| {
            let (offset, _, from, to) = *cmds.get(i)?;
            let (s, e) = *ranges[from..to].get(j)?;
            buf.get(offset + s..offset + e)
        });
    }
    let stop = run_batch(ex, slot, conn, cmds, limits, output_at_start);
    conn.parser.release_args();
    stop
}

/// Runs the commands of `batch` (`run_pipeline`).
fn run_batch(
    ex: &mut Executor,
    slot: usize,
    conn: &mut Conn,
    batch: &[BatchCmd],
    limits: &Limits,
    output_at_start: usize,
) -> Option<Stop> {
    let base = conn.start;
    for (i, &(offset, consumed, from, to)) in batch.iter().enumerate() {
        debug_assert_eq!(conn.start, base + offset);
        if i > 0 {
            let c = ex.client(slot);
            if c.close_after_reply || c.close_asap || c.stream.is_some() {
                return Some(Stop::Done);
            }
            if c.authenticated != limits.authenticated
                || ex.config.proto_max_bulk_len != limits.max_bulk_len
            {
                return None;
            }
        }
        let buf = &conn.rbuf[base + offset..];
        let (mut stack, mut heap) = ([&[][..]; ARGS_ON_STACK], Vec::new());
        let args = args_at(
            &mut stack,
            &mut heap,
            buf,
            &conn.parser.all_ranges()[from..to],
        );
        if !ex.can_run(slot, args) {
            // Blocked clients resume through `blocking.take_resumed`.
            return Some(if ex.blocking.is_blocked(slot) {
                Stop::Done
            } else {
                Stop::Held
            });
        }
        conn.report_qbuf(ex.client_mut(slot));
        if evicted_before_command(ex, slot) {
            return Some(Stop::Done);
        }
        ex.execute_and_reply(slot, args);
        conn.start += consumed;
        if spent_output_budget(ex, slot, output_at_start) {
            return Some(Stop::Yielded);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ahead(authenticated: bool) -> ParseAhead {
        ParseAhead {
            parser: RequestParser::new(),
            batch: Vec::new(),
            limits: Limits {
                max_bulk_len: 512 * 1024 * 1024,
                authenticated,
            },
            first: None,
        }
    }

    /// What an I/O thread parses after a read: the first command and the complete
    /// ones behind it, with the ranges the loop runs them from; partial, inline and
    /// malformed requests are left as they were for the loop.
    #[test]
    fn a_read_is_parsed_into_its_first_command_and_batch() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$2\r\nxy\r\n*1\r\n$4\r\nPI";
        let mut a = ahead(true);
        parse_read(&mut a, buf);
        assert_eq!(a.first, Some(20));
        assert_eq!(a.batch.len(), 2);
        assert_eq!(a.batch[0], (0, 20, 0, 2));
        assert_eq!(a.batch[1], (20, 28, 2, 5));
        let ranges = a.parser.all_ranges();
        let arg = |cmd: &BatchCmd, i: usize| {
            let (s, e) = ranges[cmd.2 + i];
            &buf[cmd.0 + s..cmd.0 + e]
        };
        assert_eq!(arg(&a.batch[0], 1), b"a");
        assert_eq!(arg(&a.batch[1], 0), b"SET");
        assert_eq!(arg(&a.batch[1], 2), b"xy");
        // The partial PING was forgotten: the loop parses it afresh from its start.
        assert_eq!(a.parser.parse(&buf[48..], &a.limits), Ok(None));

        // An unauthenticated client gets its first command only (no batch runs).
        let mut a = ahead(false);
        parse_read(&mut a, buf);
        assert_eq!((a.first, a.batch.len()), (Some(20), 0));

        // A command that is not complete yet: nothing, and the parser keeps its place.
        let mut a = ahead(true);
        parse_read(&mut a, &buf[..15]);
        assert_eq!((a.first, a.batch.len()), (None, 0));
        assert_eq!(
            a.parser.parse(&buf[..20], &a.limits),
            Ok(Some(Request::Multibulk { consumed: 20 }))
        );

        // Inline and malformed requests are the loop's.
        for other in [&b"PING\r\n"[..], b"*1\r\n!3\r\nfoo\r\n"] {
            let mut a = ahead(true);
            parse_read(&mut a, other);
            assert_eq!((a.first, a.batch.len()), (None, 0));
            assert!(a.parser.parse(b"*1\r\n$4\r\nPING\r\n", &a.limits).is_ok());
        }
    }
}
