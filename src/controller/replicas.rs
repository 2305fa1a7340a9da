//! The leader-only requests as pure functions: request x applied state x liveness ->
//! (response, events), Java's `ReplicasInfoManager` request methods step by step, quirks
//! included (docs/controller.md lists them). A write's events are applied once durable.

use super::body;
use super::codes::response as rc;
use super::elect::{self, ElectInput};
use super::event::Event;
use super::liveness::Liveness;
use super::request::{
    sync_state_set_json, AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ElectMaster,
    GetNextBrokerId, LeaderRequest, RegisterBroker,
};
use super::response::Response;
use super::state::{BrokerReplicaInfo, ControllerState, SyncStateInfo, FIRST_BROKER_CONTROLLER_ID};
use crate::remoting::codes::response::SUCCESS;
use std::collections::{BTreeMap, BTreeSet};

/// Bounds on what peers can make the tables hold (Java has none): far above any real
/// deployment, low enough that a hostile peer cannot exhaust memory with 1013s.
pub const MAX_BROKER_SETS: usize = 100_000;
pub const MAX_IDS_PER_BROKER_SET: usize = 1_024;
/// The most broker ids one 1006 answer lists (~1.5 MB, ~2 ms to write): 2,700 sets of three.
pub const MAX_SYNC_STATE_DATA_REPLICAS: usize = 8_192;

#[derive(Clone, Copy)]
pub struct View<'a> {
    pub state: &'a ControllerState,
    pub liveness: &'a Liveness,
    pub now_ms: u64,
    pub enable_elect_unclean_master: bool,
}

impl View<'_> {
    fn alive(&self, cluster: Option<&str>, name: &str, id: i64) -> bool {
        self.liveness.is_active(cluster, name, id, self.now_ms)
    }
}

/// A successful election, for the role-change notifications sent once it is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elected {
    pub cluster_name: Option<String>,
    pub broker_name: String,
    pub master_broker_id: i64,
    pub master_address: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set_epoch: i32,
    pub members: Vec<(i64, String)>,
}

/// A handler's result: the answer, the events to make durable first, and an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub response: Response,
    pub events: Vec<Event>,
    pub elected: Option<Elected>,
}

impl Outcome {
    fn reply(response: Response) -> Outcome {
        Outcome {
            response,
            events: Vec::new(),
            elected: None,
        }
    }

    fn with_event(response: Response, event: Event) -> Outcome {
        Outcome {
            response,
            events: vec![event],
            elected: None,
        }
    }
}

/// Java's NullPointerException on a field the request left out.
fn missing(field: &str) -> Outcome {
    Outcome::reply(Response::system_error(format!(
        "the custom field <{field}> is null"
    )))
}

fn opt_field(fields: &mut Vec<(&'static str, String)>, key: &'static str, value: Option<&str>) {
    if let Some(value) = value {
        fields.push((key, value.to_owned()));
    }
}

/// The master's header fields (1002, 1003 and 1008 answers), after the set's name fields.
pub(super) fn master_fields(
    fields: &mut Vec<(&'static str, String)>,
    address: Option<&str>,
    master: i64,
    master_epoch: i32,
    set_epoch: i32,
) {
    opt_field(fields, "masterAddress", address);
    fields.push(("masterBrokerId", master.to_string()));
    fields.push(("masterEpoch", master_epoch.to_string()));
    fields.push(("syncStateSetEpoch", set_epoch.to_string()));
}

/// Java's `Long.toString` of a nullable Long in `%s`.
fn show(id: Option<i64>) -> String {
    id.map_or_else(|| "null".to_owned(), |id| id.to_string())
}

pub fn handle(request: &LeaderRequest, view: &View<'_>) -> Outcome {
    match request {
        LeaderRequest::AlterSyncStateSet(r) => alter_sync_state_set(r, view),
        LeaderRequest::ElectMaster(r) => elect_master(r, view),
        LeaderRequest::RegisterBroker(r) => register_broker(r, view),
        LeaderRequest::GetReplicaInfo { broker_name } => {
            get_replica_info(broker_name.as_deref(), view)
        }
        LeaderRequest::GetSyncStateData { broker_names } => get_sync_state_data(broker_names, view),
        LeaderRequest::CleanBrokerData(r) => clean_broker_data(r, view),
        LeaderRequest::GetNextBrokerId(r) => get_next_broker_id(r, view),
        LeaderRequest::ApplyBrokerId(r) => apply_broker_id(r, view),
    }
}

/// A refused 1001 (every 1001 answer carries `newSyncStateSetEpoch`).
fn alter_refused(code: i32, remark: String) -> Outcome {
    Outcome::reply(
        Response::with_header(code, vec![("newSyncStateSetEpoch", "0".into())]).remark(remark),
    )
}

const BECAUSE: &str = "Rejecting alter syncStateSet request because";

/// 1001: the checks in Java's order, then the new set and its epoch.
fn alter_sync_state_set(r: &AlterSyncStateSet, view: &View<'_>) -> Outcome {
    let Some(name) = r.broker_name.as_deref() else {
        return missing("brokerName");
    };
    // 1. the broker set
    let Some((replica, sync)) = view.state.broker_set(name) else {
        return alter_refused(
            rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "Broker metadata is not existed".into(),
        );
    };
    let Some(body) = &r.body else {
        return missing("syncStateSet body");
    };
    let Some(new_set) = &body.sync_state_set else {
        return missing("syncStateSet");
    };
    // 2. a change at all
    if *new_set == sync.sync_state_set {
        return alter_refused(
            rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
                .into(),
        );
    }
    // 3. the master
    if sync.master_broker_id.is_none() || sync.master_broker_id != r.master_broker_id {
        return alter_refused(
            rc::CONTROLLER_INVALID_MASTER,
            format!(
                "{BECAUSE} the current leader is:{{{}}}, not {{{}}}",
                show(sync.master_broker_id),
                show(r.master_broker_id)
            ),
        );
    }
    // 4. the master epoch
    let Some(master_epoch) = r.master_epoch else {
        return missing("masterEpoch");
    };
    if master_epoch != sync.master_epoch {
        return alter_refused(
            rc::CONTROLLER_FENCED_MASTER_EPOCH,
            format!(
                "{BECAUSE} the current master epoch is:{{{}}}, not {{{master_epoch}}}",
                sync.master_epoch
            ),
        );
    }
    // 5. the set's epoch
    if body.sync_state_set_epoch != sync.sync_state_set_epoch {
        return alter_refused(
            rc::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            format!(
                "{BECAUSE} the current syncStateSet epoch is:{{{}}}, not {{{}}}",
                sync.sync_state_set_epoch, body.sync_state_set_epoch
            ),
        );
    }
    if let Some(refused) = check_new_members(new_set, replica, sync, view) {
        return refused;
    }
    let epoch = sync.sync_state_set_epoch.wrapping_add(1);
    let response =
        Response::with_header(SUCCESS, vec![("newSyncStateSetEpoch", epoch.to_string())])
            .body(sync_state_set_json(Some(new_set), epoch));
    Outcome::with_event(
        response,
        Event::AlterSyncStateSet {
            broker_name: name.to_owned(),
            new_sync_state_set: new_set.clone(),
        },
    )
}

/// 1001 steps 6-8: every member registered and alive, and the master still among them.
fn check_new_members(
    new_set: &BTreeSet<i64>,
    replica: &BrokerReplicaInfo,
    sync: &SyncStateInfo,
    view: &View<'_>,
) -> Option<Outcome> {
    for &id in new_set {
        if !replica.contains(id) {
            return Some(alter_refused(
                rc::CONTROLLER_INVALID_REPLICAS,
                format!("{BECAUSE} the replicas {{{id}}} don't exist"),
            ));
        }
        if !view.alive(replica.cluster_name.as_deref(), &replica.broker_name, id) {
            return Some(alter_refused(
                rc::CONTROLLER_BROKER_NOT_ALIVE,
                format!("{BECAUSE} the replicas {{{id}}} don't alive"),
            ));
        }
    }
    if !sync.master_broker_id.is_some_and(|m| new_set.contains(&m)) {
        return Some(alter_refused(
            rc::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
            format!(
                "{BECAUSE} the newSyncStateSet don't contains origin leader {{{}}}",
                show(sync.master_broker_id)
            ),
        ));
    }
    None
}

/// 1002 (and the controller's own elections).
fn elect_master(r: &ElectMaster, view: &View<'_>) -> Outcome {
    let Some((replica, sync)) = view.state.broker_set(&r.broker_name) else {
        return Outcome::reply(
            Response::with_header(rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, vec![])
                .remark("Broker hasn't been registered"),
        );
    };
    let old_master = sync.master_broker_id;
    // The first master of a set (Java's `isFirstTimeForElect`: epoch 0) is whoever asks
    // first, alive or not.
    let mut new_master = (sync.master_epoch == 0).then_some(r.broker_id);
    if new_master.map_or(true, |m| m == -1) {
        let all: BTreeSet<i64>;
        let all_replicas = if view.enable_elect_unclean_master {
            all = replica.brokers.keys().copied().collect();
            Some(&all)
        } else {
            None
        };
        new_master = elect::elect(
            &ElectInput {
                cluster_name: replica.cluster_name.as_deref(),
                broker_name: &replica.broker_name,
                sync_state_set: &sync.sync_state_set,
                all_replicas,
                old_master,
                prefer: r.designate_elect.then_some(r.broker_id),
            },
            view.liveness,
            view.now_ms,
        );
    }
    match new_master {
        Some(master) if Some(master) == old_master => {
            let mut fields = Vec::with_capacity(4);
            master_fields(
                &mut fields,
                replica.address(master),
                master,
                sync.master_epoch,
                sync.sync_state_set_epoch,
            );
            Outcome::reply(
                Response::with_header(rc::CONTROLLER_MASTER_STILL_EXIST, fields)
                    .remark(format!(
                        "The old master {master} is still alive, not need to elect new master for broker {}",
                        replica.broker_name
                    ))
                    .body(body::elect_master(None, &sync.sync_state_set)),
            )
        }
        Some(master) => elected(r, view, master),
        None if r.broker_id == -1 => {
            // Controller-triggered (or looks like it): "no master" is recorded (masterEpoch + 1).
            Outcome::with_event(
                Response::with_header(rc::CONTROLLER_MASTER_NOT_AVAILABLE, vec![])
                    .remark("Old master has down and failed to elect a new broker master"),
                Event::ElectMaster {
                    broker_name: r.broker_name.clone(),
                    new_master_elected: false,
                    new_master_broker_id: None,
                },
            )
        }
        None => Outcome::reply(
            Response::with_header(rc::CONTROLLER_ELECT_MASTER_FAILED, vec![])
                .remark("Failed to elect a new master"),
        ),
    }
}

fn elected(r: &ElectMaster, view: &View<'_>, master: i64) -> Outcome {
    let Some((replica, sync)) = view.state.broker_set(&r.broker_name) else {
        return missing("brokerName");
    };
    let master_epoch = sync.master_epoch.wrapping_add(1);
    let set_epoch = sync.sync_state_set_epoch.wrapping_add(1);
    let address = replica.address(master).map(str::to_owned);
    let mut fields = Vec::with_capacity(4);
    master_fields(
        &mut fields,
        address.as_deref(),
        master,
        master_epoch,
        set_epoch,
    );
    let new_set: BTreeSet<i64> = [master].into_iter().collect();
    Outcome {
        response: Response::with_header(SUCCESS, fields)
            .body(body::elect_master(Some(replica), &new_set)),
        events: vec![Event::ElectMaster {
            broker_name: r.broker_name.clone(),
            new_master_elected: true,
            new_master_broker_id: Some(master),
        }],
        elected: Some(Elected {
            cluster_name: replica.cluster_name.clone(),
            broker_name: replica.broker_name.clone(),
            master_broker_id: master,
            master_address: address,
            master_epoch,
            sync_state_set_epoch: set_epoch,
            members: replica
                .brokers
                .iter()
                .map(|(id, b)| (*id, b.address.clone()))
                .collect(),
        }),
    }
}

/// 1003: answers who the (live) master is; records a changed address.
fn register_broker(r: &RegisterBroker, view: &View<'_>) -> Outcome {
    let Some(name) = r.broker_name.as_deref() else {
        return missing("brokerName");
    };
    let mut fields = Vec::with_capacity(6);
    opt_field(&mut fields, "brokerName", Some(name));
    opt_field(&mut fields, "clusterName", r.cluster_name.as_deref());
    let Some((replica, sync)) = view.state.broker_set(name) else {
        return Outcome::reply(
            Response::with_header(rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, fields).remark(
                format!("Broker-set: {name} hasn't been registered in controller"),
            ),
        );
    };
    let Some(id) = r.broker_id else {
        return missing("brokerId");
    };
    if !replica.contains(id) {
        return Outcome::reply(
            Response::with_header(rc::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, fields).remark(
                format!("BrokerId: {id} hasn't been registered in broker-set: {name}"),
            ),
        );
    }
    let Some(address) = r.broker_address.as_deref() else {
        return missing("brokerAddress");
    };
    if let Some(master) = sync.master_broker_id {
        // Only a master that is alive (checked under the request's cluster) is announced.
        if view.alive(r.cluster_name.as_deref(), name, master) {
            master_fields(
                &mut fields,
                replica.address(master),
                master,
                sync.master_epoch,
                sync.sync_state_set_epoch,
            );
        }
    }
    let response = Response::with_header(SUCCESS, fields).body(sync_state_set_json(
        Some(&sync.sync_state_set),
        sync.sync_state_set_epoch,
    ));
    if replica.address(id) == Some(address) {
        return Outcome::reply(response);
    }
    Outcome::with_event(
        response,
        Event::UpdateBrokerAddress {
            cluster_name: r.cluster_name.clone(),
            broker_name: name.to_owned(),
            broker_address: address.to_owned(),
            broker_id: id,
        },
    )
}

/// 1004.
fn get_replica_info(broker_name: Option<&str>, view: &View<'_>) -> Outcome {
    let Some(name) = broker_name else {
        return missing("brokerName");
    };
    let Some((replica, sync)) = view.state.broker_set(name) else {
        return Outcome::reply(
            Response::with_header(rc::CONTROLLER_BROKER_METADATA_NOT_EXIST, vec![])
                .remark("Broker metadata is not existed"),
        );
    };
    let mut fields = Vec::with_capacity(3);
    if let Some(master) = sync.master_broker_id {
        opt_field(&mut fields, "masterAddress", replica.address(master));
        fields.push(("masterBrokerId", master.to_string()));
    }
    fields.push(("masterEpoch", sync.master_epoch.to_string()));
    Outcome::reply(
        Response::with_header(SUCCESS, fields).body(sync_state_set_json(
            Some(&sync.sync_state_set),
            sync.sync_state_set_epoch,
        )),
    )
}

/// 1006: every known set among the names; unknown names are skipped.
fn get_sync_state_data(names: &[String], view: &View<'_>) -> Outcome {
    let sets: BTreeMap<&str, _> = names
        .iter()
        .filter_map(|name| Some((name.as_str(), view.state.broker_set(name)?)))
        .collect();
    let sets: Vec<_> = sets.into_values().collect();
    let replicas: usize = sets.iter().map(|(r, _)| r.brokers.len()).sum();
    if replicas > MAX_SYNC_STATE_DATA_REPLICAS {
        return Outcome::reply(Response::system_error(format!(
            "the answer would list {replicas} broker ids of {} broker sets, more than {MAX_SYNC_STATE_DATA_REPLICAS}; ask for fewer broker sets at a time",
            sets.len()
        )));
    }
    let alive =
        |r: &BrokerReplicaInfo, id| view.alive(r.cluster_name.as_deref(), &r.broker_name, id);
    let body = body::broker_replicas_info(&sets, alive);
    Outcome::reply(Response::new(SUCCESS, None).body(body))
}

/// Java's `String.split(";")` of the id list: trailing empty pieces dropped.
fn java_split(text: &str) -> Vec<&str> {
    let mut pieces: Vec<&str> = text.split(';').collect();
    while pieces.last() == Some(&"") {
        pieces.pop();
    }
    pieces
}

/// 1011.
fn clean_broker_data(r: &CleanBrokerData, view: &View<'_>) -> Outcome {
    let invalid = |remark: String| {
        Outcome::reply(Response::error(
            rc::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
            remark,
        ))
    };
    let Some(name) = r.broker_name.as_deref() else {
        return missing("brokerName");
    };
    let mut ids: Option<BTreeSet<i64>> = None;
    if !r.is_clean_living_broker {
        let list = r
            .broker_controller_ids_to_clean
            .as_deref()
            .filter(|l| !l.trim().is_empty());
        let has_master = view
            .state
            .sync_state(name)
            .is_some_and(|s| s.master_broker_id.is_some());
        if list.is_none() && has_master {
            return invalid(format!("Broker {name} is still alive, clean up failure"));
        }
        if let Some(list) = list {
            let mut parsed = BTreeSet::new();
            for piece in java_split(list) {
                match super::request::java_parse_long(piece) {
                    Some(id) => parsed.insert(id),
                    None => {
                        return invalid(format!(
                            "Please set the option <brokerControllerIdsToClean> according to the format, exception: java.lang.NumberFormatException: For input string: \"{piece}\""
                        ))
                    }
                };
            }
            if let Some(id) = parsed
                .iter()
                .find(|id| view.alive(r.cluster_name.as_deref(), name, **id))
            {
                return invalid(format!(
                    "Broker [{name},  {id}] is still alive, clean up failure"
                ));
            }
            ids = Some(parsed);
        }
    }
    // With isCleanLivingBroker the id list is ignored: the whole set goes (Java's behaviour).
    if !view.state.contains_broker_set(name) {
        return invalid(format!(
            "Broker {name} is not existed,clean broker data failure."
        ));
    }
    if ids
        .as_ref()
        .is_some_and(|ids| clean_changes_nothing(view.state, name, ids))
    {
        // Java appends an event that removes nothing; the log grows only with changes.
        return Outcome::reply(Response::new(SUCCESS, None));
    }
    Outcome::with_event(
        Response::new(SUCCESS, None),
        Event::CleanBrokerData {
            broker_name: name.to_owned(),
            broker_id_set_to_clean: ids,
        },
    )
}

/// Whether cleaning `ids` (not empty) from a set leaves it as it is: none of them is known
/// and no table entry becomes empty (the state's `apply_clean`).
fn clean_changes_nothing(state: &ControllerState, name: &str, ids: &BTreeSet<i64>) -> bool {
    let keeps = |len: usize, holds: &dyn Fn(&i64) -> bool| len > 0 && !ids.iter().any(holds);
    !ids.is_empty()
        && state
            .replica_info(name)
            .map_or(true, |r| keeps(r.brokers.len(), &|id| r.contains(*id)))
        && state.sync_state(name).map_or(true, |s| {
            keeps(s.sync_state_set.len(), &|id| s.sync_state_set.contains(id))
        })
}

/// 1012: never fails; 1 for an unknown set.
fn get_next_broker_id(r: &GetNextBrokerId, view: &View<'_>) -> Outcome {
    let Some(name) = r.broker_name.as_deref() else {
        return missing("brokerName");
    };
    let next = view
        .state
        .replica_info(name)
        .map_or(FIRST_BROKER_CONTROLLER_ID, |r| r.next_assign_broker_id);
    let mut fields = Vec::with_capacity(3);
    opt_field(&mut fields, "brokerName", Some(name));
    opt_field(&mut fields, "clusterName", r.cluster_name.as_deref());
    fields.push(("nextBrokerId", next.to_string()));
    Outcome::reply(Response::with_header(SUCCESS, fields))
}

/// 1013: an id for a broker; re-applying with the same check code succeeds again (without
/// an event: the id is already that broker's).
fn apply_broker_id(r: &ApplyBrokerId, view: &View<'_>) -> Outcome {
    let Some(code) = r.register_check_code.as_deref() else {
        return missing("registerCheckCode");
    };
    if !code.is_empty() && code.bytes().all(|b| b == b';') {
        // Java's split(";") of only separators is an empty array: [0] throws.
        return Outcome::reply(Response::system_error(format!(
            "registerCheckCode {code:?} holds no broker address"
        )));
    }
    let address = code.split(';').next().unwrap_or_default();
    let Some(name) = r.broker_name.as_deref() else {
        return missing("brokerName");
    };
    let Some(id) = r.applied_broker_id else {
        return missing("appliedBrokerId");
    };
    let mut fields = Vec::with_capacity(2);
    opt_field(&mut fields, "brokerName", Some(name));
    opt_field(&mut fields, "clusterName", r.cluster_name.as_deref());
    let event = Event::ApplyBrokerId {
        cluster_name: r.cluster_name.clone(),
        broker_name: name.to_owned(),
        broker_address: address.to_owned(),
        new_broker_id: id,
        register_check_code: code.to_owned(),
    };
    let refuse = |remark: String| {
        Outcome::reply(
            Response::with_header(rc::CONTROLLER_BROKER_ID_INVALID, fields.clone()).remark(remark),
        )
    };
    match view.state.replica_info(name) {
        None if id == FIRST_BROKER_CONTROLLER_ID
            && view.state.replica_count() >= MAX_BROKER_SETS =>
        {
            refuse(format!(
                "the controller already holds {MAX_BROKER_SETS} broker sets (its limit); broker-set {name} is not created"
            ))
        }
        None if id == FIRST_BROKER_CONTROLLER_ID => {
            Outcome::with_event(Response::with_header(SUCCESS, fields), event)
        }
        Some(replica) if !replica.contains(id) && replica.brokers.len() >= MAX_IDS_PER_BROKER_SET => {
            refuse(format!(
                "broker-set {name} already holds {MAX_IDS_PER_BROKER_SET} broker ids (the limit); clean unused ones first"
            ))
        }
        None => refuse(format!(
            "Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {id}"
        )),
        Some(r) => match r.brokers.get(&id) {
            None => Outcome::with_event(Response::with_header(SUCCESS, fields), event),
            Some(b) if b.register_check_code == code => {
                Outcome::reply(Response::with_header(SUCCESS, fields))
            }
            Some(_) => refuse(format!("Fail to apply brokerId: {id} in broker-set: {name}")),
        },
    }
}

/// Java's `scanNeedReelectBrokerSets`, one of the state's shards of it: the sets whose master
/// is inactive while one of their ids is active (sorted), and how many sets it examined. With
/// `unheard_is_inactive` false, a master this node never heard from is not counted inactive
/// (a new leader, before brokers found it).
pub fn scan_need_reelect(
    state: &ControllerState,
    liveness: &Liveness,
    shard: usize,
    now_ms: u64,
    unheard_is_inactive: bool,
) -> (Vec<String>, usize) {
    let mut examined = 0;
    let mut names: Vec<String> = state
        .sync_states_in(shard)
        .inspect(|_| examined += 1)
        .filter(|sync| {
            let Some(master) = sync.master_broker_id else {
                return false;
            };
            let (cluster, name) = (sync.cluster_name.as_deref(), &*sync.broker_name);
            let heard = liveness.get(cluster, name, master).is_some();
            (heard || unheard_is_inactive)
                && !liveness.is_active(cluster, name, master, now_ms)
                && state.replica_info(name).is_some_and(|r| {
                    r.brokers
                        .keys()
                        .any(|id| liveness.is_active(cluster, name, *id, now_ms))
                })
        })
        .map(|sync| sync.broker_name.clone())
        .collect();
    names.sort();
    (names, examined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(name: &str, id: i64) -> LeaderRequest {
        LeaderRequest::ApplyBrokerId(ApplyBrokerId {
            cluster_name: Some("c".into()),
            broker_name: Some(name.into()),
            applied_broker_id: Some(id),
            register_check_code: Some(format!("h:{id};1")),
        })
    }

    fn run(state: &mut ControllerState, request: &LeaderRequest) -> i32 {
        let liveness = Liveness::default();
        let outcome = handle(
            request,
            &View {
                state,
                liveness: &liveness,
                now_ms: 0,
                enable_elect_unclean_master: false,
            },
        );
        for event in &outcome.events {
            state.apply(event);
        }
        outcome.response.code
    }

    fn events_of(state: &ControllerState, request: &LeaderRequest) -> (i32, usize) {
        let liveness = Liveness::default();
        let view = View {
            state,
            liveness: &liveness,
            now_ms: 0,
            enable_elect_unclean_master: false,
        };
        let outcome = handle(request, &view);
        (outcome.response.code, outcome.events.len())
    }

    fn clean(name: &str, ids: &str) -> LeaderRequest {
        LeaderRequest::CleanBrokerData(CleanBrokerData {
            cluster_name: Some("c".into()),
            broker_name: Some(name.into()),
            broker_controller_ids_to_clean: Some(ids.into()),
            is_clean_living_broker: false,
        })
    }

    #[test]
    fn requests_that_change_nothing_answer_as_java_without_an_event() {
        let mut state = ControllerState::default();
        assert_eq!(run(&mut state, &apply("a", 1)), SUCCESS);
        assert_eq!(run(&mut state, &apply("a", 2)), SUCCESS);
        assert_eq!(
            events_of(&state, &apply("a", 2)),
            (SUCCESS, 0),
            "same check code"
        );
        let mut other_code = apply("a", 2);
        if let LeaderRequest::ApplyBrokerId(r) = &mut other_code {
            r.register_check_code = Some("h:9;9".into());
        }
        assert_eq!(
            events_of(&state, &other_code),
            (rc::CONTROLLER_BROKER_ID_INVALID, 0)
        );
        // A set never elected has an empty SyncStateSet: a clean drops that entry.
        assert_eq!(events_of(&state, &clean("a", "7")), (SUCCESS, 1));
        state.apply(&Event::ElectMaster {
            broker_name: "a".into(),
            new_master_elected: true,
            new_master_broker_id: Some(1),
        });
        assert_eq!(
            events_of(&state, &clean("a", "7;8")),
            (SUCCESS, 0),
            "unknown ids"
        );
        assert_eq!(
            events_of(&state, &clean("a", "2;7")),
            (SUCCESS, 1),
            "one known id"
        );
        assert_eq!(run(&mut state, &clean("a", "2")), SUCCESS);
        assert!(!state.replica_info("a").unwrap().contains(2));
    }

    #[test]
    fn peers_cannot_grow_the_tables_without_bound() {
        let mut state = ControllerState::default();
        for id in 1..=MAX_IDS_PER_BROKER_SET as i64 {
            assert_eq!(run(&mut state, &apply("a", id)), SUCCESS);
        }
        assert_eq!(
            run(&mut state, &apply("a", 5_000)),
            rc::CONTROLLER_BROKER_ID_INVALID
        );
        assert_eq!(
            run(&mut state, &apply("a", 7)),
            SUCCESS,
            "re-applying an id still works"
        );
        for s in 1..MAX_BROKER_SETS {
            state.apply(&Event::ApplyBrokerId {
                cluster_name: None,
                broker_name: format!("set-{s}"),
                broker_address: "h:1".into(),
                new_broker_id: 1,
                register_check_code: "h:1;1".into(),
            });
        }
        assert_eq!(
            run(&mut state, &apply("one-too-many", 1)),
            rc::CONTROLLER_BROKER_ID_INVALID
        );
        assert_eq!(
            run(&mut state, &apply("set-7", 2)),
            SUCCESS,
            "known sets still take ids"
        );
    }

    #[test]
    fn one_sync_state_answer_lists_a_bounded_number_of_ids() {
        let mut state = ControllerState::default();
        let per_set = MAX_IDS_PER_BROKER_SET;
        let sets = MAX_SYNC_STATE_DATA_REPLICAS / per_set;
        for s in 0..=sets {
            for id in 1..=per_set as i64 {
                assert_eq!(run(&mut state, &apply(&format!("s{s}"), id)), SUCCESS);
            }
        }
        let ask = |n: usize| LeaderRequest::GetSyncStateData {
            broker_names: (0..n).map(|s| format!("s{s}")).collect(),
        };
        assert_eq!(run(&mut state, &ask(sets)), SUCCESS);
        let liveness = Liveness::default();
        let view = View {
            state: &state,
            liveness: &liveness,
            now_ms: 0,
            enable_elect_unclean_master: false,
        };
        let refused = handle(&ask(sets + 1), &view).response;
        assert_eq!(
            (refused.code, refused.remark.as_deref()),
            (1, Some("the answer would list 9216 broker ids of 9 broker sets, more than 8192; ask for fewer broker sets at a time"))
        );
    }
}
