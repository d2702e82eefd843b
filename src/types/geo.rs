//! Geohash math for the GEO commands, bit for bit as Redis computes it.
//!
//! A position is stored as a sorted-set score: longitude and latitude are each
//! quantised to 26 bits over [-180, 180] and [-85.05112878, 85.05112878] (the
//! Web-Mercator limits), and interleaved into a 52-bit integer (latitude on the even
//! bits, longitude on the odd ones), so that nearby points have nearby scores and a
//! geohash cell of any precision is one contiguous score interval.
//!
//! A search (radius or box) does what Redis does, because the order of unsorted
//! replies and which points `COUNT n ANY` returns depend on it: estimate a cell size
//! ("step") from the radius, take the cell holding the centre and its eight
//! neighbours, drop the neighbours the bounding box cannot reach, then scan each
//! cell's score interval and keep the points that pass the exact shape test.
//!
//! Everything here is pure floating-point arithmetic in Redis's operation order
//! (the same libm functions), so distances printed to 4 decimals agree byte for byte.

use std::f64::consts::PI;

pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate in a stored score.
pub const STEP_MAX: u8 = 26;
/// Earth's quadratic mean radius for WGS-84, as Redis uses it.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash cell: `step` bits per coordinate, interleaved in `bits`. The zero value
/// (`bits == 0 && step == 0`) marks a neighbour excluded from a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

impl Cell {
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The score interval `[min, max)` of the points inside this cell.
    pub fn score_range(&self) -> (f64, f64) {
        let shift = 52 - u32::from(self.step) * 2;
        (
            (self.bits << shift) as f64,
            ((self.bits + 1) << shift) as f64,
        )
    }
}

/// A cell's extent in degrees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub lon_min: f64,
    pub lon_max: f64,
    pub lat_min: f64,
    pub lat_max: f64,
}

/// Spreads the low 32 bits of `v` onto the even bits of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `v` into a u32.
fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// Latitude on the even bits, longitude on the odd bits.
fn interleave(lat: u32, lon: u32) -> u64 {
    spread(lat) | (spread(lon) << 1)
}

/// Encodes a position at `step` bits per coordinate over the given ranges; `None`
/// outside the Web-Mercator limits (Redis's geohashEncode). The offsets are truncated
/// to integers, so a coordinate exactly on the upper limit yields `2^step` (a 53-bit
/// score at step 26), as in Redis.
pub fn encode_in(
    lon: f64,
    lat: f64,
    step: u8,
    lon_range: (f64, f64),
    lat_range: (f64, f64),
) -> Option<Cell> {
    if step == 0 || step > 32 {
        return None;
    }
    // NaN fails every comparison below, so check the accepted intervals positively.
    if !((LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)) {
        return None;
    }
    if !((lon_range.0..=lon_range.1).contains(&lon) && (lat_range.0..=lat_range.1).contains(&lat)) {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_off = (lon - lon_range.0) / (lon_range.1 - lon_range.0) * scale;
    Some(Cell {
        bits: interleave(lat_off as u32, lon_off as u32),
        step,
    })
}

/// Encodes over the geo ranges (what scores are made of).
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode_in(lon, lat, step, (LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX))
}

/// The score GEOADD stores for a position, or `None` when it is out of range.
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(|c| c.bits << (52 - 2 * u32::from(STEP_MAX)))
}

/// The extent of a cell (Redis's geohashDecode over the geo ranges).
pub fn decode_area(c: Cell) -> Area {
    let lat_i = squash(c.bits);
    let lon_i = squash(c.bits >> 1);
    let div = (1u64 << c.step) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let lon_scale = LONG_MAX - LONG_MIN;
    Area {
        lat_min: LAT_MIN + (f64::from(lat_i) / div) * lat_scale,
        lat_max: LAT_MIN + (f64::from(lat_i.wrapping_add(1)) / div) * lat_scale,
        lon_min: LONG_MIN + (f64::from(lon_i) / div) * lon_scale,
        lon_max: LONG_MIN + (f64::from(lon_i.wrapping_add(1)) / div) * lon_scale,
    }
}

/// The position a score stands for: the centre of its step-26 cell, clamped to the
/// valid ranges. The score is converted to an integer as gcc's `(uint64_t)` cast does
/// on x86-64, so odd scores put in by ZADD decode as in Redis: a negative score goes
/// through a signed conversion (wrapping, and `0x8000000000000000` below -2^63) and a
/// score of 2^64 or more becomes 0.
pub fn decode_score(score: f64) -> (f64, f64) {
    const TWO_64: f64 = 18446744073709551616.0;
    let bits = if score < 0.0 {
        (score as i64) as u64
    } else if score < TWO_64 {
        score as u64
    } else {
        0
    };
    let a = decode_area(Cell {
        bits,
        step: STEP_MAX,
    });
    let lon = ((a.lon_min + a.lon_max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat_min + a.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The 11-character standard geohash of a score (GEOHASH): decoded, re-encoded over
/// the standard latitude range [-90, 90], the 52 bits in base 32 and a final `0`.
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    let bits = encode_in(lon, lat, STEP_MAX, (-180.0, 180.0), (-90.0, 90.0)).map_or(0, |c| c.bits);
    let mut out = [b'0'; 11];
    for (i, o) in out.iter_mut().take(10).enumerate() {
        *o = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn move_x(c: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(c.step) * 2;
    let mut x = c.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = c.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x = (x | zz).wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaa >> shift;
    c.bits = x | y;
}

fn move_y(c: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(c.step) * 2;
    let x = c.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = c.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y = (y | zz).wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555 >> shift;
    c.bits = x | y;
}

fn moved(c: Cell, dx: i8, dy: i8) -> Cell {
    let mut n = c;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// The eight neighbours of a cell (wrapping around at the edges), in the order
/// Redis scans them: north, south, east, west, north-east, north-west, south-east,
/// south-west.
pub fn neighbours(c: Cell) -> [Cell; 8] {
    [
        moved(c, 0, 1),
        moved(c, 0, -1),
        moved(c, 1, 0),
        moved(c, -1, 0),
        moved(c, 1, 1),
        moved(c, -1, 1),
        moved(c, 1, -1),
        moved(c, -1, -1),
    ]
}

/// The cell precision to search a radius at a latitude (Redis's
/// geohashEstimateStepsByRadius).
pub fn estimate_step(range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut range = range_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// Haversine distance in meters (Redis's geohashGetDistance).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// Distance along a meridian.
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// A search area: a circle or an axis-aligned box around a centre, with the unit's
/// conversion factor to meters (sizes are kept in the unit the user gave, as Redis
/// multiplies at each use).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub lon: f64,
    pub lat: f64,
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The cells a search scans: the centre cell then its neighbours in Redis's order;
/// excluded neighbours are zero cells.
pub type SearchCells = [Cell; 9];

impl Shape {
    /// `[lon_min, lat_min, lon_max, lat_max]` of the area (Redis's geohashBoundingBox).
    pub fn bounding_box(&self) -> [f64; 4] {
        let (height, width) = match self.kind {
            ShapeKind::Radius(r) => (self.conversion * r, self.conversion * r),
            ShapeKind::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom =
            rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let delta = if self.lat < 0.0 {
            lon_delta_bottom
        } else {
            lon_delta_top
        };
        [
            self.lon - delta,
            self.lat - lat_delta,
            self.lon + delta,
            self.lat + lat_delta,
        ]
    }

    /// The nine cells to scan (Redis's geohashCalculateAreasByShapeWGS84).
    pub fn search_cells(&self) -> SearchCells {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_m = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut step = estimate_step(radius_m, self.lat);
        let centre = |step| encode(self.lon, self.lat, step).unwrap_or_default();
        let mut hash = centre(step);
        let mut nb = neighbours(hash);
        // The estimate can be too fine when the centre sits near its cell's edge: if
        // a side neighbour does not reach the bounding box, use cells twice as big.
        let [north, south, east, west] = [nb[0], nb[1], nb[2], nb[3]].map(decode_area);
        let decrease = north.lat_max < max_lat
            || south.lat_min > min_lat
            || east.lon_max < max_lon
            || west.lon_min > min_lon;
        if step > 1 && decrease {
            step -= 1;
            hash = centre(step);
            nb = neighbours(hash);
        }
        let area = decode_area(hash);
        // Drop the neighbours on a side the bounding box does not reach.
        const N: usize = 0;
        const S: usize = 1;
        const E: usize = 2;
        const W: usize = 3;
        const NE: usize = 4;
        const NW: usize = 5;
        const SE: usize = 6;
        const SW: usize = 7;
        if step >= 2 {
            let mut zero = |idx: &[usize]| idx.iter().for_each(|&i| nb[i] = Cell::default());
            if area.lat_min < min_lat {
                zero(&[S, SW, SE]);
            }
            if area.lat_max > max_lat {
                zero(&[N, NE, NW]);
            }
            if area.lon_min < min_lon {
                zero(&[W, SW, NW]);
            }
            if area.lon_max > max_lon {
                zero(&[E, SE, NE]);
            }
        }
        [hash, nb[0], nb[1], nb[2], nb[3], nb[4], nb[5], nb[6], nb[7]]
    }

    /// The distance in meters from the centre to a point when the point is inside
    /// the shape (Redis's geoWithinShape; the argument order matters to the last bit).
    pub fn contains(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= r * self.conversion).then_some(d)
            }
            ShapeKind::Box { width, height } => {
                let (w, h) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }
}

/// The cells to scan, without repeats: Redis skips a cell equal to the last one
/// scanned (huge radii make neighbours coincide), never comparing with the centre.
pub fn cells_to_scan(cells: &SearchCells) -> Vec<Cell> {
    let mut out = Vec::with_capacity(9);
    let mut last: Option<usize> = None;
    for (i, c) in cells.iter().enumerate() {
        if c.is_zero() {
            continue;
        }
        if let Some(l) = last {
            if l != 0 && cells[l] == *c {
                continue;
            }
        }
        out.push(*c);
        last = Some(i);
    }
    out
}

/// Distances as Redis prints them: 4 decimals.
pub fn format_distance(d: f64) -> String {
    format!("{d:.4}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::numeric::format_human_f64;

    // Expected values below were read from redis-server 7.0 (GEOADD then ZSCORE,
    // GEOPOS, GEOHASH, GEODIST).

    #[test]
    fn scores_match_redis() {
        let cases = [
            (13.361389, 38.115556, 3479099956230698u64),
            (15.087269, 37.502669, 3479447370796909),
            (-122.4194, 37.7749, 1367859919124626),
            (0.0, 0.0, 3377699720527872),
            (-180.0, -85.05112878, 0),
            (180.0, 85.05112878, 13510798882111488),
        ];
        for (lon, lat, s) in cases {
            assert_eq!(score_of(lon, lat), Some(s), "{lon},{lat}");
        }
        assert_eq!(score_of(200.0, 100.0), None);
        assert_eq!(score_of(0.0, 85.06), None);
        assert_eq!(score_of(f64::NAN, 0.0), None);
    }

    #[test]
    fn decode_matches_redis() {
        let cases: [(f64, &str, &str); 10] = [
            (
                3479099956230698.0,
                "13.36138933897018433",
                "38.11555639549629859",
            ),
            (13510798882111488.0, "180", "85.0511287799999991"),
            (0.0, "-179.99999731779098511", "-85.05112751263942528"),
            (
                3377699720527872.0,
                "0.00000268220901489",
                "0.00000126736058093",
            ),
            (9e15, "170.77080041170120239", "85.0511287799999991"),
            (-5.0, "180", "85.0511287799999991"),
            (1e300, "-179.99999731779098511", "-85.05112751263942528"),
            (
                f64::INFINITY,
                "-179.99999731779098511",
                "-85.05112751263942528",
            ),
            (f64::NEG_INFINITY, "180", "-85.05112751263942528"),
            (
                4503599627370495.0,
                "179.99999731779098511",
                "85.05112751263942528",
            ),
        ];
        for (score, lon, lat) in cases {
            let (x, y) = decode_score(score);
            assert_eq!(
                (format_human_f64(x).as_str(), format_human_f64(y).as_str()),
                (lon, lat)
            );
        }
    }

    #[test]
    fn geohash_strings_match_redis() {
        let cases = [
            (3479099956230698.0, "sqc8b49rny0"),
            (3479447370796909.0, "sqdtr74hyu0"),
            (1367859919124626.0, "9q8yyk8ytp0"),
            (13510798882111488.0, "bp05b5048p0"),
            (0.0, "00bh0hbj200"),
            (3377699720527872.0, "s0000000000"),
            (9e15, "zz17vgpd8p0"),
            (4503599627370495.0, "zzpgzgpfxz0"),
        ];
        for (score, h) in cases {
            assert_eq!(std::str::from_utf8(&geohash_string(score)).unwrap(), h);
        }
    }

    #[test]
    fn distances_match_redis() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        let c = decode_score(1367859919124626.0);
        assert_eq!(
            format_distance(distance(a.0, a.1, b.0, b.1) / 1000.0),
            "166.2742"
        );
        assert_eq!(
            format_distance(distance(a.0, a.1, b.0, b.1) / 0.3048),
            "545518.8700"
        );
        assert_eq!(
            format_distance(distance(a.0, a.1, c.0, c.1) / 1609.34),
            "6487.9968"
        );
        assert_eq!(format_distance(distance(a.0, a.1, a.0, a.1)), "0.0000");
    }

    #[test]
    fn interleave_round_trips() {
        for (lat, lon) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            let h = interleave(lat, lon);
            assert_eq!((squash(h), squash(h >> 1)), (lat, lon));
        }
    }

    #[test]
    fn neighbours_are_adjacent_and_wrap() {
        let c = encode(13.36, 38.11, 10).unwrap();
        let a = decode_area(c);
        let n = neighbours(c).map(decode_area);
        let w = a.lon_max - a.lon_min;
        let h = a.lat_max - a.lat_min;
        assert!((n[0].lat_min - a.lat_max).abs() < 1e-9 && n[0].lon_min == a.lon_min);
        assert!((n[1].lat_max - a.lat_min).abs() < 1e-9);
        assert!((n[2].lon_min - a.lon_max).abs() < 1e-9 && n[2].lat_min == a.lat_min);
        assert!((n[3].lon_max - a.lon_min).abs() < 1e-9);
        assert!((n[4].lon_min - a.lon_min - w).abs() < 1e-9);
        assert!((n[7].lat_min - a.lat_min + h).abs() < 1e-9);
        // West of the westmost cell is the eastmost one.
        let edge = encode(-180.0, 0.0, 5).unwrap();
        assert_eq!(decode_area(neighbours(edge)[3]).lon_max, 180.0);
    }

    #[test]
    fn steps_as_redis_estimates() {
        assert_eq!(estimate_step(0.0, 0.0), 26);
        // 100 km doubles 8 times to pass the Mercator half-width: 1 + 8 - 2.
        assert_eq!(estimate_step(100_000.0, 0.0), 7);
        assert_eq!(estimate_step(100_000.0, 70.0), 6);
        assert_eq!(estimate_step(100_000.0, -85.0), 5);
        assert_eq!(estimate_step(1.0, 0.0), 24);
        assert_eq!(estimate_step(1e9, 0.0), 1);
    }

    #[test]
    fn search_cells_cover_the_shape() {
        // Every point inside the shape lies in one of the cells scanned.
        let shapes = [
            Shape {
                lon: 15.0,
                lat: 37.0,
                conversion: 1000.0,
                kind: ShapeKind::Radius(200.0),
            },
            Shape {
                lon: -0.1,
                lat: 51.5,
                conversion: 1.0,
                kind: ShapeKind::Box {
                    width: 3000.0,
                    height: 800.0,
                },
            },
            Shape {
                lon: 179.9,
                lat: -60.0,
                conversion: 1609.34,
                kind: ShapeKind::Radius(30.0),
            },
        ];
        for s in shapes {
            let cells = cells_to_scan(&s.search_cells());
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..5000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let dlon = ((x & 0xffff) as f64 / 65535.0 - 0.5) * 8.0;
                let dlat = (((x >> 16) & 0xffff) as f64 / 65535.0 - 0.5) * 8.0;
                // A longitude of exactly 180 encodes past the last cell (in Redis too).
                let (lon, lat) = (
                    (s.lon + dlon).clamp(-180.0, 179.999),
                    (s.lat + dlat).clamp(-85.0, 85.0),
                );
                let score = score_of(lon, lat).unwrap() as f64;
                let (plon, plat) = decode_score(score);
                if s.contains(plon, plat).is_some() {
                    assert!(
                        cells.iter().any(|c| {
                            let (lo, hi) = c.score_range();
                            score >= lo && score < hi
                        }),
                        "{lon},{lat} not covered for {s:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn coordinates_print_as_redis() {
        assert_eq!(format_human_f64(13.361389338970184), "13.36138933897018433");
        assert_eq!(format_human_f64(180.0), "180");
        assert_eq!(format_human_f64(-0.0), "0");
        assert_eq!(format_human_f64(0.5), "0.5");
    }
}
