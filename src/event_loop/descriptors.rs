//! The process's open-file limit (`RLIMIT_NOFILE`): every connection is a descriptor, so the
//! application reads this limit at start to keep its connection cap below it, and may raise
//! the soft limit up to the hard one (as the JVM does by default) when its cap needs more;
//! and the kernel's descriptor table, grown once at start rather than under load.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The most descriptors [`presize_descriptor_table`] makes room for: 128 KiB of kernel memory;
/// past it the table grows by doubling again (twice more up to 65,536).
pub const PRESIZED_DESCRIPTORS_MAX: u64 = 16_384;

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

/// Makes the kernel's descriptor table hold `count` descriptors now. Linux grows it by
/// doubling as descriptors are opened, and in a process with threads each growth waits for an
/// RCU grace period (`expand_files` -> `synchronize_rcu`): with 10,000 brokers connecting,
/// the loop froze for 13-20 ms at each of 128, 256, ... 16,384 open descriptors (seen with
/// `perf sched timehist`). The table never shrinks. `count` must not exceed the soft limit.
pub fn presize_descriptor_table(count: u64) -> io::Result<()> {
    let file = File::open("/dev/null")?;
    let lowest = libc::c_int::try_from(count.saturating_sub(1)).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_DUPFD duplicates a descriptor this function owns onto the lowest free number
    // at or above `lowest`: it never touches a descriptor in use, and the copy is closed here.
    let copy = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, lowest) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` was just created above and is owned by nothing else.
    unsafe { libc::close(copy) };
    Ok(())
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

    /// `FDSize` in /proc/self/status: the slots of the process's descriptor table.
    fn table_size() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn presizing_grows_the_table_at_once_and_closes_nothing() {
        let Some(limit) = descriptor_limit() else {
            return;
        };
        let wanted = limit.soft.min(4096);
        let kept = File::open("/dev/null").unwrap();
        presize_descriptor_table(wanted).unwrap();
        assert!(table_size() >= wanted, "table {} < {wanted}", table_size());
        // SAFETY: F_GETFD only reads the flags of a descriptor this test owns.
        assert!(unsafe { libc::fcntl(kept.as_raw_fd(), libc::F_GETFD) } >= 0);
        let past_limit = presize_descriptor_table(limit.soft + 1);
        assert!(past_limit.is_err() || limit.soft >= libc::c_int::MAX as u64);
    }
}
