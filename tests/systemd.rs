//! The binary under a service manager: systemd's notifications through a `NOTIFY_SOCKET` the
//! test binds (READY=1, STOPPING=1, the watchdog), signals (a second one while stopping), and
//! SIGHUP's reload of the config file and the log file.

mod common;

use common::{wait_until, TempDir};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, response};
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary, its address, and its log file (`dir/ns.log`); killed when dropped.
struct Service {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Service {
    /// Started with loopback, an ephemeral port, files in `dir`, then `args` and `env`.
    fn start(dir: &TempDir, args: &[String], env: &[(&str, &str)]) -> Service {
        let log = dir.path().join("ns.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"));
        command
            .current_dir(dir.path())
            .env("HOME", dir.path().join("home"))
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .args([
                "--listenPort=0".to_string(),
                "--bindAddress=127.0.0.1".to_string(),
                format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
                format!("--logPath={}", log.display()),
            ])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().expect("spawn rmq-namesrv");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
        let Some(addr) = line.trim().strip_prefix("rmq-namesrv listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("did not start: {line:?}");
        };
        Service {
            addr: addr.to_string(),
            child,
            log,
        }
    }

    fn client(&self) -> Client {
        Client::connect(&self.addr, Duration::from_secs(10)).expect("connect")
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `text`.
    fn wait_for_log(&self, text: &str) {
        let found = wait_until(Duration::from_secs(20), || self.log_text().contains(text));
        assert!(found, "no {text:?} in the log:\n{}", self.log_text());
    }

    fn exit_code(&mut self) -> Option<i32> {
        let mut status = None;
        let exited = wait_until(Duration::from_secs(20), || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        assert!(exited, "the server did not exit");
        status.and_then(|s| s.code())
    }

    fn config(&self) -> String {
        let resp = self.client().request(request::GET_NAMESRV_CONFIG, &[], b"");
        let resp = resp.expect("GET_NAMESRV_CONFIG");
        assert_eq!(resp.code, response::SUCCESS);
        String::from_utf8(resp.body.to_vec()).unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fake systemd: the datagram socket `NOTIFY_SOCKET` names.
struct NotifySocket {
    socket: UnixDatagram,
    name: String,
}

impl NotifySocket {
    fn at_path(path: &Path) -> NotifySocket {
        NotifySocket {
            socket: UnixDatagram::bind(path).unwrap(),
            name: path.to_string_lossy().into_owned(),
        }
    }

    fn abstract_named(name: &str) -> NotifySocket {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
        NotifySocket {
            socket: UnixDatagram::bind_addr(&addr).unwrap(),
            name: format!("@{name}"),
        }
    }

    /// The next notification within `wait`, with when it arrived.
    fn next(&self, wait: Duration) -> Option<(String, Instant)> {
        self.socket.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 256];
        let n = self.socket.recv(&mut buf).ok()?;
        Some((
            String::from_utf8_lossy(&buf[..n]).into_owned(),
            Instant::now(),
        ))
    }

    /// Waits for `state`, skipping watchdog pings; panics after 20 s.
    fn expect(&self, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            match self.next(Duration::from_millis(500)) {
                Some((got, _)) if got == state => return,
                Some((got, _)) if got == "WATCHDOG=1" => {}
                Some((got, _)) => panic!("expected {state}, got {got:?}"),
                None => {}
            }
        }
        panic!("no {state} within 20 s");
    }
}

#[test]
fn ready_comes_once_the_port_answers_and_stopping_at_sigterm() {
    let dir = TempDir::new("notify-ready");
    for abstract_address in [false, true] {
        let notify = if abstract_address {
            NotifySocket::abstract_named(&format!("rmq-namesrv-notify-{}", std::process::id()))
        } else {
            NotifySocket::at_path(&dir.path().join("notify.sock"))
        };
        let mut service = Service::start(&dir, &[], &[("NOTIFY_SOCKET", &notify.name)]);
        notify.expect("READY=1");
        // Sent after the port was bound: it answers now.
        assert!(service.config().contains("listenPort="));
        // No WatchdogSec=, no pings.
        assert_eq!(notify.next(Duration::from_millis(300)), None);
        service.signal("TERM");
        notify.expect("STOPPING=1");
        assert_eq!(service.exit_code(), Some(0), "abstract: {abstract_address}");
    }
}

#[test]
fn the_watchdog_is_pinged_at_half_the_interval_and_not_while_the_loop_is_stuck() {
    let dir = TempDir::new("notify-watchdog");
    let notify = NotifySocket::at_path(&dir.path().join("notify.sock"));
    let service = Service::start(
        &dir,
        &[],
        &[
            ("NOTIFY_SOCKET", &notify.name),
            ("WATCHDOG_USEC", "200000"),
            ("RMQ_NAMESRV_DEBUG_STALL_MS", "1500"),
        ],
    );
    notify.expect("READY=1");
    // About every 100 ms: ten pings take at least 0.8 s, and each came within the interval
    // (generous on a loaded machine: systemd would have killed the process otherwise).
    let mut pings = Vec::new();
    while pings.len() < 10 {
        let (state, at) = notify.next(Duration::from_secs(5)).expect("a ping");
        assert_eq!(state, "WATCHDOG=1");
        pings.push(at);
    }
    let span = pings[9] - pings[0];
    assert!(span >= Duration::from_millis(800), "{span:?}");
    assert!(span <= Duration::from_millis(9 * 200 * 2), "{span:?}");
    if !cfg!(debug_assertions) {
        eprintln!("release build: no stall hook, the stuck loop is not tried");
        return;
    }
    // The debug build's hook holds the loop 1.5 s in this GET_NAMESRV_CONFIG: no ping then.
    let mut last = notify.next(Duration::from_secs(5)).expect("a ping").1;
    let stuck = std::thread::spawn({
        let client = service.client();
        move || {
            let mut client = client;
            let began = Instant::now();
            let resp = client.request(request::GET_NAMESRV_CONFIG, &[], b"");
            (resp.map(|r| r.code).ok(), began.elapsed())
        }
    });
    let mut longest = Duration::ZERO;
    while !stuck.is_finished() {
        if let Some((state, at)) = notify.next(Duration::from_millis(100)) {
            assert_eq!(state, "WATCHDOG=1");
            longest = longest.max(at - last);
            last = at;
        }
    }
    let (code, took) = stuck.join().unwrap();
    assert_eq!(code, Some(response::SUCCESS));
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(longest >= Duration::from_millis(1300), "{longest:?}");
    // And back once the loop runs again.
    assert_eq!(
        notify
            .next(Duration::from_secs(5))
            .map(|(s, _)| s)
            .as_deref(),
        Some("WATCHDOG=1")
    );
}

/// Sends a GET_NAMESRV_CONFIG that the debug build's stall hook holds, and returns once the
/// loop is seen stuck in it (another request goes unanswered).
fn stick_the_loop(service: &Service) -> std::thread::JoinHandle<()> {
    let mut client = service.client();
    let stuck = std::thread::spawn(move || {
        let _ = client.request(request::GET_NAMESRV_CONFIG, &[], b"");
    });
    let seen = wait_until(Duration::from_secs(20), || {
        let mut probe = service.client();
        probe.set_timeout(Duration::from_millis(300));
        probe
            .request(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", "t")], b"")
            .is_err()
    });
    assert!(seen, "the loop never got stuck");
    stuck
}

#[test]
fn a_second_signal_while_stopping_logs_a_line_and_exits_at_once() {
    if !cfg!(debug_assertions) {
        eprintln!("release build: no stall hook to keep the server stopping");
        return;
    }
    let dir = TempDir::new("second-signal-line");
    let mut service = Service::start(&dir, &[], &[("RMQ_NAMESRV_DEBUG_STALL_MS", "5000")]);
    let _stuck = stick_the_loop(&service);
    service.signal("TERM");
    service.wait_for_log("INFO signals - rmq-namesrv shutting down (signal TERM)");
    service.signal("INT");
    assert_eq!(service.exit_code(), Some(130));
    let log = service.log_text();
    assert!(
        log.contains(
            "WARN signals - rmq-namesrv: signal INT while stopping (signal TERM): exiting now, \
             without finishing in-flight replies and writes"
        ),
        "{log}"
    );
    assert!(!log.contains("rmq-namesrv stopped"), "{log}");
}

/// A server reading `dir/ns.conf` (written with `text` first) with -c.
fn start_with_file(dir: &TempDir, text: &str) -> (Service, PathBuf) {
    let conf = dir.path().join("ns.conf");
    std::fs::write(&conf, text).unwrap();
    let args = ["-c".to_string(), conf.to_string_lossy().into_owned()];
    (Service::start(dir, &args, &[]), conf)
}

#[test]
fn sighup_applies_changed_live_keys_and_names_start_only_ones_in_one_warning() {
    let dir = TempDir::new("hup-live");
    let (service, conf) = start_with_file(&dir, "scanNotActiveBrokerInterval=5000\n");
    assert!(service
        .config()
        .contains("scanNotActiveBrokerInterval=5000\n"));
    std::fs::write(
        &conf,
        "scanNotActiveBrokerInterval=7000\nmaxConnections=500\nlogFileCount=3\n\
         unRegisterBrokerQueueCapacity=100\n",
    )
    .unwrap();
    service.signal("HUP");
    let applied = wait_until(Duration::from_secs(20), || {
        service
            .config()
            .contains("scanNotActiveBrokerInterval=7000\n")
    });
    assert!(applied, "{}", service.log_text());
    let config = service.config();
    // maxConnections is black-listed for remote updates, not for the operator's file.
    assert!(config.contains("maxConnections=500\n"), "{config}");
    assert!(config.contains("logFileCount=5\n"), "{config}");
    assert!(
        config.contains("unRegisterBrokerQueueCapacity=3000\n"),
        "{config}"
    );
    service.wait_for_log(&format!(
        "WARN signals - SIGHUP: logFileCount, unRegisterBrokerQueueCapacity changed in {} but \
         take effect at the next start only",
        conf.display()
    ));
    // The file is the source: nothing is written back.
    assert!(!dir.path().join("ns.conf.bak").exists());
}

#[test]
fn sighup_with_an_invalid_value_applies_nothing_and_keeps_serving() {
    let dir = TempDir::new("hup-bad");
    let (mut service, conf) = start_with_file(&dir, "scanNotActiveBrokerInterval=5000\n");
    std::fs::write(
        &conf,
        "scanNotActiveBrokerInterval=9000\norderMessageEnable=yes\nmaxJsonDepth=2\n",
    )
    .unwrap();
    service.signal("HUP");
    let conf = conf.display();
    service.wait_for_log(&format!(
        "WARN signals - SIGHUP: config not reloaded, nothing applied: {conf} line 2: \
         orderMessageEnable: \"yes\" is not true or false"
    ));
    service.wait_for_log(&format!(
        "WARN signals - SIGHUP: config not reloaded, nothing applied: {conf} line 3: \
         maxJsonDepth: 2 is outside 16..=1024"
    ));
    let config = service.config();
    assert!(
        config.contains("scanNotActiveBrokerInterval=5000\n"),
        "{config}"
    );
    assert!(config.contains("orderMessageEnable=false\n"), "{config}");
    assert_eq!(service.child.try_wait().unwrap(), None, "still running");
    // A clean stop still works after it.
    service.signal("TERM");
    assert_eq!(service.exit_code(), Some(0));
}

#[test]
fn sighup_reopens_a_log_file_moved_away() {
    let dir = TempDir::new("hup-log");
    let service = Service::start(&dir, &[], &[]);
    service.wait_for_log("listening on");
    let moved = dir.path().join("ns.log.moved");
    std::fs::rename(&service.log, &moved).unwrap();
    service.signal("HUP");
    let reopened = wait_until(Duration::from_secs(20), || {
        service.log_text().contains("SIGHUP: log file reopened")
    });
    assert!(reopened, "no new file at {}", service.log.display());
    let old = std::fs::read_to_string(&moved).unwrap();
    assert!(old.contains("listening on"), "{old}");
    assert!(!old.contains("SIGHUP"), "{old}");
    // Requests' lines go on in the new file too.
    assert!(service.config().contains("listenPort="));
}
