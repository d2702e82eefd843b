//! GEO commands: positions stored as 52-bit geohash scores in an ordinary sorted set,
//! so ZRANGE, ZREM, ZSCORE and the rest work on geo keys unchanged.
//!
//! Shapes shared by variants, as in Redis's geo.c:
//! - GEOADD turns each position into a score and hands over to the sorted sets'
//!   `zadd_generic` (NX/XX/CH, events and encodings are ZADD's).
//! - `search_generic` serves GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER
//!   and the two `_RO` forms: one argument loop with the variant's allowed options
//!   (so errors come in Redis's order), one `Shape`, then the nine-cell scan of
//!   `types::geo`, sorting, and either a reply or a store.
//!
//! The geohash arithmetic lives in `types::geo`.

use crate::command;
use crate::commands::flags::*;
use crate::commands::zsets::{read_zset, store_result, zadd_generic};
use crate::commands::{errors, is, Command, Ctx, KeySpec};
use crate::protocol::Reply;
use crate::types::geo::{self, Shape, ShapeKind};
use crate::types::zset::{AddFlags, ScoreRange, ZSet};
use crate::util::numeric::{parse_f64, parse_i64};

const R: &[&str] = &["read", "geo", "slow"];
const W: &[&str] = &["write", "geo", "slow"];

pub static COMMANDS: &[Command] = &[
    command!("geoadd", -5, WRITE | DENYOOM, (1, 1, 1), W, "geo", "3.2.0", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", geoadd),
    command!("geopos", -2, READONLY, (1, 1, 1), R, "geo", "3.2.0", "Returns the longitude and latitude of members from a geospatial index.", "O(1) for each member requested.", geopos),
    command!("geodist", -4, READONLY, (1, 1, 1), R, "geo", "3.2.0", "Returns the distance between two members of a geospatial index.", "O(1)", geodist),
    command!("geohash", -2, READONLY, (1, 1, 1), R, "geo", "3.2.0", "Returns members from a geospatial index as geohash strings.", "O(1) for each member requested.", geohash),
    command!("geosearch", -7, READONLY, (1, 1, 1), R, "geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle.", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape", geosearch),
    command!("geosearchstore", -8, WRITE | DENYOOM, (1, 2, 1), W, "geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape", geosearchstore),
    // STORE/STOREDIST name a second key anywhere in the options (movable keys, as SORT).
    Command {
        key_spec: KeySpec::Range,
        ..command!("georadius", -6, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), W, "geo", "3.2.0", "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.", georadius)
    },
    Command {
        key_spec: KeySpec::Range,
        ..command!("georadiusbymember", -5, WRITE | DENYOOM | MOVABLE_KEYS, (1, 1, 1), W, "geo", "3.2.0", "Queries a geospatial index for members within a distance from a member, optionally stores the result.", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.", georadiusbymember)
    },
    command!("georadius_ro", -6, READONLY, (1, 1, 1), R, "geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a coordinate.", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.", georadius_ro),
    command!("georadiusbymember_ro", -5, READONLY, (1, 1, 1), R, "geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a member.", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.", georadiusbymember_ro),
];

// ----- argument helpers -----------------------------------------------------------

/// A longitude/latitude pair, range-checked (Redis's extractLongLatOrReply).
fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Reply> {
    let x = parse_f64(lon).ok_or(errors::NOT_FLOAT)?;
    let y = parse_f64(lat).ok_or(errors::NOT_FLOAT)?;
    if !((geo::LONG_MIN..=geo::LONG_MAX).contains(&x) && (geo::LAT_MIN..=geo::LAT_MAX).contains(&y))
    {
        return Err(Reply::error(format!(
            "ERR invalid longitude,latitude pair {x:.6},{y:.6}"
        )));
    }
    Ok((x, y))
}

/// The factor converting a unit to meters.
fn parse_unit(u: &[u8]) -> Result<f64, Reply> {
    if is(u, "m") {
        Ok(1.0)
    } else if is(u, "km") {
        Ok(1000.0)
    } else if is(u, "ft") {
        Ok(0.3048)
    } else if is(u, "mi") {
        Ok(1609.34)
    } else {
        Err(Reply::err(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// `radius unit`: the radius in the given unit and the unit's conversion factor.
fn parse_radius(r: &[u8], unit: &[u8]) -> Result<(f64, f64), Reply> {
    let d = parse_f64(r).ok_or(Reply::err("ERR need numeric radius"))?;
    if d < 0.0 {
        return Err(Reply::err("ERR radius cannot be negative"));
    }
    Ok((d, parse_unit(unit)?))
}

/// `width height unit`.
fn parse_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), Reply> {
    let w = parse_f64(w).ok_or(Reply::err("ERR need numeric width"))?;
    let h = parse_f64(h).ok_or(Reply::err("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Reply::err("ERR height or width cannot be negative"));
    }
    Ok((w, h, parse_unit(unit)?))
}

/// A member's position, or Redis's error when it is not in the set.
fn member_pos(z: &ZSet, member: &[u8]) -> Result<(f64, f64), Reply> {
    z.score(member)
        .map(geo::decode_score)
        .ok_or(Reply::err("ERR could not decode requested zset member"))
}

// ----- GEOADD, GEOPOS, GEODIST, GEOHASH --------------------------------------------

fn geoadd(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut f = AddFlags::default();
    let mut ch = false;
    let mut at = 2;
    while at < args.len() {
        let a = args[at];
        if is(a, "nx") {
            f.nx = true;
        } else if is(a, "xx") {
            f.xx = true;
        } else if is(a, "ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    let rest = &args[at..];
    // No triple at all is ZADD's syntax error once the options are consumed.
    if !rest.len().is_multiple_of(3) || (f.xx && f.nx) || rest.is_empty() {
        return errors::SYNTAX;
    }
    let mut pairs = Vec::with_capacity(rest.len() / 3);
    for t in rest.chunks(3) {
        let (lon, lat) = match parse_lon_lat(t[0], t[1]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Some(score) = geo::score_of(lon, lat) else {
            return errors::SYNTAX;
        };
        pairs.push((score as f64, t[2]));
    }
    zadd_generic(ctx, args[1], &pairs, f, ch)
}

fn geopos(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let z = match read_zset(ctx, args[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let out = args[2..]
        .iter()
        .map(|m| match z.and_then(|z| z.score(m)) {
            None => Reply::NullArray,
            Some(s) => {
                let (lon, lat) = geo::decode_score(s);
                Reply::Array(vec![Reply::HumanDouble(lon), Reply::HumanDouble(lat)])
            }
        })
        .collect();
    Reply::Array(out)
}

fn geodist(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => match parse_unit(args[4]) {
            Ok(c) => c,
            Err(e) => return e,
        },
        _ => return errors::SYNTAX,
    };
    let z = match read_zset(ctx, args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Reply::Null,
        Err(e) => return e,
    };
    match (z.score(args[2]), z.score(args[3])) {
        (Some(a), Some(b)) => {
            let (a, b) = (geo::decode_score(a), geo::decode_score(b));
            let d = geo::distance(a.0, a.1, b.0, b.1) / to_meters;
            Reply::Bulk(geo::format_distance(d).into_bytes())
        }
        _ => Reply::Null,
    }
}

fn geohash(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let z = match read_zset(ctx, args[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let out = args[2..]
        .iter()
        .map(|m| match z.and_then(|z| z.score(m)) {
            None => Reply::Null,
            Some(s) => Reply::Bulk(geo::geohash_string(s).to_vec()),
        })
        .collect();
    Reply::Array(out)
}

// ----- searches ---------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// GEORADIUS: centre and radius at fixed positions, STORE allowed unless `_RO`.
    RadiusCoords { ro: bool },
    /// GEORADIUSBYMEMBER.
    RadiusMember { ro: bool },
    /// GEOSEARCH.
    Search,
    /// GEOSEARCHSTORE.
    SearchStore,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// One point found by a search.
struct Found {
    member: Vec<u8>,
    dist: f64,
    score: f64,
    lon: f64,
    lat: f64,
}

/// Where the shape's centre comes from, until the key has been looked at.
enum Centre {
    Unset,
    At(f64, f64),
    /// FROMMEMBER on a missing key: accepted while parsing (the reply is empty).
    MissingKey,
}

/// Scans the shape's cells in Redis's order, stopping once `limit` points are found
/// (COUNT n ANY).
fn search(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for cell in geo::cells_to_scan(&shape.search_cells()) {
        if limit > 0 && out.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        let range = ScoreRange {
            min,
            min_ex: false,
            max,
            max_ex: true,
        };
        let (start, end) = z.score_ranks(&range);
        z.for_each_rank(start, end, false, |m, score| {
            if limit > 0 && out.len() >= limit {
                return;
            }
            let (lon, lat) = geo::decode_score(score);
            if let Some(dist) = shape.contains(lon, lat) {
                out.push(Found {
                    member: m.to_vec(),
                    dist,
                    score,
                    lon,
                    lat,
                });
            }
        });
    }
    out
}

fn search_generic(ctx: &mut Ctx, args: &[&[u8]], v: Variant) -> Reply {
    let src = if v == Variant::SearchStore {
        args[2]
    } else {
        args[1]
    };
    let z = match read_zset(ctx, src) {
        Ok(z) => z,
        Err(e) => return e,
    };
    let mut centre = Centre::Unset;
    // (size, conversion) once BYRADIUS/BYBOX or the fixed radius is parsed.
    let mut kind: Option<(ShapeKind, f64)> = None;
    let mut store: Option<&[u8]> = None;
    let mut storedist = false;
    let base = match v {
        Variant::RadiusCoords { .. } => {
            match parse_lon_lat(args[2], args[3]) {
                Ok((x, y)) => centre = Centre::At(x, y),
                Err(e) => return e,
            }
            match parse_radius(args[4], args[5]) {
                Ok((r, c)) => kind = Some((ShapeKind::Radius(r), c)),
                Err(e) => return e,
            }
            6
        }
        Variant::RadiusMember { .. } => {
            // With no key Redis skips the member and the radius and only parses
            // the options, to know which empty reply to give.
            if let Some(z) = z {
                match member_pos(z, args[2]) {
                    Ok((x, y)) => centre = Centre::At(x, y),
                    Err(e) => return e,
                }
                match parse_radius(args[3], args[4]) {
                    Ok((r, c)) => kind = Some((ShapeKind::Radius(r), c)),
                    Err(e) => return e,
                }
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            store = Some(args[1]);
            3
        }
    };
    let geosearch = matches!(v, Variant::Search | Variant::SearchStore);
    let store_allowed = matches!(
        v,
        Variant::RadiusCoords { ro: false } | Variant::RadiusMember { ro: false }
    );
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let opts = &args[base..];
    let mut i = 0;
    while i < opts.len() {
        let a = opts[i];
        let left = opts.len() - i - 1;
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            sort = Sort::Asc;
        } else if is(a, "desc") {
            sort = Sort::Desc;
        } else if is(a, "count") && left >= 1 {
            count = match parse_i64(opts[i + 1]) {
                Some(n) => n,
                None => return errors::NOT_INTEGER,
            };
            if count <= 0 {
                return Reply::err("ERR COUNT must be > 0");
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist")) && left >= 1 && store_allowed {
            store = Some(opts[i + 1]);
            storedist = is(a, "storedist");
            i += 1;
        } else if is(a, "storedist") && v == Variant::SearchStore {
            storedist = true;
        } else if is(a, "frommember") && left >= 1 && geosearch && !fromloc {
            if let Some(z) = z {
                match member_pos(z, opts[i + 1]) {
                    Ok((x, y)) => centre = Centre::At(x, y),
                    Err(e) => return e,
                }
            } else {
                centre = Centre::MissingKey;
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && left >= 2 && geosearch && !frommember {
            match parse_lon_lat(opts[i + 1], opts[i + 2]) {
                Ok((x, y)) => centre = Centre::At(x, y),
                Err(e) => return e,
            }
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && left >= 2 && geosearch && !bybox {
            match parse_radius(opts[i + 1], opts[i + 2]) {
                Ok((r, c)) => kind = Some((ShapeKind::Radius(r), c)),
                Err(e) => return e,
            }
            byradius = true;
            i += 2;
        } else if is(a, "bybox") && left >= 3 && geosearch && !byradius {
            match parse_box(opts[i + 1], opts[i + 2], opts[i + 3]) {
                Ok((width, height, c)) => kind = Some((ShapeKind::Box { width, height }, c)),
                Err(e) => return e,
            }
            bybox = true;
            i += 3;
        } else {
            return errors::SYNTAX;
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        return Reply::err(if v == Variant::SearchStore {
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        } else {
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        });
    }
    let name = String::from_utf8_lossy(args[0]);
    if geosearch && !(frommember || fromloc) {
        return Reply::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if geosearch && !(byradius || bybox) {
        return Reply::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if any && count == 0 {
        return Reply::err("ERR the ANY argument requires COUNT argument");
    }
    let event = if geosearch {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    let (Some(z), Centre::At(lon, lat), Some((kind, conversion))) = (z, centre, kind) else {
        // The source key does not exist: an empty result.
        return match store {
            Some(dst) => {
                store_result(ctx, dst, Vec::new(), event);
                Reply::Int(0)
            }
            None => Reply::Array(Vec::new()),
        };
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = Shape {
        lon,
        lat,
        conversion,
        kind,
    };
    let limit = if any { count as usize } else { 0 };
    let mut found = search(z, &shape, limit);
    // A stable sort keeps scan order among equal distances, as glibc's qsort does.
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if count > 0 {
        found.truncate(count as usize);
    }
    match store {
        Some(dst) => {
            let n = found.len() as i64;
            let items = found
                .into_iter()
                .map(|f| {
                    let s = if storedist {
                        f.dist / conversion
                    } else {
                        f.score
                    };
                    (f.member, s)
                })
                .collect();
            store_result(ctx, dst, items, event);
            Reply::Int(n)
        }
        None => {
            let plain = !(withdist || withhash || withcoord);
            let out = found
                .into_iter()
                .map(|f| {
                    if plain {
                        return Reply::Bulk(f.member);
                    }
                    let mut item = vec![Reply::Bulk(f.member)];
                    if withdist {
                        item.push(Reply::Bulk(
                            geo::format_distance(f.dist / conversion).into_bytes(),
                        ));
                    }
                    if withhash {
                        item.push(Reply::Int(f.score as i64));
                    }
                    if withcoord {
                        item.push(Reply::Array(vec![
                            Reply::HumanDouble(f.lon),
                            Reply::HumanDouble(f.lat),
                        ]));
                    }
                    Reply::Array(item)
                })
                .collect();
            Reply::Array(out)
        }
    }
}

fn geosearch(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::Search)
}

fn geosearchstore(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::SearchStore)
}

fn georadius(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::RadiusCoords { ro: false })
}

fn georadiusbymember(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::RadiusMember { ro: false })
}

fn georadius_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::RadiusCoords { ro: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    search_generic(ctx, args, Variant::RadiusMember { ro: true })
}
