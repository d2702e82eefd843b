//! CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR and CLIENT TRACKINGINFO (rows in
//! the CLIENT container of `connection.rs`). The tracking table and invalidation
//! messages live in `exec/tracking.rs`.

use crate::commands::{errors, is, Ctx};
use crate::exec::tracking::{check_prefix_collisions, TrackingOptions};
use crate::protocol::Reply;

pub fn client_tracking(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let mut opts = TrackingOptions::default();
    let mut j = 3;
    while j < args.len() {
        let more = args.len() - j - 1;
        let a = args[j];
        if is(a, "redirect") && more >= 1 {
            j += 1;
            if opts.redirect.is_some() {
                return Reply::err("ERR A client can only redirect to a single other client");
            }
            let Some(id) = crate::util::numeric::parse_i64(args[j]) else {
                return errors::NOT_INTEGER;
            };
            // Redirecting to yourself is allowed; to a missing client is not.
            match u64::try_from(id)
                .ok()
                .and_then(|id| ctx.ex.slot_of_client_id(id).map(|slot| (id, slot)))
            {
                Some(target) => opts.redirect = Some(target),
                None => return Reply::err("ERR The client ID you want redirect to does not exist"),
            }
        } else if is(a, "bcast") {
            opts.bcast = true;
        } else if is(a, "optin") {
            opts.optin = true;
        } else if is(a, "optout") {
            opts.optout = true;
        } else if is(a, "noloop") {
            opts.noloop = true;
        } else if is(a, "prefix") && more >= 1 {
            j += 1;
            opts.prefixes.push(args[j].to_vec());
        } else {
            return errors::SYNTAX;
        }
        j += 1;
    }
    if is(args[2], "off") {
        ctx.ex.tracking_disable(ctx.client);
        return Reply::ok();
    }
    if !is(args[2], "on") {
        return errors::SYNTAX;
    }
    let current = ctx.client_ref().tracking.clone();
    if !opts.bcast && !opts.prefixes.is_empty() {
        return Reply::err("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if current.on && current.bcast != opts.bcast {
        return Reply::err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return Reply::err("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if opts.optin && opts.optout {
        return Reply::err("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if (opts.optin && current.optout) || (opts.optout && current.optin) {
        return Reply::err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if opts.bcast {
        if let Err(e) = check_prefix_collisions(&current.prefixes, &opts.prefixes) {
            return e;
        }
    }
    ctx.ex.tracking_enable(ctx.client, opts);
    Reply::ok()
}

pub fn client_caching(ctx: &mut Ctx, args: &[&[u8]]) -> Reply {
    let t = &mut ctx.client().tracking;
    if !t.on {
        return Reply::err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    if is(args[2], "yes") {
        if !t.optin {
            return Reply::err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(args[2], "no") {
        if !t.optout {
            return Reply::err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return errors::SYNTAX;
    }
    t.caching = true;
    Reply::ok()
}

pub fn client_getredir(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    Reply::Int(ctx.client_ref().tracking.redirect_id())
}

pub fn client_trackinginfo(ctx: &mut Ctx, _args: &[&[u8]]) -> Reply {
    let t = &ctx.client_ref().tracking;
    let mut flags = vec![if t.on { "on" } else { "off" }];
    if t.bcast {
        flags.push("bcast");
    }
    if t.optin {
        flags.push("optin");
        if t.caching {
            flags.push("caching-yes");
        }
    }
    if t.optout {
        flags.push("optout");
        if t.caching {
            flags.push("caching-no");
        }
    }
    if t.noloop {
        flags.push("noloop");
    }
    if t.broken_redirect {
        flags.push("broken_redirect");
    }
    Reply::Map(vec![
        (
            Reply::bulk(b"flags"),
            Reply::Set(flags.iter().map(|f| Reply::bulk(f.as_bytes())).collect()),
        ),
        (Reply::bulk(b"redirect"), Reply::Int(t.redirect_id())),
        (
            Reply::bulk(b"prefixes"),
            Reply::Array(t.prefixes.iter().map(|p| Reply::bulk(p)).collect()),
        ),
    ])
}
