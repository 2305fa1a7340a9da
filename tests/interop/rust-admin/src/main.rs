//! rocketmq-rust's admin client against rmq-namesrv.
//!
//! ```text
//! rust-admin NAMESRV registered CLUSTER BROKER_NAME BROKER_ADDR TIMEOUT_SECS
//! rust-admin NAMESRV gone       CLUSTER BROKER_NAME TIMEOUT_SECS
//! ```
//!
//! `registered` polls GET_BROKER_CLUSTER_INFO through `DefaultMQAdminExt` until the broker is
//! listed as master of BROKER_NAME in CLUSTER, then reads every topic of the topic list
//! through `examine_topic_route_info` and checks each route field by field against the same
//! route decoded by rmq-namesrv's own client, and that the broker's own topics (TBW102, the
//! cluster and broker-name topics) route to it. `gone` polls until the broker name has left
//! the cluster info and its TBW102 route is gone. Exit status 0 = check passed.
#![recursion_limit = "512"]

use cheetah_string::CheetahString;
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::codes::request;
use rmq_namesrv::route::model;
use rocketmq_client_rust::{ClientRuntime, ClientRuntimeConfig, DefaultMQAdminExt, MQAdminReadExt};
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

type Fail = String;

/// A route reduced to what both decoders must agree on.
#[derive(Debug, PartialEq)]
struct Route {
    /// brokerName -> (cluster, id -> addr)
    brokers: BTreeMap<String, (String, BTreeMap<i64, String>)>,
    /// brokerName -> (read, write, perm, sysFlag)
    queues: BTreeMap<String, (i64, i64, i64, i64)>,
}

fn route_from_rocketmq_rust(
    r: &rocketmq_protocol::protocol::route::topic_route_data::TopicRouteData,
) -> Route {
    let brokers = r
        .broker_datas
        .iter()
        .map(|b| {
            let addrs = b
                .broker_addrs()
                .iter()
                .map(|(id, a)| (*id as i64, a.to_string()))
                .collect();
            (
                b.broker_name().to_string(),
                (b.cluster().to_string(), addrs),
            )
        })
        .collect();
    let queues = r
        .queue_datas
        .iter()
        .map(|q| {
            (
                q.broker_name.to_string(),
                (
                    i64::from(q.read_queue_nums),
                    i64::from(q.write_queue_nums),
                    i64::from(q.perm),
                    i64::from(q.topic_sys_flag),
                ),
            )
        })
        .collect();
    Route { brokers, queues }
}

fn route_from_rmq_namesrv(r: &model::TopicRouteData) -> Route {
    let brokers = r
        .broker_datas
        .iter()
        .map(|b| {
            let addrs = b
                .broker_addrs
                .iter()
                .map(|(id, a)| (*id, a.clone()))
                .collect();
            (b.broker_name.clone(), (b.cluster.clone(), addrs))
        })
        .collect();
    let queues = r
        .queue_datas
        .iter()
        .map(|q| {
            (
                q.broker_name.clone(),
                (
                    i64::from(q.read_queue_nums),
                    i64::from(q.write_queue_nums),
                    i64::from(q.perm),
                    i64::from(q.topic_sys_flag),
                ),
            )
        })
        .collect();
    Route { brokers, queues }
}

/// Our own decoding of GET_ROUTEINFO_BY_TOPIC (None = TOPIC_NOT_EXIST).
fn our_route(ns: &str, topic: &str) -> Result<Option<model::TopicRouteData>, Fail> {
    let mut c = Client::connect(ns, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let resp = c
        .request(request::GET_ROUTEINFO_BY_TOPIC, &[("topic", topic)], b"")
        .map_err(|e| e.to_string())?;
    match resp.code {
        17 => Ok(None),
        0 => model::TopicRouteData::decode(&resp.body)
            .map(Some)
            .map_err(|e| format!("{topic}: {e}")),
        code => Err(format!("{topic}: code {code} {:?}", resp.remark)),
    }
}

/// (cluster, master addr) of `broker` as rocketmq-rust reads the cluster info.
async fn broker_in_cluster_info(
    admin: &DefaultMQAdminExt,
    cluster: &str,
    broker: &str,
) -> Result<Option<String>, Fail> {
    let info = admin
        .examine_broker_cluster_info()
        .await
        .map_err(|e| format!("examine_broker_cluster_info: {e}"))?;
    let data = info
        .broker_addr_table
        .as_ref()
        .and_then(|t| t.get(&CheetahString::from(broker)));
    let listed = info
        .cluster_addr_table
        .as_ref()
        .and_then(|t| t.get(&CheetahString::from(cluster)))
        .is_some_and(|names| names.contains(&CheetahString::from(broker)));
    match data {
        Some(d) if listed && d.cluster() == cluster => {
            Ok(d.broker_addrs().get(&0).map(|a| a.to_string()))
        }
        Some(d) => Err(format!(
            "{broker} in brokerAddrTable (cluster {}) but clusterAddrTable[{cluster}] lists it: {listed}",
            d.cluster()
        )),
        None if listed => Err(format!("{broker} in clusterAddrTable only")),
        None => Ok(None),
    }
}

async fn registered(
    admin: &DefaultMQAdminExt,
    ns: &str,
    cluster: &str,
    broker: &str,
    addr: &str,
    timeout: Duration,
) -> Result<(), Fail> {
    let deadline = Instant::now() + timeout;
    loop {
        match broker_in_cluster_info(admin, cluster, broker).await? {
            Some(a) if a == addr => break,
            Some(a) => return Err(format!("{broker} master is {a}, expected {addr}")),
            None if Instant::now() >= deadline => {
                return Err(format!(
                    "{broker} not in the cluster info after {timeout:?}"
                ))
            }
            None => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    println!("cluster info: {broker} (cluster {cluster}) master 0 = {addr}");

    let topics = admin
        .fetch_all_topic_list()
        .await
        .map_err(|e| format!("fetch_all_topic_list: {e}"))?;
    let mut names: Vec<String> = topics.topic_list.iter().map(|t| t.to_string()).collect();
    names.sort();
    println!("topic list: {} topics", names.len());
    for must in ["TBW102", cluster, broker] {
        if !names.iter().any(|n| n == must) {
            return Err(format!(
                "topic {must} missing from the topic list {names:?}"
            ));
        }
    }
    for topic in &names {
        let theirs = admin
            .examine_topic_route_info(CheetahString::from(topic.as_str()))
            .await
            .map_err(|e| format!("examine_topic_route_info({topic}): {e}"))?
            .ok_or_else(|| format!("{topic}: rocketmq-rust got no route"))?;
        let ours = our_route(ns, topic)?.ok_or_else(|| format!("{topic}: no route"))?;
        let (theirs, ours) = (
            route_from_rocketmq_rust(&theirs),
            route_from_rmq_namesrv(&ours),
        );
        if theirs != ours {
            return Err(format!(
                "{topic}: rocketmq-rust read {theirs:?}, rmq-namesrv {ours:?}"
            ));
        }
        let Some((c, addrs)) = theirs.brokers.get(broker) else {
            continue; // a topic of another broker
        };
        if c != cluster || addrs.get(&0).map(String::as_str) != Some(addr) {
            return Err(format!("{topic}: broker {broker} read as {c} {addrs:?}"));
        }
        let (r, w, perm, sys) = theirs.queues.get(broker).copied().unwrap_or_default();
        println!("route {topic}: {broker}@{addr} read={r} write={w} perm={perm} sysFlag={sys}");
    }
    Ok(())
}

async fn gone(
    admin: &DefaultMQAdminExt,
    cluster: &str,
    broker: &str,
    timeout: Duration,
) -> Result<(), Fail> {
    let deadline = Instant::now() + timeout;
    loop {
        let listed = broker_in_cluster_info(admin, cluster, broker)
            .await?
            .is_some();
        let tbw102 = admin
            .examine_topic_route_info(CheetahString::from("TBW102"))
            .await
            .map_err(|e| format!("examine_topic_route_info(TBW102): {e}"))?;
        let routed = tbw102.is_some_and(|r| {
            r.broker_datas
                .iter()
                .any(|b| b.broker_name().as_str() == broker)
        });
        if !listed && !routed {
            println!("{broker} is gone from the cluster info and from TBW102's route");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{broker} still present after {timeout:?} (cluster info: {listed}, TBW102 route: {routed})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn run(args: &[String]) -> Result<(), Fail> {
    let usage = "usage: rust-admin NAMESRV registered CLUSTER BROKER ADDR SECS | NAMESRV gone CLUSTER BROKER SECS";
    let secs = |s: &String| {
        s.parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| usage.to_string())
    };
    let owner = RuntimeOwner::plan(RuntimeConfig {
        thread_name: "rust-admin".into(),
        ..Default::default()
    })
    .map_err(|e| format!("runtime plan: {e}"))?
    .build()
    .map_err(|e| format!("runtime: {e}"))?;
    // Their client logs at INFO to stdout by default; RUST_LOG still overrides this.
    let mut telemetry_config = rocketmq_observability::TelemetryBootstrapConfig::default();
    telemetry_config.logging.filter = "warn".into();
    let telemetry = rocketmq_observability::install_global(&telemetry_config)
        .map_err(|e| format!("telemetry: {e}"))?;
    let runtime = ClientRuntime::try_new(
        owner.root_context().component("client"),
        ClientRuntimeConfig::default(),
        telemetry.handle(),
    )
    .map_err(|e| format!("client runtime: {e}"))?;
    let mut admin = DefaultMQAdminExt::new(runtime.clone());
    let ns = args.get(1).ok_or(usage)?;
    admin.set_namesrv_addr(ns.as_str());
    MQAdminReadExt::start(&mut admin)
        .await
        .map_err(|e| format!("admin start: {e}"))?;
    let result = match args.get(2).map(String::as_str) {
        Some("registered") if args.len() == 7 => {
            registered(&admin, ns, &args[3], &args[4], &args[5], secs(&args[6])?).await
        }
        Some("gone") if args.len() == 6 => gone(&admin, &args[3], &args[4], secs(&args[5])?).await,
        _ => Err(usage.to_string()),
    };
    MQAdminReadExt::shutdown(&mut admin).await;
    let _ = runtime.shutdown().await;
    let _ = owner.shutdown_tasks().await;
    let _ = owner.shutdown_background();
    let _ = telemetry.shutdown();
    result
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rust-admin: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
