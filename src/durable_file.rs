//! Crash-safe replacement of a small file: the only durable state this server keeps
//! (the KV config and the properties file) is written through here.
//!
//! `replace_file` follows the order that survives a crash at any point:
//! copy the current content to `<path>.bak` (as Java does), write the new content to
//! `<path>.tmp`, fsync it, rename it over `<path>`, then fsync the directory so the rename
//! itself is durable. A reader therefore sees either the old or the new file, never a
//! torn one, and `.bak` holds the previous version.

use std::fs::{self, File, OpenOptions};
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

/// Atomically replaces `path` with `content` and returns once it is on disk.
pub fn replace_file(path: &Path, content: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)?;
    if path.exists() {
        // Keep the previous version like Java's MixAll.string2File does. The copy is
        // fsynced so that a crash right after the rename still leaves a usable .bak.
        let bak = sibling(path, ".bak");
        let previous = fs::read(path)?;
        write_and_sync(&sibling(path, ".bak.tmp"), &previous)?;
        fs::rename(sibling(path, ".bak.tmp"), &bak)?;
    }
    let tmp = sibling(path, ".tmp");
    write_and_sync(&tmp, content)?;
    fs::rename(&tmp, path)?;
    sync_dir(&dir)
}

fn write_and_sync(path: &Path, content: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(content)?;
    f.sync_all()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    // Directories can be opened read-only and fsynced on Unix; elsewhere this is a no-op.
    match File::open(dir) {
        Ok(d) => d.sync_all().or(Ok(())),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_keeps_previous_content_as_bak() {
        let dir = crate::test_support::TempDir::new("durable");
        let path = dir.join("nested").join("f.json");
        replace_file(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert!(!sibling(&path, ".bak").exists());
        replace_file(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read(sibling(&path, ".bak")).unwrap(), b"one");
        assert!(!sibling(&path, ".tmp").exists());
    }
}
