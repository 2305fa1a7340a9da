//! `rmq-bench controller`: load on a RocketMQ controller (rmq-namesrv's embedded one, or any
//! other), over the real wire protocol ([`throughput`]), and the failover time seen by
//! brokers ([`failover`]).
//!
//! Requests are the controller's own typed requests (`controller::request`), encoded by the
//! library. The timed phases run on the [`crate::engine`]; the set-up, the clean-up and
//! failover use blocking connections (failover needs listeners and role changes).

mod failover;
mod throughput;

use crate::args::Options;
use crate::report::{sample_proc, ProcSample};
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::{
    ApplyBrokerId, CleanBrokerData, ControllerRequest, ElectMaster, Heartbeat, LeaderRequest,
    RegisterBroker,
};
use rmq_namesrv::remoting::codes::version;
use rmq_namesrv::remoting::command::{RemotingCommand, SerializeType};
use rmq_namesrv::request::Encoded;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CLUSTER: &str = "ControllerBench";
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One request frame with `opaque` (JSON header, as Java peers send).
fn frame_of(request: &Encoded<'_>, opaque: i32) -> Vec<u8> {
    request.frame(SerializeType::Json, "JAVA", version::CURRENT, opaque, 0)
}

/// Sends `request` and waits for the answer, whatever its code.
fn call(c: &mut Client, request: &ControllerRequest) -> Result<RemotingCommand, String> {
    c.request_encoded(&request.encode())
        .map_err(|e| format!("request {}: {e}", request.code()))
}

/// SUCCESS, else the code and remark.
fn expect_ok(resp: RemotingCommand, what: &str) -> Result<RemotingCommand, String> {
    if resp.code == 0 {
        Ok(resp)
    } else {
        Err(format!("{what}: answered {} {:?}", resp.code, resp.remark))
    }
}

/// `request`, which must be answered SUCCESS.
fn call_ok(c: &mut Client, request: &ControllerRequest) -> Result<RemotingCommand, String> {
    expect_ok(call(c, request)?, &request.code().to_string())
}

fn ext_i64(resp: &RemotingCommand, key: &str) -> Option<i64> {
    resp.ext(key).and_then(|v| v.parse().ok())
}

// What a simulated broker of set `name` sends (cluster CLUSTER).

/// 1012 GET_NEXT_BROKER_ID.
fn next_broker_id(name: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::GetNextBrokerId {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
    })
}

/// 1013 APPLY_BROKER_ID for broker `id` at `addr`.
fn apply_broker_id(name: &str, id: i64, addr: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::ApplyBrokerId(ApplyBrokerId {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
        applied_broker_id: Some(id),
        register_check_code: Some(format!("{addr};{}", millis())),
    }))
}

/// 1003 REGISTER_BROKER of broker `id` at `addr`.
fn register_broker(name: &str, id: i64, addr: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::RegisterBroker(RegisterBroker {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
        broker_id: Some(id),
        broker_address: Some(addr.into()),
    }))
}

/// 1002 ELECT_MASTER as a broker electing itself (not designated).
fn elect_master(name: &str, id: i64) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
        cluster_name: CLUSTER.into(),
        broker_name: name.into(),
        broker_id: id,
        designate_elect: false,
    }))
}

/// 904 BROKER_HEARTBEAT of broker `id` at `addr`.
fn heartbeat(name: &str, addr: &str, id: i64, timeout_ms: u64) -> ControllerRequest {
    ControllerRequest::Heartbeat(Heartbeat {
        cluster_name: Some(CLUSTER.into()),
        broker_addr: Some(addr.into()),
        broker_name: Some(name.into()),
        broker_id: Some(id),
        heartbeat_timeout_millis: i64::try_from(timeout_ms).ok(),
        ..Heartbeat::default()
    })
}

/// 1011 CLEAN_BROKER_DATA of the whole set, living brokers included.
fn clean_broker_data(name: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::CleanBrokerData(CleanBrokerData {
        cluster_name: None,
        broker_name: Some(name.into()),
        broker_controller_ids_to_clean: None,
        is_clean_living_broker: true,
    }))
}

/// The broker-set names of a run: `cb-<tag>-<i>`, the tag `--tag` or one of this process.
fn set_names(o: &Options) -> Vec<String> {
    let tag = if o.layout.run_tag.is_empty() {
        format!("{}-{}", std::process::id(), millis() % 1_000_000)
    } else {
        o.layout.run_tag.clone()
    };
    (0..o.layout.brokers)
        .map(|i| format!("cb-{tag}-{i}"))
        .collect()
}

/// The server's RSS and CPU time now (`--pid` only).
fn server_sample(o: &Options) -> Option<ProcSample> {
    o.pid.and_then(|p| sample_proc(&p.to_string()))
}

pub fn run(o: &Options, stop: Arc<AtomicBool>) -> Result<String, String> {
    let controller = o.controller.clone().unwrap_or_default();
    match o.failover {
        Some(mode) => failover::run(o, &controller, mode, &stop),
        None => throughput::run(o, &controller, stop),
    }
}
