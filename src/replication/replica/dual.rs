//! Dual-channel full sync, the replica side (Valkey 8's protocol, with
//! `dual-channel-replication-enabled yes`).
//!
//! A master that answers our PSYNC `+DUALCHANNELSYNC` (it cannot continue our history
//! and agreed to `capa dual-channel`) sends the image on a second connection, the RDB
//! channel, so that the stream written meanwhile comes to us at once instead of
//! waiting in the master's memory until the image is out:
//!
//! 1. The main channel is parked (token `MAIN_TOKEN`) and the link connects again:
//!    that socket is the RDB channel. `AUTH` (when set), `REPLCONF capa eof rdb-only 1
//!    rdb-channel 1 listening-port <port>`, then `SYNC`.
//! 2. The master answers `$ENDOFF:<offset> <replid> <db> <client id>` as its snapshot
//!    starts, then the image, which the link receives as any other. The main channel
//!    sends `REPLCONF set-rdb-client-id <id>` and `PSYNC <replid> <offset+1>`; the
//!    master answers `+CONTINUE` and streams from the image's instant on.
//! 3. That stream is read into the main channel's buffer while the image is decoded,
//!    up to the `replica` class hard limit of `client-output-buffer-limit`; past it,
//!    reading stops and the rest waits on the master, as with one channel.
//! 4. Once the image is loaded and `+CONTINUE` is in, the RDB channel is closed and
//!    the main channel becomes the link's socket, its buffer the link's input: the
//!    buffered stream is applied and the link is up.
//!
//! A failure on either channel fails the link, closing both; it retries as usual.

use std::io::Write;

use mio::{Interest, Token};

use super::{fail, read_link, Link, State, Step, Transfer, LINK_TOKEN};
use crate::exec::Executor;
use crate::protocol::reply::encode_command;
use crate::tls::LinkStream;

/// Bytes of the buffered stream applied between two reads of the socket.
const APPLY_SLICE: usize = 1024 * 1024;

/// The event-loop token of a dual-channel sync's parked main channel.
pub const MAIN_TOKEN: usize = usize::MAX - 68;

/// Whether an event-loop token is one of the link's sockets.
pub fn owns_token(token: usize) -> bool {
    token == LINK_TOKEN || token == MAIN_TOKEN
}

/// Socket events of the link's sockets.
pub fn on_token(ex: &mut Executor, token: usize) {
    if token == MAIN_TOKEN {
        on_main_event(ex);
    } else {
        super::on_event(ex);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum MainStep {
    /// Waiting for the RDB channel's `$ENDOFF`.
    AwaitEndOff,
    /// `REPLCONF set-rdb-client-id` sent; on its `+OK`, `PSYNC <replid> <offset>`
    /// (one at a time: a PSYNC behind an unwritten reply is refused).
    SetId {
        replid: String,
        offset: u64,
    },
    Psync,
    /// `+CONTINUE` in: the stream is buffered until the image is loaded.
    Buffering,
}

pub(super) struct MainChannel {
    sock: LinkStream,
    rbuf: Vec<u8>,
    rpos: usize,
    wbuf: Vec<u8>,
    step: MainStep,
    /// Reading stopped at the buffer limit (reported once).
    full: bool,
}

/// `+DUALCHANNELSYNC`: the main channel is parked and the RDB channel connected.
pub(super) fn open_rdb_channel(ex: &mut Executor) {
    let r = &mut ex.repl;
    let Some(link) = r.link.as_mut() else { return };
    let Some(mut sock) = link.sock.take() else {
        return;
    };
    let parked = r.registry.as_ref().is_some_and(|reg| {
        reg.reregister(
            &mut sock,
            Token(MAIN_TOKEN),
            Interest::READABLE | Interest::WRITABLE,
        )
        .is_ok()
    });
    // Whatever followed the reply belongs to the main channel.
    let rbuf = link.rbuf.split_off(link.rpos);
    link.rbuf.clear();
    link.rpos = 0;
    link.sock_gen += 1;
    link.main = Some(MainChannel {
        sock,
        rbuf,
        rpos: 0,
        wbuf: Vec::new(),
        step: MainStep::AwaitEndOff,
        full: false,
    });
    if !parked {
        return fail(
            ex,
            "Unable to register the main channel for dual channel sync",
        );
    }
    link.state = State::Connect;
    super::connect(ex);
}

/// The RDB channel is connected: its handshake goes out (no PING, as Valkey's).
pub(super) fn send_rdb_handshake(ex: &mut Executor) {
    let port = super::announced_port(ex);
    let auth = ex.config.masterauth.clone();
    let user = ex.config.masteruser.clone();
    let Some(link) = ex.repl.link.as_mut() else {
        return;
    };
    if let Some(pass) = &auth {
        match &user {
            Some(u) => link.send(&[b"AUTH", u.as_bytes(), pass.as_bytes()]),
            None => link.send(&[b"AUTH", pass.as_bytes()]),
        }
    }
    link.send(&[
        b"REPLCONF",
        b"capa",
        b"eof",
        b"rdb-only",
        b"1",
        b"rdb-channel",
        b"1",
        b"listening-port",
        port.as_bytes(),
    ]);
    link.state = State::Handshake(Step::RdbConf {
        left: 1 + usize::from(auth.is_some()),
        auth: auth.is_some(),
    });
}

/// One reply on the RDB channel before its image; false when the link failed.
pub(super) fn rdb_handshake(ex: &mut Executor, step: Step, line: &[u8], text: &str) -> bool {
    match step {
        Step::RdbConf { left, auth } => {
            if line.first() == Some(&b'-') {
                let why = if auth {
                    format!("Unable to AUTH to MASTER: {text}")
                } else {
                    format!("Master refused the RDB channel, dual channel sync approach cannot be used: {text}")
                };
                fail(ex, &why);
                return false;
            }
            let link = ex.repl.link.as_mut().expect("link");
            if left > 1 {
                link.state = State::Handshake(Step::RdbConf {
                    left: left - 1,
                    auth: false,
                });
            } else {
                link.send(&[b"SYNC"]);
                link.state = State::Handshake(Step::EndOff);
            }
            true
        }
        Step::EndOff => {
            if line.is_empty() {
                // A newline the master sends while the snapshot waits to start.
                return true;
            }
            let Some((offset, replid, rdb_id)) = parse_endoff(text) else {
                fail(ex, &format!("Received unexpected $ENDOFF response: {text}"));
                return false;
            };
            let link = ex.repl.link.as_mut().expect("link");
            link.transfer = Some(Transfer::new(replid.clone(), offset));
            link.state = State::Transfer;
            let Some(main) = link.main.as_mut() else {
                fail(ex, "Dual channel sync without its main channel");
                return false;
            };
            let id = rdb_id.to_string();
            encode_command(
                &[b"REPLCONF", b"set-rdb-client-id", id.as_bytes()],
                &mut main.wbuf,
            );
            main.step = MainStep::SetId {
                replid,
                offset: offset + 1,
            };
            flush_main(ex);
            true
        }
        _ => true,
    }
}

/// `$ENDOFF:<offset> <replid> <db> <client id>`: (offset, replid, client id).
fn parse_endoff(text: &str) -> Option<(u64, String, u64)> {
    let mut words = text.strip_prefix("$ENDOFF:")?.split(' ');
    // Offsets are Redis's `long long`: one past the image's is asked for next.
    let offset = words.next()?.parse::<i64>().ok().filter(|o| *o >= 0)? as u64;
    let replid = words.next().filter(|r| r.len() == 40)?.to_string();
    words.next()?.parse::<i64>().ok()?;
    let rdb_id = words.next()?.parse::<u64>().ok()?;
    words.next().is_none().then_some((offset, replid, rdb_id))
}

/// Writes what the main channel has queued.
fn flush_main(ex: &mut Executor) {
    let mut failed = None;
    if let Some(main) = ex.repl.link.as_mut().and_then(|l| l.main.as_mut()) {
        while !main.wbuf.is_empty() {
            match main.sock.write(&main.wbuf) {
                Ok(n) => {
                    main.wbuf.drain(..n);
                    ex.stats.total_net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(format!("Error writing to MASTER: {e}"));
                    break;
                }
            }
        }
        if failed.is_none() && main.wbuf.is_empty() && main.sock.wants_write() {
            if let Err(e) = main.sock.flush() {
                failed = Some(format!("Error writing to MASTER: {e}"));
            }
        }
    }
    if let Some(why) = failed {
        fail(ex, &why);
    }
}

/// Socket events of the parked main channel: its replies, then the stream, read
/// into its buffer up to the limit.
fn on_main_event(ex: &mut Executor) {
    flush_main(ex);
    let closed = read_main_buffer(ex);
    let gen = ex.repl.link.as_ref().map_or(0, |l| l.sock_gen);
    process_main(ex);
    if let Some(why) = closed {
        // Unless the sync completed with what was read (the channel is the link's now,
        // and its own read finds the close).
        if ex
            .repl
            .link
            .as_ref()
            .is_some_and(|l| l.sock_gen == gen && l.main.is_some())
        {
            fail(ex, &why);
        }
    }
}

/// Reads what the parked main channel has, while the image is installed (a close
/// or an error is found again by the next event).
pub(super) fn read_main(ex: &mut Executor) {
    let _ = read_main_buffer(ex);
}

/// Reads the main channel into its buffer, up to the limit; Some
/// when the master closed it or reading failed.
fn read_main_buffer(ex: &mut Executor) -> Option<String> {
    let limit = ex.config.client_output_buffer_limit[1].hard as usize;
    let mut closed = None;
    {
        let link = ex.repl.link.as_mut()?;
        let main = link.main.as_mut()?;
        loop {
            let buffered = main.rbuf.len() - main.rpos;
            // Before `+CONTINUE` too: a master sending more than replies is held back.
            if limit > 0 && buffered >= limit {
                if !main.full {
                    main.full = true;
                    crate::log::notice("Replication buffer limit reached, stopping buffering.");
                }
                break;
            }
            if main.rpos > 0 && buffered < 16 * 1024 {
                main.rbuf.drain(..main.rpos);
                main.rpos = 0;
            }
            let eof = "Connection with master lost (main channel).";
            let (sock, buf) = (&mut main.sock, &mut main.rbuf);
            match read_link(sock, buf, &mut link.last_io, &mut ex.stats, eof) {
                Ok(0) => break,
                Ok(_) => {}
                Err(why) => {
                    closed = Some(why);
                    break;
                }
            }
        }
    }
    closed
}

/// The main channel's replies to `set-rdb-client-id` and `PSYNC`.
fn process_main(ex: &mut Executor) {
    loop {
        let Some(link) = ex.repl.link.as_mut() else {
            return;
        };
        let expected = link
            .transfer
            .as_ref()
            .map_or_else(|| ex.repl.replid.clone(), |t| t.replid.clone());
        let Some(main) = link.main.as_mut() else {
            return;
        };
        if !matches!(main.step, MainStep::SetId { .. } | MainStep::Psync) {
            return;
        }
        let buf = &main.rbuf[main.rpos..];
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            return;
        };
        let mut line = &buf[..nl];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let text = String::from_utf8_lossy(line).into_owned();
        main.rpos += nl + 1;
        if let MainStep::SetId { replid, offset } = &main.step {
            if text.starts_with('-') {
                return fail(
                    ex,
                    &format!("Master does not understand REPLCONF set-rdb-client-id: {text}"),
                );
            }
            let (replid, off) = (replid.clone(), offset.to_string());
            crate::log::notice(&format!(
                "Dual channel replication: Trying a partial resynchronization using main channel (request {replid}:{off})."
            ));
            encode_command(
                &[b"PSYNC", replid.as_bytes(), off.as_bytes()],
                &mut main.wbuf,
            );
            main.step = MainStep::Psync;
            flush_main(ex);
            continue;
        }
        if text.is_empty() {
            continue;
        }
        let mut words = text.split(' ');
        let continued =
            words.next() == Some("+CONTINUE") && words.next().is_none_or(|id| id == expected);
        if !continued {
            return fail(
                ex,
                &format!("Aborting dual channel sync. Main channel PSYNC reply: {text}"),
            );
        }
        main.step = MainStep::Buffering;
        crate::log::notice(
            "Dual channel replication: MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization, RDB load in background.",
        );
        if link.state == State::DualWait {
            finish(ex);
        }
        return;
    }
}

/// The image is loaded (`load`): the RDB channel is closed; the sync completes now
/// if the main channel's `+CONTINUE` is in, else when it comes.
pub(super) fn image_loaded(ex: &mut Executor) {
    let r = &mut ex.repl;
    let Some(link) = r.link.as_mut() else { return };
    if let Some(mut s) = link.sock.take() {
        if let Some(reg) = r.registry.as_ref() {
            let _ = reg.deregister(&mut s);
        }
    }
    link.sock_gen += 1;
    link.wbuf.clear();
    link.state = State::DualWait;
    if link
        .main
        .as_ref()
        .is_some_and(|m| m.step == MainStep::Buffering)
    {
        finish(ex);
    }
}

/// The main channel becomes the link's socket and its buffer the link's input: the
/// stream buffered during the load is applied, and the link is up.
fn finish(ex: &mut Executor) {
    let r = &mut ex.repl;
    let Some(link) = r.link.as_mut() else { return };
    let Some(main) = link.main.take() else { return };
    let MainChannel {
        mut sock,
        rbuf,
        rpos,
        wbuf,
        ..
    } = main;
    let registered = r.registry.as_ref().is_some_and(|reg| {
        reg.reregister(
            &mut sock,
            Token(LINK_TOKEN),
            Interest::READABLE | Interest::WRITABLE,
        )
        .is_ok()
    });
    let buffered = rbuf.len() - rpos;
    link.sock = Some(sock);
    link.sock_gen += 1;
    link.rbuf.clear();
    link.rpos = 0;
    link.wbuf = wbuf;
    if !registered {
        return fail(
            ex,
            "Unable to register the main channel after dual channel sync",
        );
    }
    super::connected(ex);
    // The buffered stream is applied a slice at a time, the socket read behind it
    // between slices, so the master's output does not fill while we catch up. What
    // was read meanwhile is left to the usual path (no loop chasing a master that
    // writes faster than we apply).
    let (mut pending, mut at) = (rbuf, rpos);
    let mut left = buffered;
    while left > 0 {
        let Some(link) = ex.repl.link.as_mut().filter(|l| l.is_up()) else {
            return;
        };
        let end = (at + APPLY_SLICE.min(left)).min(pending.len());
        link.rbuf.extend_from_slice(&pending[at..end]);
        left -= end - at;
        at = end;
        super::process(ex);
        if at > pending.len() / 2 {
            pending.drain(..at);
            at = 0;
        }
        let Some(link) = ex.repl.link.as_mut().filter(|l| l.is_up()) else {
            return;
        };
        let Some(sock) = link.sock.as_mut() else {
            return;
        };
        // A close or an error is found again by `on_event` below.
        while read_link(sock, &mut pending, &mut link.last_io, &mut ex.stats, "")
            .is_ok_and(|n| n > 0)
        {}
    }
    if let Some(link) = ex.repl.link.as_mut().filter(|l| l.is_up()) {
        link.rbuf.extend_from_slice(&pending[at..]);
    }
    drop(pending);
    super::process(ex);
    let d = crate::replication::fack::Durability::of(ex);
    if let Some(l) = ex.repl.link.as_mut().filter(|l| l.is_up()) {
        l.send_ack(d);
    }
    crate::log::notice(&format!(
        "Dual channel replication: Successfully streamed replication data into memory ({buffered} bytes buffered while loading)"
    ));
    // What waits in the socket (reading may have stopped at the limit, and no new
    // readiness event would announce it).
    super::on_event(ex);
}

/// Closes a dual-channel sync's main channel, if any (the link fails or goes).
pub(super) fn close_main(ex: &Executor, link: &mut Link) {
    if let Some(mut main) = link.main.take() {
        if let Some(reg) = ex.repl.registry.as_ref() {
            let _ = reg.deregister(&mut main.sock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_endoff;

    #[test]
    fn endoff_lines_parse_exactly() {
        let id = "a".repeat(40);
        assert_eq!(
            parse_endoff(&format!("$ENDOFF:1234 {id} 0 17")),
            Some((1234, id.clone(), 17))
        );
        for bad in [
            format!("$ENDOFF:-1 {id} 0 17"),
            format!("$ENDOFF:9223372036854775808 {id} 0 17"),
            format!("$ENDOFF:12 {} 0 17", "a".repeat(39)),
            format!("$ENDOFF:12 {id} x 17"),
            format!("$ENDOFF:12 {id} 0"),
            format!("$ENDOFF:12 {id} 0 17 extra"),
            format!("+FULLRESYNC {id} 12"),
            "$ENDOFF:".to_string(),
        ] {
            assert_eq!(parse_endoff(&bad), None, "{bad}");
        }
    }
}
