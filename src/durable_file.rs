//! Crash-safe replacement of a small file: the only durable state this server keeps (the KV
//! config and the properties file) is written through here, on the writer thread beside the
//! loop, never on the loop itself.
//!
//! [`replace_file`] follows an order that survives a crash at any point: the current file is
//! kept as `<path>.bak` (a hard link, so the old content is not copied and costs no space; a
//! copy where links are not supported), the new content is written to `<path>.tmp` and fsynced,
//! renamed over `<path>`, and the directory is fsynced so the renames are durable too. A reader
//! therefore finds either the old or the new file, never a torn one, and `.bak` holds the
//! previous version. A failed write removes its temporary files.
//!
//! [`ReservedFile`] adds what keeps a file shrinkable on a full disk: a `<path>.reserve` file at
//! least as large as the file itself, grown before any write that grows the file (such a write
//! is refused when the reserve cannot grow). A write that fails for want of space releases the
//! reserve and tries once more; since the new content is smaller than the reserve was, a write
//! that shrinks the file (a delete) succeeds. The reserve holds pseudo-random bytes, so a
//! compressing filesystem cannot make it free.
//!
//! Tests simulate a full disk with [`simulate_disk_capacity`]: every write of this module then
//! fails with ENOSPC once the files of that directory would exceed the given size.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `<path>` with `suffix` appended to the file name (`kvConfig.json` -> `kvConfig.json.bak`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// The directory `path` is in ("." for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// ENOSPC or EDQUOT (also inside an error that explains it): the write may succeed once space
/// is freed.
pub fn is_out_of_space(e: &io::Error) -> bool {
    if matches!(e.raw_os_error(), Some(28) | Some(122)) {
        return true;
    }
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Explained>())
        .is_some_and(|explained| is_out_of_space(&explained.source))
}

/// An I/O error with what was being done when it happened.
#[derive(Debug)]
struct Explained {
    what: String,
    source: io::Error,
}

impl std::fmt::Display for Explained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Explained {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn explain(what: String, source: io::Error) -> io::Error {
    io::Error::new(source.kind(), Explained { what, source })
}

/// Bytes gathered before a write: parts smaller than this are copied together, larger ones
/// written as they are, so a file assembled from many pieces is never copied whole.
const WRITE_CHUNK: usize = 1 << 20;

/// Atomically replaces `path` with `content` and returns once it is on disk. On an error the
/// file is as it was and no temporary file is left behind.
pub fn replace_file(path: &Path, content: &[u8]) -> io::Result<()> {
    replace_file_parts(path, &[content])
}

/// [`replace_file`] with the content given as consecutive parts.
pub fn replace_file_parts(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let dir = parent_dir(path);
    fs::create_dir_all(&dir)?;
    let bak_tmp = sibling(path, ".bak.tmp");
    let tmp = sibling(path, ".tmp");
    let result = keep_backup(path, &bak_tmp)
        .and_then(|()| write_and_sync(&tmp, parts))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&bak_tmp);
        return Err(e);
    }
    sync_dir(&dir)
}

/// Makes `<path>.bak` the current content of `path` (nothing to do if there is none).
fn keep_backup(path: &Path, bak_tmp: &Path) -> io::Result<()> {
    let _ = fs::remove_file(bak_tmp);
    match fs::hard_link(path, bak_tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {
            // No hard links here (some network or FAT filesystems): copy, as Java does. The
            // copy is fsynced so that a crash right after the rename still leaves a usable .bak.
            let previous = match fs::read(path) {
                Ok(previous) => previous,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            write_and_sync(bak_tmp, &[&previous])?;
        }
    }
    fs::rename(bak_tmp, sibling(path, ".bak"))
}

fn write_and_sync(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut gathered = Vec::new();
    for part in parts {
        if gathered.len() + part.len() > WRITE_CHUNK && !gathered.is_empty() {
            write_within_capacity(&mut f, path, &gathered)?;
            gathered.clear();
        }
        if part.len() >= WRITE_CHUNK {
            write_within_capacity(&mut f, path, part)?;
        } else {
            gathered.extend_from_slice(part);
        }
    }
    write_within_capacity(&mut f, path, &gathered)?;
    f.sync_all()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // Directories can be opened read-only and fsynced on Unix; elsewhere this is a no-op.
    match File::open(dir) {
        Ok(d) => d.sync_all().or(Ok(())),
        Err(_) => Ok(()),
    }
}

/// Removes temporary files a crash may have left next to `path`.
pub fn remove_stale_temps(path: &Path) {
    for suffix in [".tmp", ".bak.tmp"] {
        let stale = sibling(path, suffix);
        if fs::remove_file(&stale).is_ok() {
            log::warn!("removed {} left by an interrupted write", stale.display());
        }
    }
}

// ---------------------------------------------------------------------- the reserve

/// The reserve grows in steps of this many bytes (and a quarter more than needed), so that a
/// store growing entry by entry does not rewrite it on every write.
const RESERVE_STEP: u64 = 64 * 1024;

/// A file replaced whole by [`replace_file`], with a reserve that keeps it shrinkable when the
/// disk is full (see the module doc).
#[derive(Debug)]
pub struct ReservedFile {
    path: PathBuf,
    reserve: PathBuf,
    /// The reserve's size on disk (0 = none).
    reserve_len: u64,
}

impl ReservedFile {
    /// Takes charge of `path` and its reserve (an existing reserve is kept as found); removes
    /// temporary files a crash left behind.
    pub fn new(path: &Path) -> ReservedFile {
        remove_stale_temps(path);
        let reserve = sibling(path, ".reserve");
        let reserve_len = fs::metadata(&reserve).map(|m| m.len()).unwrap_or(0);
        ReservedFile {
            path: path.to_path_buf(),
            reserve,
            reserve_len,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reserve file's size on disk.
    pub fn reserve_len(&self) -> u64 {
        self.reserve_len
    }

    /// Replaces the file with the concatenation of `parts` (crash-safe, durable on return). A
    /// write that grows the file first grows the reserve and is refused if it cannot; a write
    /// that does not grow it and fails for want of space releases the reserve and is tried
    /// once more.
    pub fn replace(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        let current = fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        let needed: u64 = parts.iter().map(|p| p.len() as u64).sum();
        // The reserve sits beside the file: its directory must exist before the first write
        // (a fresh install's ~/namesrv does not).
        let dir = parent_dir(&self.path);
        fs::create_dir_all(&dir)
            .map_err(|e| explain(format!("cannot create the directory {}", dir.display()), e))?;
        if let Err(e) = self.ensure_reserve(needed) {
            if needed > current {
                let what = format!(
                    "no room to grow the reserve {} (which keeps deletes possible on a full \
                     disk) for {needed} bytes",
                    self.reserve.display()
                );
                return Err(explain(what, e));
            }
            // A write that does not grow the file goes ahead: the old reserve still covers it.
        }
        match replace_file_parts(&self.path, parts) {
            // Only a write that does not grow the file may spend the reserve: the reserve must
            // stay at least as large as the file for the next delete.
            Err(e) if is_out_of_space(&e) && self.reserve_len > 0 && needed <= current => {
                log::warn!(
                    "{}: {e}; releasing the reserve {} ({} bytes) for this write",
                    self.path.display(),
                    self.reserve.display(),
                    self.reserve_len
                );
                self.release_reserve();
                replace_file_parts(&self.path, parts)?;
                if let Err(e) = self.ensure_reserve(needed) {
                    log::warn!(
                        "the reserve {} cannot be made again ({e}): writes that grow {} are refused \
                         until there is space",
                        self.reserve.display(),
                        self.path.display()
                    );
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Grows the reserve to cover `needed` bytes; on failure it keeps the size it had.
    fn ensure_reserve(&mut self, needed: u64) -> io::Result<()> {
        if self.reserve_len >= needed {
            return Ok(());
        }
        let target = (needed + needed / 4).div_ceil(RESERVE_STEP) * RESERVE_STEP;
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.reserve)?;
        let grown = fill_from(&mut f, &self.reserve, self.reserve_len, target);
        if let Err(e) = grown {
            // Give back what was written; the reserve keeps the size it had.
            let _ = f.set_len(self.reserve_len);
            return Err(e);
        }
        self.reserve_len = target;
        Ok(())
    }

    fn release_reserve(&mut self) {
        if let Err(e) = fs::remove_file(&self.reserve) {
            if e.kind() != io::ErrorKind::NotFound {
                log::warn!("cannot remove {}: {e}", self.reserve.display());
            }
        }
        self.reserve_len = 0;
    }
}

/// Writes pseudo-random bytes into `f` from `from` to `to` and syncs them.
fn fill_from(f: &mut File, path: &Path, from: u64, to: u64) -> io::Result<()> {
    f.set_len(from)?;
    f.seek(SeekFrom::Start(from))?;
    let mut chunk = vec![0u8; RESERVE_STEP as usize];
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ from;
    let mut at = from;
    while at < to {
        for word in chunk.chunks_exact_mut(8) {
            // xorshift64: incompressible enough that no filesystem stores it for free.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = (to - at).min(RESERVE_STEP) as usize;
        write_within_capacity(f, path, &chunk[..n])?;
        at += n as u64;
    }
    f.sync_data()
}

// ---------------------------------------------------------------------- test seam

/// Simulated capacities by directory (tests only; empty in production).
static CAPACITIES: Mutex<Vec<(PathBuf, u64)>> = Mutex::new(Vec::new());

/// Test seam: makes every write of this module into `dir` fail with ENOSPC once the files in
/// `dir` would take more than `capacity` bytes (`None` lifts it). Only for tests: it stands in
/// for a full disk, which tests cannot make without privileges.
#[doc(hidden)]
pub fn simulate_disk_capacity(dir: &Path, capacity: Option<u64>) {
    let mut capacities = CAPACITIES.lock().unwrap_or_else(|e| e.into_inner());
    capacities.retain(|(d, _)| d != dir);
    if let Some(capacity) = capacity {
        capacities.push((dir.to_path_buf(), capacity));
    }
}

/// Bytes taken by the regular files of `dir`, each inode counted once (hard links share).
#[doc(hidden)]
pub fn dir_usage(dir: &Path) -> io::Result<u64> {
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    let mut seen = Vec::new();
    let mut total = 0;
    for entry in fs::read_dir(dir)? {
        let meta = entry?.metadata()?;
        if !meta.is_file() {
            continue;
        }
        #[cfg(unix)]
        {
            if seen.contains(&meta.ino()) {
                continue;
            }
            seen.push(meta.ino());
        }
        total += meta.len();
    }
    Ok(total)
}

/// `f.write_all(bytes)`, unless a simulated capacity for `path`'s directory is exceeded: then
/// what fits is written and the error is ENOSPC, as a real full disk would answer.
fn write_within_capacity(f: &mut File, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path);
    let capacity = {
        let capacities = CAPACITIES.lock().unwrap_or_else(|e| e.into_inner());
        capacities
            .iter()
            .find(|(d, _)| *d == dir)
            .map(|(_, capacity)| *capacity)
    };
    if let Some(capacity) = capacity {
        let room = capacity.saturating_sub(dir_usage(&dir)?);
        if (bytes.len() as u64) > room {
            f.write_all(&bytes[..room as usize])?;
            return Err(io::Error::from_raw_os_error(28));
        }
    }
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;

    #[test]
    fn replacing_keeps_previous_content_as_bak() {
        let dir = TempDir::new("durable");
        let path = dir.join("nested").join("f.json");
        replace_file(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert!(!sibling(&path, ".bak").exists());
        replace_file(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read(sibling(&path, ".bak")).unwrap(), b"one");
        replace_file(&path, b"three").unwrap();
        assert_eq!(fs::read(sibling(&path, ".bak")).unwrap(), b"two");
        assert!(!sibling(&path, ".tmp").exists());
        assert!(!sibling(&path, ".bak.tmp").exists());
    }

    #[test]
    fn a_failed_write_leaves_the_file_and_no_temporary_files() {
        let dir = TempDir::new("durable-fail");
        let path = dir.join("f.json");
        replace_file(&path, b"old content").unwrap();
        simulate_disk_capacity(dir.path(), Some(dir_usage(dir.path()).unwrap() + 4));
        let err = replace_file(&path, b"much longer new content").unwrap_err();
        simulate_disk_capacity(dir.path(), None);
        assert!(is_out_of_space(&err), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old content");
        assert!(!sibling(&path, ".tmp").exists());
        assert!(!sibling(&path, ".bak.tmp").exists());
    }

    #[test]
    fn stale_temporary_files_are_removed_when_a_reserved_file_is_opened() {
        let dir = TempDir::new("durable-stale");
        let path = dir.join("f.json");
        fs::write(sibling(&path, ".tmp"), b"half").unwrap();
        fs::write(sibling(&path, ".bak.tmp"), b"half").unwrap();
        let _ = ReservedFile::new(&path);
        assert!(!sibling(&path, ".tmp").exists());
        assert!(!sibling(&path, ".bak.tmp").exists());
    }

    #[test]
    fn the_first_write_creates_the_directory_the_file_and_its_reserve_live_in() {
        let dir = TempDir::new("durable-fresh");
        let path = dir.join("namesrv").join("kvConfig.json");
        let mut file = ReservedFile::new(&path);
        file.replace(&[b"{}"]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert_eq!(file.reserve_len(), RESERVE_STEP);
    }

    #[test]
    fn the_reserve_grows_ahead_of_the_file() {
        let dir = TempDir::new("durable-reserve");
        let path = dir.join("f.json");
        let mut file = ReservedFile::new(&path);
        file.replace(&[&[b'a'; 1000]]).unwrap();
        assert_eq!(file.reserve_len(), RESERVE_STEP);
        let big = vec![b'b'; 100_000];
        file.replace(&[&big]).unwrap();
        assert!(file.reserve_len() >= 100_000);
        let on_disk = fs::metadata(sibling(&path, ".reserve")).unwrap().len();
        assert_eq!(on_disk, file.reserve_len());
        // Reopening finds the reserve as it is.
        assert_eq!(ReservedFile::new(&path).reserve_len(), on_disk);
    }

    #[test]
    fn on_a_full_disk_shrinking_writes_succeed_and_growing_ones_are_refused() {
        let dir = TempDir::new("durable-full");
        let path = dir.join("f.json");
        // Every byte freed is taken at once by someone else.
        let disk_full = || simulate_disk_capacity(dir.path(), Some(dir_usage(dir.path()).unwrap()));
        let mut file = ReservedFile::new(&path);
        let mut content = vec![b'x'; 10_000];
        file.replace(&[&content]).unwrap();
        content.resize(150_000, b'x');
        file.replace(&[&content]).unwrap();
        disk_full();
        let err = file.replace(&[&vec![b'z'; 300_000]]).unwrap_err();
        assert!(is_out_of_space(&err), "{err}");
        assert!(err.to_string().contains(".reserve"), "{err}");
        content.push(b'y');
        let err = file.replace(&[&content]).unwrap_err();
        assert!(is_out_of_space(&err), "{err}");
        assert_eq!(fs::metadata(&path).unwrap().len(), 150_000);
        // Shrinking writes, one after the other, each find room: the first in the reserve
        // (the previous version, 10 KB, is too small to make room), the next ones in the
        // space their predecessor's backup gave back.
        for len in [149_000, 100_000, 99_000, 10] {
            disk_full();
            content.truncate(len);
            file.replace(&[&content]).unwrap();
            assert_eq!(fs::read(&path).unwrap(), content);
        }
        assert_eq!(file.reserve_len(), 0, "no room to make the reserve again");
        assert!(!sibling(&path, ".tmp").exists());
        simulate_disk_capacity(dir.path(), None);
        // With space again, the reserve comes back with the next write.
        file.replace(&[b"small"]).unwrap();
        assert!(file.reserve_len() >= 5);
    }
}
