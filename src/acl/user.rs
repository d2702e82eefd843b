//! ACL users and selectors: the rules of ACL SETUSER applied one at a time, and the
//! text ACL LIST / GETUSER / SAVE give back.
//!
//! A user is flags, password hashes (SHA-256 hex, as Redis stores them) and a list of
//! selectors, the first being the root one (rules outside parentheses). A selector
//! holds a bitmap of allowed command ids (`table.rs`), allowed first arguments of
//! otherwise denied commands (`+select|0`), key patterns with read/write flags and
//! channel patterns. Command rules are also kept as the text they were given in
//! (Redis 7.2+'s `command_rules`): a rule for a command replaces an earlier rule for
//! the same command or one of its subcommands, and `+@all`/`-@all` clear the text,
//! so the description is the operator's own order, stable across runs.

use sha2::{Digest, Sha256};

use super::table::{category_bit, table};

pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

#[derive(Clone, Debug)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    /// READ | WRITE.
    pub flags: u8,
}

#[derive(Clone, Debug)]
pub struct Selector {
    pub allkeys: bool,
    pub allchannels: bool,
    pub allcommands: bool,
    /// Set by `+@all`/`allcommands`: the description starts with `+@all`.
    pub future: bool,
    pub allowed: Vec<u64>,
    /// Command id → first arguments allowed although the command is denied.
    pub firstargs: Vec<(usize, Vec<Vec<u8>>)>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
    /// The command rules as applied, after the leading `+@all`/`-@all`.
    pub rules: String,
}

/// Why a rule was refused; `message()` is Redis's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    Unknown,
    Syntax,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

impl Selector {
    /// An empty selector: no commands, no keys; channels per `acl-pubsub-default`.
    pub fn new(allchannels: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels,
            allcommands: false,
            future: false,
            allowed: vec![0; table().len().div_ceil(64)],
            firstargs: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            rules: String::new(),
        }
    }

    #[inline]
    pub fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allows or denies a command and, for a container, all its subcommands.
    fn change_perm(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.retain(|(i, _)| *i != id);
        for &s in &table().cmds[id].subs {
            self.set_bit(s, on);
        }
    }

    /// Records a command rule: drops an earlier rule for the same name (or one of
    /// its subcommands), then appends.
    fn update_rules(&mut self, rule: &str, allow: bool) {
        let rule = rule.to_ascii_lowercase();
        let kept: Vec<&str> = self
            .rules
            .split(' ')
            .filter(|r| !r.is_empty())
            .filter(|r| {
                let name = &r[1..];
                !(name == rule
                    || (name.len() > rule.len()
                        && name.starts_with(rule.as_str())
                        && name.as_bytes()[rule.len()] == b'|'))
            })
            .collect();
        let mut s = kept.join(" ");
        if !s.is_empty() {
            s.push(' ');
        }
        s.push(if allow { '+' } else { '-' });
        s.push_str(&rule);
        self.rules = s;
    }

    /// Applies one selector rule (keys, channels, commands).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.allowed.iter_mut().for_each(|w| *w = u64::MAX);
            self.allcommands = true;
            self.future = true;
            self.rules.clear();
            self.firstargs.clear();
        } else if is("nocommands") || is("-@all") {
            self.allowed.iter_mut().for_each(|w| *w = 0);
            self.allcommands = false;
            self.future = false;
            self.rules.clear();
            self.firstargs.clear();
        } else if op.first() == Some(&b'~') || op.first() == Some(&b'%') {
            if self.allkeys {
                return Err(RuleError::KeysAfterAll);
            }
            let mut flags = 0u8;
            let mut offset = 1;
            if op[0] == b'%' {
                loop {
                    match op.get(offset).map(|c| c.to_ascii_uppercase()) {
                        Some(b'R') if flags & READ == 0 => flags |= READ,
                        Some(b'W') if flags & WRITE == 0 => flags |= WRITE,
                        Some(b'~') if flags != 0 => {
                            offset += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
            } else {
                flags = READ | WRITE;
            }
            let pat = &op[offset..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pat) {
                Some(k) => k.flags |= flags,
                None => self.keys.push(KeyPattern {
                    pattern: pat.to_vec(),
                    flags,
                }),
            }
            self.allkeys = false;
        } else if op.first() == Some(&b'&') {
            if self.allchannels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pat = &op[1..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pat) {
                self.channels.push(pat.to_vec());
            }
        } else if (op.first() == Some(&b'+') || op.first() == Some(&b'-'))
            && op.get(1) == Some(&b'@')
        {
            let allow = op[0] == b'+';
            let bit = category_bit(&op[2..]).ok_or(RuleError::Unknown)?;
            self.update_rules(&String::from_utf8_lossy(&op[1..]), allow);
            let t = table();
            for id in t.in_category(bit).collect::<Vec<_>>() {
                self.change_perm(id, allow);
            }
        } else if op.first() == Some(&b'+') {
            let name = &op[1..];
            let t = table();
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let id = t.lookup(name).ok_or(RuleError::Unknown)?;
                    self.change_perm(id, true);
                    self.update_rules(t.cmds[id].cmd.name, true);
                }
                Some(bar) => {
                    let id = t.lookup(&name[..bar]).ok_or(RuleError::Unknown)?;
                    if t.cmds[id].is_sub {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !t.cmds[id].subs.is_empty() {
                        let sid = t.lookup(name).ok_or(RuleError::Unknown)?;
                        self.change_perm(sid, true);
                    } else {
                        crate::log::warning(&format!(
                            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                            String::from_utf8_lossy(name)
                        ));
                        match self.firstargs.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, v)) => {
                                if !v.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    v.push(sub.to_vec());
                                }
                            }
                            None => self.firstargs.push((id, vec![sub.to_vec()])),
                        }
                    }
                    self.update_rules(&String::from_utf8_lossy(name), true);
                }
            }
        } else if op.first() == Some(&b'-') {
            let t = table();
            let id = t.lookup(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change_perm(id, false);
            self.update_rules(t.cmds[id].cmd.name, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+@all ...` / `-@all ...`: the command rules as ACL GETUSER shows them.
    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.future { "+@all" } else { "-@all" });
        if !self.rules.is_empty() {
            s.push(' ');
            s.push_str(&self.rules);
        }
        s
    }

    /// Key patterns as GETUSER shows them (`~*`, or each pattern with its flags).
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(match k.flags {
                READ => b"%R~",
                WRITE => b"%W~",
                _ => b"~",
            });
            out.extend_from_slice(&k.pattern);
        }
        out
    }

    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The selector in ACL LIST form: keys, channels, command rules.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys || !self.keys.is_empty() {
            out.extend_from_slice(&self.describe_keys());
            out.push(b' ');
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            if !self.channels.is_empty() {
                out.extend_from_slice(&self.describe_channels());
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// Nothing to check: every command, key and channel is allowed.
    pub fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }
}

#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true), how Redis 7.4 creates every user) or
    /// `skip-sanitize-payload`; None is not produced any more but reads as neither.
    pub sanitize: Option<bool>,
    pub passwords: Vec<String>,
    /// The root selector first, then those given in parentheses.
    pub selectors: Vec<Selector>,
}

/// SHA-256 of a password as 64 lowercase hex digits, as Redis stores it.
pub fn hash_password(p: &[u8]) -> String {
    let d = Sha256::digest(p);
    let mut s = String::with_capacity(64);
    for b in d.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Constant-time comparison of two hashes.
fn same_hash(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl User {
    /// A new user: off, no passwords, no permissions.
    pub fn new(name: &str, pubsub_all: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: Some(true),
            passwords: Vec::new(),
            selectors: vec![Selector::new(pubsub_all)],
        }
    }

    /// The `default` user as Redis creates it: `on nopass ~* &* +@all`.
    pub fn new_default() -> User {
        let mut u = User::new("default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes(), false);
        }
        u
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one ACL SETUSER rule. `pubsub_all`: `acl-pubsub-default` is
    /// `allchannels` (for `reset` and new selectors).
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            let pos = self
                .passwords
                .iter()
                .position(|p| *p == h)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(pos);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(pubsub_all);
            let inner = &op[1..op.len() - 1];
            let words = crate::protocol::parser::split_args(inner).ok_or(RuleError::Syntax)?;
            for w in words {
                s.apply(&w)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for r in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(r.as_bytes(), pubsub_all)?;
            }
            if pubsub_all {
                self.apply(b"allchannels", pubsub_all)?;
            }
            for r in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(r.as_bytes(), pubsub_all)?;
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Whether `pass` authenticates this user (enabled, and nopass or a matching hash).
    pub fn check_password(&self, pass: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        self.passwords.iter().any(|p| same_hash(p, &h))
    }

    /// Flags in Redis's order (`on`/`off`, `nopass`, sanitize flags).
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user's rules as ACL LIST / the ACL file write them (after `user <name> `).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flags() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.extend_from_slice(&s.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe());
                out.push(b')');
            }
        }
        out
    }

    /// No check needed for this user's commands (the executor's fast path).
    pub fn unrestricted(&self) -> bool {
        self.selectors.iter().any(|s| s.unrestricted())
    }
}

/// Joins selector rules spread over several arguments (`(~key` `+get)`) into one.
/// On an unmatched parenthesis returns the index of the argument that opened it.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, a) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().map(|(_, s)| s).unwrap_or_default());
            }
            continue;
        }
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((j, a.to_vec()));
            continue;
        }
        out.push(a.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("bob", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    fn text(u: &User) -> String {
        String::from_utf8(u.describe()).unwrap()
    }

    #[test]
    fn describe_as_redis() {
        let u = user(&[
            "on",
            ">pass",
            "~foo*",
            "%R~bar*",
            "&chan*",
            "+get",
            "+@hash",
            "-hset",
            "+config|get",
            "+select|0",
        ]);
        assert_eq!(
            text(&u),
            "on sanitize-payload #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~foo* %R~bar* resetchannels &chan* -@all +get +@hash -hset +config|get +select|0"
        );
        assert_eq!(
            text(&User::new_default()),
            "on nopass sanitize-payload ~* &* +@all"
        );
        assert_eq!(
            text(&user(&["reset"])),
            "off sanitize-payload resetchannels -@all"
        );
        let u = user(&["on", "%RW~k", "%R~k", "%W~j", "%R~j"]);
        assert_eq!(text(&u), "on sanitize-payload ~k ~j resetchannels -@all");
    }

    #[test]
    fn rules_replace_earlier_ones() {
        let u = user(&["+config|get", "+get", "-config", "+GET"]);
        assert_eq!(u.root().describe_commands(), "-@all -config +get");
        let u = user(&["+@all", "-get", "+@all"]);
        assert_eq!(u.root().describe_commands(), "+@all");
    }

    #[test]
    fn bits_follow_rules() {
        let t = table();
        let u = user(&["+@read", "-get"]);
        let get = t.lookup(b"get").unwrap();
        let strlen = t.lookup(b"strlen").unwrap();
        let set = t.lookup(b"set").unwrap();
        assert!(!u.root().bit(get));
        assert!(u.root().bit(strlen));
        assert!(!u.root().bit(set));
        let u = user(&["+config"]);
        let cg = t.lookup(b"config|get").unwrap();
        assert!(u.root().bit(cg));
    }

    #[test]
    fn errors() {
        let mut u = User::new("x", false);
        assert_eq!(u.apply(b"+nope", false), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"+@nope", false), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"bogus", false), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"%X~a", false), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"#abc", false), Err(RuleError::BadHash));
        assert_eq!(u.apply(b"<nope", false), Err(RuleError::NoSuchPassword));
        assert_eq!(
            u.apply(b"+config|get|x", false),
            Err(RuleError::FirstArgOfSub)
        );
        u.apply(b"allkeys", false).unwrap();
        assert_eq!(u.apply(b"~a", false), Err(RuleError::KeysAfterAll));
    }

    #[test]
    fn passwords() {
        let u = user(&["on", ">a", ">b", "<a"]);
        assert!(u.check_password(b"b"));
        assert!(!u.check_password(b"a"));
        let u = user(&[">a"]);
        assert!(!u.check_password(b"a"), "disabled users never authenticate");
    }

    #[test]
    fn selectors() {
        let merged = merge_selector_args(&[b"on", b"(~a", b"+get)", b"(+set)"]).unwrap();
        assert_eq!(
            merged,
            vec![b"on".to_vec(), b"(~a +get)".to_vec(), b"(+set)".to_vec()]
        );
        assert_eq!(merge_selector_args(&[b"(~a", b"+get"]), Err(0));
        let u = user(&["on", "(~a +get)"]);
        assert_eq!(
            text(&u),
            "on sanitize-payload resetchannels -@all (~a resetchannels -@all +get)"
        );
        assert_eq!(
            text(&user(&["(~a +get)", "clearselectors"])),
            "off sanitize-payload resetchannels -@all"
        );
    }
}
