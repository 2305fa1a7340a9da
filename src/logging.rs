//! One global logger writing Java's layout (docs/operations.md#logs) to a size-rotated file and
//! stderr. A failed write drops the line; each failure streak is reported once.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    pub level: LevelFilter,
    /// `None` logs to stderr only.
    pub file: Option<PathBuf>,
    /// 0 never rotates.
    pub max_size: u64,
    /// Rotated files kept (`namesrv.log.1` … `namesrv.log.N`).
    pub max_files: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Console {
    /// systemd with a log file: the file is the one destination.
    Off,
    Plain,
    /// `<N>LEVEL thread - message`: the journal adds the time and reads the priority.
    Journal,
}

/// True when systemd's `JOURNAL_STREAM` (`<device>:<inode>`) names stderr.
fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(value) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((device, inode)) = value.split_once(':') else {
        return false;
    };
    let (Ok(device), Ok(inode)) = (device.parse::<u64>(), inode.parse::<u64>()) else {
        return false;
    };
    fs::metadata("/proc/self/fd/2").map_or(true, |m| m.dev() == device && m.ino() == inode)
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Installs the global logger once; if the file cannot be opened nothing is installed.
pub fn init(settings: &LogSettings) -> io::Result<()> {
    if LOGGER.get().is_some() {
        return Ok(());
    }
    let (max_size, max_files) = (settings.max_size, settings.max_files);
    let file = (settings.file.as_deref())
        .map(|path| RotatingFile::open(path, max_size, max_files))
        .transpose()?;
    let console = match (stderr_is_journal(), file.is_some()) {
        (true, true) => Console::Off,
        (true, false) => Console::Journal,
        (false, _) => Console::Plain,
    };
    let file = Mutex::new(file);
    if LOGGER.set(Logger { console, file }).is_ok() {
        if let Some(logger) = LOGGER.get() {
            log::set_logger(logger)
                .map_err(|e| io::Error::other(format!("another logger is installed: {e}")))?;
            log::set_max_level(settings.level);
        }
    }
    Ok(())
}

/// Reopens the log file at its path (SIGHUP: after it was moved away, by logrotate or by
/// hand, lines go to a new file there). Without a log file there is nothing to do.
pub fn reopen_file() -> io::Result<()> {
    let Some(logger) = LOGGER.get() else {
        return Ok(());
    };
    let mut file = logger.file.lock().unwrap_or_else(|p| p.into_inner());
    match file.as_mut() {
        Some(file) => file.reopen(),
        None => Ok(()),
    }
}

/// Whether log lines reach stderr (not before [`init`], nor under systemd with a log file).
pub fn console_enabled() -> bool {
    LOGGER.get().is_some_and(|l| l.console != Console::Off)
}

struct Logger {
    console: Console,
    file: Mutex<Option<RotatingFile>>,
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("-");
        let body = format!("{} {thread} - {}\n", record.level(), record.args());
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let line = match file.is_some() || self.console == Console::Plain {
            true => timestamp(SystemTime::now()) + " " + &body,
            false => String::new(),
        };
        if let Some(file) = &mut *file {
            file.write_line(line.as_bytes());
        }
        let mut stderr = io::stderr().lock();
        let _ = match self.console {
            Console::Off => Ok(()),
            Console::Plain => stderr.write_all(line.as_bytes()),
            Console::Journal => write!(stderr, "<{}>{body}", syslog_priority(record.level())),
        };
    }

    fn flush(&self) {}
}

fn syslog_priority(level: Level) -> u8 {
    match level {
        Level::Error => 3,
        Level::Warn => 4,
        Level::Info => 6,
        Level::Debug | Level::Trace => 7,
    }
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in local time.
fn timestamp(now: SystemTime) -> String {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let t = local_time(since_epoch.as_secs() as i64);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02},{:03}",
        i64::from(t.tm_year) + 1900,
        t.tm_mon + 1,
        t.tm_mday,
        t.tm_hour,
        t.tm_min,
        t.tm_sec,
        since_epoch.subsec_millis()
    )
}

/// The local calendar time of a Unix second (`localtime_r`; UTC if that fails).
fn local_time(secs: i64) -> libc::tm {
    static TZSET: std::sync::Once = std::sync::Once::new();
    // SAFETY: `struct tm` holds integers and maybe a raw pointer, for which zero is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // POSIX asks for tzset() before localtime_r; `libc` does not declare tzset, but mktime
    // is specified to set the time zone as tzset does (its result is not needed).
    // SAFETY: mktime reads and normalises the valid, exclusively borrowed `struct tm`.
    TZSET.call_once(|| unsafe {
        let mut zero = tm;
        libc::mktime(&mut zero);
    });
    let time = libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX);
    // SAFETY: both pointers are valid for the calls; localtime_r and gmtime_r are reentrant
    // (they write only into `tm`) and return null on failure.
    unsafe {
        if libc::localtime_r(&time, &mut tm).is_null() {
            libc::gmtime_r(&time, &mut tm);
        }
    }
    tm
}

/// A log file that rotates by size, only between whole lines, and never fails a write.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_size: u64,
    max_files: u32,
    /// `None` after the file could not be reopened; each line then retries the open.
    file: Option<File>,
    size: u64,
    /// A failure has been reported and no write has succeeded since.
    failure_reported: bool,
}

impl RotatingFile {
    /// Appends to `path`, creating it and its parent directories.
    pub fn open(path: &Path, max_size: u64, max_files: u32) -> io::Result<Self> {
        let mut log = RotatingFile {
            path: path.to_path_buf(),
            max_size,
            max_files,
            file: None,
            size: 0,
            failure_reported: false,
        };
        log.reopen()?;
        Ok(log)
    }

    /// Opens (again) `path` for appending; a file moved away is left to whoever moved it.
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file = None;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    /// Rotates first if the line would push a non-empty file past `max_size`.
    pub fn write_line(&mut self, line: &[u8]) {
        let line_len = line.len() as u64;
        if self.max_size > 0 && self.size > 0 && self.size.saturating_add(line_len) > self.max_size
        {
            self.rotate();
        }
        if self.file.is_none() {
            if let Err(e) = self.reopen() {
                return self.report_failure("open", &e, "dropping log lines");
            }
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        match file.write_all(line) {
            Ok(()) => {
                self.size = self.size.saturating_add(line_len);
                if self.failure_reported {
                    self.failure_reported = false;
                    eprintln!("rmq-namesrv: writing {} again", self.path.display());
                }
            }
            Err(e) => {
                // Part of the line may have landed; re-read the length so rotation stays honest.
                if let Ok(meta) = file.metadata() {
                    self.size = meta.len();
                }
                self.report_failure("write", &e, "dropping log lines");
            }
        }
    }

    /// Shifts `path.i` to `path.i+1` (dropping `path.max_files`) and starts a new file.
    fn rotate(&mut self) {
        if let Err(e) = self.shift_old_files() {
            return self.report_failure("rotate", &e, "continuing in the current file");
        }
        // On failure the file stays closed: the old handle now points at `path.1`, and writing
        // on into it would be undone by the next shift, so lines are dropped until an open works.
        if let Err(e) = self.reopen() {
            self.report_failure("reopen", &e, "dropping log lines");
        }
    }

    fn shift_old_files(&self) -> io::Result<()> {
        let absent_is_fine = |result: io::Result<()>| match result {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        let name = |n: u32| match n {
            0 => self.path.clone(),
            n => numbered(&self.path, n),
        };
        absent_is_fine(fs::remove_file(name(self.max_files)))?;
        for n in (0..self.max_files).rev() {
            absent_is_fine(fs::rename(name(n), name(n + 1)))?;
        }
        Ok(())
    }

    /// `cannot {what} <path>: {e}; {then}`, once per failure streak.
    fn report_failure(&mut self, what: &str, e: &io::Error, then: &str) {
        if !self.failure_reported {
            self.failure_reported = true;
            let path = self.path.display();
            eprintln!("rmq-namesrv: log file: cannot {what} {path}: {e}; {then}");
        }
    }
}

/// `namesrv.log` -> `namesrv.log.<n>`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    crate::durable_file::sibling(path, &format!(".{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;

    fn put(log: &mut RotatingFile, line: &str) {
        log.write_line(format!("{line}\n").as_bytes());
    }

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }

    /// Whatever the machine's time zone, local time is UTC moved by less than a day, with the
    /// same seconds (no zone offset has seconds since 1972), and is UTC itself under TZ=UTC.
    #[test]
    fn local_time_is_utc_shifted_by_the_zone() {
        for secs in [86_400 * 365 * 3, 951_782_400, 1_796_065_803] {
            let mut local = local_time(secs);
            // SAFETY: a valid, exclusively borrowed `struct tm`.
            let as_if_utc = unsafe { libc::timegm(&mut local) };
            assert_eq!(i64::from(local.tm_sec), secs % 60, "{secs}");
            assert!((as_if_utc - secs).abs() < 86_400, "{secs}");
            if std::env::var("TZ").is_ok_and(|tz| tz == "UTC" || tz == "UTC0") {
                assert_eq!(as_if_utc, secs);
            }
        }
    }

    #[test]
    fn timestamps_have_java_s_layout_with_milliseconds() {
        let at = UNIX_EPOCH + std::time::Duration::from_millis(1_796_065_803_123);
        let stamp = timestamp(at);
        let bytes = stamp.as_bytes();
        assert_eq!(stamp.len(), 23, "{stamp}");
        assert_eq!(
            (bytes[4], bytes[7], bytes[10], bytes[13], bytes[16], bytes[19]),
            (b'-', b'-', b' ', b':', b':', b','),
            "{stamp}"
        );
        assert!(stamp.ends_with(":03,123"), "{stamp}");
        let later = at + std::time::Duration::from_millis(5);
        assert_eq!(timestamp(later), format!("{},128", &stamp[..19]));
        // Local time is UTC moved by whole minutes (every zone's offset is).
        let local: u32 = stamp[14..16].parse().unwrap();
        assert!(local < 60);
    }

    #[test]
    fn rotation_keeps_at_most_max_files_and_newest_lines_stay_live() {
        let dir = TempDir::new("keep");
        let path = dir.join("nested/logs/namesrv.log");
        let mut log = RotatingFile::open(&path, 100, 3).expect("open");
        for i in 0..200 {
            put(&mut log, &format!("line {i:04} padding padding"));
        }
        drop(log);

        assert!(read(&path).ends_with("line 0199 padding padding\n"));
        for n in 1..=3 {
            let old = numbered(&path, n);
            assert!(old.exists(), "{} should exist", old.display());
            assert!(fs::metadata(&old).map(|m| m.len()).unwrap_or(0) <= 100);
        }
        assert!(!numbered(&path, 4).exists());
        let entries = fs::read_dir(path.parent().expect("parent"))
            .expect("read dir")
            .count();
        assert_eq!(entries, 4, "live file plus three rotated ones");
        // Older files hold older lines: .1 ends right before the live file begins.
        let live_first = read(&path).lines().next().unwrap_or_default().to_string();
        let previous_last = read(&numbered(&path, 1))
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        assert!(
            previous_last < live_first,
            "{previous_last:?} vs {live_first:?}"
        );
    }

    #[test]
    fn lines_are_never_split_across_files_and_read_back_in_order() {
        let dir = TempDir::new("pieces");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 200, 50).expect("open");
        for i in 0..120 {
            put(
                &mut log,
                &format!("2024-01-01T00:00:00.000Z INFO  rmq_namesrv: message {i}"),
            );
        }
        drop(log);

        assert!(
            numbered(&path, 2).exists(),
            "the lines should span several files"
        );
        let mut seen = Vec::new();
        for n in (1..=50).rev() {
            let old = numbered(&path, n);
            if old.exists() {
                let text = read(&old);
                assert!(text.ends_with('\n'), "{} ends mid-line", old.display());
                assert!(text.len() <= 200, "{} is over max_size", old.display());
                seen.extend(text.lines().map(str::to_string));
            }
        }
        seen.extend(read(&path).lines().map(str::to_string));
        let expected: Vec<String> = (0..120)
            .map(|i| format!("2024-01-01T00:00:00.000Z INFO  rmq_namesrv: message {i}"))
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_line_longer_than_max_size_gets_a_file_of_its_own() {
        let dir = TempDir::new("long");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 10, 2).expect("open");
        put(&mut log, "short");
        put(&mut log, "a line far longer than ten bytes");
        put(&mut log, "tail");
        drop(log);
        assert_eq!(read(&numbered(&path, 2)), "short\n");
        assert_eq!(
            read(&numbered(&path, 1)),
            "a line far longer than ten bytes\n"
        );
        assert_eq!(read(&path), "tail\n");
    }

    #[test]
    fn reopening_appends_and_counts_the_existing_size() {
        let dir = TempDir::new("reopen");
        let path = dir.join("namesrv.log");
        fs::write(&path, "0123456789\n").expect("seed");
        let mut log = RotatingFile::open(&path, 15, 1).expect("open");
        put(&mut log, "abcdefgh");
        drop(log);
        assert_eq!(read(&numbered(&path, 1)), "0123456789\n");
        assert_eq!(read(&path), "abcdefgh\n");
    }

    #[test]
    fn max_files_zero_starts_over_without_keeping_old_files() {
        let dir = TempDir::new("zero");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 8, 0).expect("open");
        put(&mut log, "first");
        put(&mut log, "second");
        drop(log);
        assert_eq!(read(&path), "second\n");
        assert!(!numbered(&path, 1).exists());
    }

    #[test]
    fn reopening_after_a_move_writes_a_new_file_at_the_path() {
        let dir = TempDir::new("moved");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 0, 1).expect("open");
        put(&mut log, "before");
        fs::rename(&path, dir.join("moved.log")).expect("move");
        log.reopen().expect("reopen");
        put(&mut log, "after");
        assert_eq!(read(&dir.join("moved.log")), "before\n");
        assert_eq!(read(&path), "after\n");
    }

    #[test]
    fn a_failed_rotation_keeps_writing_to_the_current_file() {
        let dir = TempDir::new("blocked");
        let path = dir.join("namesrv.log");
        // A directory where namesrv.log.1 should go makes the rename fail.
        fs::create_dir_all(numbered(&path, 1).join("occupied")).expect("blocker");
        let mut log = RotatingFile::open(&path, 8, 1).expect("open");
        put(&mut log, "first");
        put(&mut log, "second");
        drop(log);
        assert_eq!(read(&path), "first\nsecond\n");
    }
}
