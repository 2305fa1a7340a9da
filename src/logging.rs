//! Logging: one global `log` logger, written by simplelog to stderr and, optionally, to a
//! size-rotated file.
//!
//! Console output goes to stderr so that stdout carries only what scripts read (the
//! "listening on" line and `-p` output). simplelog has no rotation, so this module owns a
//! small [`RotatingFile`] writer: `namesrv.log` is renamed to `namesrv.log.1` (and `.1` to
//! `.2`, …, the oldest dropped) before a line would push it past `max_size`.
//!
//! simplelog hands a record over in several `write` calls (time, level, target, message), so
//! the writer collects bytes up to each `\n` and rotates only between whole lines: a line is
//! never split across files. Logging must never take the server down: a failed rotation keeps
//! writing to the current file, a failed write drops the line, and each failure streak is
//! reported once on stderr.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use log::LevelFilter;
use simplelog::{CombinedLogger, ConfigBuilder, SharedLogger, WriteLogger};

/// What [`init`] installs: the level, the optional log file and its rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    pub level: LevelFilter,
    /// `None` logs to stderr only.
    pub file: Option<PathBuf>,
    /// Bytes a file may hold before it is rotated; 0 never rotates.
    pub max_size: u64,
    /// Rotated files kept (`namesrv.log.1` … `namesrv.log.N`); 0 keeps none.
    pub max_files: u32,
}

/// `error|warn|info|debug|trace|off`, ignoring case and surrounding blanks.
pub fn parse_level(s: &str) -> Option<LevelFilter> {
    match s.trim().to_ascii_lowercase().as_str() {
        "error" => Some(LevelFilter::Error),
        "warn" => Some(LevelFilter::Warn),
        "info" => Some(LevelFilter::Info),
        "debug" => Some(LevelFilter::Debug),
        "trace" => Some(LevelFilter::Trace),
        "off" => Some(LevelFilter::Off),
        _ => None,
    }
}

/// Set once the global logger is ours; a second `init` is then a no-op.
static INSTALLED: Mutex<bool> = Mutex::new(false);

/// Installs the global logger: stderr always, plus `settings.file` when given (its parent
/// directories are created). Calling it again after a success does nothing and returns Ok.
/// If the file cannot be opened nothing is installed and the error is returned, so the caller
/// can retry with `file: None`.
pub fn init(settings: &LogSettings) -> io::Result<()> {
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *installed {
        return Ok(());
    }
    let line_format = ConfigBuilder::new()
        .set_time_level(LevelFilter::Error)
        .set_level_padding(simplelog::LevelPadding::Right)
        .set_target_level(LevelFilter::Error)
        .set_thread_level(LevelFilter::Off)
        .set_location_level(LevelFilter::Off)
        // RFC 3339 keeps the date in every line; without simplelog's local-offset feature
        // the time is UTC, and the trailing Z says so.
        .set_time_format_rfc3339()
        .build();
    let mut sinks: Vec<Box<dyn SharedLogger>> = vec![WriteLogger::new(
        settings.level,
        line_format.clone(),
        io::stderr(),
    )];
    if let Some(path) = &settings.file {
        let file = RotatingFile::open(path, settings.max_size, settings.max_files)?;
        sinks.push(WriteLogger::new(settings.level, line_format, file));
    }
    CombinedLogger::init(sinks).map_err(|e| {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("another logger is already installed: {e}"),
        )
    })?;
    *installed = true;
    Ok(())
}

/// A log file that rotates by size, only at line boundaries, and never fails a write.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_size: u64,
    max_files: u32,
    /// `None` after the file could not be reopened; each line then retries the open.
    file: Option<File>,
    /// Bytes in the live file, counted from its length at open.
    size: u64,
    /// Bytes of the line being assembled (everything after the last `\n` seen).
    partial_line: Vec<u8>,
    /// A failure has been reported and no write has succeeded since.
    failure_reported: bool,
}

impl RotatingFile {
    /// Opens (appending) or creates `path`, creating its parent directories.
    pub fn open(path: &Path, max_size: u64, max_files: u32) -> io::Result<Self> {
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max_size,
            max_files,
            file: Some(file),
            size,
            partial_line: Vec::new(),
            failure_reported: false,
        })
    }

    /// Writes one whole line (or a final unterminated fragment), rotating first if the
    /// line would push a non-empty file past `max_size`.
    fn write_line(&mut self, line: &[u8]) {
        let line_len = line.len() as u64;
        if self.max_size > 0 && self.size > 0 && self.size.saturating_add(line_len) > self.max_size
        {
            self.rotate();
        }
        if self.file.is_none() {
            match open_append(&self.path).and_then(|f| Ok((f.metadata()?.len(), f))) {
                Ok((size, file)) => {
                    self.size = size;
                    self.file = Some(file);
                }
                Err(e) => {
                    self.report_failure(&format!(
                        "cannot open {}: {e}; dropping log lines",
                        self.path.display()
                    ));
                    return;
                }
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
                self.report_failure(&format!(
                    "cannot write {}: {e}; dropping log lines",
                    self.path.display()
                ));
            }
        }
    }

    /// Shifts `path.i` to `path.i+1` (dropping `path.max_files`), moves the live file to
    /// `path.1` and starts a new one. On failure the current file is kept.
    fn rotate(&mut self) {
        if let Err(e) = self.shift_old_files() {
            self.report_failure(&format!(
                "cannot rotate {}: {e}; continuing in the current file",
                self.path.display()
            ));
            return;
        }
        match open_append(&self.path).and_then(|f| Ok((f.metadata()?.len(), f))) {
            Ok((size, file)) => {
                self.size = size;
                self.file = Some(file);
            }
            Err(e) => {
                // The old handle now points at `path.1`; writing on into it would be undone
                // by the next shift, so drop lines until the open succeeds.
                self.file = None;
                self.report_failure(&format!(
                    "cannot reopen {}: {e}; dropping log lines",
                    self.path.display()
                ));
            }
        }
    }

    fn shift_old_files(&self) -> io::Result<()> {
        if self.max_files == 0 {
            return remove_if_present(&self.path);
        }
        remove_if_present(&numbered(&self.path, self.max_files))?;
        for n in (1..self.max_files).rev() {
            rename_if_present(&numbered(&self.path, n), &numbered(&self.path, n + 1))?;
        }
        fs::rename(&self.path, numbered(&self.path, 1))
    }

    fn report_failure(&mut self, message: &str) {
        if !self.failure_reported {
            self.failure_reported = true;
            eprintln!("rmq-namesrv: log file: {message}");
        }
    }
}

impl Write for RotatingFile {
    /// Always accepts every byte: failures are handled (and reported) inside, because the
    /// logger has no one to hand them to.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(end + 1);
            if self.partial_line.is_empty() {
                self.write_line(line);
            } else {
                let mut whole = std::mem::take(&mut self.partial_line);
                whole.extend_from_slice(line);
                self.write_line(&whole);
                // Keep the allocation for the next line.
                whole.clear();
                self.partial_line = whole;
            }
            rest = tail;
        }
        self.partial_line.extend_from_slice(rest);
        Ok(buf.len())
    }

    /// Complete lines are already in the file (unbuffered); a partial line stays held so it
    /// cannot be split by a later rotation.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for RotatingFile {
    fn drop(&mut self) {
        if !self.partial_line.is_empty() {
            let fragment = std::mem::take(&mut self.partial_line);
            self.write_line(&fragment);
        }
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

/// `namesrv.log` -> `namesrv.log.<n>`.
fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_present(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn parse_level_accepts_every_name_in_any_case() {
        assert_eq!(parse_level("error"), Some(LevelFilter::Error));
        assert_eq!(parse_level("WARN"), Some(LevelFilter::Warn));
        assert_eq!(parse_level(" Info "), Some(LevelFilter::Info));
        assert_eq!(parse_level("debug"), Some(LevelFilter::Debug));
        assert_eq!(parse_level("TRACE"), Some(LevelFilter::Trace));
        assert_eq!(parse_level("Off"), Some(LevelFilter::Off));
        assert_eq!(parse_level("warning"), None);
        assert_eq!(parse_level(""), None);
    }

    #[test]
    fn rotation_keeps_at_most_max_files_and_newest_lines_stay_live() {
        let dir = TempDir::new("keep");
        let path = dir.join("nested/logs/namesrv.log");
        let mut log = RotatingFile::open(&path, 100, 3).expect("open");
        for i in 0..200 {
            writeln!(log, "line {i:04} padding padding").expect("write");
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
    fn a_line_written_in_pieces_is_never_split_across_files() {
        let dir = TempDir::new("pieces");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 200, 50).expect("open");
        for i in 0..120 {
            // Like simplelog: time, level, target and message arrive as separate writes.
            write!(log, "2024-01-01T00:00:00.000Z ").expect("write");
            write!(log, "INFO  ").expect("write");
            write!(log, "rmq_namesrv: ").expect("write");
            writeln!(log, "message {i}").expect("write");
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
        writeln!(log, "short").expect("write");
        writeln!(log, "a line far longer than ten bytes").expect("write");
        writeln!(log, "tail").expect("write");
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
        writeln!(log, "abcdefgh").expect("write");
        drop(log);
        assert_eq!(read(&numbered(&path, 1)), "0123456789\n");
        assert_eq!(read(&path), "abcdefgh\n");
    }

    #[test]
    fn max_files_zero_starts_over_without_keeping_old_files() {
        let dir = TempDir::new("zero");
        let path = dir.join("namesrv.log");
        let mut log = RotatingFile::open(&path, 8, 0).expect("open");
        writeln!(log, "first").expect("write");
        writeln!(log, "second").expect("write");
        drop(log);
        assert_eq!(read(&path), "second\n");
        assert!(!numbered(&path, 1).exists());
    }

    #[test]
    fn a_failed_rotation_keeps_writing_to_the_current_file() {
        let dir = TempDir::new("blocked");
        let path = dir.join("namesrv.log");
        // A directory where namesrv.log.1 should go makes the rename fail.
        fs::create_dir_all(numbered(&path, 1).join("occupied")).expect("blocker");
        let mut log = RotatingFile::open(&path, 8, 1).expect("open");
        writeln!(log, "first").expect("write");
        writeln!(log, "second").expect("write");
        drop(log);
        assert_eq!(read(&path), "first\nsecond\n");
    }
}
