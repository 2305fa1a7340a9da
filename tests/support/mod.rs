//! Helpers shared by the unit tests (`crate::test_support`) and the integration tests
//! (`mod support;`): a temporary directory that removes itself, and test fixtures.
#![allow(dead_code)]

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, empty directory under the system temp dir, removed when dropped. Names are
/// unique per process and call, so tests running in parallel never share one.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rmq-test-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create temp dir {}: {e}", dir.display()));
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The path of a file in `tests/fixtures` (see its README for where each came from).
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The bytes of a fixture; a missing one fails the test with its path.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// A client bound to a chosen loopback address (127.0.0.x): attackers and good clients are
/// different peers as far as per-address rules go (10 s read timeout).
pub fn connect_from(source: [u8; 4], addr: &str) -> io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let Ok(SocketAddr::V4(v4)) = addr.parse::<SocketAddr>() else {
        panic!("IPv4 address expected: {addr}");
    };
    let sockaddr = |ip: [u8; 4], port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // Close-on-exec, as std's sockets: children spawned by tests running alongside must not
    // inherit (and keep open) these connections.
    // SAFETY: plain socket calls on a descriptor this function owns (handed to TcpStream,
    // which closes it), with sockaddr_in values that live across each call.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let local = sockaddr(source, 0);
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(io::Error::last_os_error());
        }
        let remote = sockaddr(v4.ip().octets(), v4.port());
        if libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(io::Error::last_os_error());
        }
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        Ok(stream)
    }
}
