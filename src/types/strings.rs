//! String algorithms: the longest common subsequence behind LCS.

/// A matched range pair: inclusive byte ranges in the first and second string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchRange {
    pub a: (usize, usize),
    pub b: (usize, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lcs {
    pub len: usize,
    pub sequence: Vec<u8>,
    /// Contiguous matches, from the end of the strings backwards (Redis's order).
    pub ranges: Vec<MatchRange>,
}

/// Computes the LCS with the classic dynamic-programming table, then walks it back
/// from the end, merging contiguous matches into ranges the way Redis reports them.
pub fn lcs(a: &[u8], b: &[u8]) -> Lcs {
    let w = b.len() + 1;
    let mut table = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * w + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * w + j - 1] + 1
            } else {
                table[(i - 1) * w + j].max(table[i * w + j - 1])
            };
        }
    }
    let len = table[a.len() * w + b.len()] as usize;
    let mut sequence = vec![0u8; len];
    let mut ranges = Vec::new();
    let (mut i, mut j, mut k) = (a.len(), b.len(), len);
    // The range being grown backwards: (a_start, a_end, b_start, b_end).
    let mut current: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            sequence[k - 1] = a[i - 1];
            current = match current {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                Some((as_, ae, bs, be)) if as_ == i && bs == j => Some((as_ - 1, ae, bs - 1, be)),
                Some(r) => {
                    emit = true;
                    Some(r)
                }
            };
            if let Some((as_, _, bs, _)) = current {
                if as_ == 0 || bs == 0 {
                    emit = true;
                }
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[(i - 1) * w + j] > table[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if current.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some((as_, ae, bs, be)) = current.take() {
                ranges.push(MatchRange {
                    a: (as_, ae),
                    b: (bs, be),
                });
            }
        }
    }
    Lcs {
        len,
        sequence,
        ranges,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_examples() {
        // From the LCS documentation: ohmytext / mynewtext.
        let r = lcs(b"ohmytext", b"mynewtext");
        assert_eq!(r.sequence, b"mytext");
        assert_eq!(r.len, 6);
        assert_eq!(
            r.ranges,
            vec![
                MatchRange {
                    a: (4, 7),
                    b: (5, 8)
                },
                MatchRange {
                    a: (2, 3),
                    b: (0, 1)
                }
            ]
        );
        assert_eq!(lcs(b"", b"abc").len, 0);
        assert_eq!(
            lcs(b"abc", b"abc").ranges,
            vec![MatchRange {
                a: (0, 2),
                b: (0, 2)
            }]
        );
    }
}
