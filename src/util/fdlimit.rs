//! The open-files limit against `maxclients`, as Redis's `adjustOpenFilesLimit`: the
//! process needs one descriptor per client plus a reserve (listeners, AOF and RDB
//! files, the replication link, logs). If `ulimit -n` is too low and cannot be raised,
//! `maxclients` is lowered to fit, so clients past it get "max number of clients
//! reached" instead of being accepted and left unserved.

/// Descriptors kept for everything that is not a client (Redis's CONFIG_MIN_RESERVED_FDS).
pub const RESERVED_FDS: u64 = 32;

fn get_nofile() -> std::io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lim)
}

fn set_nofile(n: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the open-files limit for `maxclients` if needed and possible, and returns
/// the `maxclients` the limit allows (lower than asked when it could not be raised
/// enough). `Err` carries Redis's message for a limit too low to start at all.
pub fn adjust(maxclients: usize) -> Result<usize, String> {
    let wanted = maxclients as u64 + RESERVED_FDS;
    let old = match get_nofile() {
        Ok(l) => l.rlim_cur,
        Err(e) => {
            crate::log::warning(&format!(
                "Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly."
            ));
            return Ok((1024 - RESERVED_FDS) as usize);
        }
    };
    if old >= wanted {
        return Ok(maxclients);
    }
    // The highest limit the system grants, trying downwards in steps of 16.
    let mut best = wanted;
    let mut error = None;
    while best > old {
        match set_nofile(best) {
            Ok(()) => break,
            Err(e) => error = Some(e),
        }
        if best < 16 {
            best = old;
            break;
        }
        best -= 16;
    }
    best = best.max(old);
    if best >= wanted {
        crate::log::notice(&format!(
            "Increased maximum number of open files to {wanted} (it was originally set to {old})."
        ));
        return Ok(maxclients);
    }
    if best <= RESERVED_FDS {
        return Err(format!(
            "Your current 'ulimit -n' of {old} is not enough for the server to start. Please increase your open file limit to at least {wanted}. Exiting."
        ));
    }
    let lowered = (best - RESERVED_FDS) as usize;
    let why = error
        .map(|e| crate::config::strerror(&e))
        .unwrap_or_default();
    crate::log::warning(&format!(
        "You requested maxclients of {maxclients} requiring at least {wanted} max file descriptors."
    ));
    crate::log::warning(&format!(
        "Server can't set maximum open files to {wanted} because of OS error: {why}."
    ));
    crate::log::warning(&format!(
        "Current maximum open files is {best}. maxclients has been reduced to {lowered} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
    ));
    Ok(lowered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_already_high_enough_changes_nothing() {
        let cur = get_nofile().unwrap().rlim_cur;
        let fits = cur.saturating_sub(RESERVED_FDS).max(1) as usize;
        assert_eq!(adjust(fits), Ok(fits));
        assert_eq!(get_nofile().unwrap().rlim_cur, cur);
    }
}
