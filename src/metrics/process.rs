//! The process's own figures, as Prometheus's client libraries name them, read from
//! `/proc/self` at each scrape (Linux; elsewhere they are left out).

use super::{Exposition, Kind};
use std::fs;

/// `/proc/self/stat` fields after the command name, from 0 at the state (proc(5)'s number - 3).
const UTIME: usize = 11;
const STIME: usize = 12;
const STARTTIME: usize = 19;
const RSS_PAGES: usize = 21;

fn sysconf(name: libc::c_int) -> Option<f64> {
    // SAFETY: sysconf only reads a system constant; it has no preconditions.
    let value = unsafe { libc::sysconf(name) };
    (value > 0).then_some(value as f64)
}

/// The fields of `/proc/self/stat` after `comm` (which may hold spaces and parentheses).
fn stat_fields(text: &str) -> Vec<f64> {
    let after = text.rfind(')').map_or("", |at| &text[at + 1..]);
    after
        .split_ascii_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect()
}

/// When the process started, in seconds since the epoch (boot time plus its start tick).
pub fn start_time_seconds() -> Option<f64> {
    let boot: f64 = fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let ticks = *stat_fields(&fs::read_to_string("/proc/self/stat").ok()?).get(STARTTIME)?;
    Some(boot + ticks / sysconf(libc::_SC_CLK_TCK)?)
}

/// RSS, CPU time, open and allowed descriptors, and `start_time` (read once at start).
pub fn write(e: &mut Exposition<'_>, start_time: Option<f64>, max_fds: Option<u64>) {
    let stat = fs::read_to_string("/proc/self/stat").map(|t| stat_fields(&t));
    if let (Ok(f), Some(tick), Some(page)) = (
        stat,
        sysconf(libc::_SC_CLK_TCK),
        sysconf(libc::_SC_PAGESIZE),
    ) {
        let field = |i: usize| f.get(i).copied().unwrap_or(0.0);
        let cpu = (field(UTIME) + field(STIME)) / tick;
        e.single(
            "process_cpu_seconds_total",
            Kind::Counter,
            "User and system CPU time spent, in seconds.",
            cpu,
        );
        e.single(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident set size, in bytes.",
            field(RSS_PAGES) * page,
        );
    }
    // The directory's own descriptor is counted too, as the client libraries do.
    if let Ok(dir) = fs::read_dir("/proc/self/fd") {
        let open = dir.count();
        e.single(
            "process_open_fds",
            Kind::Gauge,
            "Open file descriptors (connections, listeners, files).",
            open,
        );
    }
    if let Some(max) = max_fds {
        e.single(
            "process_max_fds",
            Kind::Gauge,
            "The open-file limit (soft).",
            max,
        );
    }
    if let Some(start) = start_time {
        e.single(
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process, in seconds since the Unix epoch.",
            start,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let f =
            stat_fields("42 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22");
        assert_eq!(f[UTIME], 11.0);
        assert_eq!(f[STIME], 12.0);
        assert_eq!(f[STARTTIME], 19.0);
        assert_eq!(f[RSS_PAGES], 21.0);
    }

    #[test]
    fn this_process_has_a_start_time_in_the_past() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = start_time_seconds().unwrap();
        assert!(
            start > now - 86_400.0 * 365.0 && start <= now + 1.0,
            "{start}"
        );
    }
}
