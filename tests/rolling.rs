//! Rolling operation, the RocketMQ way: several independent name servers, every broker
//! registers with each, clients hold the list. Restarting one server must not take a
//! broker's routes away from the others, and the restarted one learns them again from the
//! next registration.

mod common;

use common::*;
use rmq_namesrv::client::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A broker that registers with every server in `addrs` every 50 ms, reconnecting as needed.
fn run_broker(
    addrs: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let broker = Broker::new("c", "broker-a", "10.0.0.1:10911", 0).identity();
        let body = body_with(1, &[topic("Rolling", 4, 6)]);
        let mut conns: Vec<Option<Client>> = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let list = addrs.lock().unwrap().clone();
            conns.resize_with(list.len(), || None);
            for (i, addr) in list.iter().enumerate() {
                if conns[i].is_none() {
                    conns[i] = Client::connect(addr, Duration::from_millis(500)).ok();
                }
                let ok = conns[i].as_mut().is_some_and(|c| {
                    c.register_broker(&broker, &body, &RegisterOptions::default())
                        .is_ok()
                });
                if !ok {
                    conns[i] = None;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

fn routable(addr: &str) -> bool {
    Client::connect(addr, Duration::from_secs(2))
        .ok()
        .and_then(|mut c| route_data(&mut c, "Rolling"))
        .is_some()
}

#[test]
fn a_broker_stays_routable_from_the_others_while_one_server_restarts() {
    let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new("rolling")).collect();
    let mut handles: Vec<Option<ServerHandle>> = dirs
        .iter()
        .map(|d| Some(start(test_config(d.path())).expect("start")))
        .collect();
    let addrs: Vec<String> = handles
        .iter()
        .map(|h| h.as_ref().unwrap().local_addr().to_string())
        .collect();
    let shared = Arc::new(Mutex::new(addrs.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let broker = run_broker(shared, stop.clone());
    assert!(wait_until(Duration::from_secs(10), || addrs
        .iter()
        .all(|a| routable(a))));

    // Stop the middle server: the other two keep answering with the broker's route.
    handles[1].take().unwrap().stop().unwrap();
    assert!(!routable(&addrs[1]));
    for _ in 0..5 {
        assert!(routable(&addrs[0]) && routable(&addrs[2]));
    }

    // Restart it on the same port: the broker's next registration makes it routable again.
    let port: u16 = addrs[1].rsplit(':').next().unwrap().parse().unwrap();
    let mut config = test_config(dirs[1].path());
    config.listen_port = port;
    handles[1] = Some(start(config).expect("restart on the same port"));
    assert!(wait_until(Duration::from_secs(10), || routable(&addrs[1])));
    assert!(routable(&addrs[0]) && routable(&addrs[2]));

    stop.store(true, Ordering::SeqCst);
    broker.join().unwrap();
}
