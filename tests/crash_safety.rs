//! Crash safety of the only durable state: the KV config (kvConfigPath) and the properties
//! file (UPDATE_NAMESRV_CONFIG's write-back). The real binary is SIGKILLed while clients
//! stream PUT_KV_CONFIG (three connections, so the writer thread commits several changes per
//! write) and UPDATE_NAMESRV_CONFIG at it; after a restart on the same files, every change that
//! was acknowledged must be there, and both files (and their .bak copies) must parse. Several
//! rounds, each killing at a different point of the stream.

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::{wait_until, TempDir};
use rmq_namesrv::config::parse_properties;
use rmq_namesrv::kv::KvStore;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::remoting::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const NAMESPACE: &str = "CRASH_TEST";
const ROUNDS: usize = 6;

struct Files {
    conf: PathBuf,
    kv: PathBuf,
}

fn args(files: &Files) -> Vec<String> {
    vec![
        "-c".into(),
        files.conf.to_string_lossy().into_owned(),
        "--listenPort=0".into(),
        "--bindAddress=127.0.0.1".into(),
        "--logPath=".into(),
        "--logLevel=warn".into(),
        format!("--kvConfigPath={}", files.kv.display()),
    ]
}

/// What the clients saw acknowledged.
#[derive(Default)]
struct Acked {
    /// Unique KV keys -> value.
    kv: BTreeMap<String, String>,
    /// Acknowledged config updates.
    config_updates: usize,
    /// The highest acknowledged value of the KV key and of the config keys rewritten on every
    /// call (both config keys get the same value).
    kv_last: Option<u64>,
    config_last: Option<u64>,
}

/// KV writers per round; writer 0 also moves the `last` key.
const KV_WRITERS: usize = 3;

/// Streams PUT_KV_CONFIG until the connection fails (the server was killed). Writers other
/// than 0 put only their own unique keys.
fn kv_writer(
    addr: String,
    (round, writer): (usize, usize),
    acked: Arc<Mutex<Acked>>,
    count: Arc<AtomicUsize>,
) {
    let Ok(mut c) = rmq_namesrv::client::Client::connect(&addr, Duration::from_secs(5)) else {
        return;
    };
    for i in 0u64.. {
        let key = format!("k.{round}.{writer}.{i}");
        let value = format!("v{i}-\u{e9}\"quoted\"\\{round}");
        let Ok(resp) = c.request(
            request::PUT_KV_CONFIG,
            &[("namespace", NAMESPACE), ("key", &key), ("value", &value)],
            b"",
        ) else {
            return;
        };
        assert_eq!(
            resp.code,
            response::SUCCESS,
            "PUT_KV_CONFIG: {:?}",
            resp.remark
        );
        if writer > 0 {
            acked.lock().unwrap().kv.insert(key, value);
            count.fetch_add(1, Ordering::SeqCst);
            continue;
        }
        let Ok(resp) = c.request(
            request::PUT_KV_CONFIG,
            &[
                ("namespace", NAMESPACE),
                ("key", "last"),
                ("value", &(round as u64 * 1_000_000 + i).to_string()),
            ],
            b"",
        ) else {
            let mut a = acked.lock().unwrap();
            a.kv.insert(key, value);
            return;
        };
        assert_eq!(
            resp.code,
            response::SUCCESS,
            "PUT_KV_CONFIG: {:?}",
            resp.remark
        );
        let mut a = acked.lock().unwrap();
        a.kv.insert(key, value);
        a.kv_last = Some(round as u64 * 1_000_000 + i);
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Streams UPDATE_NAMESRV_CONFIG until the connection fails.
fn config_writer(addr: String, round: usize, acked: Arc<Mutex<Acked>>, count: Arc<AtomicUsize>) {
    let Ok(mut c) = rmq_namesrv::client::Client::connect(&addr, Duration::from_secs(5)) else {
        return;
    };
    for i in 0u64.. {
        // Two harmless keys (a live one and a reported-only one), a new value every time.
        let value = 10 + round as u64 * 1_000 + i;
        let body = format!(
            "scanNotActiveBrokerInterval={value}\n{}={value}\n",
            "clientRequestThreadPoolQueueCapacity"
        );
        let Ok(resp) = c.request(request::UPDATE_NAMESRV_CONFIG, &[], body.as_bytes()) else {
            return;
        };
        assert_eq!(
            resp.code,
            response::SUCCESS,
            "UPDATE_NAMESRV_CONFIG: {:?}",
            resp.remark
        );
        let mut a = acked.lock().unwrap();
        a.config_updates += 1;
        a.config_last = Some(value);
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Both files and their backups parse on their own (not only through the loader's fallback).
fn check_files_parse(files: &Files) {
    let kv_text = std::fs::read(&files.kv).expect("kv file exists after acknowledged puts");
    let root = json::parse(&kv_text).unwrap_or_else(|e| {
        panic!(
            "kv file does not parse ({e}): {:?}",
            String::from_utf8_lossy(&kv_text)
        )
    });
    assert!(root.get("configTable").is_some(), "kv file has configTable");
    let bak = sibling(&files.kv, ".bak");
    if bak.exists() {
        let text = std::fs::read(&bak).unwrap();
        json::parse(&text).unwrap_or_else(|e| panic!("kv .bak does not parse ({e})"));
    }
    KvStore::open(&files.kv).expect("KvStore opens the kv file");
    for path in [files.conf.clone(), sibling(&files.conf, ".bak")] {
        if path.exists() || path == files.conf {
            let text = std::fs::read_to_string(&path).expect("config file readable");
            parse_properties(&text)
                .unwrap_or_else(|e| panic!("{} does not parse ({e})", path.display()));
        }
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    rmq_namesrv::durable_file::sibling(path, suffix)
}

/// Every acknowledged change is visible through the restarted server.
fn check_acknowledged(server: &ServerProcess, acked: &Acked, files: &Files) {
    let mut c = server.client();
    for (key, value) in &acked.kv {
        let resp = c
            .request(
                request::GET_KV_CONFIG,
                &[("namespace", NAMESPACE), ("key", key)],
                b"",
            )
            .expect("GET_KV_CONFIG");
        assert_eq!(resp.code, response::SUCCESS, "acknowledged {key} lost");
        assert_eq!(resp.ext("value"), Some(value.as_str()), "{key}");
    }
    if let Some(last) = acked.kv_last {
        let resp = c
            .request(
                request::GET_KV_CONFIG,
                &[("namespace", NAMESPACE), ("key", "last")],
                b"",
            )
            .expect("GET_KV_CONFIG");
        let got: u64 = resp.ext("value").and_then(|v| v.parse().ok()).unwrap_or(0);
        // The write in flight at the kill may have landed without its acknowledgement.
        assert!(got >= last, "kv 'last' went back from {last} to {got}");
    }
    let resp = c
        .request(request::GET_NAMESRV_CONFIG, &[], b"")
        .expect("GET_NAMESRV_CONFIG");
    assert_eq!(resp.code, response::SUCCESS);
    let text = String::from_utf8(resp.body.to_vec()).expect("config is text");
    let config: BTreeMap<String, String> = parse_properties(&text)
        .expect("GET_NAMESRV_CONFIG parses")
        .into_iter()
        .collect();
    // The file on disk says the same as the server (it is what the next start reads), and
    // updates rewrote only their own lines.
    let file_text = std::fs::read_to_string(&files.conf).unwrap();
    assert!(
        file_text.starts_with("# crash-safety test\n"),
        "{file_text}"
    );
    let on_disk: BTreeMap<String, String> =
        parse_properties(&file_text).unwrap().into_iter().collect();
    let Some(last) = acked.config_last else {
        return;
    };
    for key in [
        "scanNotActiveBrokerInterval",
        "clientRequestThreadPoolQueueCapacity",
    ] {
        for (source, values) in [("server", &config), ("file", &on_disk)] {
            let got: u64 = values.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
            assert!(
                got >= last,
                "{source}: {key} went back from {last} to {got}"
            );
        }
    }
}

#[test]
fn acknowledged_changes_survive_sigkill_mid_stream() {
    let dir = TempDir::new("crash");
    let files = Files {
        conf: dir.path().join("namesrv.conf"),
        kv: dir.path().join("kv.json"),
    };
    std::fs::write(
        &files.conf,
        "# crash-safety test\nscanNotActiveBrokerInterval=5\n",
    )
    .unwrap();
    let acked = Arc::new(Mutex::new(Acked::default()));
    // Kill points vary per round: after this many acknowledged changes (of either kind).
    let kill_after = [3usize, 17, 41, 9, 60, 1];
    let mut total_acked = 0;
    for (round, &after) in kill_after.iter().enumerate().take(ROUNDS) {
        let mut server = ServerProcess::spawn(&args(&files));
        if round > 0 {
            check_files_parse(&files);
            check_acknowledged(&server, &acked.lock().unwrap(), &files);
        }
        let count = Arc::new(AtomicUsize::new(0));
        let mut writers: Vec<thread::JoinHandle<()>> = (0..KV_WRITERS)
            .map(|writer| {
                let (addr, a, n) = (server.addr.clone(), acked.clone(), count.clone());
                thread::spawn(move || kv_writer(addr, (round, writer), a, n))
            })
            .collect();
        writers.push({
            let (addr, a, n) = (server.addr.clone(), acked.clone(), count.clone());
            thread::spawn(move || config_writer(addr, round, a, n))
        });
        assert!(
            wait_until(Duration::from_secs(60), || count.load(Ordering::SeqCst)
                >= after
                || writers.iter().all(|w| w.is_finished())),
            "writers made no progress"
        );
        // Every writer still has a request in flight: kill now.
        server.kill();
        for w in writers {
            w.join().expect("writer thread");
        }
        let a = acked.lock().unwrap();
        assert!(
            a.kv.len() + a.config_updates > total_acked,
            "round {round} acknowledged nothing"
        );
        total_acked = a.kv.len() + a.config_updates;
    }
    let server = ServerProcess::spawn(&args(&files));
    check_files_parse(&files);
    check_acknowledged(&server, &acked.lock().unwrap(), &files);
    let a = acked.lock().unwrap();
    println!(
        "crash safety: {ROUNDS} SIGKILLs; {} KV puts and {} config updates acknowledged, all \
         present after restart",
        a.kv.len(),
        a.config_updates
    );
}
