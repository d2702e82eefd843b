//! Incremental request parser: RESP multibulk and inline commands.
//!
//! The parser never copies a multibulk argument: it records `(start, end)` ranges into
//! the connection's read buffer, and keeps its position across calls so that a command
//! arriving in many small reads is scanned once, not once per read. It never reserves
//! memory for an announced bulk length: the buffer grows only with bytes that arrived,
//! so a client announcing 500 MB and stalling costs nothing.
//!
//! Errors carry Redis's exact `Protocol error: …` text; the caller replies with it and
//! closes the connection, as Redis does.

use memchr::memchr;

/// Longest inline command or `*`/`$` header line accepted (Redis's PROTO_INLINE_MAX_SIZE).
pub const MAX_INLINE_SIZE: usize = 64 * 1024;

/// Limits enforced while parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: i64,
    /// Whether the client has authenticated (unauthenticated clients get tight limits).
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            authenticated: true,
        }
    }
}

/// One complete request found at the start of the buffer.
#[derive(Debug, PartialEq)]
pub enum Request {
    /// A multibulk command; its arguments are the parser's `ranges()` into the buffer.
    Multibulk { consumed: usize },
    /// An inline command; arguments are unquoted copies.
    Inline { consumed: usize, args: Vec<Vec<u8>> },
    /// Bytes that hold no command (an empty line, `*0`, `*-1`): drop them.
    Empty { consumed: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Argument slots reserved up front for a multibulk, and kept between commands.
const ARGS_KEPT: usize = 1024;

#[derive(Debug, Default)]
pub struct RequestParser {
    /// Arguments still to read in the current multibulk; `None` outside one.
    remaining: Option<usize>,
    /// Where parsing resumes, relative to the start of the current command.
    pos: usize,
    /// Length of the bulk whose header was read but whose payload has not fully arrived.
    pending_bulk: Option<usize>,
    ranges: Vec<(usize, usize)>,
    /// Where the last command's ranges begin in `ranges` (`parse_next` keeps those of
    /// the commands before it).
    first: usize,
}

impl RequestParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Argument ranges of the last `Request::Multibulk`, relative to the buffer given.
    pub fn ranges(&self) -> &[(usize, usize)] {
        &self.ranges[self.first..]
    }

    /// The ranges of every command since the last `parse`: `parse_next` appends each
    /// command's, relative to the buffer it was given.
    pub fn all_ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }

    /// Frees the argument ranges of a large command once it ran, as Redis frees a
    /// client's argv after each command: a 100,000-argument SADD would otherwise keep
    /// 2 MB of ranges per connection for good.
    pub fn release_args(&mut self) {
        if self.ranges.capacity() > ARGS_KEPT {
            self.ranges = Vec::new();
            self.first = 0;
        }
    }

    /// Forgets a command parsed in part: parsing starts afresh at the next buffer
    /// given (a look-ahead that stopped at an incomplete command).
    pub fn reset(&mut self) {
        if self.remaining.is_some() {
            self.ranges.truncate(self.first);
        }
        self.remaining = None;
        self.pos = 0;
        self.pending_bulk = None;
    }

    /// How many more bytes the command in progress needs at least, when known (used to
    /// size reads of a large bulk without trusting the announced size up front).
    pub fn bytes_wanted(&self) -> Option<usize> {
        self.pending_bulk.map(|n| n + 2)
    }

    /// Where the bulk in progress ends, counted from the current command's first byte
    /// (its trailing CRLF included), with that bulk's length; `None` outside a bulk.
    pub fn pending_bulk_end(&self) -> Option<(usize, usize)> {
        self.pending_bulk.map(|n| (self.pos + n + 2, n))
    }

    /// Parses one request from `buf`, which must start at the current command's first
    /// byte. Returns `Ok(None)` when more bytes are needed.
    pub fn parse(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<Request>, ProtocolError> {
        self.parse_request(buf, limits, false)
    }

    /// `parse`, keeping the ranges of the commands parsed before (`all_ranges`): a
    /// pipeline's commands parsed ahead share one vector.
    pub fn parse_next(
        &mut self,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Option<Request>, ProtocolError> {
        self.parse_request(buf, limits, true)
    }

    #[inline(always)]
    fn parse_request(
        &mut self,
        buf: &[u8],
        limits: &Limits,
        append: bool,
    ) -> Result<Option<Request>, ProtocolError> {
        // A new command: the usual kind is read in one pass (`parse_usual`); anything
        // else goes to the loop below, which starts afresh.
        if self.remaining.is_none() {
            if append {
                self.first = self.ranges.len();
            } else {
                self.ranges.clear();
                self.first = 0;
            }
            self.ranges.reserve(USUAL_MAX_ARGS);
            let start = self.ranges.len();
            let spare = &mut self.ranges.spare_capacity_mut()[..USUAL_MAX_ARGS];
            if let Some((consumed, n)) = parse_usual(buf, spare.try_into().expect("reserved")) {
                // SAFETY: `parse_usual` initialised the first `n` of the spare slots
                // (n <= USUAL_MAX_ARGS, all reserved above).
                unsafe { self.ranges.set_len(start + n) };
                return Ok(Some(Request::Multibulk { consumed }));
            }
        }
        // The position, the arguments left and a length already read live in locals
        // while the loop runs; the parser's fields keep them only when the command is
        // incomplete and parsing resumes with the next read.
        let (mut pos, mut left, mut pending) = match self.remaining {
            Some(left) => (self.pos, left, self.pending_bulk.take()),
            None => {
                if buf.is_empty() {
                    return Ok(None);
                }
                if buf[0] != b'*' {
                    return parse_inline(buf);
                }
                let Some((count, next)) = read_line_number(buf, 1, "mbulk")? else {
                    return Ok(None);
                };
                let count = match count {
                    Some(n) if n <= i32::MAX as i64 => n,
                    _ => return Err(proto("invalid multibulk length")),
                };
                if !limits.authenticated && count > 10 {
                    return Err(proto("unauthenticated multibulk length"));
                }
                if count <= 0 {
                    return Ok(Some(Request::Empty { consumed: next }));
                }
                if append {
                    self.first = self.ranges.len();
                } else {
                    self.ranges.clear();
                    self.first = 0;
                }
                // Reserve modestly: the count is announced, not proven.
                self.ranges.reserve((count as usize).min(ARGS_KEPT));
                (next, count as usize, None)
            }
        };
        loop {
            if left == 0 {
                self.remaining = None;
                self.pos = 0;
                return Ok(Some(Request::Multibulk { consumed: pos }));
            }
            let len = match pending.take() {
                Some(len) => len,
                None => {
                    if pos >= buf.len() {
                        self.pos = pos;
                        self.remaining = Some(left);
                        return Ok(None);
                    }
                    if buf[pos] != b'$' {
                        let got = buf[pos] as char;
                        return Err(ProtocolError(format!(
                            "Protocol error: expected '$', got '{got}'"
                        )));
                    }
                    // One or two digits: no limit can refuse such a length
                    // (`proto-max-bulk-len` is at least 1MB, an unauthenticated
                    // client's limit 16KB), so the checks below are skipped.
                    if let Some((len, next)) = short_number(buf, pos + 1) {
                        pos = next;
                        len
                    } else {
                        let Some((len, next)) = read_long_line_number(buf, pos + 1, "bulk")? else {
                            self.pos = pos;
                            self.remaining = Some(left);
                            return Ok(None);
                        };
                        let len = match len {
                            Some(n) if n >= 0 && n <= limits.max_bulk_len => n as usize,
                            _ => return Err(proto("invalid bulk length")),
                        };
                        if !limits.authenticated && len > 16384 {
                            return Err(proto("unauthenticated bulk length"));
                        }
                        pos = next;
                        len
                    }
                }
            };
            // The two bytes after the payload are skipped unchecked, as Redis does.
            if buf.len() < pos + len + 2 {
                self.pos = pos;
                self.remaining = Some(left);
                self.pending_bulk = Some(len);
                return Ok(None);
            }
            self.ranges.push((pos, pos + len));
            pos += len + 2;
            left -= 1;
        }
    }
}

/// Most arguments `parse_usual` reads.
const USUAL_MAX_ARGS: usize = 8;

/// The usual request, read in one pass: a multibulk of 1 to `USUAL_MAX_ARGS` arguments,
/// whole in `buf`, whose count and lengths have one or two digits. Its argument ranges
/// are written to the first slots of `found`; returns the bytes it takes and the
/// argument count. None: anything else, which the general parser reads. No limit can
/// refuse such a request (an unauthenticated client may send 10 arguments of 16 KB,
/// `proto-max-bulk-len` is at least 1 MB), so none is checked. Nothing is kept between
/// calls, so the general parser starts afresh where this one gave up.
#[inline(always)]
fn parse_usual(
    buf: &[u8],
    found: &mut [std::mem::MaybeUninit<(usize, usize)>; USUAL_MAX_ARGS],
) -> Option<(usize, usize)> {
    if *buf.first()? != b'*' {
        return None;
    }
    let (n, mut pos) = short_number(buf, 1)?;
    if n == 0 || n > USUAL_MAX_ARGS {
        return None;
    }
    for range in &mut found[..n] {
        if *buf.get(pos)? != b'$' {
            return None;
        }
        let (len, start) = short_number(buf, pos + 1)?;
        let end = start + len;
        if buf.len() < end + 2 {
            return None;
        }
        range.write((start, end));
        // The two bytes after the payload are skipped unchecked, as Redis does.
        pos = end + 2;
    }
    Some((pos, n))
}

fn proto(msg: &str) -> ProtocolError {
    ProtocolError(format!("Protocol error: {msg}"))
}

/// A number of one or two digits (`0\r\n` to `99\r\n`, no leading zero) at `from`,
/// and where its line ends: nearly every argument count and most argument lengths.
/// None: any other line, read by `read_long_line_number`.
#[inline(always)]
fn short_number(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let w = buf.get(from..from + 4)?;
    let d0 = w[0].wrapping_sub(b'0');
    if d0 > 9 {
        return None;
    }
    if w[1] == b'\r' && w[2] == b'\n' {
        return Some((d0 as usize, from + 3));
    }
    let d1 = w[1].wrapping_sub(b'0');
    if d0 != 0 && d1 <= 9 && w[2] == b'\r' && w[3] == b'\n' {
        return Some((d0 as usize * 10 + d1 as usize, from + 4));
    }
    None
}

/// Reads a `\r\n`-terminated number starting at `from`. `Ok(None)`: line incomplete.
/// The inner `None` means the line was not a valid integer.
#[allow(clippy::type_complexity)]
#[inline(always)]
fn read_line_number(
    buf: &[u8],
    from: usize,
    what: &str,
) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    if let Some((n, next)) = short_number(buf, from) {
        return Ok(Some((Some(n as i64), next)));
    }
    read_long_line_number(buf, from, what)
}

/// `read_line_number` beyond `short_number`'s one or two digits.
#[allow(clippy::type_complexity)]
#[inline(never)]
fn read_long_line_number(
    buf: &[u8],
    from: usize,
    what: &str,
) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    // Up to 9 plain digits and "\r\n" without a scan for '\r' (no leading zero, so
    // the value is canonical, as `parse_i64` would require).
    if let Some(&first) = buf.get(from) {
        if (b'1'..=b'9').contains(&first) {
            let mut n = (first - b'0') as i64;
            let mut i = from + 1;
            while i < buf.len() && i < from + 9 && buf[i].is_ascii_digit() {
                n = n * 10 + (buf[i] - b'0') as i64;
                i += 1;
            }
            if i + 1 < buf.len() && buf[i] == b'\r' && buf[i + 1] == b'\n' {
                return Ok(Some((Some(n), i + 2)));
            }
        }
    }
    let rest = &buf[from.min(buf.len())..];
    match memchr(b'\r', rest) {
        None => {
            if rest.len() > MAX_INLINE_SIZE {
                return Err(ProtocolError(format!(
                    "Protocol error: too big {what} count string"
                )));
            }
            Ok(None)
        }
        Some(i) => {
            if i > MAX_INLINE_SIZE {
                return Err(ProtocolError(format!(
                    "Protocol error: too big {what} count string"
                )));
            }
            // The '\n' after '\r' must have arrived before the line counts as read.
            if from + i + 1 >= buf.len() {
                return Ok(None);
            }
            Ok(Some((
                crate::util::numeric::parse_i64(&rest[..i]),
                from + i + 2,
            )))
        }
    }
}

fn parse_inline(buf: &[u8]) -> Result<Option<Request>, ProtocolError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > MAX_INLINE_SIZE {
            return Err(proto("too big inline request"));
        }
        return Ok(None);
    };
    if nl > MAX_INLINE_SIZE {
        return Err(proto("too big inline request"));
    }
    let mut line = &buf[..nl];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    let args = split_args(line).ok_or_else(|| proto("unbalanced quotes in request"))?;
    if args.is_empty() {
        return Ok(Some(Request::Empty { consumed: nl + 1 }));
    }
    Ok(Some(Request::Inline {
        consumed: nl + 1,
        args,
    }))
}

/// Splits an inline command line into arguments with redis-cli's quoting rules:
/// `"..."` with `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` with `\'`. A closing quote
/// must be followed by a space or the end of the line. `None`: unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis splits the line as a C string: a NUL byte ends it.
    let line = match memchr(0, line) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    cur.push(hex(line[i + 2]) * 16 + hex(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    c if c.is_ascii_whitespace() => {
                        break;
                    }
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Parses everything in `input`, feeding it in the given chunk sizes, and returns the
    /// commands found (or the first error).
    fn parse_all(input: &[u8], chunks: &[usize]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::new();
        let limits = Limits::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut out = Vec::new();
        let mut chunk_iter = chunks.iter().cycle();
        while fed < input.len() || !buf.is_empty() {
            let step = if chunks.is_empty() {
                input.len()
            } else {
                *chunk_iter.next().unwrap()
            };
            let end = (fed + step.max(1)).min(input.len());
            buf.extend_from_slice(&input[fed..end]);
            fed = end;
            loop {
                match parser.parse(&buf, &limits)? {
                    None => break,
                    Some(Request::Multibulk { consumed }) => {
                        out.push(
                            parser
                                .ranges()
                                .iter()
                                .map(|&(s, e)| buf[s..e].to_vec())
                                .collect(),
                        );
                        buf.drain(..consumed);
                    }
                    Some(Request::Inline { consumed, args }) => {
                        out.push(args);
                        buf.drain(..consumed);
                    }
                    Some(Request::Empty { consumed }) => {
                        buf.drain(..consumed);
                    }
                }
            }
            if fed == input.len() {
                break;
            }
        }
        Ok(out)
    }

    fn encode(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cmds {
            out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
            for a in c {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        out
    }

    #[test]
    fn multibulk_and_inline() {
        let got = parse_all(
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n\r\nset a \"b c\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                vec![b"GET".to_vec(), b"k".to_vec()],
                vec![b"PING".to_vec()],
                vec![b"set".to_vec(), b"a".to_vec(), b"b c".to_vec()],
            ]
        );
    }

    #[test]
    fn short_and_long_bulk_lengths_read_alike() {
        // Zero, one and two digits (the short reader), three and more (the long one),
        // whole or fed a byte at a time.
        let mut input = b"*5\r\n$0\r\n\r\n$1\r\na\r\n$10\r\n0123456789\r\n".to_vec();
        input.extend_from_slice(b"$99\r\n");
        input.extend_from_slice(&[b'x'; 99]);
        input.extend_from_slice(b"\r\n$100\r\n");
        input.extend_from_slice(&[b'y'; 100]);
        input.extend_from_slice(b"\r\n");
        let want: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"0123456789".to_vec(),
            vec![b'x'; 99],
            vec![b'y'; 100],
        ];
        for chunks in [&[][..], &[1][..], &[3, 7][..]] {
            assert_eq!(parse_all(&input, chunks).unwrap(), vec![want.clone()]);
        }
    }

    #[test]
    fn protocol_errors_match_redis() {
        let rows: &[(&[u8], &str)] = &[
            (b"*x\r\n", "Protocol error: invalid multibulk length"),
            (
                b"*3000000000\r\n",
                "Protocol error: invalid multibulk length",
            ),
            (b"*1\r\nfoo\r\n", "Protocol error: expected '$', got 'f'"),
            (b"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"),
            // A leading zero is not a length (Redis's string2ll), short or long.
            (b"*1\r\n$01\r\nx\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$007\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$+5\r\n", "Protocol error: invalid bulk length"),
            (
                b"*1\r\n$600000000\r\n",
                "Protocol error: invalid bulk length",
            ),
            (
                b"set a \"b\n",
                "Protocol error: unbalanced quotes in request",
            ),
            (
                b"set a \"b\"c\n",
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (input, msg) in rows {
            assert_eq!(
                parse_all(input, &[]).unwrap_err().0,
                *msg,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let long = vec![b'a'; MAX_INLINE_SIZE + 10];
        assert_eq!(
            parse_all(&long, &[]).unwrap_err().0,
            "Protocol error: too big inline request"
        );
        let mut mb = b"*1\r\n$".to_vec();
        mb.extend(std::iter::repeat_n(b'1', MAX_INLINE_SIZE + 10));
        assert_eq!(
            parse_all(&mb, &[]).unwrap_err().0,
            "Protocol error: too big bulk count string"
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let mut p = RequestParser::new();
        let limits = Limits {
            authenticated: false,
            ..Limits::default()
        };
        assert_eq!(
            p.parse(b"*11\r\n", &limits).unwrap_err().0,
            "Protocol error: unauthenticated multibulk length"
        );
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(b"*1\r\n$16385\r\n", &limits).unwrap_err().0,
            "Protocol error: unauthenticated bulk length"
        );
    }

    #[test]
    fn announced_bulk_is_not_trusted() {
        let mut p = RequestParser::new();
        let r = p
            .parse(b"*1\r\n$500000000\r\nabc", &Limits::default())
            .unwrap();
        assert_eq!(r, None);
        assert_eq!(p.bytes_wanted(), Some(500_000_002));
        assert!(p.ranges.capacity() <= 1024);
    }

    #[test]
    fn ranges_of_a_large_command_are_released() {
        let mut p = RequestParser::new();
        let n = 5000;
        let mut req = format!("*{n}\r\n").into_bytes();
        for _ in 0..n {
            req.extend_from_slice(b"$1\r\nx\r\n");
        }
        let r = p.parse(&req, &Limits::default()).unwrap();
        assert_eq!(
            r,
            Some(Request::Multibulk {
                consumed: req.len()
            })
        );
        assert_eq!(p.ranges().len(), n);
        p.release_args();
        assert_eq!(p.ranges.capacity(), 0);
        // A small command keeps its slots.
        let r = p
            .parse(b"*1\r\n$4\r\nPING\r\n", &Limits::default())
            .unwrap();
        assert_eq!(r, Some(Request::Multibulk { consumed: 14 }));
        p.release_args();
        assert!(p.ranges.capacity() >= 1);
    }

    #[test]
    fn quoting_rules() {
        let rows: &[(&[u8], &[&[u8]])] = &[
            (br#"a "b\x41\n" 'c\'d'"#, &[b"a", b"bA\n", b"c'd"]),
            (b"  x   y ", &[b"x", b"y"]),
            (b"a\0b c", &[b"a"]),
            (br#""" ''"#, &[b"", b""]),
        ];
        for (line, want) in rows {
            let got = split_args(line).unwrap();
            let want: Vec<Vec<u8>> = want.iter().map(|a| a.to_vec()).collect();
            assert_eq!(got, want);
        }
    }

    proptest! {
        #[test]
        fn any_split_gives_same_commands(
            cmds in prop::collection::vec(prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6), 1..8),
            chunks in prop::collection::vec(1usize..17, 1..8),
        ) {
            let input = encode(&cmds);
            let got = parse_all(&input, &chunks).unwrap();
            prop_assert_eq!(got, cmds);
        }

        #[test]
        fn random_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..300), chunks in prop::collection::vec(1usize..9, 1..4)) {
            let _ = parse_all(&input, &chunks);
        }
    }

    /// Requests the one-pass reader takes (up to 8 arguments of up to 99 bytes) and
    /// those it leaves to the general parser, one after another in one buffer,
    /// appended or parsed alone, come out as sent.
    #[test]
    fn usual_and_other_requests_read_alike() {
        let arg = |n: usize| vec![b'x'; n];
        let cmds: Vec<Vec<Vec<u8>>> = vec![
            vec![b"PING".to_vec()],
            vec![arg(0), arg(1), arg(9), arg(10), arg(99)],
            (0..8).map(arg).collect(),
            (0..9).map(arg).collect(),
            vec![b"SET".to_vec(), arg(100), arg(12345)],
            vec![b"GET".to_vec(), b"k".to_vec()],
            (0..12).map(|i| arg(i * 10)).collect(),
        ];
        let input = encode(&cmds);
        for append in [false, true] {
            let mut p = RequestParser::new();
            let (mut at, mut got) = (0, Vec::new());
            while at < input.len() {
                let buf = &input[at..];
                let r = if append && at > 0 {
                    p.parse_next(buf, &Limits::default())
                } else {
                    p.parse(buf, &Limits::default())
                };
                let Ok(Some(Request::Multibulk { consumed })) = r else {
                    panic!("{r:?}");
                };
                got.push(
                    p.ranges()
                        .iter()
                        .map(|&(s, e)| buf[s..e].to_vec())
                        .collect::<Vec<_>>(),
                );
                at += consumed;
            }
            assert_eq!(got, cmds);
            let total: usize = cmds.iter().map(Vec::len).sum();
            assert_eq!(p.all_ranges().len(), if append { total } else { 12 });
        }
        // Unauthenticated: 10 arguments pass, 11 are refused, however short.
        let limits = Limits {
            authenticated: false,
            ..Limits::default()
        };
        let ten = encode(&[(0..10).map(arg).collect()]);
        assert!(matches!(
            RequestParser::new().parse(&ten, &limits),
            Ok(Some(_))
        ));
        let eleven = encode(&[(0..11).map(arg).collect()]);
        assert!(RequestParser::new().parse(&eleven, &limits).is_err());
    }

    /// `parse_next` keeps each command's ranges after the ones before it, `ranges()`
    /// shows the last command's, and `reset` drops a command parsed in part.
    #[test]
    fn parse_next_appends_and_reset_forgets_a_partial_command() {
        let limits = Limits::default();
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$2\r\nvv\r\n*2\r\n$3\r\nGE";
        let mut p = RequestParser::new();
        let Ok(Some(Request::Multibulk { consumed: first })) = p.parse(buf, &limits) else {
            panic!("first command");
        };
        assert_eq!(p.all_ranges(), &[(8, 11), (17, 18)]);
        let Ok(Some(Request::Multibulk { consumed: second })) =
            p.parse_next(&buf[first..], &limits)
        else {
            panic!("second command");
        };
        assert_eq!(p.ranges(), &[(8, 11), (17, 18), (24, 26)]);
        assert_eq!(p.all_ranges().len(), 5);
        let rest = &buf[first + second..];
        assert_eq!(p.parse_next(rest, &limits), Ok(None));
        p.reset();
        assert_eq!(p.all_ranges().len(), 5);
        // Parsed afresh from its first byte once complete.
        let mut whole = rest.to_vec();
        whole.extend_from_slice(b"T\r\n$1\r\nc\r\n");
        assert_eq!(
            p.parse(&whole, &limits),
            Ok(Some(Request::Multibulk {
                consumed: whole.len()
            }))
        );
        assert_eq!(p.ranges(), &[(8, 11), (17, 18)]);
    }
}
