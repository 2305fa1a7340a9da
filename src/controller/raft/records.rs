//! The record framing of the controller's Raft log file (`raft.log`, laid out in
//! docs/controller.md, "Storage"), and the errors that name a store file.
//!
//! Appends only, so a crash can damage only the end: a torn tail is dropped with a warning;
//! anything else is corruption, an error naming file and offset, because silently dropping
//! acknowledged changes is worse than refusing to start.

use crate::checksum::crc32;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Why the store cannot be used; every variant names the file.
#[derive(Debug)]
pub enum StorageError {
    Io {
        path: PathBuf,
        op: &'static str,
        error: std::io::Error,
    },
    Corrupt {
        path: PathBuf,
        offset: Option<u64>,
        reason: String,
    },
    /// The writer thread is gone (after shutdown).
    Stopped,
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Io { path, op, error } => {
                write!(
                    f,
                    "controller store {}: {op} failed: {error}",
                    path.display()
                )
            }
            StorageError::Corrupt {
                path,
                offset,
                reason,
            } => {
                let at = offset.map(|o| format!(" at byte {o}")).unwrap_or_default();
                write!(
                    f,
                    "controller store {} is damaged{at}: {reason}",
                    path.display()
                )
            }
            StorageError::Stopped => f.write_str("the controller log writer has stopped"),
        }
    }
}

impl std::error::Error for StorageError {}

pub const MAGIC: &[u8; 8] = b"RMQCLOG1";
pub const RECORD_HEADER_LEN: usize = 16;
/// Items are a Raft entry or hard state, a few hundred bytes; anything this large is damage.
pub const MAX_ENTRY_LEN: usize = 64 << 20;

pub fn encode_record(seq: u64, item: &[u8], out: &mut Vec<u8>) {
    let mut crc_input = Vec::with_capacity(8 + item.len());
    crc_input.extend_from_slice(&seq.to_be_bytes());
    crc_input.extend_from_slice(item);
    out.extend_from_slice(&(item.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(item);
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub item: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Record>,
    /// Bytes up to the end of the last good record.
    pub valid_len: u64,
    /// Why bytes after `valid_len` were dropped, if any were.
    pub torn: Option<String>,
}

pub fn corrupt(path: &Path, offset: Option<usize>, reason: String) -> StorageError {
    StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: offset.map(|o| o as u64),
        reason,
    }
}

pub fn scan(path: &Path, bytes: &[u8]) -> Result<Scan, StorageError> {
    if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
        return Ok(Scan {
            torn: (!bytes.is_empty()).then(|| "the file header was cut short".to_owned()),
            ..Scan::default()
        });
    }
    if !bytes.starts_with(MAGIC) {
        return Err(corrupt(
            path,
            Some(0),
            "not a controller Raft log (bad magic)".into(),
        ));
    }
    let mut scan = Scan {
        valid_len: MAGIC.len() as u64,
        ..Scan::default()
    };
    let mut pos = MAGIC.len();
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        let torn = |why: &str| {
            Some(format!(
                "{why} at byte {pos} ({} bytes dropped)",
                rest.len()
            ))
        };
        if rest.len() < RECORD_HEADER_LEN {
            scan.torn = torn("a record header is cut short");
            break;
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let seq = u64::from_be_bytes([
            rest[8], rest[9], rest[10], rest[11], rest[12], rest[13], rest[14], rest[15],
        ]);
        if len > MAX_ENTRY_LEN || rest.len() < RECORD_HEADER_LEN + len {
            scan.torn = torn("the last record runs past the end of the file");
            break;
        }
        let end = RECORD_HEADER_LEN + len;
        if crc32(&rest[8..end]) != crc {
            let only_zeros_follow = rest[end..].iter().all(|b| *b == 0);
            if only_zeros_follow {
                scan.torn = torn("the last record fails its checksum");
                break;
            }
            return Err(corrupt(
                path,
                Some(pos),
                format!("record {seq} fails its checksum and more records follow"),
            ));
        }
        if let Some(prev) = scan.records.last() {
            if seq != prev.seq + 1 {
                return Err(corrupt(
                    path,
                    Some(pos),
                    format!("record {seq} follows record {}", prev.seq),
                ));
            }
        }
        scan.records.push(Record {
            seq,
            item: rest[RECORD_HEADER_LEN..end].to_vec(),
        });
        pos += end;
        scan.valid_len = pos as u64;
    }
    Ok(scan)
}

pub fn io<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> StorageError + 'a {
    move |error| StorageError::Io {
        path: path.to_path_buf(),
        op,
        error,
    }
}

/// Opens (creating if needed) the log at `path`, reads it, cuts a torn tail off, and returns
/// an append handle positioned at the end with what was read.
pub fn open(path: &Path) -> Result<(File, Scan), StorageError> {
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(io(path, "open"))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(io(path, "read"))?;
    let scan = scan(path, &bytes)?;
    if bytes.len() < MAGIC.len() {
        // New (or cut during creation): write the header and make the file itself durable.
        f.set_len(0).map_err(io(path, "truncate"))?;
        f.write_all(MAGIC).map_err(io(path, "write"))?;
        f.sync_all().map_err(io(path, "fsync"))?;
        let dir = crate::durable_file::parent_dir(path);
        crate::durable_file::sync_dir(dir).map_err(io(dir, "fsync"))?;
    } else if scan.valid_len < bytes.len() as u64 {
        // Appends go to the end, which is then the end of the last good record.
        f.set_len(scan.valid_len).map_err(io(path, "truncate"))?;
        f.sync_all().map_err(io(path, "fsync"))?;
    }
    Ok((f, scan))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(records: &[(u64, &[u8])]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for (i, e) in records {
            encode_record(*i, e, &mut out);
        }
        out
    }

    #[test]
    fn records_read_back_in_order() {
        let bytes = file_with(&[(1, b"a"), (2, b""), (3, b"ccc")]);
        let s = scan(Path::new("x"), &bytes).unwrap();
        assert_eq!(
            s.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(s.records[2].item, b"ccc");
        assert_eq!(s.valid_len, bytes.len() as u64);
        assert!(s.torn.is_none());
    }

    #[test]
    fn every_cut_of_the_last_record_is_a_torn_tail() {
        let whole = file_with(&[(1, b"first"), (2, b"second")]);
        let first_end = file_with(&[(1, b"first")]).len();
        for cut in first_end + 1..whole.len() {
            let s = scan(Path::new("x"), &whole[..cut]).unwrap();
            assert_eq!(s.records.len(), 1, "cut at {cut}");
            assert_eq!(s.valid_len, first_end as u64);
            assert!(s.torn.is_some());
        }
        // A garbled last record, or one followed by zeros (a file extended by the crash).
        let mut garbled = whole.clone();
        let last = garbled.len() - 1;
        garbled[last] ^= 0xFF;
        assert_eq!(scan(Path::new("x"), &garbled).unwrap().records.len(), 1);
        garbled.extend_from_slice(&[0; 40]);
        assert_eq!(scan(Path::new("x"), &garbled).unwrap().records.len(), 1);
        let mut zeros = whole.clone();
        zeros.extend_from_slice(&[0; 100]);
        assert_eq!(scan(Path::new("x"), &zeros).unwrap().records.len(), 2);
    }

    #[test]
    fn damage_before_the_end_is_corruption_naming_the_file_and_offset() {
        let mut bytes = file_with(&[(1, b"first"), (2, b"second")]);
        bytes[MAGIC.len() + RECORD_HEADER_LEN] ^= 0x01;
        let err = scan(Path::new("/data/raft.log"), &bytes)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/data/raft.log"), "{err}");
        assert!(err.contains("byte 8"), "{err}");
        let gap = file_with(&[(1, b"a"), (3, b"c")]);
        assert!(scan(Path::new("x"), &gap)
            .unwrap_err()
            .to_string()
            .contains("record 3 follows record 1"));
        assert!(scan(Path::new("x"), b"NOTALOG!....").is_err());
        assert!(scan(Path::new("x"), b"XY").is_err());
        assert!(scan(Path::new("x"), b"RMQ").unwrap().torn.is_some());
    }
}
