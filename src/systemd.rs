//! systemd's service notifications (sd_notify(3)) without libsystemd: `READY=1` once every
//! listener is bound, `STOPPING=1` when a stop begins, `WATCHDOG=1` from the event loop's own
//! timer, each one datagram to the socket `NOTIFY_SOCKET` names (a path, or `@name` for an
//! abstract address). Outside systemd (no `NOTIFY_SOCKET`) nothing is sent.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where notifications go; each thread that notifies owns a clone.
#[derive(Clone)]
pub struct Notifier {
    addr: SocketAddr,
    /// A failure has been logged and no send has worked since (the watchdog repeats).
    failing: bool,
}

impl Notifier {
    /// `None` when systemd did not ask for notifications (no `NOTIFY_SOCKET`).
    pub fn from_env() -> Option<io::Result<Notifier>> {
        let name = std::env::var_os("NOTIFY_SOCKET")?;
        Some(Notifier::connect(&name))
    }

    fn connect(name: &OsStr) -> io::Result<Notifier> {
        let addr = match name.as_bytes().strip_prefix(b"@") {
            Some(abstract_name) => {
                use std::os::linux::net::SocketAddrExt;
                SocketAddr::from_abstract_name(abstract_name)?
            }
            None => SocketAddr::from_pathname(name)?,
        };
        Ok(Notifier {
            addr,
            failing: false,
        })
    }

    /// Sends `state` (`READY=1`, ...); a failure is logged once per streak. A socket per
    /// notification (a few a minute) keeps the sender free of shared state.
    pub fn notify(&mut self, state: &str) {
        let sent = UnixDatagram::unbound().and_then(|socket| {
            // A notification is dropped rather than ever holding the event loop.
            socket.set_nonblocking(true)?;
            socket.send_to_addr(state.as_bytes(), &self.addr)
        });
        match sent {
            Ok(_) => self.failing = false,
            Err(e) if !self.failing => {
                self.failing = true;
                log::warn!("cannot notify systemd ({state}) through NOTIFY_SOCKET: {e}");
            }
            Err(_) => {}
        }
    }
}

/// How often systemd wants `WATCHDOG=1` (`WatchdogSec=`), if it wants it from this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec = std::env::var("WATCHDOG_USEC").ok();
    let pid = std::env::var("WATCHDOG_PID").ok();
    watchdog_from(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// `WATCHDOG_USEC` microseconds, unless `WATCHDOG_PID` names another process (then the
/// watchdog is for it, as sd_watchdog_enabled(3) reads it).
fn watchdog_from(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&us| us > 0)?;
    match pid.map(|p| p.trim().parse::<u32>()) {
        Some(Ok(pid)) if pid == own_pid => {}
        Some(_) => return None,
        None => {}
    }
    Some(Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_ours_only_without_a_pid_or_with_our_pid() {
        let interval = Some(Duration::from_millis(200));
        assert_eq!(watchdog_from(Some("200000"), None, 7), interval);
        assert_eq!(watchdog_from(Some("200000"), Some("7"), 7), interval);
        assert_eq!(watchdog_from(Some("200000"), Some("8"), 7), None);
        assert_eq!(watchdog_from(Some("200000"), Some("x"), 7), None);
        assert_eq!(watchdog_from(None, Some("7"), 7), None);
        assert_eq!(watchdog_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_from(Some("soon"), None, 7), None);
    }

    #[test]
    fn notifications_reach_a_path_and_an_abstract_socket() {
        let dir = crate::test_support::TempDir::new("notify");
        let path = dir.join("notify.sock");
        let listener = UnixDatagram::bind(&path).unwrap();
        let mut notifier = Notifier::connect(path.as_os_str()).unwrap();
        notifier.notify("READY=1");
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("rmq-namesrv-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let mut notifier = Notifier::connect(OsStr::new(&format!("@{name}"))).unwrap();
        notifier.clone().notify("STOPPING=1");
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        drop(listener);
        // Nobody listening: logged once, never an error to the caller.
        notifier.notify("WATCHDOG=1");
        assert!(notifier.failing);
    }
}
