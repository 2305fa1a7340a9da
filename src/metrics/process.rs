//! The process's own figures, as Prometheus's client libraries name them, read from
//! `/proc/self` at each scrape (Linux; elsewhere they are left out), but for the open
//! descriptors, counted off the loop ([`FdCounter`]).

use super::{Exposition, Kind};
use crossbeam_channel::{bounded, RecvTimeoutError, Sender};
use std::fs;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

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

/// RSS, CPU time, open ([`FdCounter`]) and allowed descriptors, and `start_time` (read once
/// at start).
pub fn write(
    e: &mut Exposition<'_>,
    start_time: Option<f64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
) {
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
    if let Some(open) = open_fds {
        e.single(
            "process_open_fds",
            Kind::Gauge,
            "Open file descriptors (counted every 5 s off the event loop).",
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

/// How often [`FdCounter`] counts.
const FD_COUNT_EVERY: Duration = Duration::from_secs(5);

/// Open descriptors, counted on a thread of its own: listing `/proc/self/fd` costs about 1 us
/// per descriptor (16 ms for 15,000 on a 2 vCPU guest; re-measure with a `rustc -O` loop of
/// `read_dir("/proc/self/fd").count()`), far more than a request may hold the loop.
pub struct FdCounter {
    /// The last count plus one (0: none yet).
    open: Arc<AtomicU64>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FdCounter {
    pub fn spawn() -> io::Result<FdCounter> {
        let open = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = bounded::<()>(0);
        let counted = open.clone();
        let thread = thread::Builder::new()
            .name("fd-counter".into())
            .spawn(move || loop {
                // The directory's own descriptor is counted too, as the client libraries do.
                if let Ok(dir) = fs::read_dir("/proc/self/fd") {
                    counted.store(dir.count() as u64 + 1, Ordering::Relaxed);
                }
                if !matches!(
                    stopped.recv_timeout(FD_COUNT_EVERY),
                    Err(RecvTimeoutError::Timeout)
                ) {
                    return;
                }
            })?;
        Ok(FdCounter {
            open,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn open_fds(&self) -> Option<u64> {
        self.open.load(Ordering::Relaxed).checked_sub(1)
    }
}

impl Drop for FdCounter {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
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
    fn open_descriptors_are_counted_on_a_thread_that_stops_with_the_counter() {
        let counter = FdCounter::spawn().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while counter.open_fds().is_none() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(counter.open_fds().is_some_and(|n| n >= 3));
        let began = std::time::Instant::now();
        drop(counter);
        assert!(began.elapsed() < FD_COUNT_EVERY, "the thread ended at once");
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
