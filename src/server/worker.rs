//! The unregistration worker: the one thread besides the loop. It turns a stream of single
//! unregistrations into de-duplicated batches (Java's BatchUnregistrationService: take one,
//! drain the rest) and hands each batch back to the loop through the mio `Waker`; it never
//! touches the route tables. It also sends NOTIFY_MIN_BROKER_ID_CHANGE (905) to brokers,
//! which means connecting to them: slow work that must stay off the loop.

use crate::processor::WorkerJob;
use crate::remoting::codes::{request, version, FLAG_ONEWAY};
use crate::remoting::command::{encode_frame, Header, SerializeType};
use crate::route::table::{MinIdNotification, RemovalReason, UnregisterRequest};
use crossbeam_channel::{Receiver, Sender};
use log::{debug, warn};
use mio::Waker;
use std::collections::HashSet;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

/// A batch handed back to the loop.
pub type Batch = Vec<(UnregisterRequest, RemovalReason)>;

/// Runs until the job channel is closed (the loop dropped its sender).
pub fn run(jobs: Receiver<WorkerJob>, batches: Sender<Batch>, waker: Arc<Waker>) {
    while let Ok(first) = jobs.recv() {
        let mut batch: Batch = Vec::new();
        let mut seen: HashSet<UnregisterRequest> = HashSet::new();
        let mut notifications = Vec::new();
        let mut take = |job: WorkerJob| match job {
            WorkerJob::Unregister(requests) => {
                for (r, reason) in requests {
                    if seen.insert(r.clone()) {
                        batch.push((r, reason));
                    }
                }
            }
            WorkerJob::Notify(n) => notifications.push(n),
        };
        take(first);
        for job in jobs.try_iter() {
            take(job);
        }
        if !batch.is_empty() {
            if batches.send(batch).is_err() {
                return;
            }
            if let Err(e) = waker.wake() {
                warn!("could not wake the event loop: {e}");
            }
        }
        for n in notifications {
            notify_min_broker_id_change(&n);
        }
    }
}

/// Sends one oneway 905 to every target broker (PROTOCOL.md §3.5), 300 ms per attempt.
fn notify_min_broker_id_change(n: &MinIdNotification) {
    let min_id = n.min_broker_id.to_string();
    let mut ext: Vec<(&str, &str)> = vec![
        ("minBrokerId", min_id.as_str()),
        ("minBrokerAddr", n.min_broker_addr.as_str()),
    ];
    if let Some(a) = &n.offline_broker_addr {
        ext.push(("offlineBrokerAddr", a));
    }
    if let Some(a) = &n.ha_broker_addr {
        ext.push(("haBrokerAddr", a));
    }
    let mut frame = Vec::new();
    let header = Header {
        code: request::NOTIFY_MIN_BROKER_ID_CHANGE,
        language: "JAVA",
        version: version::CURRENT,
        opaque: 0,
        flag: FLAG_ONEWAY,
        remark: None,
    };
    encode_frame(
        &mut frame,
        SerializeType::Json,
        &header,
        Some(ext.iter().copied()),
        &[],
    );
    for target in &n.targets {
        let timeout = Duration::from_millis(300);
        let result = target
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| std::io::Error::other("unresolvable address"))
            .and_then(|addr| TcpStream::connect_timeout(&addr, timeout))
            .and_then(|mut s| {
                s.set_write_timeout(Some(timeout))?;
                s.write_all(&frame)
            });
        match result {
            Ok(()) => debug!("sent NOTIFY_MIN_BROKER_ID_CHANGE to {target}"),
            Err(e) => warn!("NOTIFY_MIN_BROKER_ID_CHANGE to {target} failed: {e}"),
        }
    }
}
