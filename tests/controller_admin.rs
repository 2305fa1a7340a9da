//! `rmq-admin`'s controller commands (mqadmin's getControllerMetaData, getSyncStateSet,
//! electMaster, cleanBrokerMetadata, getControllerConfig, updateControllerConfig) run as a
//! process against the embedded Controller, with stand-in brokers making the broker sets.
#![cfg(feature = "controller")]

#[path = "common/admin_run.rs"]
mod admin_run;
mod common;
mod controller_net;

use admin_run::{admin_env, ok, parse, Run};
use common::wait_until;
use controller_net::{BrokerOptions, ControllerServer, StandInBroker, CLUSTER};
use rmq_namesrv::remoting::json::Value;
use std::time::Duration;

fn admin(args: &[&str]) -> Run {
    admin_env(args, None)
}

/// `electMaster -a <a> -c CLUSTER -bn broker-a -b <broker_id>`.
fn elect_master(a: &str, broker_id: &str) -> Run {
    admin(&[
        "electMaster",
        "-a",
        a,
        "-c",
        CLUSTER,
        "-bn",
        "broker-a",
        "-b",
        broker_id,
    ])
}

/// The rows of a `--json` table as (key -> value) lookups.
fn rows(text: &str) -> Vec<Value> {
    parse(text).as_array().expect("an array").to_vec()
}

fn field<'a>(row: &'a Value, key: &str) -> &'a Value {
    row.get(key).unwrap_or_else(|| panic!("{key} in {row:?}"))
}

#[test]
fn metadata_and_config_commands() {
    let server = ControllerServer::start(&[]);
    let a = server.controller.as_str();
    let out = admin(&["getControllerMetaData", "-a", a]);
    assert_eq!(
        ok(&out),
        format!(
            "GROUP   PEER  ADDRESS{}  LEADER  ROLE    TERM  SEES_LEADER\ngroup1  n0    {a}  true    LEADER  -     n0\n",
            " ".repeat(a.len() - "ADDRESS".len())
        )
    );
    let out = admin(&["--json", "getControllerMetaData", "-a", a]);
    let peer = &rows(ok(&out))[0];
    assert_eq!(field(peer, "address").as_str(), Some(a));
    assert_eq!(field(peer, "leader").as_bool(), Some(true));

    let out = admin(&[
        "updateControllerConfig",
        "-a",
        a,
        "-k",
        "electMasterMaxRetryCount",
        "-v",
        "4",
    ]);
    assert!(ok(&out).contains("OK"));
    let out = admin(&["--json", "getControllerConfig", "-a", a]);
    let config = parse(ok(&out));
    let mine = config.get(a).expect("this controller's section");
    assert_eq!(
        mine.get("electMasterMaxRetryCount").and_then(Value::as_str),
        Some("4")
    );
    // Refusals name the address and the reason, exit 1.
    let out = admin(&[
        "updateControllerConfig",
        "-a",
        a,
        "-k",
        "configStorePath",
        "-v",
        "/x",
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(&format!(
            "{a}: NO_PERMISSION (16): Can not update config in black list."
        )),
        "{}",
        out.stderr
    );
    // Two addresses, one of them dead: partial (4), each named.
    let both = format!("{a};127.0.0.1:1");
    let out = admin(&[
        "updateControllerConfig",
        "-a",
        &both,
        "-k",
        "electMasterMaxRetryCount",
        "-v",
        "3",
    ]);
    assert_eq!(out.code, 4, "{}", out.stderr);
    assert!(
        out.stderr.contains("127.0.0.1:1: connection refused"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_name_server_port_is_called_out_and_usage_is_checked() {
    let server = ControllerServer::start(&[]);
    let out = admin(&["getControllerMetaData", "-a", &server.namesrv]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("not a controller (a name server's port answers so"),
        "{}",
        out.stderr
    );
    let out = admin(&["getControllerMetaData"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("getControllerMetaData needs -a <controllerAddress>"),
        "{}",
        out.stderr
    );
    let a = server.controller.as_str();
    let out = admin(&["getSyncStateSet", "-a", a]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let out = admin(&["getSyncStateSet", "-a", a, "-c", CLUSTER]);
    assert_eq!(out.code, 2, "-c needs name servers: {}", out.stderr);
    assert!(out.stderr.contains("-n"), "{}", out.stderr);
    let out = elect_master(a, "one");
    assert_eq!(out.code, 2, "{}", out.stderr);
    let out = admin(&["cleanBrokerMetadata", "-a", a, "-bn", "broker-a"]);
    assert_eq!(out.code, 2, "needs -c unless -l: {}", out.stderr);
}

#[test]
fn sync_state_set_elect_master_and_clean_with_brokers() {
    let server = ControllerServer::start(&[]);
    let a = server.controller.as_str();
    let master = StandInBroker::start(&server, "broker-a", BrokerOptions::default());
    let slave = StandInBroker::start(&server, "broker-a", BrokerOptions::default());
    master.alter_sync_state_set(&[1, 2]);

    let out = admin(&["getSyncStateSet", "-a", a, "-b", "broker-a"]);
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("BROKER    BID  ADDRESS"), "{text}");
    assert!(
        lines[1].contains(" master ") && lines[1].contains(master.addr()),
        "{text}"
    );
    assert!(
        lines[2].contains(" slave ") && lines[2].contains(slave.addr()),
        "{text}"
    );
    // By cluster, the names come from the name server.
    let out = admin(&[
        "--json",
        "-n",
        &server.namesrv,
        "getSyncStateSet",
        "-a",
        a,
        "-c",
        CLUSTER,
    ]);
    let replicas = rows(ok(&out));
    assert_eq!(replicas.len(), 2);
    for r in &replicas {
        assert_eq!(field(r, "inSync").as_bool(), Some(true));
        assert_eq!(field(r, "alive").as_bool(), Some(true));
        assert_eq!(field(r, "masterEpoch").as_i64(), Some(1));
        assert_eq!(field(r, "syncStateSetEpoch").as_i64(), Some(2));
    }
    // An unknown set: exit 1, named.
    let out = admin(&["getSyncStateSet", "-a", a, "-b", "nope"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no broker set nope"), "{}", out.stderr);

    // The admin designates the slave: it is elected and told so over 1008.
    let out = admin(&[
        "--json",
        "electMaster",
        "-a",
        a,
        "-c",
        CLUSTER,
        "-bn",
        "broker-a",
        "-b",
        "2",
    ]);
    let elected = &rows(ok(&out))[0];
    assert_eq!(field(elected, "masterBrokerId").as_i64(), Some(2));
    assert_eq!(field(elected, "masterAddress").as_str(), Some(slave.addr()));
    assert_eq!(field(elected, "masterEpoch").as_i64(), Some(2));
    assert!(wait_until(Duration::from_secs(10), || slave
        .role()
        .is_master()));
    // Asking again: the controller's refusal, named and explained.
    let out = elect_master(a, "2");
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("CONTROLLER_MASTER_STILL_EXIST (2011)"),
        "{}",
        out.stderr
    );

    // Cleaning ids of living brokers is refused; with -l the whole set goes.
    let out = admin(&[
        "cleanBrokerMetadata",
        "-a",
        a,
        "-c",
        CLUSTER,
        "-bn",
        "broker-a",
        "-b",
        "1",
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("CONTROLLER_INVALID_CLEAN_BROKER_METADATA (2009)"),
        "{}",
        out.stderr
    );
    let out = admin(&["cleanBrokerMetadata", "-a", a, "-bn", "broker-a", "-l"]);
    assert!(ok(&out).contains("OK"));
    let out = admin(&["getSyncStateSet", "-a", a, "-b", "broker-a"]);
    assert_eq!(out.code, 1, "the set is gone: {}", out.stdout);
}
