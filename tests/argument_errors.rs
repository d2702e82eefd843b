//! Error replies for malformed arguments, found by `scripts/differential.py --mutate`
//! (commands with an argument dropped, added, repeated or replaced) and checked against
//! Redis 7.4's source: which error a command gives, and which it judges first.

mod common;
use common::*;

const NOT_POSITIVE: &str = "-ERR value is out of range, must be positive\r\n";
const NOT_INTEGER: &str = "-ERR value is not an integer or out of range\r\n";
const NOT_INT32: &str =
    "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n";
const NOT_LONG: &str = "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n";

/// Counts read by getPositiveLongFromObjectOrReply without a message of their own
/// (SPOP, ZPOPMIN/ZPOPMAX, DEBUG POPULATE): anything but an integer of 0 or more,
/// words included, gets "must be positive", before the key is looked at.
#[test]
fn positive_counts_refuse_words_as_out_of_range() {
    let s = TestServer::start();
    check_both(
        &s,
        &[
            (&["SADD", "s", "a", "b"], ":2\r\n", ":2\r\n"),
            (&["ZADD", "z", "1", "a"], ":1\r\n", ":1\r\n"),
            (&["SPOP", "s", "abc"], NOT_POSITIVE, NOT_POSITIVE),
            (&["SPOP", "s", "-1"], NOT_POSITIVE, NOT_POSITIVE),
            (&["SPOP", "nosuch", "1.5"], NOT_POSITIVE, NOT_POSITIVE),
            (
                &["SPOP", "s", "9223372036854775808"],
                NOT_POSITIVE,
                NOT_POSITIVE,
            ),
            (&["ZPOPMIN", "z", "abc"], NOT_POSITIVE, NOT_POSITIVE),
            (&["ZPOPMAX", "nosuch", "x"], NOT_POSITIVE, NOT_POSITIVE),
            (&["ZPOPMAX", "z", "-1"], NOT_POSITIVE, NOT_POSITIVE),
            (&["DEBUG", "POPULATE", "abc"], NOT_POSITIVE, NOT_POSITIVE),
            (
                &["DEBUG", "POPULATE", "1", "p", "abc"],
                NOT_POSITIVE,
                NOT_POSITIVE,
            ),
            (&["SCARD", "s"], ":2\r\n", ":2\r\n"),
        ],
    );
}

/// Database indexes are 32-bit integers first (getIntFromObjectOrReply), databases
/// second; SWAPDB names the index it could not read.
#[test]
fn database_indexes_are_32_bit_integers_first() {
    let s = TestServer::start();
    let out_of_range = "-ERR DB index is out of range\r\n";
    check_both(
        &s,
        &[
            (&["SET", "k", "v"], "+OK\r\n", "+OK\r\n"),
            (&["SELECT", "abc"], NOT_INTEGER, NOT_INTEGER),
            (&["SELECT", "2147483648"], NOT_INT32, NOT_INT32),
            (&["SELECT", "-2147483649"], NOT_INT32, NOT_INT32),
            (&["SELECT", "-1"], out_of_range, out_of_range),
            (&["SELECT", "2147483647"], out_of_range, out_of_range),
            (&["MOVE", "k", "99999999999"], NOT_INT32, NOT_INT32),
            (&["MOVE", "k", "16"], out_of_range, out_of_range),
            (
                &["COPY", "k", "d", "DB", "99999999999"],
                NOT_INT32,
                NOT_INT32,
            ),
            (&["COPY", "k", "d", "DB", "x"], NOT_INTEGER, NOT_INTEGER),
            (&["COPY", "k", "d", "DB", "-1"], out_of_range, out_of_range),
            (
                &["SWAPDB", "99999999999", "0"],
                "-ERR invalid first DB index\r\n",
                "-ERR invalid first DB index\r\n",
            ),
            (
                &["SWAPDB", "0", "2147483648"],
                "-ERR invalid second DB index\r\n",
                "-ERR invalid second DB index\r\n",
            ),
            (
                &["SWAPDB", "x", "y"],
                "-ERR invalid first DB index\r\n",
                "-ERR invalid first DB index\r\n",
            ),
            (&["SWAPDB", "0", "99"], out_of_range, out_of_range),
            (&["SWAPDB", "-1", "0"], out_of_range, out_of_range),
            (&["GET", "k"], "$1\r\nv\r\n", "$1\r\nv\r\n"),
        ],
    );
}

/// ZRANDMEMBER reads its count (in -LONG_MAX..LONG_MAX) before the rest of its
/// syntax; ZRANGE takes a LIMIT whose count is -1 with a rank range, since that is no
/// limit at all, and refuses any other.
#[test]
fn zset_counts_and_limits_in_redis_order() {
    let s = TestServer::start();
    let limit_error = "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n";
    check_both(
        &s,
        &[
            (
                &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
                ":3\r\n",
                ":3\r\n",
            ),
            (
                &["ZRANDMEMBER", "z", "abc", "foo"],
                NOT_INTEGER,
                NOT_INTEGER,
            ),
            (
                &["ZRANDMEMBER", "z", "1", "withscores", "x"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["ZRANDMEMBER", "z", "-9223372036854775808"],
                NOT_LONG,
                NOT_LONG,
            ),
            (
                &["ZRANDMEMBER", "z", "-9223372036854775808", "withscores"],
                NOT_LONG,
                NOT_LONG,
            ),
            (
                &["ZRANDMEMBER", "z", "-9223372036854775807", "withscores"],
                "-ERR value is out of range\r\n",
                "-ERR value is out of range\r\n",
            ),
            (&["ZRANDMEMBER", "z", "0", "withscores"], "*0\r\n", "*0\r\n"),
            (
                &["ZRANGE", "z", "0", "-1", "LIMIT", "5", "-1"],
                "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
                "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
            ),
            (
                &["ZRANGE", "z", "0", "0", "LIMIT", "0", "-1", "WITHSCORES"],
                "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
                "*1\r\n*2\r\n$1\r\na\r\n,1\r\n",
            ),
            (
                &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
                limit_error,
                limit_error,
            ),
            (
                &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "-2"],
                limit_error,
                limit_error,
            ),
            (
                &["ZRANGESTORE", "d", "z", "1", "-1", "LIMIT", "1", "-1"],
                ":2\r\n",
                ":2\r\n",
            ),
            // The LIMIT is read before the rank range.
            (
                &["ZRANGESTORE", "d", "z", "1", "BYSCORE", "LIMIT", "3", "-1"],
                NOT_INTEGER,
                NOT_INTEGER,
            ),
        ],
    );
}

/// LCS reads both keys and judges their types before its options.
#[test]
fn lcs_checks_its_keys_before_its_options() {
    let s = TestServer::start();
    let not_strings = "-ERR The specified keys must contain string values\r\n";
    check_both(
        &s,
        &[
            (&["SET", "a", "ohmytext"], "+OK\r\n", "+OK\r\n"),
            (&["RPUSH", "l", "x"], ":1\r\n", ":1\r\n"),
            (&["LCS", "a", "l", "GT"], not_strings, not_strings),
            (
                &["LCS", "l", "nosuch", "MINMATCHLEN", "x"],
                not_strings,
                not_strings,
            ),
            (
                &["LCS", "a", "nosuch", "GT"],
                "-ERR syntax error\r\n",
                "-ERR syntax error\r\n",
            ),
            (
                &["LCS", "a", "a", "MINMATCHLEN", "x"],
                NOT_INTEGER,
                NOT_INTEGER,
            ),
            (&["LCS", "a", "a", "LEN"], ":8\r\n", ":8\r\n"),
        ],
    );
}

/// XINFO STREAM looks its key up before it reads its options, and a negative FULL
/// COUNT is the default of 10 entries (0 is every entry).
#[test]
fn xinfo_stream_key_first_and_negative_count_is_ten() {
    let s = TestServer::start();
    let syntax =
        "-ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.\r\n";
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    check_both(
        &s,
        &[
            (&["SET", "s", "v"], "+OK\r\n", "+OK\r\n"),
            (
                &["XINFO", "STREAM", "nosuch", "junk"],
                "-ERR no such key\r\n",
                "-ERR no such key\r\n",
            ),
            (
                &["XINFO", "STREAM", "s", "FULL", "COUNT"],
                wrongtype,
                wrongtype,
            ),
            (
                &["XADD", "x", "1-1", "a", "1"],
                "$3\r\n1-1\r\n",
                "$3\r\n1-1\r\n",
            ),
            (&["XINFO", "STREAM", "x", "junk"], syntax, syntax),
            (&["XINFO", "STREAM", "x", "FULL", "COUNT"], syntax, syntax),
        ],
    );
    let mut c = s.raw(2);
    for i in 2..=12 {
        c.cmd(&["XADD", "x", &format!("{i}-1"), "a", &i.to_string()]);
    }
    let entries = |reply: String| reply.matches("$1\r\na\r\n").count();
    assert_eq!(
        entries(c.cmd(&["XINFO", "STREAM", "x", "FULL", "COUNT", "-1"])),
        10
    );
    assert_eq!(
        entries(c.cmd(&["XINFO", "STREAM", "x", "FULL", "COUNT", "0"])),
        12
    );
    assert_eq!(
        entries(c.cmd(&["XINFO", "STREAM", "x", "FULL", "COUNT", "3"])),
        3
    );
}

/// ZINCRBY is Redis's ZADD with INCR, whose options it parses too: an option word
/// where the increment goes is a syntax error, not a bad float.
#[test]
fn zincrby_takes_an_option_word_as_zadd_does() {
    let s = TestServer::start();
    let syntax = "-ERR syntax error\r\n";
    let not_float = "-ERR value is not a valid float\r\n";
    check_both(
        &s,
        &[
            (&["ZINCRBY", "z", "XX", "m"], syntax, syntax),
            (&["ZINCRBY", "z", "nx", "m"], syntax, syntax),
            (&["ZINCRBY", "z", "Incr", "m"], syntax, syntax),
            (&["ZINCRBY", "z", "abc", "m"], not_float, not_float),
            (&["ZINCRBY", "z", "2", "m"], "$1\r\n2\r\n", ",2\r\n"),
        ],
    );
}

/// CLIENT PAUSE judges its mode before its timeout, and a timeout whose deadline
/// would not fit is out of range (getTimeoutFromObjectOrReply, shared with WAIT,
/// WAITAOF and XREAD BLOCK); COMMAND INFO of an unknown name is a null bulk; CLIENT
/// UNBLOCK judges its reason before its ID.
#[test]
fn client_pause_and_command_info_errors() {
    let s = TestServer::start();
    let mode = "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n";
    let out_of_range = "-ERR timeout is out of range\r\n";
    check_both(
        &s,
        &[
            (&["CLIENT", "PAUSE", "10", "maybe"], mode, mode),
            (&["CLIENT", "PAUSE", "abc", "maybe"], mode, mode),
            (
                &["CLIENT", "PAUSE", "10", "all", "x"],
                "-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n",
                "-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n",
            ),
            (
                &["CLIENT", "PAUSE", "-1"],
                "-ERR timeout is negative\r\n",
                "-ERR timeout is negative\r\n",
            ),
            (
                &["CLIENT", "PAUSE", "1.5"],
                "-ERR timeout is not an integer or out of range\r\n",
                "-ERR timeout is not an integer or out of range\r\n",
            ),
            (&["CLIENT", "PAUSE", "9223372036854775807"], out_of_range, out_of_range),
            (&["WAIT", "0", "9223372036854775807"], out_of_range, out_of_range),
            (
                &["XREAD", "BLOCK", "9223372036854775807", "STREAMS", "x", "$"],
                out_of_range,
                out_of_range,
            ),
            (&["COMMAND", "INFO", "nosuch"], "*1\r\n$-1\r\n", "*1\r\n_\r\n"),
            // CLIENT UNBLOCK: its reason before its ID, at most one reason.
            (
                &["CLIENT", "UNBLOCK", "abc", "maybe"],
                "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
                "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
            ),
            (
                &["CLIENT", "UNBLOCK", "1", "TIMEOUT", "x"],
                "-ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.\r\n",
                "-ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.\r\n",
            ),
            (
                &["CLIENT", "UNBLOCK", "abc", "error"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (&["CLIENT", "UNBLOCK", "999999"], ":0\r\n", ":0\r\n"),
            (&["PING"], "+PONG\r\n", "+PONG\r\n"),
        ],
    );
}

/// ZSCAN, like SSCAN and HSCAN, looks its key up before it reads its options: a
/// missing key is the empty scan and a wrong type WRONGTYPE, whatever follows.
#[test]
fn zscan_looks_its_key_up_before_its_options() {
    let s = TestServer::start();
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let empty = "*2\r\n$1\r\n0\r\n*0\r\n";
    let syntax = "-ERR syntax error\r\n";
    check_both(
        &s,
        &[
            (&["SET", "str", "x"], "+OK\r\n", "+OK\r\n"),
            (&["ZADD", "z", "1", "a"], ":1\r\n", ":1\r\n"),
            (&["ZSCAN", "str", "0", "COUNT", "0"], wrongtype, wrongtype),
            (&["ZSCAN", "nosuch", "0", "COUNT", "0"], empty, empty),
            (&["SSCAN", "nosuch", "0", "junk"], empty, empty),
            (&["HSCAN", "str", "0", "junk"], wrongtype, wrongtype),
            (&["ZSCAN", "z", "0", "COUNT", "0"], syntax, syntax),
            (&["ZSCAN", "z", "0", "NOVALUES"], syntax, syntax),
            (
                &["ZSCAN", "z", "0", "COUNT", "x"],
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["ZSCAN", "z", "0", "MATCH", "a*"],
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
                "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
            ),
        ],
    );
}
