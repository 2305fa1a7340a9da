//! Crash-safe replacement of a small file (the KV config, the properties file, the
//! Controller's files), always off the loop.
//!
//! [`replace_file`] survives a crash at any point: the current file is kept as `<path>.bak`
//! (a hard link; a copy where links are not supported), the new content is written to
//! `<path>.tmp`, fsynced, renamed over `<path>`, and the directory is fsynced. A reader finds
//! the old or the new file, never a torn one. The new file keeps the old one's permission bits
//! (an operator's 0660 stays 0660) and, when running as root, its owner and group. A failed
//! write (a full disk, a read-only directory) returns the OS error, removes its temporary files
//! and leaves the file as it was.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// `<path>` with `suffix` appended to the file name (`kvConfig.json` -> `kvConfig.json.bak`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// Returns once the new content is on disk.
pub fn replace_file(path: &Path, content: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path);
    fs::create_dir_all(dir)?;
    let bak_tmp = sibling(path, ".bak.tmp");
    let tmp = sibling(path, ".tmp");
    let previous = fs::metadata(path).ok();
    let result = keep_backup(path, &bak_tmp)
        .and_then(|()| write_and_sync(&tmp, content, previous.as_ref()))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&bak_tmp);
        return Err(e);
    }
    sync_dir(dir)
}

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
            write_and_sync(bak_tmp, &previous, None)?;
        }
    }
    fs::rename(bak_tmp, sibling(path, ".bak"))
}

/// Writes `content` to a new `path`, with `like`'s mode (and owner, as root) when given.
fn write_and_sync(path: &Path, content: &[u8], like: Option<&fs::Metadata>) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mut file = File::create(path)?;
    if let Some(like) = like {
        file.set_permissions(like.permissions())?;
        // Only root may give a file away; anyone else keeps their own uid and primary group.
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::fchown(&file, Some(like.uid()), Some(like.gid()))?;
        }
    }
    file.write_all(content)?;
    file.sync_all()
}

/// The directory holding `path` ("." for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// fsync of a directory (makes a create or rename in it durable).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    // Directories can be opened read-only and fsynced on Unix; elsewhere this is a no-op.
    match File::open(dir) {
        Ok(d) => d.sync_all().or(Ok(())),
        Err(_) => Ok(()),
    }
}

/// Creates `dir` if missing and proves it writable by creating and removing `<dir>/<probe>`
/// (not `access(2)`: root passes that check on a read-only mount or in /proc, and fails later).
pub fn check_writable_dir(dir: &Path, probe: &str) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let probe = dir.join(probe);
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)?;
    fs::remove_file(&probe)
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
    fn replacing_keeps_the_file_s_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("durable-mode");
        let path = dir.join("f.conf");
        replace_file(&path, b"one").unwrap();
        for mode in [0o640, 0o600, 0o660] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            replace_file(&path, b"next").unwrap();
            let kept = fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
            assert_eq!(kept, mode);
        }
    }

    #[test]
    fn stale_temporary_files_are_removed() {
        let dir = TempDir::new("durable-stale");
        let path = dir.join("f.json");
        fs::write(sibling(&path, ".tmp"), b"half").unwrap();
        fs::write(sibling(&path, ".bak.tmp"), b"half").unwrap();
        remove_stale_temps(&path);
        assert!(!sibling(&path, ".tmp").exists());
        assert!(!sibling(&path, ".bak.tmp").exists());
    }
}
