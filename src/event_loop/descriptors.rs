//! The process's open-file limit (`RLIMIT_NOFILE`): every connection is a descriptor, so the
//! application reads this limit at start to keep its connection cap below it, and may raise
//! the soft limit up to the hard one (as the JVM does by default) when its cap needs more.

use std::io;

/// The soft limit (what `open`/`accept` hit) and the hard one (how far the soft one may rise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorLimit {
    pub soft: u64,
    pub hard: u64,
}

pub fn descriptor_limit() -> Option<DescriptorLimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `struct rlimit` into the valid, exclusively borrowed `r`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    // `rlim_t` is 32 bits on some targets: the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    (rc == 0).then_some(DescriptorLimit {
        soft: r.rlim_cur as u64,
        hard: r.rlim_max as u64,
    })
}

/// Sets both limits (lowering is always allowed; raising the hard one needs privileges).
/// Async-signal-safe: may be called in a child between fork and exec.
pub fn set_descriptor_limit(limit: DescriptorLimit) -> io::Result<()> {
    let clamp = |v: u64| libc::rlim_t::try_from(v).unwrap_or(libc::RLIM_INFINITY);
    let r = libc::rlimit {
        rlim_cur: clamp(limit.soft),
        rlim_max: clamp(limit.hard),
    };
    // SAFETY: setrlimit only reads the `struct rlimit` behind the valid pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Raises the soft limit to `wanted` descriptors, or as near as the hard limit allows, when it
/// is below; returns the limit now in force.
pub fn raise_descriptor_limit(wanted: u64) -> Option<DescriptorLimit> {
    let current = descriptor_limit()?;
    if current.soft >= wanted {
        return Some(current);
    }
    let raised = DescriptorLimit {
        soft: wanted.min(current.hard),
        hard: current.hard,
    };
    match set_descriptor_limit(raised) {
        Ok(()) => Some(raised),
        Err(_) => Some(current),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_reads_back_and_raising_to_it_changes_nothing() {
        let Some(now) = descriptor_limit() else {
            return;
        };
        assert!(now.soft <= now.hard);
        assert_eq!(raise_descriptor_limit(now.soft), Some(now));
        assert_eq!(descriptor_limit(), Some(now));
    }
}
