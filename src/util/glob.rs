//! Redis's glob matcher (`stringmatchlen`), used by KEYS, SCAN MATCH,
//! PSUBSCRIBE, CONFIG GET and friends.
//!
//! Clients depend on its quirks, so this reproduces Redis 7.0's semantics
//! (checked against a live server) rather than POSIX `fnmatch`. It keeps
//! Redis's shape, backtracking over `*` with a shared "give up" flag: once
//! the text after some `*` has failed at every remaining position, no
//! earlier `*` can help by matching more, so the whole search stops. That
//! keeps patterns such as `*a*a*a…*b` polynomial instead of exponential.

/// Redis stops expanding `*` beyond this nesting depth and reports no match.
const MAX_STAR_NESTING: u32 = 1000;

/// Does `subject` match the glob `pattern`? Byte-based and binary safe;
/// `nocase` folds ASCII letters only (the C locale's `tolower`).
///
/// Redis 7.0 behaviours kept on purpose (all seen via KEYS or
/// `COMMAND LIST FILTERBY PATTERN`):
/// * a match must consume at least one subject byte, so `*` and `**` do not
///   match the empty string (KEYS/SCAN special-case a lone `*` themselves);
/// * `[…]`: `^` negates, ranges work reversed (`[z-a]`), `\` escapes the
///   next byte and compares it case-sensitively even with `nocase`, `]`
///   right after `[` closes an empty class, an unterminated class runs to
///   the end of the pattern (so `[^` matches any one byte);
/// * range bounds compare as signed C `char` (x86-64), so bytes >= 0x80
///   sort below ASCII; with `nocase` the bounds are ordered first and
///   lower-cased after, making `[Z-a]` empty;
/// * a trailing lone `\` matches a literal backslash;
/// * beyond 1000 nested `*` expansions the match fails, Redis's recursion
///   guard.
pub fn glob_match(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    match_at(pattern, subject, nocase, &mut give_up, 0)
}

fn fold(b: u8, nocase: bool) -> u8 {
    if nocase {
        b.to_ascii_lowercase()
    } else {
        b
    }
}

fn match_at(
    mut pat: &[u8],
    mut sub: &[u8],
    nocase: bool,
    give_up: &mut bool,
    nesting: u32,
) -> bool {
    if nesting > MAX_STAR_NESTING {
        return false;
    }
    while let (Some(&p), Some(&c)) = (pat.first(), sub.first()) {
        match p {
            b'*' => {
                let rest = trim_stars(pat);
                if rest.is_empty() {
                    return true;
                }
                // Try the rest at each non-empty suffix; the empty suffix
                // never helps since `rest` does not start with `*`.
                while !sub.is_empty() {
                    if match_at(rest, sub, nocase, give_up, nesting + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    sub = &sub[1..];
                }
                // `rest` matches no suffix at all, so matching more with an
                // outer `*` cannot succeed either.
                *give_up = true;
                return false;
            }
            b'?' => pat = &pat[1..],
            b'[' => {
                let (matched, used) = match_class(&pat[1..], c, nocase);
                if !matched {
                    return false;
                }
                pat = &pat[1 + used..];
            }
            b'\\' if pat.len() >= 2 => {
                if fold(pat[1], nocase) != fold(c, nocase) {
                    return false;
                }
                pat = &pat[2..];
            }
            _ => {
                if fold(p, nocase) != fold(c, nocase) {
                    return false;
                }
                pat = &pat[1..];
            }
        }
        sub = &sub[1..];
        if sub.is_empty() {
            // Trailing stars may match the empty rest, but only once at least
            // one byte has been consumed here.
            pat = trim_stars(pat);
            break;
        }
    }
    pat.is_empty() && sub.is_empty()
}

fn trim_stars(pat: &[u8]) -> &[u8] {
    let n = pat.iter().take_while(|&&b| b == b'*').count();
    &pat[n..]
}

/// Matches byte `c` against the class body `body` (the pattern just after
/// `[`). Returns whether it matched and how many bytes of `body` the class
/// used, including its closing `]` when there is one.
fn match_class(body: &[u8], c: u8, nocase: bool) -> (bool, usize) {
    let negate = body.first() == Some(&b'^');
    let mut i = usize::from(negate);
    let mut hit = false;
    loop {
        match body.get(i) {
            // Unterminated: the class extends to the end of the pattern.
            None => break,
            Some(b'\\') if i + 1 < body.len() => {
                // Escaped bytes compare exactly, even in nocase mode.
                hit |= body[i + 1] == c;
                i += 2;
            }
            Some(b']') => {
                i += 1;
                break;
            }
            Some(&lo) if i + 2 < body.len() && body[i + 1] == b'-' => {
                hit |= in_range(lo, body[i + 2], c, nocase);
                i += 3;
            }
            Some(&b) => {
                hit |= fold(b, nocase) == fold(c, nocase);
                i += 1;
            }
        }
    }
    (hit != negate, i)
}

/// Range test with C `char` (signed) ordering; bounds are put in order
/// first and only then case-folded, as Redis does, so `[Z-a]` in nocase mode
/// becomes the empty range `z..=a`.
fn in_range(a: u8, b: u8, c: u8, nocase: bool) -> bool {
    let signed = |x: u8| i32::from(fold(x, nocase) as i8);
    let (lo, hi) = if (a as i8) > (b as i8) {
        (b, a)
    } else {
        (a, b)
    };
    (signed(lo)..=signed(hi)).contains(&signed(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows: `SET <subject> 1; KEYS <pattern>` on redis-server 7.0.15
    /// (KEYS matches case-sensitively).
    #[test]
    fn matches_redis_keys() {
        let rows: &[(&[u8], &[u8], bool)] = &[
            (b"h?llo", b"hello", true),
            (b"h?llo", b"hallo", true),
            (b"h?llo", b"hllo", false),
            (b"h?llo", b"heello", false),
            (b"h*llo", b"hllo", true),
            (b"h*llo", b"heeeello", true),
            (b"h*llo", b"hello", true),
            (b"h*llo", b"hellox", false),
            (b"h[ae]llo", b"hello", true),
            (b"h[ae]llo", b"hallo", true),
            (b"h[ae]llo", b"hillo", false),
            (b"h[^e]llo", b"hallo", true),
            (b"h[^e]llo", b"hbllo", true),
            (b"h[^e]llo", b"hello", false),
            (b"h[^e]llo", b"hllo", false),
            (b"h[a-b]llo", b"hallo", true),
            (b"h[a-b]llo", b"hbllo", true),
            (b"h[a-b]llo", b"hcllo", false),
            (b"h[z-a]llo", b"hallo", true),
            (b"h[z-a]llo", b"hmllo", true),
            (b"h[z-a]llo", b"hzllo", true),
            (b"h[z-a]llo", b"hAllo", false),
            (b"\\*", b"*", true),
            (b"\\*", b"a", false),
            (b"a\\*b", b"a*b", true),
            (b"a\\*b", b"axb", false),
            (b"\\?", b"?", true),
            (b"\\?", b"a", false),
            (b"\\[a]", b"[a]", true),
            (b"\\[a]", b"a", false),
            (b"[\\]]", b"]", true),
            (b"[\\]]", b"\\", false),
            (b"[\\^a]", b"^", true),
            (b"[\\^a]", b"a", true),
            (b"[\\^a]", b"\\", false),
            (b"[\\-]", b"-", true),
            (b"[\\-]", b"\\", false),
            (b"[a\\-z]", b"-", true),
            (b"[a\\-z]", b"b", false),
            (b"[a\\-z]", b"a", true),
            (b"[a\\-z]", b"z", true),
            (b"[]a]", b"]", false),
            (b"[]a]", b"a", false),
            (b"[]a]", b"]a]", false),
            (b"[]", b"]", false),
            (b"[]", b"a", false),
            (b"[^]", b"]", true),
            (b"[^]", b"a", true),
            (b"[^]", b"ab", false),
            (b"[^]a", b"xa", true),
            (b"[^]a", b"a", false),
            (b"[^]a", b"]a", true),
            (b"[", b"[", false),
            (b"[", b"a", false),
            (b"[^", b"a", true),
            (b"[^", b"^", true),
            (b"[^", b"ab", false),
            (b"a[", b"a", false),
            (b"a[", b"a[", false),
            (b"a[", b"ab", false),
            (b"[ab", b"a", true),
            (b"[ab", b"b", true),
            (b"[ab", b"[", false),
            (b"[ab", b"ab", false),
            (b"[a-", b"a", true),
            (b"[a-", b"-", true),
            (b"[a-", b"b", false),
            (b"[a-]", b"a", true),
            (b"[a-]", b"-", false),
            (b"[a-]", b"]", true),
            (b"[a-]", b"_", true),
            (b"[a-]", b"b", false),
            (b"[a-]x]", b"ax]", false),
            (b"[a-]x]", b"ax", false),
            (b"[a-]x]", b"_x]", false),
            (b"[-a]", b"-", true),
            (b"[-a]", b"a", true),
            (b"[-a]", b"b", false),
            (b"[a-c-e]", b"b", true),
            (b"[a-c-e]", b"-", true),
            (b"[a-c-e]", b"d", false),
            (b"[a-c-e]", b"e", true),
            (b"x\\", b"x\\", true),
            (b"x\\", b"x", false),
            (b"\\", b"\\", true),
            (b"[\\", b"\\", true),
            (b"[\\", b"[", false),
            (b"a\\", b"a\\", true),
            (b"a\\", b"a", false),
            (b"\\a", b"a", true),
            (b"\\a", b"\\a", false),
            (b"**", b"", false),
            (b"**", b"a", true),
            (b"a*", b"a", true),
            (b"a*", b"ab", true),
            (b"a**", b"a", true),
            (b"*a", b"a", true),
            (b"*a", b"ba", true),
            (b"*a", b"ab", false),
            (b"?*", b"a", true),
            (b"?*", b"", false),
            (b"*?*", b"a", true),
            (b"a*b*c", b"abc", true),
            (b"a*b*c", b"aXbYc", true),
            (b"a*b*c", b"acb", false),
            (b"a*b*c", b"abcc", true),
            (b"*[", b"a[", false),
            (b"*[", b"a", false),
            (b"", b"", true),
            (b"[a-\xff]", b"a", true),
            (b"[a-\xff]", b"b", false),
            (b"[a-\xff]", b"\x00", true),
            (b"[a-\xff]", b"A", true),
            (b"[a-\xff]", b"\xff", true),
            (b"[a-\xff]", b"\xfe", false),
            (b"[a-\xff]", b"\x80", false),
            (b"[\x80-\xff]", b"\x80", true),
            (b"[\x80-\xff]", b"\xc3", true),
            (b"[\x80-\xff]", b"\xff", true),
            (b"[\x80-\xff]", b"a", false),
            (b"[\x7f-\x80]", b"\x7f", true),
            (b"[\x7f-\x80]", b"\x80", true),
            (b"[\x7f-\x80]", b"a", true),
            (b"[\x7f-\x80]", b"\x00", true),
            (b"[\x7f-\x80]", b"\xc3", true),
            (b"\xc3*", b"\xc3\xa9", true),
            (b"\xc3*", b"\xc3", true),
            (b"a?c", b"a\x00c", true),
            (b"a?c", b"ac", false),
            (b"a\x00*", b"a\x00b", true),
            (b"a\x00*", b"a", false),
            (b"[\x00]", b"\x00", true),
            (b"H*", b"h", false),
            (b"H*", b"H", true),
            (b"[A-Z]", b"a", false),
            (b"[A-Z]", b"A", true),
            (b"*\\", b"\\", true),
            (b"*\\", b"a\\", true),
            (b"*\\", b"a", false),
            (b"[[]", b"[", true),
            (b"[*]", b"*", true),
            (b"[*]", b"a", false),
            (b"[?]", b"?", true),
            (b"[?]", b"a", false),
            (b"[a-z][0-9]", b"a1", true),
            (b"[a-z][0-9]", b"A1", false),
            (b"[a-z][0-9]", b"aa", false),
            (b"[^a-z]", b"a", false),
            (b"[^a-z]", b"A", true),
            (b"[^a-z]", b"-", true),
        ];
        for &(pattern, subject, want) in rows {
            assert_eq!(
                glob_match(pattern, subject, false),
                want,
                "pattern {:?} subject {:?}",
                pattern.escape_ascii().to_string(),
                subject.escape_ascii().to_string()
            );
        }
    }

    /// Rows: `COMMAND LIST FILTERBY PATTERN <pattern>` on redis-server
    /// 7.0.15, which matches case-insensitively.
    #[test]
    fn matches_redis_nocase() {
        let rows: &[(&[u8], &[u8], bool)] = &[
            (b"CONFIG", b"config", true),
            (b"C*G", b"config", true),
            (b"c[O]nfig", b"config", true),
            (b"c[\\O]nfig", b"config", false),
            (b"c[\\o]nfig", b"config", true),
            (b"c[N-P]nfig", b"config", true),
            (b"c[n-p]nfig", b"config", true),
            (b"c[Z-a]nfig", b"config", false),
            (b"c[a-Z]nfig", b"config", false),
            (b"c[A-z]nfig", b"config", true),
            (b"c[^O]nfig", b"config", false),
            (b"\\Config", b"config", true),
            (b"GE?", b"get", true),
            (b"[G]ET", b"get", true),
            (b"config|G*", b"config|get", true),
        ];
        for &(pattern, subject, want) in rows {
            assert_eq!(
                glob_match(pattern, subject, true),
                want,
                "pattern {:?} subject {:?}",
                pattern.escape_ascii().to_string(),
                subject.escape_ascii().to_string()
            );
        }
    }

    /// With a key of 1001 `a`s, KEYS `*a` x1000 finds it and `*a` x1001
    /// does not (redis-server 7.0.15): the star nesting limit.
    #[test]
    fn star_nesting_limit_matches_redis() {
        let subject = vec![b'a'; 1001];
        assert!(glob_match(&b"*a".repeat(1000), &subject, false));
        assert!(!glob_match(&b"*a".repeat(1001), &subject, false));
        let mut trailing = b"*a".repeat(999);
        trailing.push(b'*');
        assert!(glob_match(&trailing, &subject, false));
    }

    #[test]
    fn pathological_patterns_finish() {
        // Exponential for naive backtracking; polynomial thanks to give-up.
        let mut pattern = b"*a".repeat(30);
        pattern.extend_from_slice(b"*b");
        let subject = vec![b'a'; 10 * 1024];
        assert!(!glob_match(&pattern, &subject, false));
        let classes = b"*[a-c]*\\a*?".repeat(10);
        assert!(!glob_match(&[&classes[..], b"z"].concat(), &subject, false));
        let mut hit = subject.clone();
        hit.push(b'b');
        assert!(glob_match(&pattern, &hit, false));
    }

    /// Exponential reference without the give-up shortcut or nesting limit,
    /// to show the shortcut never changes an answer.
    fn naive(pat: &[u8], sub: &[u8], nocase: bool) -> bool {
        match (pat.first(), sub.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                let rest = trim_stars(pat);
                if rest.is_empty() {
                    return !sub.is_empty();
                }
                (0..sub.len()).any(|i| naive(rest, &sub[i..], nocase))
            }
            (_, None) | (None, _) => false,
            (Some(&p), Some(&c)) => {
                let used = match p {
                    b'?' => 1,
                    b'[' => match match_class(&pat[1..], c, nocase) {
                        (true, n) => n + 1,
                        (false, _) => return false,
                    },
                    b'\\' if pat.len() >= 2 => {
                        if fold(pat[1], nocase) != fold(c, nocase) {
                            return false;
                        }
                        2
                    }
                    _ => {
                        if fold(p, nocase) != fold(c, nocase) {
                            return false;
                        }
                        1
                    }
                };
                if sub.len() == 1 {
                    trim_stars(&pat[used..]).is_empty()
                } else {
                    naive(&pat[used..], &sub[1..], nocase)
                }
            }
        }
    }

    proptest! {
        #[test]
        fn give_up_shortcut_preserves_answers(
            pat in proptest::collection::vec(proptest::sample::select(b"ab*?[]^-\\A".to_vec()), 0..10),
            sub in proptest::collection::vec(proptest::sample::select(b"abAB-]\\^".to_vec()), 0..10),
            nocase: bool,
        ) {
            prop_assert_eq!(glob_match(&pat, &sub, nocase), naive(&pat, &sub, nocase));
        }

        #[test]
        fn literal_patterns_match_themselves(s in proptest::collection::vec(any::<u8>(), 1..20)) {
            // Escaping every byte makes any subject a literal pattern.
            let escaped: Vec<u8> = s.iter().flat_map(|&b| [b'\\', b]).collect();
            prop_assert!(glob_match(&escaped, &s, false));
            prop_assert!(glob_match(b"**", &s, false));
        }
    }
}
