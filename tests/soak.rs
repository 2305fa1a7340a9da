//! Soak: about a minute of churn against the real binary (a child process, so its RSS is its
//! own). Broker threads register (5.x JSON body, correct CRC), heartbeat, and vanish at random
//! (connection dropped, explicit unregistration, or silence until the scanner expires them);
//! client threads query routes, cluster info and topic lists; another thread opens
//! connections that send malformed frames. Checked: no error response to a valid request,
//! no panic (the process is alive, still answers, and its stderr has no panic message), RSS
//! after warm-up stays within a bound, and every vanished broker is gone from cluster info.
//!
//! RMQ_SOAK_SECS sets the churn phase (default 45 s; the whole test takes about a minute).

#[path = "common/child.rs"]
mod child;
mod common;

use child::ServerProcess;
use common::*;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::{request, response};
use rmq_namesrv::route::model;
use std::collections::BTreeSet;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const BROKER_THREADS: usize = 8;
const CLIENT_THREADS: usize = 2;
const SHARED_TOPICS: usize = 8;
/// Expiry for every soak broker; the scanner runs every 200 ms.
const HEARTBEAT_TIMEOUT_MS: u64 = 3_000;
/// Allowed RSS growth from the warm-up sample to any later one.
const RSS_GROWTH_LIMIT_KIB: u64 = 16 * 1024;

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Default)]
struct Stats {
    registrations: AtomicUsize,
    heartbeats: AtomicUsize,
    vanished_closed: AtomicUsize,
    vanished_unregistered: AtomicUsize,
    vanished_silent: AtomicUsize,
    queries: AtomicUsize,
    topic_not_exist: AtomicUsize,
    malformed: AtomicUsize,
}

fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn soak_duration() -> Duration {
    let secs = std::env::var("RMQ_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(45u64);
    Duration::from_secs(secs)
}

fn names_in_cluster_info(addr: &str) -> BTreeSet<String> {
    let mut c = Client::connect(addr, Duration::from_secs(5)).expect("connect");
    cluster_info(&mut c).broker_addr_table.into_keys().collect()
}

/// One broker thread: lives one after another until `end`, each with a fresh broker name,
/// and ends with its last life vanished too. Returns the names of every life.
fn broker_thread(addr: String, t: usize, end: Instant, stats: Arc<Stats>) -> Vec<String> {
    let mut rng = Rng::new(100 + t as u64);
    let mut names = Vec::new();
    let options = RegisterOptions {
        heartbeat_timeout_millis: Some(HEARTBEAT_TIMEOUT_MS as i64),
        ..RegisterOptions::default()
    };
    for life in 0.. {
        let name = format!("soak-b{t}-{life}");
        let broker_addr = format!("10.{}.{}.{}:10911", 100 + t, life / 250, life % 250 + 1);
        let broker = Broker::new("soak", &name, &broker_addr, 0);
        let mut topics: Vec<_> = (0..3)
            .map(|k| topic(&format!("SoakOwn-{t}-{life}-{k}"), 4, 6))
            .collect();
        for s in 0..SHARED_TOPICS {
            if rng.below(2) == 0 {
                topics.push(topic(&format!("SoakShared-{s}"), 4, 6));
            }
        }
        let body = body_with(life as i64 + 1, &topics);
        let mut c = Client::connect(&addr, Duration::from_secs(10)).expect("broker connect");
        let resp = register_with(&mut c, &broker, &body, &options);
        assert_eq!(
            resp.code,
            response::SUCCESS,
            "{name}: register: {:?}",
            resp.remark
        );
        bump(&stats.registrations);
        names.push(name.clone());
        let ext = [
            ("clusterName", "soak"),
            ("brokerAddr", broker_addr.as_str()),
            ("brokerName", name.as_str()),
            ("brokerId", "0"),
        ];
        let beats = 2 + rng.below(14);
        for b in 0..beats {
            if Instant::now() >= end {
                break;
            }
            thread::sleep(Duration::from_millis(50 + rng.below(200)));
            let resp = if b % 10 == 9 {
                // Brokers re-register periodically with an unchanged body.
                register_with(&mut c, &broker, &body, &options)
            } else {
                c.request(request::BROKER_HEARTBEAT, &ext, b"")
                    .expect("heartbeat response")
            };
            assert_eq!(resp.code, response::SUCCESS, "{name}: {:?}", resp.remark);
            bump(&stats.heartbeats);
        }
        match rng.below(3) {
            0 => {
                drop(c);
                bump(&stats.vanished_closed);
            }
            1 => {
                let resp = c
                    .request(request::UNREGISTER_BROKER, &ext, b"")
                    .expect("unregister response");
                assert_eq!(resp.code, response::SUCCESS, "{name}: {:?}", resp.remark);
                drop(c);
                bump(&stats.vanished_unregistered);
            }
            _ => {
                // Silent with the connection open: only the expiry scan can remove it.
                let gone = wait_until(Duration::from_secs(30), || {
                    !names_in_cluster_info(&addr).contains(&name)
                });
                assert!(
                    gone,
                    "{name} was not expired while its connection stayed open"
                );
                drop(c);
                bump(&stats.vanished_silent);
            }
        }
        if Instant::now() >= end {
            break;
        }
    }
    names
}

fn client_thread(addr: String, t: usize, end: Instant, stats: Arc<Stats>) {
    let mut rng = Rng::new(200 + t as u64);
    let mut c = Client::connect(&addr, Duration::from_secs(10)).expect("client connect");
    while Instant::now() < end {
        match rng.below(4) {
            0 => {
                let info = cluster_info(&mut c);
                for (name, b) in &info.broker_addr_table {
                    assert!(!b.broker_addrs.is_empty(), "{name} listed with no address");
                }
            }
            1 => {
                let resp = c
                    .request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, &[], b"")
                    .expect("topic list");
                assert_eq!(resp.code, response::SUCCESS, "{:?}", resp.remark);
                model::decode_topic_list(&resp.body).expect("topic list decodes");
            }
            _ => {
                let topic = if rng.below(2) == 0 {
                    format!("SoakShared-{}", rng.below(SHARED_TOPICS as u64))
                } else {
                    format!(
                        "SoakOwn-{}-{}-{}",
                        rng.below(BROKER_THREADS as u64),
                        rng.below(20),
                        rng.below(3)
                    )
                };
                let resp = route(&mut c, &topic);
                match resp.code {
                    response::SUCCESS => {
                        let r = model::TopicRouteData::decode(&resp.body).expect("route decodes");
                        assert!(!r.broker_datas.is_empty(), "{topic}: route without brokers");
                    }
                    // The topic's brokers have vanished (or not registered yet).
                    response::TOPIC_NOT_EXIST => bump(&stats.topic_not_exist),
                    code => panic!("{topic}: error {code} {:?}", resp.remark),
                }
            }
        }
        bump(&stats.queries);
    }
}

/// Malformed frames, each on its own connection, which is half-closed after sending so a
/// frame waiting for bytes that never come still ends.
fn malformed_thread(addr: String, end: Instant, stats: Arc<Stats>) {
    let mut rng = Rng::new(300);
    let good = common::request_frame(request::GET_BROKER_CLUSTER_INFO, 1, &[], b"");
    while Instant::now() < end {
        let bytes: Vec<u8> = match rng.below(7) {
            0 => (0..1 + rng.below(64)).map(|_| rng.next() as u8).collect(),
            1 => vec![0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0],
            2 => [&12u32.to_be_bytes()[..], &[7, 0, 0, 4], b"{{{{"].concat(),
            3 => [&12u32.to_be_bytes()[..], &[0, 0, 0, 8], b"{\"code\":"].concat(),
            4 => [
                &10u32.to_be_bytes()[..],
                &[1, 0, 0, 6],
                &[0, 105, 0, 1, 0xDD, 0xDD],
            ]
            .concat(),
            5 => {
                let mut v = good.clone();
                v.extend((0..16).map(|_| rng.next() as u8));
                v
            }
            _ => {
                let mut v = good.clone();
                v.truncate(1 + rng.below(good.len() as u64 - 1) as usize);
                v
            }
        };
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(Shutdown::Write);
        let mut sink = Vec::new();
        match s.read_to_end(&mut sink) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => panic!("server kept a malformed connection open: {e}"),
        }
        bump(&stats.malformed);
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn soak_churn_keeps_serving_expires_everything_and_holds_memory() {
    let dir = TempDir::new("soak");
    let stderr_path = dir.path().join("server.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    std::fs::write(dir.path().join("namesrv.conf"), "# soak\n").unwrap();
    let args: Vec<String> = vec![
        "-c".into(),
        dir.path()
            .join("namesrv.conf")
            .to_string_lossy()
            .into_owned(),
        "--listenPort=0".into(),
        "--bindAddress=127.0.0.1".into(),
        "--logPath=".into(),
        "--logLevel=warn".into(),
        "--scanNotActiveBrokerInterval=200".into(),
        format!("--kvConfigPath={}", dir.path().join("kv.json").display()),
    ];
    let mut server = ServerProcess::spawn_with_stderr(&args, Stdio::from(stderr));
    let addr = server.addr.clone();
    let stats = Arc::new(Stats::default());
    let start = Instant::now();
    let churn = soak_duration();
    let end = start + churn;
    let rss_at_start = server.rss_kib().expect("rss");

    let brokers: Vec<_> = (0..BROKER_THREADS)
        .map(|t| {
            let (a, s) = (addr.clone(), stats.clone());
            thread::spawn(move || broker_thread(a, t, end, s))
        })
        .collect();
    let clients: Vec<_> = (0..CLIENT_THREADS)
        .map(|t| {
            let (a, s) = (addr.clone(), stats.clone());
            thread::spawn(move || client_thread(a, t, end, s))
        })
        .collect();
    let malformed = {
        let (a, s) = (addr.clone(), stats.clone());
        thread::spawn(move || malformed_thread(a, end, s))
    };

    // RSS once a second; the sample a third of the way in is the warm-up reference.
    let samples = Arc::new(Mutex::new(Vec::<(Duration, u64)>::new()));
    let warm_up_at = churn / 3;
    while Instant::now() < end && !clients.iter().all(|c| c.is_finished()) {
        thread::sleep(Duration::from_secs(1));
        let rss = server.rss_kib().expect("server alive during the soak");
        samples.lock().unwrap().push((start.elapsed(), rss));
    }
    for c in clients {
        c.join().expect("client thread");
    }
    malformed.join().expect("malformed-frame thread");
    let mut vanished = BTreeSet::new();
    for b in brokers {
        vanished.extend(b.join().expect("broker thread"));
    }

    // Every broker has vanished one way or another: none may remain.
    let leftover = std::cell::RefCell::new(BTreeSet::new());
    let all_gone = wait_until(Duration::from_secs(20), || {
        let names = names_in_cluster_info(&addr);
        *leftover.borrow_mut() = names.intersection(&vanished).cloned().collect();
        leftover.borrow().is_empty()
    });
    assert!(all_gone, "not expired: {:?}", leftover.borrow());
    let mut c = server.client();
    let info = cluster_info(&mut c);
    assert!(
        info.cluster_addr_table
            .get("soak")
            .is_none_or(|v| v.is_empty()),
        "cluster 'soak' still lists {:?}",
        info.cluster_addr_table.get("soak")
    );
    assert!(route_data(&mut c, "SoakShared-0").is_none());

    assert!(server.is_running(), "server exited during the soak");
    let rss_end = server.rss_kib().expect("rss at end");
    let samples = samples.lock().unwrap().clone();
    let warm = samples
        .iter()
        .find(|(t, _)| *t >= warm_up_at)
        .map(|(_, r)| *r)
        .expect("a warm-up sample");
    let max_after = samples
        .iter()
        .filter(|(t, _)| *t >= warm_up_at)
        .map(|(_, r)| *r)
        .chain([rss_end])
        .max()
        .unwrap_or(warm);
    server.kill();
    let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(!log.contains("panicked"), "server panicked:\n{log}");

    let s = &stats;
    let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
    println!(
        "soak: {:.0} s churn; {} registrations, {} heartbeats/re-registrations, brokers vanished \
         {} by close, {} by unregister, {} by expiry ({} distinct brokers); {} client queries \
         ({} TOPIC_NOT_EXIST); {} malformed connections",
        churn.as_secs_f64(),
        n(&s.registrations),
        n(&s.heartbeats),
        n(&s.vanished_closed),
        n(&s.vanished_unregistered),
        n(&s.vanished_silent),
        vanished.len(),
        n(&s.queries),
        n(&s.topic_not_exist),
        n(&s.malformed)
    );
    println!(
        "soak RSS (KiB): start {rss_at_start}, warm-up ({:.0} s) {warm}, max after warm-up \
         {max_after}, end {rss_end}; growth after warm-up {} KiB (limit {RSS_GROWTH_LIMIT_KIB})",
        warm_up_at.as_secs_f64(),
        max_after.saturating_sub(warm)
    );
    assert!(n(&s.vanished_silent) > 0, "no broker was left to expire");
    assert!(n(&s.malformed) > 0 && n(&s.queries) > 0);
    assert!(
        max_after.saturating_sub(warm) < RSS_GROWTH_LIMIT_KIB,
        "RSS grew from {warm} KiB to {max_after} KiB after warm-up"
    );
}
