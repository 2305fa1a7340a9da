//! `mqadmin`'s controller commands: most go to the leader; config commands to every one.

use crate::cli::Invocation;
use crate::outcome::{Failure, Outcome, Ran, Role};
use crate::output::{columns, opt_cell, opt_int, s, Cell, Table};
use crate::peers::Peers;
use crate::writes::{done, write_all};
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::config::parse_properties;
use rmq_namesrv::controller::request::field::{
    CONTROLLER_LEADER_ADDRESS, CONTROLLER_LEADER_ID, GROUP, INVOKE_TIME, IS_LEADER, MASTER_ADDRESS,
    MASTER_BROKER_ID, MASTER_EPOCH, PEERS, RAFT_ROLE, RAFT_TERM, SYNC_STATE_SET_EPOCH,
};
use rmq_namesrv::controller::request::{
    CleanBrokerData, ControllerRequest, ElectMaster, LeaderRequest,
};
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::remoting::json::{self, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// `request`, whose answer must be SUCCESS (`invoked`: with `mqadmin`'s `invokeTime`).
fn ask(
    c: &mut Client,
    request: &ControllerRequest,
    invoked: bool,
) -> Result<RemotingCommand, ClientError> {
    let mut encoded = request.encode();
    if invoked {
        let now = SystemTime::now().duration_since(UNIX_EPOCH);
        encoded.put_value(INVOKE_TIME, now.map_or(0, |d| d.as_millis()));
    }
    c.request_ok(&encoded)
}

fn read_metadata(controllers: &mut Peers) -> Result<(String, RemotingCommand), Outcome> {
    controllers.read(|c| ask(c, &ControllerRequest::GetMetadata, false))
}

/// Runs `f` on the leader, found as `mqadmin` finds it: 1005, `controllerLeaderAddress`.
fn on_leader<T>(
    controllers: &mut Peers,
    f: impl FnOnce(&mut Client) -> Result<T, ClientError>,
) -> Result<(String, T), Outcome> {
    let (asked, meta) = read_metadata(controllers)?;
    let leader = meta
        .ext(CONTROLLER_LEADER_ADDRESS)
        .filter(|a| !a.is_empty());
    let leader = leader.ok_or_else(|| {
        Outcome::failed(format!("{asked}: the controller group has no leader now"))
    })?;
    let explain = |e: ClientError| {
        let failure = Failure::from_client_as(Role::Controller, leader, &e);
        Outcome::from_failures(Role::Controller, &[failure])
    };
    let mut client = controllers
        .connect(leader)
        .map_err(|e| explain(ClientError::Io(e)))?;
    let value = f(&mut client).map_err(explain)?;
    let leader = leader.to_string();
    Ok((leader, value))
}

/// `getControllerMetaData`: one row per peer, the leader marked, and each peer's own view.
pub fn metadata(inv: &Invocation, controllers: &mut Peers) -> Ran {
    let (_, meta) = read_metadata(controllers)?;
    let group = meta.ext(GROUP);
    let leader_id = meta.ext(CONTROLLER_LEADER_ID).unwrap_or_default();
    let mut t = Table::new(&columns(
        "GROUP:group PEER:peerId ADDRESS:address LEADER:leader ROLE:role TERM:term \
         SEES_LEADER:seesLeader",
    ));
    for peer in meta.ext(PEERS).unwrap_or_default().split(';') {
        let Some((id, addr)) = peer.split_once(':') else {
            continue;
        };
        let own_meta = controllers
            .connect(addr)
            .map_err(ClientError::Io)
            .and_then(|mut c| ask(&mut c, &ControllerRequest::GetMetadata, false))
            .ok();
        let own = |key: &str| own_meta.as_ref().and_then(|m| m.ext(key));
        let leads = |l: &str| if l == "true" { "LEADER" } else { "FOLLOWER" };
        t.push(vec![
            opt_cell(group),
            s(id),
            s(addr),
            Cell::Bool(id == leader_id),
            opt_cell(own(RAFT_ROLE).or_else(|| own(IS_LEADER).map(leads))),
            opt_int(own(RAFT_TERM).and_then(|t| t.parse().ok())),
            opt_cell(own(CONTROLLER_LEADER_ID)),
        ]);
    }
    Ok(Outcome::ok(t.emit(inv.json)))
}

/// The broker names of `-b`, or of cluster `-c` as the name servers of `-n` know it.
fn broker_names(inv: &Invocation) -> Result<Vec<String>, Outcome> {
    if let Some(name) = inv.get("b") {
        return Ok(vec![name.trim().to_string()]);
    }
    let Some(cluster) = inv.get("c") else {
        return Err(Outcome::usage(
            "getSyncStateSet needs -b <brokerName> or -c <clusterName>".into(),
        ));
    };
    let namesrv = crate::namesrv_addrs(inv);
    if namesrv.is_empty() {
        return Err(Outcome::usage(
            "getSyncStateSet -c reads the cluster's brokers from the name servers: use -n or set NAMESRV_ADDR".into(),
        ));
    }
    let mut peers = Peers::of(inv, namesrv, Role::NameServer)?;
    let (addr, info) = peers.read(|c| c.get_cluster_info())?;
    match info.cluster_addr_table.get(cluster.trim()) {
        Some(names) if !names.is_empty() => {
            let mut names = names.clone();
            names.sort();
            Ok(names)
        }
        _ => Err(Outcome::failed(format!(
            "cluster {cluster} not found on {addr}"
        ))),
    }
}

/// 1006 to the leader.
pub fn sync_state_set(inv: &Invocation, controllers: &mut Peers) -> Ran {
    let names = broker_names(inv)?;
    let request = ControllerRequest::Leader(LeaderRequest::GetSyncStateData {
        broker_names: names.clone(),
    });
    let (leader, resp) = on_leader(controllers, |c| ask(c, &request, false))?;
    let info = json::parse(&resp.body)
        .map_err(|e| Outcome::failed(format!("{leader}: BrokerReplicasInfo body: {e}")))?;
    let table = info
        .get("replicasInfoTable")
        .and_then(Value::as_object)
        .unwrap_or(&[]);
    let mut t = Table::new(&columns(
        "BROKER:brokerName BID:brokerId ADDRESS:brokerAddress ROLE:role IN_SYNC:inSync \
         ALIVE:alive MASTER_EPOCH:masterEpoch SYNC_STATE_SET_EPOCH:syncStateSetEpoch",
    ));
    let mut missing = Vec::new();
    for name in &names {
        match table.iter().find(|(k, _)| k == name) {
            Some((_, replicas)) => push_replicas(&mut t, name, replicas),
            None => missing.push(name.clone()),
        }
    }
    let mut outcome = Outcome::ok(t.emit(inv.json));
    if !missing.is_empty() {
        outcome.stderr.push(format!(
            "{leader}: no broker set {} in the controller",
            missing.join(", ")
        ));
        outcome.code = crate::outcome::EXIT_FAILED;
    }
    Ok(outcome)
}

/// One broker set's `ReplicasInfo`: its in-sync replicas, then the others.
fn push_replicas(t: &mut Table, name: &str, info: &Value) {
    let int = |key: &str| info.get(key).and_then(Value::as_i64);
    let master = int("masterBrokerId");
    let (master_epoch, set_epoch) = (int("masterEpoch"), int("syncStateSetEpoch"));
    for (list, in_sync) in [("inSyncReplicas", true), ("notInSyncReplicas", false)] {
        let replicas = info.get(list).and_then(Value::as_array).unwrap_or(&[]);
        for r in replicas {
            let id = r.get("brokerId").and_then(Value::as_i64);
            let role = if id.is_some() && id == master {
                "master"
            } else {
                "slave"
            };
            let alive = r.get("alive").and_then(Value::as_bool);
            t.push(vec![
                s(name),
                opt_int(id),
                opt_cell(r.get("brokerAddress").and_then(Value::as_str)),
                s(role),
                Cell::Bool(in_sync),
                alive.map_or(Cell::None, Cell::Bool),
                opt_int(master_epoch),
                opt_int(set_epoch),
            ]);
        }
    }
}

/// 1002 with `designateElect=true`.
pub fn elect_master(inv: &Invocation, controllers: &mut Peers) -> Ran {
    let [cluster, name, id] = ["c", "bn", "b"].map(|short| inv.req(short).trim());
    let Ok(broker_id) = id.parse::<i64>() else {
        return Err(Outcome::usage(format!(
            "electMaster -b takes the broker's controller id (a number), not {id:?}"
        )));
    };
    let elect = ControllerRequest::Leader(LeaderRequest::ElectMaster(ElectMaster {
        cluster_name: cluster.to_string(),
        broker_name: name.to_string(),
        broker_id,
        designate_elect: true,
    }));
    let (_, resp) = on_leader(controllers, |c| ask(c, &elect, true))?;
    let int = |key| resp.ext(key).and_then(|v| v.parse().ok());
    let t = Table::with_rows(
        &columns(
            "CLUSTER:clusterName BROKER:brokerName MASTER_ID:masterBrokerId \
             MASTER_ADDRESS:masterAddress MASTER_EPOCH:masterEpoch \
             SYNC_STATE_SET_EPOCH:syncStateSetEpoch",
        ),
        [vec![
            s(cluster),
            s(name),
            opt_int(int(MASTER_BROKER_ID)),
            opt_cell(resp.ext(MASTER_ADDRESS)),
            opt_int(int(MASTER_EPOCH)),
            opt_int(int(SYNC_STATE_SET_EPOCH)),
        ]],
    );
    Ok(Outcome::ok(t.emit(inv.json)))
}

pub fn clean_broker_metadata(inv: &Invocation, controllers: &mut Peers) -> Ran {
    let name = inv.req("bn").trim();
    let cluster = inv.get("c").map(str::trim).filter(|c| !c.is_empty());
    let living = inv.has("l");
    let ids = inv.get("b").map(str::trim).filter(|i| !i.is_empty());
    let not_ids = |ids: &&str| ids.split(';').any(|id| id.trim().parse::<i64>().is_err());
    if let Some(ids) = ids.filter(not_ids) {
        return Err(Outcome::usage(format!(
            "cleanBrokerMetadata -b takes controller ids separated by ';' (1;2;3), not {ids:?}"
        )));
    }
    if !living && cluster.is_none() {
        return Err(Outcome::usage(
            "cleanBrokerMetadata needs -c <clusterName> unless -l (clean living brokers) is given"
                .into(),
        ));
    }
    let clean = ControllerRequest::Leader(LeaderRequest::CleanBrokerData(CleanBrokerData {
        cluster_name: cluster.map(str::to_string),
        broker_name: Some(name.to_string()),
        broker_controller_ids_to_clean: ids.map(str::to_string),
        is_clean_living_broker: living,
    }));
    let (leader, _) = on_leader(controllers, |c| ask(c, &clean, true))?;
    let columns = [("CONTROLLER", "controller"), ("RESULT", "result")];
    let t = Table::with_rows(&columns, [vec![s(leader), s("OK")]]);
    Ok(Outcome::ok(t.emit(inv.json)))
}

pub fn get_config(inv: &Invocation, controllers: &mut Peers) -> Ran {
    crate::reads::config_sections(inv, controllers, |c| {
        let resp = ask(c, &ControllerRequest::GetConfig, false)?;
        parse_properties(&String::from_utf8_lossy(&resp.body)).map_err(ClientError::Decode)
    })
}

pub fn update_config(inv: &Invocation, controllers: &mut Peers) -> Ran {
    let update = ControllerRequest::UpdateConfig {
        body: Some(format!("{}={}\n", inv.req("k").trim(), inv.req("v")).into_bytes()),
    };
    write_all(inv, controllers, None, |c| done(ask(c, &update, false)))
}
