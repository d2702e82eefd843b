//! The cluster bus wire format, byte for byte as Redis 7 (protocol version 1).
//!
//! Every message starts with a 2,256-byte header (`RCmb`, lengths, epochs, the sender's
//! slot bitmap…), all integers in network byte order; the body depends on the type.
//! A receiver drops a message whose total length differs from what its type and
//! counts imply, so `expected_len` mirrors that rule exactly.

use super::node::NodeName;
use super::slot::BITMAP_BYTES;

pub const PING: u16 = 0;
pub const PONG: u16 = 1;
pub const MEET: u16 = 2;
pub const FAIL: u16 = 3;
pub const PUBLISH: u16 = 4;
pub const AUTH_REQUEST: u16 = 5;
pub const AUTH_ACK: u16 = 6;
pub const UPDATE: u16 = 7;
pub const MFSTART: u16 = 8;
pub const MODULE: u16 = 9;
pub const PUBLISHSHARD: u16 = 10;
pub const TYPE_COUNT: usize = 11;

/// CLUSTER INFO's names of the message types, by type number.
pub const TYPE_NAMES: [&str; TYPE_COUNT] = [
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
];

pub const PROTO_VER: u16 = 1;
pub const NAMELEN: usize = 40;
pub const IPLEN: usize = 46;
pub const HEADER_LEN: usize = 2256;
pub const GOSSIP_LEN: usize = 104;
/// The largest body (UPDATE): `sizeof(clusterMsg)` is the header plus this.
pub const MAX_FIXED_BODY: usize = 8 + NAMELEN + BITMAP_BYTES;

/// Message flags (`mflags[0]`).
pub const MFLAG_PAUSED: u8 = 1 << 0;
pub const MFLAG_FORCEACK: u8 = 1 << 1;
pub const MFLAG_EXT_DATA: u8 = 1 << 2;

/// Ping extension types.
pub const EXT_HOSTNAME: u16 = 0;
pub const EXT_HUMAN_NODENAME: u16 = 1;
pub const EXT_FORGOTTEN_NODE: u16 = 2;
pub const EXT_SHARDID: u16 = 3;

// Field offsets in the header.
const O_TOTLEN: usize = 4;
const O_VER: usize = 8;
const O_PORT: usize = 10;
const O_TYPE: usize = 12;
const O_COUNT: usize = 14;
const O_CURRENT_EPOCH: usize = 16;
const O_CONFIG_EPOCH: usize = 24;
const O_OFFSET: usize = 32;
const O_SENDER: usize = 40;
const O_MYSLOTS: usize = 80;
const O_SLAVEOF: usize = 2128;
const O_MYIP: usize = 2168;
const O_EXTENSIONS: usize = 2214;
const O_PPORT: usize = 2246;
const O_CPORT: usize = 2248;
const O_FLAGS: usize = 2250;
const O_STATE: usize = 2252;
const O_MFLAGS: usize = 2253;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}
/// The field at `o`, or 0 when the message ends before it.
fn u32_at_or_0(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4).map_or(0, |f| u32_at(f, 0))
}
fn put_u16(b: &mut [u8], o: usize, v: u16) {
    b[o..o + 2].copy_from_slice(&v.to_be_bytes());
}
fn put_u32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_be_bytes());
}
fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_be_bytes());
}

/// A NUL-padded C string field as text (up to its first NUL).
pub fn c_str(b: &[u8]) -> String {
    let end = memchr::memchr(0, b).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn put_c_str(b: &mut [u8], s: &str) {
    let n = s.len().min(b.len() - 1);
    b[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// The decoded header of a message (the body stays in the buffer).
#[derive(Clone, Debug)]
pub struct Header {
    pub totlen: u32,
    pub ver: u16,
    pub port: u16,
    pub typ: u16,
    pub count: u16,
    pub current_epoch: u64,
    pub config_epoch: u64,
    pub offset: u64,
    pub sender: NodeName,
    pub myslots: Box<[u8; BITMAP_BYTES]>,
    pub slaveof: NodeName,
    pub myip: String,
    pub extensions: u16,
    pub pport: u16,
    pub cport: u16,
    pub flags: u16,
    pub state: u8,
    pub mflags: [u8; 3],
}

impl Header {
    /// Decodes the header of `b`, which holds at least `HEADER_LEN` bytes.
    pub fn parse(b: &[u8]) -> Header {
        let mut myslots = Box::new([0u8; BITMAP_BYTES]);
        myslots.copy_from_slice(&b[O_MYSLOTS..O_MYSLOTS + BITMAP_BYTES]);
        Header {
            totlen: u32_at(b, O_TOTLEN),
            ver: u16_at(b, O_VER),
            port: u16_at(b, O_PORT),
            typ: u16_at(b, O_TYPE),
            count: u16_at(b, O_COUNT),
            current_epoch: u64_at(b, O_CURRENT_EPOCH),
            config_epoch: u64_at(b, O_CONFIG_EPOCH),
            offset: u64_at(b, O_OFFSET),
            sender: b[O_SENDER..O_SENDER + NAMELEN]
                .try_into()
                .expect("40 bytes"),
            myslots,
            slaveof: b[O_SLAVEOF..O_SLAVEOF + NAMELEN]
                .try_into()
                .expect("40 bytes"),
            myip: c_str(&b[O_MYIP..O_MYIP + IPLEN]),
            extensions: u16_at(b, O_EXTENSIONS),
            pport: u16_at(b, O_PPORT),
            cport: u16_at(b, O_CPORT),
            flags: u16_at(b, O_FLAGS),
            state: b[O_STATE],
            mflags: [b[O_MFLAGS], b[O_MFLAGS + 1], b[O_MFLAGS + 2]],
        }
    }

    /// Writes the header into the first `HEADER_LEN` bytes of `b` (totlen is set
    /// from `b`'s length).
    pub fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(b"RCmb");
        put_u32(b, O_TOTLEN, b.len() as u32);
        put_u16(b, O_VER, self.ver);
        put_u16(b, O_PORT, self.port);
        put_u16(b, O_TYPE, self.typ);
        put_u16(b, O_COUNT, self.count);
        put_u64(b, O_CURRENT_EPOCH, self.current_epoch);
        put_u64(b, O_CONFIG_EPOCH, self.config_epoch);
        put_u64(b, O_OFFSET, self.offset);
        b[O_SENDER..O_SENDER + NAMELEN].copy_from_slice(&self.sender);
        b[O_MYSLOTS..O_MYSLOTS + BITMAP_BYTES].copy_from_slice(&self.myslots[..]);
        b[O_SLAVEOF..O_SLAVEOF + NAMELEN].copy_from_slice(&self.slaveof);
        put_c_str(&mut b[O_MYIP..O_MYIP + IPLEN], &self.myip);
        put_u16(b, O_EXTENSIONS, self.extensions);
        put_u16(b, O_PPORT, self.pport);
        put_u16(b, O_CPORT, self.cport);
        put_u16(b, O_FLAGS, self.flags);
        b[O_STATE] = self.state;
        b[O_MFLAGS..O_MFLAGS + 3].copy_from_slice(&self.mflags);
    }
}

/// The 8 bytes that start every message: signature and total length.
pub fn peek_totlen(b: &[u8]) -> Option<u32> {
    if b.len() < 8 || &b[0..4] != b"RCmb" {
        return None;
    }
    Some(u32_at(b, O_TOTLEN))
}

/// One node described in a PING/PONG/MEET gossip section.
#[derive(Clone, Debug)]
pub struct Gossip {
    pub name: NodeName,
    pub ping_sent: u32,
    pub pong_received: u32,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

impl Gossip {
    pub fn parse(b: &[u8]) -> Gossip {
        Gossip {
            name: b[0..40].try_into().expect("40 bytes"),
            ping_sent: u32_at(b, 40),
            pong_received: u32_at(b, 44),
            ip: c_str(&b[48..48 + IPLEN]),
            port: u16_at(b, 94),
            cport: u16_at(b, 96),
            flags: u16_at(b, 98),
            pport: u16_at(b, 100),
        }
    }

    pub fn write(&self, b: &mut [u8]) {
        b[0..40].copy_from_slice(&self.name);
        put_u32(b, 40, self.ping_sent);
        put_u32(b, 44, self.pong_received);
        put_c_str(&mut b[48..48 + IPLEN], &self.ip);
        put_u16(b, 94, self.port);
        put_u16(b, 96, self.cport);
        put_u16(b, 98, self.flags);
        put_u16(b, 100, self.pport);
    }
}

/// The gossip entries of a PING/PONG/MEET already checked by `expected_len`.
pub fn gossip_entries(b: &[u8], count: u16) -> impl Iterator<Item = Gossip> + '_ {
    (0..count as usize).map(move |i| {
        let at = HEADER_LEN + i * GOSSIP_LEN;
        Gossip::parse(&b[at..at + GOSSIP_LEN])
    })
}

/// A ping extension: its type and payload (padding included).
pub struct Ext<'a> {
    pub typ: u16,
    pub data: &'a [u8],
}

/// The extensions after the gossip section (only when EXT_DATA is flagged), already
/// checked by `expected_len`.
pub fn extensions<'a>(b: &'a [u8], h: &Header) -> Vec<Ext<'a>> {
    let mut out = Vec::new();
    if h.mflags[0] & MFLAG_EXT_DATA == 0 {
        return out;
    }
    let mut at = HEADER_LEN + h.count as usize * GOSSIP_LEN;
    for _ in 0..h.extensions {
        if at + 8 > b.len() {
            break;
        }
        let len = u32_at(b, at) as usize;
        if len < 8 || at + len > b.len() {
            break;
        }
        out.push(Ext {
            typ: u16_at(b, at + 4),
            data: &b[at + 8..at + len],
        });
        at += len;
    }
    out
}

/// Appends one extension, its payload padded with zeros to a multiple of 8 bytes.
pub fn push_ext(out: &mut Vec<u8>, typ: u16, payload: &[u8]) {
    let padded = payload.len().div_ceil(8) * 8;
    let len = 8 + padded;
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(payload);
    out.resize(out.len() + padded - payload.len(), 0);
}

/// The length Redis expects for a message given its type and counts; `Err` carries
/// the reason a receiver drops it.
pub fn expected_len(b: &[u8]) -> Result<(), String> {
    let totlen = b.len();
    if totlen < HEADER_LEN {
        return Err(format!(
            "message of {totlen} bytes is shorter than a header"
        ));
    }
    let h = Header::parse(b);
    if h.ver != PROTO_VER {
        return Err(format!("unsupported protocol version {}", h.ver));
    }
    let explen = match h.typ {
        PING | PONG | MEET => {
            let mut explen = HEADER_LEN + GOSSIP_LEN * h.count as usize;
            if h.mflags[0] & MFLAG_EXT_DATA != 0 {
                for _ in 0..h.extensions {
                    if explen + 8 > totlen {
                        return Err("extension header past the end".into());
                    }
                    let extlen = u32_at(b, explen) as usize;
                    if !extlen.is_multiple_of(8) {
                        return Err(format!("extension without proper padding ({extlen} bytes)"));
                    }
                    if extlen < 8 || totlen - explen < extlen {
                        return Err("extension data exceeds the total packet length".into());
                    }
                    explen += extlen;
                }
            }
            explen
        }
        FAIL => HEADER_LEN + NAMELEN,
        // A body too short to hold its own lengths gets an expected length past its end.
        PUBLISH | PUBLISHSHARD => {
            HEADER_LEN
                + 8
                + u32_at_or_0(b, HEADER_LEN) as usize
                + u32_at_or_0(b, HEADER_LEN + 4) as usize
        }
        AUTH_REQUEST | AUTH_ACK | MFSTART => HEADER_LEN,
        UPDATE => HEADER_LEN + MAX_FIXED_BODY,
        MODULE => HEADER_LEN + 8 + 4 + 1 + u32_at_or_0(b, HEADER_LEN + 8) as usize,
        _ => totlen,
    };
    if explen != totlen {
        return Err(format!(
            "invalid {} packet of length {totlen} but expected length {explen}",
            TYPE_NAMES.get(h.typ as usize).unwrap_or(&"unknown")
        ));
    }
    Ok(())
}

/// The body of a FAIL message: the failing node's name.
pub fn fail_body(name: &NodeName) -> Vec<u8> {
    name.to_vec()
}

/// The body of an UPDATE message.
pub fn update_body(config_epoch: u64, name: &NodeName, slots: &[u8; BITMAP_BYTES]) -> Vec<u8> {
    let mut v = Vec::with_capacity(MAX_FIXED_BODY);
    v.extend_from_slice(&config_epoch.to_be_bytes());
    v.extend_from_slice(name);
    v.extend_from_slice(slots);
    v
}

/// Decodes an UPDATE body.
pub fn parse_update(b: &[u8]) -> (u64, NodeName, Box<[u8; BITMAP_BYTES]>) {
    let body = &b[HEADER_LEN..];
    let mut slots = Box::new([0u8; BITMAP_BYTES]);
    slots.copy_from_slice(&body[48..48 + BITMAP_BYTES]);
    (
        u64_at(body, 0),
        body[8..48].try_into().expect("40 bytes"),
        slots,
    )
}

/// The body of a PUBLISH/PUBLISHSHARD message.
pub fn publish_body(channel: &[u8], message: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + channel.len() + message.len());
    v.extend_from_slice(&(channel.len() as u32).to_be_bytes());
    v.extend_from_slice(&(message.len() as u32).to_be_bytes());
    v.extend_from_slice(channel);
    v.extend_from_slice(message);
    v
}

/// Decodes a PUBLISH body (already length-checked).
pub fn parse_publish(b: &[u8]) -> (&[u8], &[u8]) {
    let clen = u32_at(b, HEADER_LEN) as usize;
    let data = &b[HEADER_LEN + 8..];
    (&data[..clen], &data[clen..])
}

/// Splits a link's received bytes into whole messages: their ranges, and the bytes
/// they use (a partial message stays for the next read). `None` on a bad signature or
/// a total length outside `HEADER_LEN..=max`: the link is dropped.
pub fn split_messages(buf: &[u8], max: usize) -> Option<(Vec<std::ops::Range<usize>>, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 8 {
        let totlen = peek_totlen(&buf[at..])? as usize;
        if !(HEADER_LEN..=max).contains(&totlen) {
            return None;
        }
        if buf.len() - at < totlen {
            break;
        }
        out.push(at..at + totlen);
        at += totlen;
    }
    Some((out, at))
}

/// A message taken apart as the bus reads it before acting on it.
pub struct Decoded<'a> {
    pub header: Header,
    pub gossip: Vec<Gossip>,
    pub extensions: Vec<Ext<'a>>,
    /// FAIL: the failing node.
    pub failing: Option<NodeName>,
    /// PUBLISH/PUBLISHSHARD: channel and message.
    pub publish: Option<(&'a [u8], &'a [u8])>,
    /// UPDATE: config epoch, node and slots.
    pub update: Option<(u64, NodeName, Box<[u8; BITMAP_BYTES]>)>,
}

/// Decodes one whole message with the checks a receiver makes (`expected_len`);
/// `Err` carries the reason it is dropped.
pub fn decode(b: &[u8]) -> Result<Decoded<'_>, String> {
    expected_len(b)?;
    let header = Header::parse(b);
    let mut d = Decoded {
        gossip: Vec::new(),
        extensions: Vec::new(),
        failing: None,
        publish: None,
        update: None,
        header,
    };
    match d.header.typ {
        PING | PONG | MEET => {
            d.gossip = gossip_entries(b, d.header.count).collect();
            d.extensions = extensions(b, &d.header);
        }
        FAIL => d.failing = b[HEADER_LEN..HEADER_LEN + NAMELEN].try_into().ok(),
        PUBLISH | PUBLISHSHARD => d.publish = Some(parse_publish(b)),
        UPDATE => d.update = Some(parse_update(b)),
        _ => {}
    }
    Ok(d)
}

/// Builds a whole message: header then body.
pub fn build(h: &Header, body: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + body.len()];
    h.write(&mut b);
    b[HEADER_LEN..].copy_from_slice(body);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(typ: u16) -> Header {
        Header {
            totlen: 0,
            ver: PROTO_VER,
            port: 7000,
            typ,
            count: 0,
            current_epoch: 3,
            config_epoch: 2,
            offset: 99,
            sender: [b'a'; 40],
            myslots: Box::new([0u8; BITMAP_BYTES]),
            slaveof: [0; 40],
            myip: "127.0.0.1".into(),
            extensions: 0,
            pport: 0,
            cport: 17000,
            flags: 1,
            state: 0,
            mflags: [0; 3],
        }
    }

    #[test]
    fn header_fields_at_redis_offsets() {
        let b = build(&header(FAIL), &[b'b'; 40]);
        assert_eq!(b.len(), 2296);
        assert_eq!(&b[0..4], b"RCmb");
        assert_eq!(u32_at(&b, 4), 2296);
        assert_eq!(u16_at(&b, 10), 7000);
        assert_eq!(u64_at(&b, 32), 99);
        assert_eq!(&b[2168..2177], b"127.0.0.1");
        assert_eq!(u16_at(&b, 2248), 17000);
        assert!(expected_len(&b).is_ok());
        assert!(expected_len(&b[..2295]).is_err());
        let p = Header::parse(&b);
        assert_eq!((p.current_epoch, p.config_epoch, p.flags), (3, 2, 1));
    }

    #[test]
    fn ping_with_gossip_and_extensions() {
        let mut h = header(PING);
        h.count = 1;
        h.extensions = 1;
        h.mflags[0] = MFLAG_EXT_DATA;
        let mut body = vec![0u8; GOSSIP_LEN];
        Gossip {
            name: [b'c'; 40],
            ping_sent: 1,
            pong_received: 2,
            ip: "10.0.0.1".into(),
            port: 7001,
            cport: 17001,
            flags: 2,
            pport: 0,
        }
        .write(&mut body);
        push_ext(&mut body, EXT_SHARDID, &[b'd'; 40]);
        let b = build(&h, &body);
        assert_eq!(b.len(), HEADER_LEN + GOSSIP_LEN + 48);
        assert!(expected_len(&b).is_ok());
        let g: Vec<_> = gossip_entries(&b, 1).collect();
        assert_eq!(
            (g[0].ip.as_str(), g[0].port, g[0].cport),
            ("10.0.0.1", 7001, 17001)
        );
        let h2 = Header::parse(&b);
        let e = extensions(&b, &h2);
        assert_eq!((e.len(), e[0].typ, e[0].data.len()), (1, EXT_SHARDID, 40));
    }

    /// A PUBLISH or MODULE message too short to hold its body's lengths is dropped as
    /// of the wrong length (reading those lengths panicked). Found by fuzzing.
    #[test]
    fn bodies_shorter_than_their_lengths_are_dropped() {
        for typ in [PUBLISH, PUBLISHSHARD, MODULE] {
            for body in [&[][..], &[0, 0, 0, 1][..], &[0; 12][..]] {
                let b = build(&header(typ), body);
                let e = expected_len(&b).unwrap_err();
                assert!(e.contains("but expected length"), "{e}");
                assert!(decode(&b).is_err());
            }
        }
    }
}
