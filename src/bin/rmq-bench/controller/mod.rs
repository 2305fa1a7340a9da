//! `rmq-bench controller`: load on a RocketMQ controller (rmq-namesrv's embedded one, or any
//! other) ([`throughput`]), and the failover time seen by brokers ([`failover`]), with the
//! library's typed controller requests. The timed phases run on the [`crate::engine`]; set-up,
//! clean-up and failover use blocking connections.

pub mod failover;
pub mod throughput;

use crate::args::Options;
use rmq_namesrv::client::Client;
use rmq_namesrv::controller::request::{
    AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ControllerRequest, ElectMaster,
    GetNextBrokerId, Heartbeat, LeaderRequest, RegisterBroker, SyncStateSetBody,
};
use rmq_namesrv::remoting::command::RemotingCommand;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CLUSTER: &str = "ControllerBench";
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn connect(addr: &str) -> Result<Client, String> {
    Client::connect(addr, CALL_TIMEOUT).map_err(|e| format!("connect to {addr}: {e}"))
}

/// Sends `request` and waits for the answer, whatever its code.
fn call(c: &mut Client, request: &ControllerRequest) -> Result<RemotingCommand, String> {
    c.request_encoded(&request.encode())
        .map_err(|e| format!("request {}: {e}", request.code()))
}

/// `request`, which must be answered SUCCESS.
fn call_ok(c: &mut Client, request: &ControllerRequest) -> Result<RemotingCommand, String> {
    c.request_ok(&request.encode())
        .map_err(|e| format!("request {}: {e}", request.code()))
}

fn ext_i64(resp: &RemotingCommand, key: &str) -> Option<i64> {
    resp.ext(key).and_then(|v| v.parse().ok())
}

// What a simulated broker of set `name` sends (cluster CLUSTER).

fn next_broker_id(name: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::GetNextBrokerId(GetNextBrokerId {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
    }))
}

fn apply_broker_id(name: &str, id: i64, addr: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::ApplyBrokerId(ApplyBrokerId {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
        applied_broker_id: Some(id),
        register_check_code: Some(format!("{addr};{}", millis())),
    }))
}

fn register_broker(name: &str, id: i64, addr: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::RegisterBroker(RegisterBroker {
        cluster_name: Some(CLUSTER.into()),
        broker_name: Some(name.into()),
        broker_id: Some(id),
        broker_address: Some(addr.into()),
    }))
}

/// As a broker electing itself (not designated).
fn elect_master(name: &str, id: i64) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
        cluster_name: CLUSTER.into(),
        broker_name: name.into(),
        broker_id: id,
        designate_elect: false,
    }))
}

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

/// The whole set, living brokers included.
fn clean_broker_data(name: &str) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::CleanBrokerData(CleanBrokerData {
        cluster_name: None,
        broker_name: Some(name.into()),
        broker_controller_ids_to_clean: None,
        is_clean_living_broker: true,
    }))
}

/// 1001 from the master of set `name`: `members` become the SyncStateSet.
fn alter_sync_state_set(
    name: &str,
    master: i64,
    master_epoch: i64,
    members: &[i64],
    set_epoch: i64,
) -> ControllerRequest {
    ControllerRequest::Leader(LeaderRequest::AlterSyncStateSet(AlterSyncStateSet {
        broker_name: Some(name.into()),
        master_broker_id: Some(master),
        master_epoch: i32::try_from(master_epoch).ok(),
        body: Some(SyncStateSetBody {
            sync_state_set: Some(members.iter().copied().collect()),
            sync_state_set_epoch: i32::try_from(set_epoch).unwrap_or(0),
        }),
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
