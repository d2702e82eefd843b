//! The reply value every command returns, and its encoding for RESP2 and RESP3.
//!
//! Handlers build a `Reply` without knowing the connection's protocol version; the
//! encoder decides how RESP3-only types (maps, sets, doubles, booleans, nulls, pushes)
//! are flattened for RESP2 clients, exactly as Redis does.

use std::borrow::Cow;

use crate::util::numeric::{format_f64, format_human_f64, format_i64_line};

/// A reply to one command. Equality compares what a client would read: a `Bulk` and a
/// `ShortBulk` of the same bytes are equal.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A simple string (`+OK`).
    Status(Cow<'static, str>),
    /// An error line without the leading `-`, e.g. `ERR syntax error`.
    Error(Cow<'static, str>),
    Int(i64),
    Bulk(Vec<u8>),
    /// A bulk string of at most `SHORT_BULK_MAX` bytes carried inside the reply (GET of
    /// a short string or an integer): nothing is allocated to make it or freed after.
    /// Code that reads a reply's bytes uses `bulk_bytes`, which sees both forms.
    ShortBulk(ShortBytes),
    /// The null bulk string (`$-1` in RESP2, `_` in RESP3).
    Null,
    /// The null array (`*-1` in RESP2, `_` in RESP3).
    NullArray,
    Array(Vec<Reply>),
    /// A map in RESP3; a flat array of key, value, key, value… in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set in RESP3; an array in RESP2.
    Set(Vec<Reply>),
    /// RESP3 attributes (`|`) describing the reply that follows them; RESP2 clients get
    /// nothing for them. Redis itself sends them only for DEBUG PROTOCOL ATTRIB.
    Attribute(Vec<(Reply, Reply)>),
    /// A double in RESP3; a bulk string in RESP2.
    Double(f64),
    /// A double printed as Redis's addReplyHumanLongDouble does (`%.17Lf` trimmed:
    /// GEOPOS, WITHCOORD): `,` in RESP3 and a bulk string in RESP2, both that text.
    HumanDouble(f64),
    /// A boolean in RESP3; the integer 1 or 0 in RESP2.
    Bool(bool),
    /// A big number (`(`) in RESP3; a bulk string in RESP2 (scripts' `{big_number=...}`).
    BigNumber(Vec<u8>),
    /// A verbatim string (`=`) in RESP3 with its three-letter format; a bulk string in RESP2.
    Verbatim(&'static str, Vec<u8>),
    /// An out-of-band push (`>`) in RESP3; an array in RESP2 (pub/sub messages).
    Push(Vec<Reply>),
    /// Several replies to be written one after another (a command that answers more than
    /// once, like SUBSCRIBE with several channels).
    Multi(Vec<Reply>),
    /// Nothing is written (the reply was already sent, or the client asked for silence).
    NoReply,
    /// An array of `.0` items already encoded in `.1`, made only of arrays and bulk
    /// strings (which RESP2 and RESP3 encode alike). Large replies (XRANGE) are written
    /// this way to skip a `Reply` and its allocations per element; `decoded()` gives
    /// the tree back for the few consumers that look inside (scripts).
    EncodedArray(usize, Vec<u8>),
    /// Independent random picks written a piece at a time as the client's socket
    /// drains (`picks.rs`); encoded whole where it cannot stream (inside EXEC).
    Picks(Box<super::picks::PickStream>),
}

impl PartialEq for Reply {
    fn eq(&self, other: &Reply) -> bool {
        use Reply::*;
        match self {
            // `self` has bytes, so equal options mean `other` has the same bytes.
            Bulk(_) | ShortBulk(_) => self.bulk_bytes() == other.bulk_bytes(),
            Status(a) => matches!(other, Status(b) if a == b),
            Error(a) => matches!(other, Error(b) if a == b),
            Int(a) => matches!(other, Int(b) if a == b),
            Null => matches!(other, Null),
            NullArray => matches!(other, NullArray),
            NoReply => matches!(other, NoReply),
            Array(a) => matches!(other, Array(b) if a == b),
            Set(a) => matches!(other, Set(b) if a == b),
            Push(a) => matches!(other, Push(b) if a == b),
            Multi(a) => matches!(other, Multi(b) if a == b),
            Map(a) => matches!(other, Map(b) if a == b),
            Attribute(a) => matches!(other, Attribute(b) if a == b),
            Double(a) => matches!(other, Double(b) if a == b),
            HumanDouble(a) => matches!(other, HumanDouble(b) if a == b),
            Bool(a) => matches!(other, Bool(b) if a == b),
            BigNumber(a) => matches!(other, BigNumber(b) if a == b),
            Verbatim(f, a) => matches!(other, Verbatim(g, b) if f == g && a == b),
            EncodedArray(n, a) => matches!(other, EncodedArray(m, b) if n == m && a == b),
            Picks(a) => matches!(other, Picks(b) if a == b),
        }
    }
}

/// The longest bulk string a `Reply::ShortBulk` holds: an embedded string value
/// (`keyspace::value::EMBSTR_MAX`) or any integer's digits.
pub const SHORT_BULK_MAX: usize = 44;

/// Up to `SHORT_BULK_MAX` bytes, inline.
#[derive(Clone, Copy)]
pub struct ShortBytes {
    len: u8,
    bytes: [u8; SHORT_BULK_MAX],
}

impl ShortBytes {
    /// `b`, if it is short enough.
    #[inline]
    pub fn new(b: &[u8]) -> Option<ShortBytes> {
        if b.len() > SHORT_BULK_MAX {
            return None;
        }
        let mut s = ShortBytes {
            len: b.len() as u8,
            bytes: [0; SHORT_BULK_MAX],
        };
        s.bytes[..b.len()].copy_from_slice(b);
        Some(s)
    }

    /// The decimal digits of `n` (at most 20 bytes).
    pub fn int(n: i64) -> ShortBytes {
        let mut s = ShortBytes {
            len: 0,
            bytes: [0; SHORT_BULK_MAX],
        };
        let mut digits = [0u8; 24];
        let d = crate::util::numeric::i64_digits(n, &mut digits);
        s.bytes[..d.len()].copy_from_slice(d);
        s.len = d.len() as u8;
        s
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::fmt::Debug for ShortBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl PartialEq for ShortBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Reply {
    /// A bulk string reply of `b`: inline (`ShortBulk`) up to `SHORT_BULK_MAX` bytes.
    #[inline]
    pub fn bulk(b: &[u8]) -> Reply {
        match ShortBytes::new(b) {
            Some(s) => Reply::ShortBulk(s),
            None => Reply::Bulk(b.to_vec()),
        }
    }

    /// A bulk string reply of `n`'s decimal digits (an integer-encoded string value).
    pub fn bulk_int(n: i64) -> Reply {
        Reply::ShortBulk(ShortBytes::int(n))
    }

    /// The reply with every `ShortBulk` in it made a `Bulk` (the embedded API's
    /// callers match on `Bulk` alone).
    pub fn with_heap_bulks(self) -> Reply {
        let all = |v: Vec<Reply>| v.into_iter().map(Reply::with_heap_bulks).collect();
        let pairs = |v: Vec<(Reply, Reply)>| {
            v.into_iter()
                .map(|(k, v)| (k.with_heap_bulks(), v.with_heap_bulks()))
                .collect()
        };
        match self {
            Reply::ShortBulk(b) => Reply::Bulk(b.as_slice().to_vec()),
            Reply::Array(v) => Reply::Array(all(v)),
            Reply::Set(v) => Reply::Set(all(v)),
            Reply::Push(v) => Reply::Push(all(v)),
            Reply::Multi(v) => Reply::Multi(all(v)),
            Reply::Map(v) => Reply::Map(pairs(v)),
            Reply::Attribute(v) => Reply::Attribute(pairs(v)),
            other => other,
        }
    }

    /// The bytes of a bulk string reply, inline or not.
    pub fn bulk_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            Reply::ShortBulk(s) => Some(s.as_slice()),
            _ => None,
        }
    }

    /// Whether dropping the reply frees anything (false: integers, nulls, booleans,
    /// doubles, borrowed statuses and errors).
    #[inline(always)]
    pub fn owns_heap(&self) -> bool {
        !matches!(
            self,
            Reply::Int(_)
                | Reply::ShortBulk(_)
                | Reply::Null
                | Reply::NullArray
                | Reply::NoReply
                | Reply::Bool(_)
                | Reply::Double(_)
                | Reply::HumanDouble(_)
                | Reply::Status(Cow::Borrowed(_))
                | Reply::Error(Cow::Borrowed(_))
        )
    }

    pub const fn ok() -> Reply {
        Reply::Status(Cow::Borrowed("OK"))
    }

    pub const fn status(s: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(s))
    }

    pub const fn err(s: &'static str) -> Reply {
        Reply::Error(Cow::Borrowed(s))
    }

    pub fn error(s: String) -> Reply {
        Reply::Error(Cow::Owned(s))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Encodes the reply for protocol version `proto` (2 or 3), appending to `out`.
    pub fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        match self {
            Reply::Status(s) => {
                out.push(b'+');
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(e) => {
                out.push(b'-');
                // An error must stay on one line whatever the message carries.
                for &c in e.as_bytes() {
                    out.push(if c == b'\r' || c == b'\n' { b' ' } else { c });
                }
                out.extend_from_slice(b"\r\n");
            }
            Reply::Int(n) => format_i64_line(b':', *n, out),
            Reply::Bulk(b) => encode_bulk(b, out),
            Reply::ShortBulk(b) => encode_bulk(b.as_slice(), out),
            Reply::Null => out.extend_from_slice(if proto >= 3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NullArray => {
                out.extend_from_slice(if proto >= 3 { b"_\r\n" } else { b"*-1\r\n" })
            }
            Reply::Array(items) => {
                encode_header(b'*', items.len(), out);
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if proto >= 3 {
                    encode_header(b'%', pairs.len(), out);
                } else {
                    encode_header(b'*', pairs.len() * 2, out);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Attribute(pairs) => {
                if proto >= 3 {
                    encode_header(b'|', pairs.len(), out);
                    for (k, v) in pairs {
                        k.encode(proto, out);
                        v.encode(proto, out);
                    }
                }
            }
            Reply::Set(items) => {
                encode_header(if proto >= 3 { b'~' } else { b'*' }, items.len(), out);
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Double(d) => {
                let s = format_f64(*d);
                if proto >= 3 {
                    out.push(b',');
                    out.extend_from_slice(s.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(s.as_bytes(), out);
                }
            }
            Reply::HumanDouble(d) => {
                let s = format_human_f64(*d);
                if proto >= 3 {
                    out.push(b',');
                    out.extend_from_slice(s.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(s.as_bytes(), out);
                }
            }
            Reply::Bool(b) => {
                if proto >= 3 {
                    out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::BigNumber(b) => {
                if proto >= 3 {
                    out.push(b'(');
                    out.extend_from_slice(b);
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(b, out);
                }
            }
            Reply::Verbatim(fmt, body) => {
                if proto >= 3 {
                    encode_header(b'=', body.len() + 4, out);
                    out.extend_from_slice(fmt.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(body);
                    out.extend_from_slice(b"\r\n");
                } else {
                    encode_bulk(body, out);
                }
            }
            Reply::Push(items) => {
                encode_header(if proto >= 3 { b'>' } else { b'*' }, items.len(), out);
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::Multi(items) => {
                for r in items {
                    r.encode(proto, out);
                }
            }
            Reply::NoReply => {}
            Reply::EncodedArray(n, body) => {
                encode_header(b'*', *n, out);
                out.extend_from_slice(body);
            }
            Reply::Picks(stream) => {
                let mut stream = stream.clone();
                while !stream.fill(out, usize::MAX) {}
            }
        }
    }

    /// An `EncodedArray` as the `Array` tree it encodes; other replies as they are.
    pub fn decoded(&self) -> Reply {
        match self {
            Reply::EncodedArray(n, body) => {
                let mut pos = 0;
                let items = (0..*n).map(|_| decode_item(body, &mut pos)).collect();
                Reply::Array(items)
            }
            Reply::Picks(_) => {
                let mut encoded = Vec::new();
                self.encode(2, &mut encoded);
                let mut pos = 0;
                decode_item(&encoded, &mut pos)
            }
            r => r.clone(),
        }
    }
}

/// Decodes one array or bulk string written by `encode_header`/`encode_bulk`, or a
/// RESP3 double.
fn decode_item(b: &[u8], pos: &mut usize) -> Reply {
    let kind = b[*pos];
    if kind == b',' {
        let nl = *pos + memchr::memchr(b'\r', &b[*pos..]).expect("encoded double");
        let value = crate::util::numeric::parse_f64(&b[*pos + 1..nl]).unwrap_or(f64::NAN);
        *pos = nl + 2;
        return Reply::Double(value);
    }
    let nl = *pos + memchr::memchr(b'\r', &b[*pos..]).expect("encoded header");
    let n: usize = std::str::from_utf8(&b[*pos + 1..nl])
        .ok()
        .and_then(|t| t.parse().ok())
        .expect("encoded length");
    *pos = nl + 2;
    match kind {
        b'*' => Reply::Array((0..n).map(|_| decode_item(b, pos)).collect()),
        _ => {
            let v = Reply::bulk(&b[*pos..*pos + n]);
            *pos += n + 2;
            v
        }
    }
}

impl From<i64> for Reply {
    fn from(n: i64) -> Reply {
        Reply::Int(n)
    }
}

impl From<Vec<u8>> for Reply {
    fn from(b: Vec<u8>) -> Reply {
        Reply::Bulk(b)
    }
}

/// Appends a command as a client sends it: an array of bulk strings.
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    encode_header(b'*', args.len(), out);
    for a in args {
        encode_bulk(a, out);
    }
}

/// Appends a bulk string frame.
pub fn encode_bulk(b: &[u8], out: &mut Vec<u8>) {
    if b.len() > 4096 {
        // One allocation for the whole frame, not a doubling for its `\r\n`.
        out.reserve(b.len() + 24);
    }
    encode_header(b'$', b.len(), out);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends an aggregate or bulk header such as `*3\r\n`.
#[inline]
pub fn encode_header(kind: u8, len: usize, out: &mut Vec<u8>) {
    format_i64_line(kind, len as i64, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> String {
        let mut out = Vec::new();
        r.encode(proto, &mut out);
        String::from_utf8(out).unwrap()
    }

    /// A short bulk encodes as the `Bulk` of the same bytes in both protocols, owns
    /// nothing, and is used only up to its limit.
    #[test]
    fn short_bulks_encode_as_bulks() {
        for len in [0, 1, 20, SHORT_BULK_MAX, SHORT_BULK_MAX + 1, 300] {
            let b: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let r = Reply::bulk(&b);
            assert_eq!(matches!(r, Reply::ShortBulk(_)), len <= SHORT_BULK_MAX);
            assert_eq!(r.bulk_bytes(), Some(&b[..]));
            assert_eq!(r.owns_heap(), len > SHORT_BULK_MAX);
            for proto in [2, 3] {
                let (mut got, mut want) = (Vec::new(), Vec::new());
                r.encode(proto, &mut got);
                Reply::Bulk(b.clone()).encode(proto, &mut want);
                assert_eq!(got, want);
            }
        }
        for n in [0, -1, 7, i64::MIN, i64::MAX] {
            assert_eq!(ShortBytes::int(n).as_slice(), n.to_string().as_bytes());
        }
        assert_eq!(Reply::Int(3).bulk_bytes(), None);
        // Equal to the `Bulk` of the same bytes, in either order and inside arrays.
        let (short, heap) = (Reply::bulk(b"v"), Reply::Bulk(b"v".to_vec()));
        assert!(matches!(short, Reply::ShortBulk(_)));
        assert_eq!(short, heap);
        assert_eq!(heap, short);
        assert_eq!(Reply::Array(vec![short.clone()]), Reply::Array(vec![heap]));
        assert_ne!(short, Reply::bulk(b"w"));
        assert_ne!(short, Reply::BigNumber(b"v".to_vec()));
        assert_ne!(Reply::Null, Reply::NullArray);
    }

    #[test]
    fn owns_heap_only_where_dropping_frees() {
        assert!(!Reply::Int(5).owns_heap());
        assert!(!Reply::ok().owns_heap());
        assert!(!Reply::err("ERR x").owns_heap());
        assert!(!Reply::Null.owns_heap());
        assert!(Reply::Status(Cow::Owned("x".into())).owns_heap());
        assert!(Reply::error(String::from("ERR y")).owns_heap());
        assert!(Reply::Bulk(b"v".to_vec()).owns_heap());
        assert!(Reply::Array(vec![]).owns_heap());
    }

    #[test]
    fn encoded_array_encodes_and_decodes_as_its_tree() {
        let tree = Reply::Array(vec![
            Reply::Array(vec![
                Reply::bulk(b"1-0"),
                Reply::Array(vec![Reply::bulk(b"f"), Reply::bulk(b"a\r\nb")]),
            ]),
            Reply::Array(vec![]),
            Reply::bulk(b""),
        ]);
        let mut body = Vec::new();
        let Reply::Array(items) = &tree else {
            unreachable!()
        };
        for r in items {
            r.encode(2, &mut body);
        }
        let encoded = Reply::EncodedArray(items.len(), body);
        for proto in [2, 3] {
            assert_eq!(enc(&encoded, proto), enc(&tree, proto));
        }
        assert_eq!(encoded.decoded(), tree);
        assert_eq!(
            Reply::EncodedArray(0, Vec::new()).decoded(),
            Reply::Array(vec![])
        );
    }

    #[test]
    fn encodings_per_protocol() {
        let rows: Vec<(Reply, &str, &str)> = vec![
            (Reply::ok(), "+OK\r\n", "+OK\r\n"),
            (Reply::err("ERR x"), "-ERR x\r\n", "-ERR x\r\n"),
            (Reply::Int(-5), ":-5\r\n", ":-5\r\n"),
            (Reply::bulk(b"ab"), "$2\r\nab\r\n", "$2\r\nab\r\n"),
            (Reply::Null, "$-1\r\n", "_\r\n"),
            (Reply::NullArray, "*-1\r\n", "_\r\n"),
            (
                Reply::Map(vec![(Reply::bulk(b"k"), Reply::Int(1))]),
                "*2\r\n$1\r\nk\r\n:1\r\n",
                "%1\r\n$1\r\nk\r\n:1\r\n",
            ),
            (
                Reply::Set(vec![Reply::Int(1)]),
                "*1\r\n:1\r\n",
                "~1\r\n:1\r\n",
            ),
            (Reply::Double(1.5), "$3\r\n1.5\r\n", ",1.5\r\n"),
            (Reply::HumanDouble(0.5), "$3\r\n0.5\r\n", ",0.5\r\n"),
            (Reply::Bool(true), ":1\r\n", "#t\r\n"),
            (
                Reply::Verbatim("txt", b"hi".to_vec()),
                "$2\r\nhi\r\n",
                "=6\r\ntxt:hi\r\n",
            ),
            (
                Reply::Push(vec![Reply::Int(1)]),
                "*1\r\n:1\r\n",
                ">1\r\n:1\r\n",
            ),
            (
                Reply::error("ERR a\r\nb".into()),
                "-ERR a  b\r\n",
                "-ERR a  b\r\n",
            ),
        ];
        for (r, two, three) in rows {
            assert_eq!(enc(&r, 2), two, "{r:?}");
            assert_eq!(enc(&r, 3), three, "{r:?}");
        }
    }
}
