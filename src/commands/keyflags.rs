//! Key-spec access flags, per command, as COMMAND INFO / COMMAND DOCS report them
//! (Redis 7.4's command JSON files; taken from redis-server 7.0's COMMAND INFO, which
//! agrees for every command both have, and checked by a differential test).
//!
//! Each row lists the flags of each of the command's key specs in order. Commands
//! not listed (those newer than 7.0, such as the hash-field-expiry family) get the
//! generic `RW update` for writes and `RO access` for reads, which is what 7.4 gives
//! them. Flags are case-sensitive on the wire: the access kind in capitals (`RO`,
//! `RW`, `OW`, `RM`), the rest in lower case.

/// (command name, flags of each key spec), sorted by name for binary search.
static TABLE: &[(&str, &[&[&str]])] = &[
    ("append", &[&["RW", "insert"]]),
    ("bitcount", &[&["RO", "access"]]),
    ("bitfield", &[&["RW", "access", "update", "variable_flags"]]),
    ("bitfield_ro", &[&["RO", "access"]]),
    ("bitop", &[&["OW", "update"], &["RO", "access"]]),
    ("bitpos", &[&["RO", "access"]]),
    ("blmove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("blmpop", &[&["RW", "access", "delete"]]),
    ("blpop", &[&["RW", "access", "delete"]]),
    ("brpop", &[&["RW", "access", "delete"]]),
    (
        "brpoplpush",
        &[&["RW", "access", "delete"], &["RW", "insert"]],
    ),
    ("bzmpop", &[&["RW", "access", "delete"]]),
    ("bzpopmax", &[&["RW", "access", "delete"]]),
    ("bzpopmin", &[&["RW", "access", "delete"]]),
    ("copy", &[&["RO", "access"], &["OW", "update"]]),
    ("decr", &[&["RW", "access", "update"]]),
    ("decrby", &[&["RW", "access", "update"]]),
    ("del", &[&["RM", "delete"]]),
    ("dump", &[&["RO", "access"]]),
    ("eval", &[&["RW", "access", "update"]]),
    ("eval_ro", &[&["RO", "access"]]),
    ("evalsha", &[&["RW", "access", "update"]]),
    ("evalsha_ro", &[&["RO", "access"]]),
    ("exists", &[&["RO"]]),
    ("expire", &[&["RW", "update"]]),
    ("expireat", &[&["RW", "update"]]),
    ("expiretime", &[&["RO", "access"]]),
    ("fcall", &[&["RW", "access", "update"]]),
    ("fcall_ro", &[&["RO", "access"]]),
    ("geoadd", &[&["RW", "update"]]),
    ("geodist", &[&["RO", "access"]]),
    ("geohash", &[&["RO", "access"]]),
    ("geopos", &[&["RO", "access"]]),
    (
        "georadius",
        &[&["RO", "access"], &["OW", "update"], &["OW", "update"]],
    ),
    ("georadius_ro", &[&["RO", "access"]]),
    (
        "georadiusbymember",
        &[&["RO", "access"], &["OW", "update"], &["OW", "update"]],
    ),
    ("georadiusbymember_ro", &[&["RO", "access"]]),
    ("geosearch", &[&["RO", "access"]]),
    ("geosearchstore", &[&["OW", "update"], &["RO", "access"]]),
    ("get", &[&["RO", "access"]]),
    ("getbit", &[&["RO", "access"]]),
    ("getdel", &[&["RW", "access", "delete"]]),
    ("getex", &[&["RW", "access", "update"]]),
    ("getrange", &[&["RO", "access"]]),
    ("getset", &[&["RW", "access", "update"]]),
    ("hdel", &[&["RW", "delete"]]),
    ("hexists", &[&["RO"]]),
    ("hget", &[&["RO", "access"]]),
    ("hgetall", &[&["RO", "access"]]),
    ("hincrby", &[&["RW", "access", "update"]]),
    ("hincrbyfloat", &[&["RW", "access", "update"]]),
    ("hkeys", &[&["RO", "access"]]),
    ("hlen", &[&["RO"]]),
    ("hmget", &[&["RO", "access"]]),
    ("hmset", &[&["RW", "update"]]),
    ("hrandfield", &[&["RO", "access"]]),
    ("hscan", &[&["RO", "access"]]),
    ("hset", &[&["RW", "update"]]),
    ("hsetnx", &[&["RW", "insert"]]),
    ("hstrlen", &[&["RO"]]),
    ("hvals", &[&["RO", "access"]]),
    ("incr", &[&["RW", "access", "update"]]),
    ("incrby", &[&["RW", "access", "update"]]),
    ("incrbyfloat", &[&["RW", "access", "update"]]),
    ("lcs", &[&["RO", "access"]]),
    ("lindex", &[&["RO", "access"]]),
    ("linsert", &[&["RW", "insert"]]),
    ("llen", &[&["RO"]]),
    ("lmove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    ("lmpop", &[&["RW", "access", "delete"]]),
    ("lpop", &[&["RW", "access", "delete"]]),
    ("lpos", &[&["RO", "access"]]),
    ("lpush", &[&["RW", "insert"]]),
    ("lpushx", &[&["RW", "insert"]]),
    ("lrange", &[&["RO", "access"]]),
    ("lrem", &[&["RW", "delete"]]),
    ("lset", &[&["RW", "update"]]),
    ("ltrim", &[&["RW", "delete"]]),
    ("memory|usage", &[&["RO"]]),
    ("mget", &[&["RO", "access"]]),
    (
        "migrate",
        &[
            &["RW", "access", "delete"],
            &["RW", "access", "delete", "incomplete"],
        ],
    ),
    ("move", &[&["RW", "access", "update"]]),
    ("mset", &[&["OW", "update"]]),
    ("msetnx", &[&["OW", "insert"]]),
    ("object|encoding", &[&["RO"]]),
    ("object|freq", &[&["RO"]]),
    ("object|idletime", &[&["RO"]]),
    ("object|refcount", &[&["RO"]]),
    ("persist", &[&["RW", "update"]]),
    ("pexpire", &[&["RW", "update"]]),
    ("pexpireat", &[&["RW", "update"]]),
    ("pexpiretime", &[&["RO", "access"]]),
    ("pfadd", &[&["RW", "insert"]]),
    ("pfcount", &[&["RW", "access"]]),
    ("pfdebug", &[&["RW", "access"]]),
    ("pfmerge", &[&["RW", "access", "insert"], &["RO", "access"]]),
    ("psetex", &[&["OW", "update"]]),
    ("pttl", &[&["RO", "access"]]),
    ("rename", &[&["RW", "access", "delete"], &["OW", "update"]]),
    (
        "renamenx",
        &[&["RW", "access", "delete"], &["OW", "insert"]],
    ),
    ("restore", &[&["OW", "update"]]),
    ("restore-asking", &[&["OW", "update"]]),
    ("rpop", &[&["RW", "access", "delete"]]),
    (
        "rpoplpush",
        &[&["RW", "access", "delete"], &["RW", "insert"]],
    ),
    ("rpush", &[&["RW", "insert"]]),
    ("rpushx", &[&["RW", "insert"]]),
    ("sadd", &[&["RW", "insert"]]),
    ("scard", &[&["RO"]]),
    ("sdiff", &[&["RO", "access"]]),
    ("sdiffstore", &[&["OW", "update"], &["RO", "access"]]),
    ("set", &[&["RW", "access", "update", "variable_flags"]]),
    ("setbit", &[&["RW", "access", "update"]]),
    ("setex", &[&["OW", "update"]]),
    ("setnx", &[&["OW", "insert"]]),
    ("setrange", &[&["RW", "update"]]),
    ("sinter", &[&["RO", "access"]]),
    ("sintercard", &[&["RO", "access"]]),
    ("sinterstore", &[&["RW", "update"], &["RO", "access"]]),
    ("sismember", &[&["RO"]]),
    ("smembers", &[&["RO", "access"]]),
    ("smismember", &[&["RO", "access"]]),
    ("smove", &[&["RW", "access", "delete"], &["RW", "insert"]]),
    (
        "sort",
        &[&["RO", "access"], &["RO", "access"], &["OW", "update"]],
    ),
    ("sort_ro", &[&["RO", "access"], &["RO", "access"]]),
    ("spop", &[&["RW", "access", "delete"]]),
    ("spublish", &[&["not_key"]]),
    ("srandmember", &[&["RO", "access"]]),
    ("srem", &[&["RW", "delete"]]),
    ("sscan", &[&["RO", "access"]]),
    ("ssubscribe", &[&["not_key"]]),
    ("strlen", &[&["RO"]]),
    ("substr", &[&["RO", "access"]]),
    ("sunion", &[&["RO", "access"]]),
    ("sunionstore", &[&["OW", "update"], &["RO", "access"]]),
    ("sunsubscribe", &[&["not_key"]]),
    ("touch", &[&["RO"]]),
    ("ttl", &[&["RO", "access"]]),
    ("type", &[&["RO"]]),
    ("unlink", &[&["RM", "delete"]]),
    ("watch", &[&["RO"]]),
    ("xack", &[&["RW", "update"]]),
    ("xadd", &[&["RW", "update"]]),
    ("xautoclaim", &[&["RW", "delete"]]),
    ("xclaim", &[&["RW", "update"]]),
    ("xdel", &[&["RW", "delete"]]),
    ("xgroup|create", &[&["RW", "insert"]]),
    ("xgroup|createconsumer", &[&["RW", "insert"]]),
    ("xgroup|delconsumer", &[&["RW", "delete"]]),
    ("xgroup|destroy", &[&["RW", "delete"]]),
    ("xgroup|setid", &[&["RW", "update"]]),
    ("xinfo|consumers", &[&["RO", "access"]]),
    ("xinfo|groups", &[&["RO", "access"]]),
    ("xinfo|stream", &[&["RO", "access"]]),
    ("xlen", &[&["RO"]]),
    ("xpending", &[&["RO", "access"]]),
    ("xrange", &[&["RO", "access"]]),
    ("xread", &[&["RO", "access"]]),
    ("xreadgroup", &[&["RO", "access"]]),
    ("xrevrange", &[&["RO", "access"]]),
    ("xsetid", &[&["RW", "update"]]),
    ("xtrim", &[&["RW", "delete"]]),
    ("zadd", &[&["RW", "update"]]),
    ("zcard", &[&["RO"]]),
    ("zcount", &[&["RO", "access"]]),
    ("zdiff", &[&["RO", "access"]]),
    ("zdiffstore", &[&["OW", "update"], &["RO", "access"]]),
    ("zincrby", &[&["RW", "access", "update"]]),
    ("zinter", &[&["RO", "access"]]),
    ("zintercard", &[&["RO", "access"]]),
    ("zinterstore", &[&["OW", "update"], &["RO", "access"]]),
    ("zlexcount", &[&["RO", "access"]]),
    ("zmpop", &[&["RW", "access", "delete"]]),
    ("zmscore", &[&["RO", "access"]]),
    ("zpopmax", &[&["RW", "access", "delete"]]),
    ("zpopmin", &[&["RW", "access", "delete"]]),
    ("zrandmember", &[&["RO", "access"]]),
    ("zrange", &[&["RO", "access"]]),
    ("zrangebylex", &[&["RO", "access"]]),
    ("zrangebyscore", &[&["RO", "access"]]),
    ("zrangestore", &[&["OW", "update"], &["RO", "access"]]),
    ("zrank", &[&["RO", "access"]]),
    ("zrem", &[&["RW", "delete"]]),
    ("zremrangebylex", &[&["RW", "delete"]]),
    ("zremrangebyrank", &[&["RW", "delete"]]),
    ("zremrangebyscore", &[&["RW", "delete"]]),
    ("zrevrange", &[&["RO", "access"]]),
    ("zrevrangebylex", &[&["RO", "access"]]),
    ("zrevrangebyscore", &[&["RO", "access"]]),
    ("zrevrank", &[&["RO", "access"]]),
    ("zscan", &[&["RO", "access"]]),
    ("zscore", &[&["RO", "access"]]),
    ("zunion", &[&["RO", "access"]]),
    ("zunionstore", &[&["OW", "update"], &["RO", "access"]]),
];

/// (command name, key spec index, note): the explanations Redis attaches to some specs.
static NOTES: &[(&str, usize, &str)] = &[
    ("bitfield", 0, "This command allows both access and modification of the key"),
    ("eval", 0, "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
    ("eval_ro", 0, "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ("fcall", 0, "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
    ("fcall_ro", 0, "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS"),
    ("getex", 0, "RW and UPDATE because it changes the TTL"),
    ("pfcount", 0, "RW because it may change the internal representation of the key, and propagate to replicas"),
    ("set", 0, "RW and ACCESS due to the optional `GET` argument"),
    ("sort", 1, "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
    ("sort", 2, "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array"),
    ("sort_ro", 1, "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort"),
    ("xadd", 0, "UPDATE instead of INSERT because of the optional trimming feature"),
];

/// The note of key spec `spec` of `name`, if Redis gives one.
pub fn spec_note(name: &str, spec: usize) -> Option<&'static str> {
    NOTES
        .iter()
        .find(|(n, i, _)| *n == name && *i == spec)
        .map(|(_, _, t)| *t)
}

/// The flags of each key spec of `name` (a command, or `container|sub`).
pub fn spec_flags(name: &str) -> Option<&'static [&'static [&'static str]]> {
    TABLE
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| TABLE[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_and_found() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            spec_flags("lpop"),
            Some(&[&["RW", "access", "delete"][..]][..])
        );
        assert_eq!(spec_flags("object|encoding"), Some(&[&["RO"][..]][..]));
        assert_eq!(spec_flags("hexpire"), None);
    }
}
