//! The daemon over real TCP: framing, both header serializations, oneway, unknown codes,
//! malformed input closing only the offending connection, idle close, backpressure, and the
//! binary's command line.

mod common;

use common::*;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::SerializeType;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

fn raw_frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    v.extend_from_slice(&(((serialize_type as u32) << 24) | header.len() as u32).to_be_bytes());
    v.extend_from_slice(header);
    v.extend_from_slice(body);
    v
}

/// Reads one whole frame off a raw socket: (serialize type, header bytes, body bytes).
fn read_raw_frame(s: &mut TcpStream) -> (u8, Vec<u8>, Vec<u8>) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("length");
    let len = u32::from_be_bytes(len) as usize;
    let mut rest = vec![0u8; len];
    s.read_exact(&mut rest).expect("frame");
    let word = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let header_len = (word & 0xFF_FFFF) as usize;
    (
        (word >> 24) as u8,
        rest[4..4 + header_len].to_vec(),
        rest[4 + header_len..].to_vec(),
    )
}

fn raw_connect(server: &TestServer) -> TcpStream {
    let s = TcpStream::connect(&server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn assert_still_serving(server: &TestServer) {
    let mut c = server.client();
    let resp = c
        .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .expect("a well-behaved connection is still answered");
    assert_eq!(resp.code, response::SUCCESS);
}

fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("read ended with {e} ({:?})", e.kind());
                return e.kind() == std::io::ErrorKind::ConnectionReset;
            }
        }
    }
}

#[test]
fn json_request_is_answered_in_json_with_opaque_echoed_and_response_flag() {
    let server = TestServer::start();
    let mut s = raw_connect(&server);
    let header = br#"{"code":106,"flag":0,"language":"JAVA","opaque":-7,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    s.write_all(&raw_frame(0, header, b"")).unwrap();
    let (st, header, body) = read_raw_frame(&mut s);
    assert_eq!(st, 0);
    let h = rmq_namesrv::remoting::json::parse(&header).expect("JSON header");
    assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(-7));
    assert_eq!(h.get("flag").and_then(|v| v.as_i64()), Some(1));
    assert_eq!(h.get("code").and_then(|v| v.as_i64()), Some(0));
    assert_eq!(h.get("language").and_then(|v| v.as_str()), Some("JAVA"));
    assert_eq!(
        h.get("serializeTypeCurrentRPC").and_then(|v| v.as_str()),
        Some("JSON")
    );
    assert_eq!(body, br#"{"brokerAddrTable":{},"clusterAddrTable":{}}"#);
}

#[test]
fn rocketmq_request_is_answered_in_the_configured_type() {
    for (setting, expected) in [("JSON", 0u8), ("ROCKETMQ", 1u8)] {
        let server = TestServer::start_with(|c| {
            c.set("serializeType", setting);
        });
        let mut c = server.client();
        c.serialize_type = SerializeType::RocketMq;
        c.request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
            .unwrap();
        let mut s = raw_connect(&server);
        // A binary request: code 106, JAVA, version 479, opaque 0x01020304, flag 0.
        let mut header = Vec::new();
        header.extend_from_slice(&106i16.to_be_bytes());
        header.push(0);
        header.extend_from_slice(&479i16.to_be_bytes());
        header.extend_from_slice(&0x0102_0304i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        header.extend_from_slice(&0i32.to_be_bytes());
        s.write_all(&raw_frame(1, &header, b"")).unwrap();
        let (st, header, _) = read_raw_frame(&mut s);
        assert_eq!(st, expected, "serializeType={setting}");
        if expected == 1 {
            assert_eq!(&header[5..9], &0x0102_0304i32.to_be_bytes());
            assert_eq!(&header[9..13], &1i32.to_be_bytes());
        } else {
            let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
            assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(0x0102_0304));
        }
    }
}

#[test]
fn oneway_request_gets_no_reply() {
    let server = TestServer::start();
    let mut c = server.client();
    c.oneway(
        request::BROKER_HEARTBEAT,
        &[
            ("clusterName", "c"),
            ("brokerAddr", "a:1"),
            ("brokerName", "b"),
        ],
        b"",
    )
    .unwrap();
    let resp = c
        .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS);
    let mut s = raw_connect(&server);
    let oneway = br#"{"code":106,"flag":2,"language":"JAVA","opaque":1,"version":479}"#;
    let twoway = br#"{"code":106,"flag":0,"language":"JAVA","opaque":2,"version":479}"#;
    s.write_all(&raw_frame(0, oneway, b"")).unwrap();
    s.write_all(&raw_frame(0, twoway, b"")).unwrap();
    let (_, header, _) = read_raw_frame(&mut s);
    let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
    assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(2));
}

#[test]
fn unknown_code_is_answered_request_code_not_supported() {
    let server = TestServer::start();
    let mut c = server.client();
    let resp = c.request(9999, &[], b"").unwrap();
    assert_eq!(resp.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    // A broker-only code is unknown here too.
    let resp = c.request(305, &[], b"").unwrap();
    assert_eq!(resp.code, response::REQUEST_CODE_NOT_SUPPORTED);
}

#[test]
fn missing_required_field_is_an_error_naming_it() {
    let server = TestServer::start();
    let mut c = server.client();
    let resp = c
        .request(request::GET_ROUTEINFO_BY_TOPIC, &[], b"")
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("topic"));
    let resp = c
        .request(
            request::REGISTER_BROKER,
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("haServerAddr", "h:1"),
                ("brokerId", "0"),
            ],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("brokerAddr"));
    let resp = c
        .request(
            request::UNREGISTER_BROKER,
            &[
                ("brokerName", "b"),
                ("clusterName", "c"),
                ("brokerAddr", "h:1"),
                ("brokerId", "x"),
            ],
            b"",
        )
        .unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(resp.remark.unwrap_or_default().contains("brokerId"));
}

#[test]
fn oversized_length_closes_only_that_connection() {
    let server = TestServer::start_with(|c| c.frame_max_length = 1 << 20);
    let mut bad = raw_connect(&server);
    bad.write_all(&(2u32 << 20).to_be_bytes()).unwrap();
    bad.write_all(&[0u8; 64]).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn header_length_larger_than_frame_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    let mut v = Vec::new();
    v.extend_from_slice(&10u32.to_be_bytes());
    v.extend_from_slice(&100u32.to_be_bytes());
    v.extend_from_slice(&[b'{'; 6]);
    bad.write_all(&v).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn garbage_json_header_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    bad.write_all(&raw_frame(0, b"{\"code\":10", b"")).unwrap();
    assert!(closed(&mut bad));
    let mut bad = raw_connect(&server);
    bad.write_all(&raw_frame(7, b"{}", b"")).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn truncated_frame_then_eof_closes_the_connection() {
    let server = TestServer::start();
    let mut bad = raw_connect(&server);
    let frame = raw_frame(0, br#"{"code":106,"flag":0,"opaque":1}"#, b"");
    bad.write_all(&frame[..frame.len() - 3]).unwrap();
    bad.shutdown(Shutdown::Write).unwrap();
    assert!(closed(&mut bad));
    assert_still_serving(&server);
}

#[test]
fn cpp_client_header_with_trailing_newline_is_understood() {
    let server = TestServer::start();
    let mut s = raw_connect(&server);
    let header = b"{\"code\":105,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"\",\"Signature\":\"\",\"topic\":\"Nope\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":1,\"remark\":\"\",\"version\":333}\n";
    s.write_all(&raw_frame(0, header, b"")).unwrap();
    let (st, header, _) = read_raw_frame(&mut s);
    assert_eq!(st, 0);
    let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
    assert_eq!(h.get("code").and_then(|v| v.as_i64()), Some(17));
}

#[test]
fn idle_connection_is_closed_after_the_configured_time() {
    let server = TestServer::start_with(|c| c.server_channel_max_idle_time_seconds = 1);
    let mut idle = raw_connect(&server);
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(closed(&mut idle));
    assert_still_serving(&server);
}

#[test]
fn a_peer_that_does_not_read_is_paused_then_served_in_order() {
    let server = TestServer::start_with(|c| c.conn_write_high_water = 16 * 1024);
    let mut s = raw_connect(&server);
    let n = 5000;
    let mut all = Vec::new();
    for i in 0..n {
        let h = format!(r#"{{"code":106,"flag":0,"language":"JAVA","opaque":{i},"version":479}}"#);
        all.extend(raw_frame(0, h.as_bytes(), b""));
    }
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || w.write_all(&all).is_ok())
    };
    for i in 0..n {
        let (_, header, _) = read_raw_frame(&mut s);
        let h = rmq_namesrv::remoting::json::parse(&header).unwrap();
        assert_eq!(h.get("opaque").and_then(|v| v.as_i64()), Some(i));
    }
    assert!(writer.join().unwrap());
}

#[test]
fn a_peer_over_the_write_hard_cap_is_disconnected() {
    let server = TestServer::start_with(|c| {
        c.conn_write_high_water = 1 << 20;
        c.conn_write_hard_cap = 4096;
    });
    let mut s = raw_connect(&server);
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // GET_NAMESRV_CONFIG answers ~2 KiB each: 20,000 of them are far more than the kernel's
    // socket buffers hold, so unread answers pile up in the server's write buffer.
    let mut all = Vec::new();
    for i in 0..20_000 {
        let h = format!(r#"{{"code":319,"flag":0,"language":"JAVA","opaque":{i},"version":479}}"#);
        all.extend(raw_frame(0, h.as_bytes(), b""));
    }
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = w.write_all(&all);
        })
    };
    // Without reading, watch from another connection until the server drops us.
    let mut watcher = server.client();
    assert!(wait_until(Duration::from_secs(30), || stat(
        &mut watcher,
        "connections"
    ) == 1));
    assert!(closed(&mut s));
    writer.join().unwrap();
    assert_still_serving(&server);
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
}

#[test]
fn binary_prints_the_bound_address_and_serves() {
    let dir = TempDir::new("bin");
    let kv = dir.path().join("kv.json");
    let mut child = binary()
        .args([
            "--listenPort=0",
            "--bindAddress=127.0.0.1",
            "--logPath=",
            &format!("--kvConfigPath={}", kv.display()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let addr = line
        .strip_prefix("rmq-namesrv listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let mut c = rmq_namesrv::client::Client::connect(&addr, Duration::from_secs(5)).unwrap();
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    assert_eq!(resp.code, 0);
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    // Started with listenPort=0, it reports the port actually bound (as Java does).
    let port = addr.rsplit(':').next().unwrap();
    assert!(text.contains(&format!("listenPort={port}\n")), "{text}");
    assert!(text.contains("scanNotActiveBrokerInterval=5000"));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn binary_prints_config_help_and_version() {
    let out = binary().args(["-p", "--listenPort=1234"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l == "listenPort=1234"));
    assert!(text.lines().any(|l| l == "orderMessageEnable=false"));
    let out = binary().arg("--version").output().unwrap();
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("rmq-namesrv "));
    let out = binary().arg("-h").output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("-c"));
    let out = binary().arg("--noSuchFlag").output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn connections_beyond_max_connections_are_closed_at_once() {
    let server = TestServer::start_with(|c| c.max_connections = 2);
    let mut first = server.client();
    let _second = server.client();
    let mut third = raw_connect(&server);
    assert!(closed(&mut third));
    assert_eq!(
        first
            .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
            .unwrap()
            .code,
        response::SUCCESS
    );
}

// ---------------------------------------------------------------------------------------------
// The binary as an operator meets it: which config file it uses, what it says about mistakes,
// how it stops, and what its logs look like.

/// The binary started in `cwd` with `HOME=home`, stdout read up to the listening line and
/// stderr written to a file; killed when dropped.
struct Daemon {
    child: std::process::Child,
    addr: String,
    stderr: std::path::PathBuf,
}

impl Daemon {
    fn start(
        dir: &TempDir,
        cwd: &std::path::Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Daemon {
        let stderr = dir.path().join("stderr.txt");
        let mut child = daemon_command(dir, cwd, args, env)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        let read = std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        );
        let Some(addr) = line.trim().strip_prefix("rmq-namesrv listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "did not start ({read:?}): {line:?}; stderr: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        };
        let daemon = Daemon {
            addr: addr.to_string(),
            child,
            stderr,
        };
        // A round trip: by the time the loop answers it has logged its start.
        let resp = daemon
            .client()
            .request(request::GET_NAMESRV_CONFIG, &[], b"")
            .unwrap();
        assert_eq!(resp.code, response::SUCCESS);
        daemon
    }

    fn client(&self) -> rmq_namesrv::client::Client {
        rmq_namesrv::client::Client::connect(&self.addr, Duration::from_secs(5)).unwrap()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits (polling) for the process to end and returns its exit code (None: killed by a
    /// signal).
    fn exit_code(&mut self) -> Option<i32> {
        let mut status = None;
        assert!(
            wait_until(Duration::from_secs(20), || {
                status = self.child.try_wait().unwrap();
                status.is_some()
            }),
            "the server did not exit"
        );
        status.and_then(|s| s.code())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary with a clean environment for the things it reads: `HOME` inside `dir`, no
/// inherited `JOURNAL_STREAM`, working directory `cwd`.
fn daemon_command(
    dir: &TempDir,
    cwd: &std::path::Path,
    args: &[String],
    env: &[(&str, &str)],
) -> Command {
    let mut command = binary();
    command
        .current_dir(cwd)
        .env("HOME", dir.path().join("home"))
        .env_remove("JOURNAL_STREAM")
        .args(args)
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Runs the binary to completion: (exit code, stdout, stderr).
fn run_daemon(
    dir: &TempDir,
    cwd: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = daemon_command(dir, cwd, &args, &[]).output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Loopback, ephemeral port, KV and log files in `dir`.
fn local_args(dir: &TempDir) -> Vec<String> {
    vec![
        "--listenPort=0".into(),
        "--bindAddress=127.0.0.1".into(),
        format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
        format!("--logPath={}", dir.path().join("ns.log").display()),
    ]
}

fn log_text(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.path().join("ns.log")).unwrap_or_default()
}

#[test]
fn without_c_the_repository_namesrv_conf_is_the_config_file_and_says_so() {
    let dir = TempDir::new("quick-start");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, stdout, _) = run_daemon(&dir, repo, &["-p"]);
    assert_eq!(code, Some(0));
    let conf = repo.join("namesrv.conf");
    let store = dir.path().join("home/namesrv/namesrv.properties");
    let note = |conf: &std::path::Path| {
        format!(
            "config file {} (./namesrv.conf, no -c given; never written); runtime config \
             updates are written to {}, not read at start while ./namesrv.conf is found",
            conf.display(),
            store.display()
        )
    };
    assert_eq!(
        stdout.lines().next(),
        Some(format!("# {}", note(&conf)).as_str())
    );
    assert!(stdout.lines().any(|l| l == "listenPort=9876"));
    assert!(stdout
        .lines()
        .any(|l| l == format!("configStorePath={}", store.display())));
    // Started for real in a copy, it logs the same.
    let cwd = dir.path().join("checkout");
    std::fs::create_dir_all(&cwd).unwrap();
    let local = cwd.join("namesrv.conf");
    std::fs::copy(&conf, &local).unwrap();
    let original = std::fs::read(&local).unwrap();
    let server = Daemon::start(&dir, &cwd, &local_args(&dir), &[]);
    assert!(server.addr.starts_with("127.0.0.1:"));
    assert!(log_text(&dir).contains(&format!("INFO main - {}", note(&local))));
    // An update leaves the found file alone and goes to configStorePath.
    let resp = server
        .client()
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"scanNotActiveBrokerInterval=7000",
        )
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(std::fs::read(&local).unwrap(), original);
    assert!(!cwd.join("namesrv.conf.bak").exists());
    assert_eq!(
        std::fs::read_to_string(&store).unwrap(),
        "scanNotActiveBrokerInterval=7000\n"
    );
}

#[test]
fn without_a_config_file_updates_go_to_config_store_path_and_are_read_at_the_next_start() {
    let dir = TempDir::new("no-c");
    let cwd = dir.path().join("empty");
    std::fs::create_dir_all(&cwd).unwrap();
    let store = dir.path().join("home/namesrv/namesrv.properties");
    let (code, stdout, _) = run_daemon(&dir, &cwd, &["-p"]);
    assert_eq!(code, Some(0));
    let note = format!(
        "no config file: no -c given, no ./namesrv.conf, and {0} (configStorePath) does not \
         exist yet; runtime config updates will be written to {0} and read at the next start",
        store.display()
    );
    assert_eq!(stdout.lines().next(), Some(format!("# {note}").as_str()));
    let server = Daemon::start(&dir, &cwd, &local_args(&dir), &[]);
    assert!(log_text(&dir).contains(&note));
    let mut c = server.client();
    let resp = c
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"scanNotActiveBrokerInterval=7000",
        )
        .unwrap();
    assert_eq!(resp.code, 0, "{:?}", resp.remark);
    // Only the change: no command-line overrides, no defaults.
    assert_eq!(
        std::fs::read_to_string(&store).unwrap(),
        "scanNotActiveBrokerInterval=7000\n"
    );
    drop(server);
    let server = Daemon::start(&dir, &cwd, &local_args(&dir), &[]);
    let mut c = server.client();
    let text = String::from_utf8(
        c.request(request::GET_NAMESRV_CONFIG, &[], b"")
            .unwrap()
            .body
            .to_vec(),
    )
    .unwrap();
    assert!(text.contains("scanNotActiveBrokerInterval=7000\n"));
    assert!(log_text(&dir).contains(&format!(
        "config file {} (configStorePath, no -c given and no ./namesrv.conf); runtime config \
         updates are written back to it",
        store.display()
    )));
}

#[test]
fn unknown_keys_are_warned_about_naming_the_closest_key() {
    let dir = TempDir::new("unknown-keys");
    let conf = dir.path().join("ns.conf");
    std::fs::write(&conf, "# test\nscanNotActivBrokerInterval=100\n").unwrap();
    let file_warning = format!(
        "{} line 2: unknown key scanNotActivBrokerInterval (did you mean \
         scanNotActiveBrokerInterval?)",
        conf.display()
    );
    let cli_warning = "command line --listenPrt: unknown key listenPrt (did you mean listenPort?)";
    let mut args = vec!["-c".to_string(), conf.to_string_lossy().into_owned()];
    args.extend(local_args(&dir));
    args.push("--listenPrt=1".into());
    let server = Daemon::start(&dir, dir.path(), &args, &[]);
    for warning in [file_warning.as_str(), cli_warning] {
        let line = format!("WARN main - {warning}");
        assert!(server.stderr().contains(&line), "{}", server.stderr());
        assert!(log_text(&dir).contains(&line), "{}", log_text(&dir));
    }
    // -p shows them too.
    let mut print = args.clone();
    print.push("-p".into());
    let print: Vec<&str> = print.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run_daemon(&dir, dir.path(), &print);
    assert_eq!(code, Some(0));
    assert_eq!(
        stderr,
        format!("rmq-namesrv: warning: {file_warning}\nrmq-namesrv: warning: {cli_warning}\n")
    );
    assert!(
        stdout.lines().any(|l| l == "listenPrt=1"),
        "kept, as Java does"
    );
}

#[test]
fn a_bad_value_in_the_file_names_the_file_line_and_key() {
    let dir = TempDir::new("bad-bool");
    let conf = dir.path().join("ns.conf");
    for value in ["yes", "ture", "1"] {
        std::fs::write(&conf, format!("listenPort=0\norderMessageEnable={value}\n")).unwrap();
        let (code, stdout, stderr) = run_daemon(&dir, dir.path(), &["-c", &conf.to_string_lossy()]);
        assert_eq!(code, Some(2));
        assert_eq!(stdout, "");
        assert_eq!(
            stderr,
            format!(
                "rmq-namesrv: {} line 2: orderMessageEnable: \"{value}\" is not true or false\n",
                conf.display()
            )
        );
    }
}

#[test]
fn a_bad_argument_is_one_line_and_a_pointer_to_help() {
    let dir = TempDir::new("bad-arg");
    for (arg, message) in [
        (
            "--listenPort=abc",
            "--listenPort=abc: listenPort: \"abc\" is not an integer",
        ),
        ("stray", "unexpected argument \"stray\""),
        (
            "--listenPort",
            "--listenPort needs a value: --listenPort=VALUE",
        ),
    ] {
        let (code, stdout, stderr) = run_daemon(&dir, dir.path(), &[arg]);
        assert_eq!(code, Some(2), "{arg}");
        assert_eq!(stdout, "");
        assert_eq!(
            stderr,
            format!("rmq-namesrv: {message}\nsee rmq-namesrv --help\n")
        );
    }
}

#[test]
fn a_log_file_that_cannot_be_opened_is_named_and_the_console_is_used() {
    let dir = TempDir::new("bad-log");
    // A regular file where the log directory should be.
    std::fs::write(dir.path().join("not-a-dir"), "").unwrap();
    let log = dir.path().join("not-a-dir/ns.log");
    let mut args = local_args(&dir);
    args.push(format!("--logPath={}", log.display()));
    let server = Daemon::start(&dir, dir.path(), &args, &[]);
    let stderr = server.stderr();
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "rmq-namesrv: cannot open log file {}: ",
            log.display()
        )) && first.ends_with("; logging to the console only"),
        "{stderr}"
    );
    assert!(!stderr.contains("Some("), "{stderr}");
    assert!(stderr.contains("INFO main - rmq-namesrv"), "{stderr}");
}

#[test]
fn a_store_directory_that_cannot_be_written_stops_the_start_naming_it() {
    // procfs takes no new files, even from root (permission bits would not stop root).
    for key in ["kvConfigPath", "configStorePath"] {
        let dir = TempDir::new("unwritable-store");
        let path = "/proc/self/rmq-namesrv-store/file";
        let mut args = local_args(&dir);
        args.push(format!("--{key}={path}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = run_daemon(&dir, dir.path(), &args);
        assert_eq!(code, Some(1), "{key}: {stderr}");
        assert_eq!(stdout, "", "{key}");
        assert!(
            stderr.contains(&format!(
                "cannot start: {key}: cannot write in /proc/self/rmq-namesrv-store: "
            )),
            "{key}: {stderr}"
        );
    }
}

#[test]
fn an_update_keeps_the_config_file_s_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("file-mode");
    let conf = dir.path().join("ns.conf");
    std::fs::write(&conf, "orderMessageEnable=false\n").unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut args = local_args(&dir);
    args.extend(["-c".to_string(), conf.to_string_lossy().into_owned()]);
    let server = Daemon::start(&dir, dir.path(), &args, &[]);
    let resp = server
        .client()
        .request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"orderMessageEnable=true",
        )
        .unwrap();
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "orderMessageEnable=true\n"
    );
    let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "{mode:o}");
}

#[test]
fn a_busy_port_names_the_address() {
    let dir = TempDir::new("busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut args = local_args(&dir);
    args.push(format!("--listenPort={port}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run_daemon(&dir, dir.path(), &args);
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "");
    let message = format!("cannot listen on 127.0.0.1:{port}: Address already in use");
    assert!(
        stderr.contains(&format!("ERROR main - {message}")),
        "{stderr}"
    );
    assert!(log_text(&dir).contains(&message));
}

#[test]
fn sigterm_and_sigint_stop_cleanly_after_acknowledged_writes() {
    for signal in ["TERM", "INT"] {
        let dir = TempDir::new("clean-stop");
        let server = Daemon::start(&dir, dir.path(), &local_args(&dir), &[]);
        let mut writer = server.client();
        let _idle = server.client();
        let resp = writer
            .request(
                request::PUT_KV_CONFIG,
                &[("namespace", "NS"), ("key", "k"), ("value", signal)],
                b"",
            )
            .unwrap();
        assert_eq!(resp.code, response::SUCCESS);
        let mut server = server;
        server.signal(signal);
        assert_eq!(server.exit_code(), Some(0), "{signal}");
        let kv = std::fs::read_to_string(dir.path().join("kv.json")).unwrap();
        assert_eq!(
            kv,
            format!(r#"{{"configTable":{{"NS":{{"k":"{signal}"}}}}}}"#)
        );
        let log = log_text(&dir);
        let shutting = log
            .find(&format!(
                "INFO signals - rmq-namesrv shutting down (signal {signal})"
            ))
            .unwrap_or_else(|| panic!("{log}"));
        let stopped = log
            .find(&format!(
                "INFO main - rmq-namesrv stopped (signal {signal}) after "
            ))
            .unwrap_or_else(|| panic!("{log}"));
        assert!(shutting < stopped, "{log}");
        assert!(log
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .contains("rmq-namesrv stopped"));
    }
}

#[test]
fn a_stop_sent_as_soon_as_the_port_answers_is_a_clean_stop() {
    // A supervisor (or a script) may stop the server the moment its port answers, before it
    // has printed or logged that it is listening: that is still a clean stop, exit 0.
    let dir = TempDir::new("early-stop");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let mut args = local_args(&dir);
    args[0] = format!("--listenPort={port}");
    let mut child = daemon_command(&dir, dir.path(), &args, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let answered = wait_until(Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut status = None;
    let exited = wait_until(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(answered && exited, "answered {answered}, exited {exited}");
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{status:?}");
}

#[test]
fn a_second_signal_exits_at_once() {
    let dir = TempDir::new("second-signal");
    let mut server = Daemon::start(&dir, dir.path(), &local_args(&dir), &[]);
    // Stopped, the process collects both signals and handles them back to back when it
    // continues: the first starts the clean stop, the second ends the process right there.
    server.signal("STOP");
    server.signal("INT");
    server.signal("TERM");
    server.signal("CONT");
    let code = server.exit_code();
    assert!(matches!(code, Some(130) | Some(143)), "{code:?}");
    assert!(!log_text(&dir).contains("rmq-namesrv stopped"));
}

/// `yyyy-MM-dd HH:mm:ss,SSS`: the minute of the day it names.
fn stamp_minutes(line: &str) -> u32 {
    let b = line.as_bytes();
    assert!(
        line.len() > 24
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b' '
            && b[13] == b':'
            && b[16] == b':'
            && b[19] == b','
            && b[20..23].iter().all(u8::is_ascii_digit)
            && b[23] == b' ',
        "{line}"
    );
    line[11..13].parse::<u32>().unwrap() * 60 + line[14..16].parse::<u32>().unwrap()
}

#[test]
fn the_file_log_uses_java_s_layout_in_local_time() {
    let mut minutes = Vec::new();
    for tz in ["UTC0", "RMQ-8"] {
        let dir = TempDir::new("log-layout");
        let server = Daemon::start(&dir, dir.path(), &local_args(&dir), &[("TZ", tz)]);
        drop(server);
        let log = log_text(&dir);
        let line = log
            .lines()
            .find(|l| l.contains(" INFO main - rmq-namesrv ") && l.contains(" listening on "))
            .unwrap_or_else(|| panic!("{log}"));
        minutes.push(stamp_minutes(line));
        for line in log.lines() {
            stamp_minutes(line);
            let rest = &line[24..];
            let (level, rest) = rest.split_once(' ').unwrap();
            assert!(
                ["INFO", "WARN", "ERROR", "DEBUG"].contains(&level),
                "{line}"
            );
            let (_thread, message) = rest.split_once(" - ").unwrap_or_else(|| panic!("{line}"));
            assert!(!message.is_empty());
        }
    }
    // TZ=RMQ-8 is UTC+8 (POSIX signs are reversed): the two stamps are eight hours apart.
    let apart = (minutes[1] + 24 * 60 - minutes[0]) % (24 * 60);
    assert!((8 * 60..=8 * 60 + 1).contains(&apart), "{minutes:?}");
}

/// `JOURNAL_STREAM` naming the file the child's stderr goes to, as systemd sets it.
fn journal_stream(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).unwrap();
    format!("{}:{}", meta.dev(), meta.ino())
}

#[test]
fn under_systemd_lines_go_to_one_place_and_the_journal_gets_no_time_stamp() {
    // With a log file (the unit's default): the file only; stderr gets no log lines.
    let dir = TempDir::new("journal-file");
    let stderr = dir.path().join("stderr.txt");
    std::fs::write(&stderr, "").unwrap();
    let env = journal_stream(&stderr);
    let server = Daemon::start(
        &dir,
        dir.path(),
        &local_args(&dir),
        &[("JOURNAL_STREAM", &env)],
    );
    let mut c = server.client();
    assert_eq!(
        c.request(request::GET_NAMESRV_CONFIG, &[], b"")
            .unwrap()
            .code,
        0
    );
    assert_eq!(server.stderr(), "");
    assert!(log_text(&dir).contains(" INFO main - rmq-namesrv "));
    drop(server);

    // Without one: the journal, with a priority prefix and no time stamp of ours.
    let dir = TempDir::new("journal-only");
    let mut args = local_args(&dir);
    args.push("--logPath=".into());
    let stderr = dir.path().join("stderr.txt");
    std::fs::write(&stderr, "").unwrap();
    let env = journal_stream(&stderr);
    let server = Daemon::start(&dir, dir.path(), &args, &[("JOURNAL_STREAM", &env)]);
    // A round trip: the loop has logged its start by the time it answers.
    let mut c = server.client();
    assert_eq!(
        c.request(request::GET_NAMESRV_CONFIG, &[], b"")
            .unwrap()
            .code,
        0
    );
    let text = server.stderr();
    assert!(text.contains("<6>INFO main - rmq-namesrv "), "{text}");
    for line in text.lines() {
        let levels = ["<6>INFO ", "<4>WARN ", "<3>ERROR ", "<7>DEBUG "];
        assert!(levels.iter().any(|l| line.starts_with(l)), "{line}");
    }
    // A JOURNAL_STREAM that names something else (inherited by a child whose stderr was
    // redirected) changes nothing: plain lines with time stamps.
    drop(server);
    let dir = TempDir::new("journal-other");
    let server = Daemon::start(&dir, dir.path(), &args, &[("JOURNAL_STREAM", "1:2")]);
    let text = server.stderr();
    let line = text
        .lines()
        .find(|l| l.contains("INFO main"))
        .unwrap_or_default();
    stamp_minutes(line);
}
