//! KV writes over TCP: they wait for the disk on the writer thread, not on the loop; a
//! connection's answers keep their order; limits are refused with the setting named; a full
//! disk (a real one: a small tmpfs in a mount namespace) refuses writes with the reason and
//! takes them again once space returns; config updates take the same path, one at a time.
//!
//! A stuck disk is a FIFO where the writer's temporary file goes: opening it for writing waits
//! until the test opens it for reading, and fsync on it fails, which makes the write fail.

#[path = "common/child.rs"]
mod child;
mod common;

use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::route::model;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

/// A FIFO at `path`, standing in for a disk that does not answer.
fn stuck_disk_at(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Lets the writer blocked on the FIFO go on (its write then fails at fsync).
fn unstick(path: PathBuf) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let _ = std::fs::read(path);
    })
}

fn config_value(c: &mut Client, key: &str) -> String {
    let resp = c.request(request::GET_NAMESRV_CONFIG, &[], b"").unwrap();
    let text = String::from_utf8(resp.body.to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_first_put_on_a_fresh_install_creates_the_kv_directory() {
    // A fresh HOME has no ~/namesrv: the first put creates it and the file.
    let home = TempDir::new("kv-fresh");
    let path = home.join("namesrv").join("kvConfig.json");
    let kv_path = path.to_string_lossy().into_owned();
    let server = TestServer::start_with(|c| c.kv_config_path = kv_path);
    let mut c = server.client();
    let resp = put_kv(&mut c, "NS", "k", "v");
    assert_eq!(resp.code, response::SUCCESS, "{}", remark(&resp));
    assert_eq!(get_kv(&mut c, "NS", "k").as_deref(), Some("v"));
}

#[test]
fn a_stuck_write_holds_up_no_one_else_and_its_failure_is_answered_with_the_file() {
    let server = TestServer::start();
    let mut writer = server.client();
    let mut reader = server.client();
    assert_eq!(put_kv(&mut writer, "NS", "k", "v1").code, response::SUCCESS);
    let fifo = server.dir.path().join("kvConfig.json.tmp");
    stuck_disk_at(&fifo);
    let opaque = writer
        .send_request(
            request::PUT_KV_CONFIG,
            &[("namespace", "NS"), ("key", "k"), ("value", "v2")],
            b"",
        )
        .unwrap();
    // The same connection's next request waits behind the put.
    let get_opaque = writer
        .send_request(
            request::GET_KV_CONFIG,
            &[("namespace", "NS"), ("key", "k")],
            b"",
        )
        .unwrap();
    // While the writer waits for its disk, everyone else is served, from what is on disk.
    assert_eq!(get_kv(&mut reader, "NS", "k").as_deref(), Some("v1"));
    let list = reader
        .request(
            request::GET_KVLIST_BY_NAMESPACE,
            &[("namespace", "NS")],
            b"",
        )
        .unwrap();
    assert_eq!(
        model::decode_kv_table(&list.body).unwrap(),
        vec![("k".to_string(), "v1".to_string())]
    );
    assert_eq!(
        reader
            .request(request::GET_BROKER_CLUSTER_INFO, &[], b"")
            .unwrap()
            .code,
        response::SUCCESS
    );
    let drained = unstick(fifo.clone());
    let resp = writer.read_response(opaque).unwrap();
    drained.join().unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    let text = remark(&resp);
    assert!(
        text.starts_with("persisting the KV config failed: cannot write ")
            && text.contains("kvConfig.json"),
        "{text}"
    );
    let after = writer.read_response(get_opaque).unwrap();
    assert_eq!(
        after.ext("value"),
        Some("v1"),
        "the failed put left nothing"
    );
    assert!(
        !fifo.exists(),
        "the failed write removed its temporary file"
    );
    assert_eq!(put_kv(&mut writer, "NS", "k", "v3").code, response::SUCCESS);
    assert_eq!(get_kv(&mut reader, "NS", "k").as_deref(), Some("v3"));
    let file = std::fs::read_to_string(server.dir.path().join("kvConfig.json")).unwrap();
    assert_eq!(file, r#"{"configTable":{"NS":{"k":"v3"}}}"#);
}

#[test]
fn pipelined_changes_are_answered_in_order_and_read_their_own_writes() {
    let server = TestServer::start();
    let mut c = server.client();
    let ns = ("namespace", "NS");
    let mut frames = Vec::new();
    let requests: [(i32, Vec<(&str, &str)>); 6] = [
        (
            request::PUT_KV_CONFIG,
            vec![ns, ("key", "k"), ("value", "1")],
        ),
        (request::GET_KV_CONFIG, vec![ns, ("key", "k")]),
        (
            request::PUT_KV_CONFIG,
            vec![ns, ("key", "k"), ("value", "2")],
        ),
        (request::GET_KV_CONFIG, vec![ns, ("key", "k")]),
        (request::DELETE_KV_CONFIG, vec![ns, ("key", "k")]),
        (request::GET_KV_CONFIG, vec![ns, ("key", "k")]),
    ];
    for (i, (code, ext)) in requests.iter().enumerate() {
        frames.extend(request_frame(*code, 100 + i as i32, ext, b""));
    }
    c.send_raw(&frames).unwrap();
    // Each answer is read in turn; one arriving out of order would be skipped and its own
    // read would then fail.
    let answers: Vec<RemotingCommand> = (0..6).map(|i| c.read_response(100 + i).unwrap()).collect();
    let codes: Vec<i32> = answers.iter().map(|a| a.code).collect();
    assert_eq!(codes, [0, 0, 0, 0, 0, response::QUERY_NOT_FOUND]);
    assert_eq!(answers[1].ext("value"), Some("1"));
    assert_eq!(answers[3].ext("value"), Some("2"));
}

#[test]
fn limits_are_refused_with_their_setting_named_and_follow_config_updates() {
    let server = TestServer::start_with(|c| c.config_black_list = JAVA_CONFIG_BLACK_LIST.into());
    let mut c = server.client();
    let long = "v".repeat(16_385);
    let resp = put_kv(&mut c, "NS", "k", &long);
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert_eq!(
        remark(&resp),
        "KV value too long: 16385 bytes, the limit is 16384 (kvMaxValueLength)"
    );
    let resp = put_kv(&mut c, "NS", &"k".repeat(1025), "v");
    assert!(remark(&resp).contains("kvMaxKeyLength"), "{resp:?}");
    let update = |c: &mut Client, body: &str| {
        c.request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes())
            .unwrap()
            .code
    };
    assert_eq!(update(&mut c, "kvMaxValueLength=20000\nkvMaxEntries=2"), 0);
    assert_eq!(put_kv(&mut c, "NS", "k", &long).code, response::SUCCESS);
    // The namespace and its key are the two entries allowed.
    let resp = put_kv(&mut c, "NS", "k2", "v");
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(remark(&resp).contains("kvMaxEntries"), "{resp:?}");
    // Changing an existing key adds no entry; deleting makes room.
    assert_eq!(put_kv(&mut c, "NS", "k", "short").code, response::SUCCESS);
    assert_eq!(delete_kv(&mut c, "NS", "k").code, response::SUCCESS);
    assert_eq!(put_kv(&mut c, "NS", "k2", "v").code, response::SUCCESS);
    assert_eq!(update(&mut c, "kvMaxEntries=100\nkvMaxTotalBytes=1024"), 0);
    let resp = put_kv(&mut c, "NS", "big", &"x".repeat(1100));
    assert!(remark(&resp).contains("kvMaxTotalBytes"), "{resp:?}");
}

/// The real binary in a mount namespace of its own whose `dir` is a 256 KiB tmpfs: a disk that
/// really fills up. The test reaches that directory through `/proc/PID/root`.
fn server_on_a_small_disk(dir: &Path) -> (child::ServerProcess, PathBuf) {
    let script = format!(
        "mount -t tmpfs -o size=256k tmpfs {dir} && exec {bin} --listenPort=0 --bindAddress=127.0.0.1 \
         --kvConfigPath={dir}/kvConfig.json --configStorePath={dir}/namesrv.properties --logPath=",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_rmq-namesrv"),
    );
    let server = child::ServerProcess::spawn_command(
        Command::new("unshare").args(["-Urm", "sh", "-c", &script]),
    );
    let seen = PathBuf::from(format!("/proc/{}/root{}", server.pid(), dir.display()));
    (server, seen)
}

/// Writes zeros into `path` until the disk is full.
fn fill_disk(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = [0u8; 4096];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => return,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

#[test]
fn on_a_full_disk_puts_are_refused_with_the_reason_and_succeed_once_space_returns() {
    let dir = TempDir::new("kv-full-disk");
    let (server, seen) = server_on_a_small_disk(dir.path());
    let mut c = server.client();
    assert_eq!(put_kv(&mut c, "NS", "a", "1").code, 0);
    let filler = seen.join("filler");
    fill_disk(&filler);
    let resp = put_kv(&mut c, "NS", "b", &"x".repeat(8_000));
    assert_eq!(resp.code, response::SYSTEM_ERROR, "{resp:?}");
    let why = remark(&resp);
    assert!(
        why.contains("kvConfig.json") && why.contains("No space left"),
        "{why}"
    );
    // Nothing changed: not in memory, not on disk; reads keep working.
    assert_eq!(get_kv(&mut c, "NS", "b"), None);
    assert_eq!(get_kv(&mut c, "NS", "a").as_deref(), Some("1"));
    let file = std::fs::read_to_string(seen.join("kvConfig.json")).unwrap();
    assert_eq!(file, r#"{"configTable":{"NS":{"a":"1"}}}"#);
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(put_kv(&mut c, "NS", "b", "2").code, 0);
    assert_eq!(get_kv(&mut c, "NS", "b").as_deref(), Some("2"));
}

#[test]
fn config_updates_are_written_one_at_a_time_off_the_loop() {
    let server = TestServer::start();
    let (mut first, mut second, mut reader) = (server.client(), server.client(), server.client());
    let before = config_value(&mut reader, "scanNotActiveBrokerInterval");
    let fifo = server.dir.path().join("namesrv.properties.tmp");
    stuck_disk_at(&fifo);
    let first_opaque = first
        .send_request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"scanNotActiveBrokerInterval=7000",
        )
        .unwrap();
    // The first update holds the writer; readers see the config in force, and a second
    // update waits its turn.
    assert_eq!(
        config_value(&mut reader, "scanNotActiveBrokerInterval"),
        before
    );
    let second_opaque = second
        .send_request(
            request::UPDATE_NAMESRV_CONFIG,
            &[],
            b"scanNotActiveBrokerInterval=8000",
        )
        .unwrap();
    assert_eq!(
        config_value(&mut reader, "scanNotActiveBrokerInterval"),
        before
    );
    let drained = unstick(fifo);
    let resp = first.read_response(first_opaque).unwrap();
    drained.join().unwrap();
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert!(
        remark(&resp).contains("namesrv.properties")
            && remark(&resp).contains("nothing was changed"),
        "{resp:?}"
    );
    let resp = second.read_response(second_opaque).unwrap();
    assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
    assert_eq!(
        config_value(&mut reader, "scanNotActiveBrokerInterval"),
        "8000"
    );
    let file = std::fs::read_to_string(server.dir.path().join("namesrv.properties")).unwrap();
    assert_eq!(file, "scanNotActiveBrokerInterval=8000\n");
}
