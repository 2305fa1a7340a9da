//! Commands that look: each asks one name server (see [`Peers::read`]), except
//! `getNamesrvConfig` and `stats`, which show every server because each has its own.

use crate::cli::Invocation;
use crate::outcome::{exit_code_of_all, Failure, Outcome};
use crate::output::{json_text, opt_cell, pretty_json, s, Cell, Table};
use crate::peers::Peers;
use rmq_namesrv::client::api::NamesrvStats;
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::remoting::codes::request_name;
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::{ClusterInfo, Dialect, TopicRouteData};

/// The KV namespace of order confs (Java's `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// One answer from any server of the list, or the outcome that explains why there is none.
fn read<T>(
    peers: &Peers,
    f: impl FnMut(&mut Client) -> Result<T, ClientError>,
) -> Result<(String, T), Outcome> {
    peers
        .read(f)
        .map_err(|failures| Outcome::from_failures(&failures))
}

/// Cluster info and the `-c` cluster filter, checked to name a known cluster.
fn cluster_info_filtered<'a>(
    inv: &'a Invocation,
    peers: &Peers,
) -> Result<(ClusterInfo, Option<&'a str>), Outcome> {
    let (addr, info) = read(peers, |c| c.get_cluster_info())?;
    let only = inv.get("c");
    if let Some(c) = only {
        if !info.cluster_addr_table.contains_key(c) {
            return Err(Outcome::failed(format!("cluster {c} not found on {addr}")));
        }
    }
    Ok((info, only))
}

pub fn cluster_list(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    let (info, only) = cluster_info_filtered(inv, peers)?;
    let mut t = Table::new(&[
        ("CLUSTER", "cluster"),
        ("BROKER", "brokerName"),
        ("BID", "brokerId"),
        ("ADDRESS", "brokerAddr"),
        ("ZONE", "zoneName"),
    ]);
    for (cluster, names) in &info.cluster_addr_table {
        if only.is_some_and(|c| c != cluster) {
            continue;
        }
        let mut names = names.clone();
        names.sort();
        for b in names.iter().filter_map(|n| info.broker_addr_table.get(n)) {
            for (id, addr) in &b.broker_addrs {
                t.push(vec![
                    s(cluster.as_str()),
                    s(b.broker_name.as_str()),
                    Cell::Int(*id),
                    s(addr.as_str()),
                    opt_cell(b.zone_name.as_ref()),
                ]);
            }
        }
    }
    Ok(Outcome::ok(t.emit(inv.json)))
}

pub fn broker_list(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    let (info, only) = cluster_info_filtered(inv, peers)?;
    let mut t = Table::new(&[
        ("BROKER", "brokerName"),
        ("CLUSTER", "cluster"),
        ("MASTER", "masterAddr"),
        ("SLAVES", "slaveAddrs"),
        ("ZONE", "zoneName"),
        ("ACTING_MASTER", "enableActingMaster"),
    ]);
    for (name, b) in &info.broker_addr_table {
        if only.is_some_and(|c| c != b.cluster) {
            continue;
        }
        let slaves: Vec<String> = b
            .broker_addrs
            .iter()
            .filter(|(id, _)| **id != 0)
            .map(|(id, a)| format!("{id}={a}"))
            .collect();
        t.push(vec![
            s(name.as_str()),
            s(b.cluster.as_str()),
            opt_cell(b.broker_addrs.get(&0)),
            if slaves.is_empty() {
                Cell::None
            } else {
                s(slaves.join(","))
            },
            opt_cell(b.zone_name.as_ref()),
            Cell::Bool(b.enable_acting_master),
        ]);
    }
    Ok(Outcome::ok(t.emit(inv.json)))
}

fn perm_text(perm: i32) -> String {
    let mut s = String::new();
    s.push(if perm & 4 != 0 { 'R' } else { '-' });
    s.push(if perm & 2 != 0 { 'W' } else { '-' });
    s.push(if perm & 1 != 0 { 'X' } else { '-' });
    s
}

/// The route of `-t`, or "not found" naming the server that said so.
fn route_of(inv: &Invocation, peers: &Peers) -> Result<TopicRouteData, Outcome> {
    let topic = inv.req("t");
    match read(peers, |c| c.get_route(topic))? {
        (_, Some(route)) => Ok(route),
        (addr, None) => Err(Outcome::failed(format!(
            "topic {topic} not found (no route on {addr})"
        ))),
    }
}

/// `mqadmin topicRoute` prints the route as indented JSON; `-l` gives tables, `--json` the
/// same JSON on one line.
pub fn topic_route(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    let route = route_of(inv, peers)?;
    if !inv.has("l") {
        let mut out = Vec::new();
        route.encode(Dialect::Standard, &mut out);
        let value = json::parse(&out).map_err(|e| Outcome::failed(format!("route JSON: {e}")))?;
        return Ok(Outcome::ok(if inv.json {
            json_text(&value)
        } else {
            pretty_json(&value)
        }));
    }
    Ok(Outcome::ok(route_tables(inv.req("t"), &route)))
}

fn route_tables(topic: &str, route: &TopicRouteData) -> String {
    let mut brokers = Table::new(&[
        ("BROKER", ""),
        ("CLUSTER", ""),
        ("BID", ""),
        ("ADDRESS", ""),
        ("ZONE", ""),
    ]);
    for b in &route.broker_datas {
        for (id, addr) in &b.broker_addrs {
            brokers.push(vec![
                s(b.broker_name.as_str()),
                s(b.cluster.as_str()),
                Cell::Int(*id),
                s(addr.as_str()),
                opt_cell(b.zone_name.as_ref()),
            ]);
        }
    }
    let mut queues = Table::new(&[
        ("BROKER", ""),
        ("READ_QUEUES", ""),
        ("WRITE_QUEUES", ""),
        ("PERM", ""),
        ("SYS_FLAG", ""),
    ]);
    for q in &route.queue_datas {
        queues.push(vec![
            s(q.broker_name.as_str()),
            Cell::Int(q.read_queue_nums.into()),
            Cell::Int(q.write_queue_nums.into()),
            s(format!("{} ({})", q.perm, perm_text(q.perm))),
            Cell::Int(q.topic_sys_flag.into()),
        ]);
    }
    let mut out = format!("Topic: {topic}\n");
    if let Some(conf) = &route.order_topic_conf {
        out.push_str(&format!("Order topic conf: {conf}\n"));
    }
    let tables = [Some(brokers), Some(queues), filter_servers(route)];
    for table in tables.iter().flatten() {
        out.push('\n');
        out.push_str(&table.render());
    }
    out
}

/// The filter servers per broker address, when there are any.
fn filter_servers(route: &TopicRouteData) -> Option<Table> {
    let mut t = Table::new(&[("BROKER_ADDRESS", ""), ("FILTER_SERVERS", "")]);
    let mut any = false;
    for (addr, servers) in route
        .filter_server_table
        .iter()
        .filter(|(_, v)| !v.is_empty())
    {
        t.push(vec![s(addr.as_str()), s(servers.join(","))]);
        any = true;
    }
    any.then_some(t)
}

/// The clusters whose brokers serve the topic, one per line (`mqadmin topicClusterList`
/// looks at the first broker only; this lists all).
pub fn topic_cluster_list(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    let route = route_of(inv, peers)?;
    let mut clusters: Vec<String> = route
        .broker_datas
        .iter()
        .map(|b| b.cluster.clone())
        .collect();
    clusters.sort();
    clusters.dedup();
    if inv.json {
        let list = clusters.into_iter().map(Value::Str).collect();
        return Ok(Outcome::ok(json_text(&Value::Array(list))));
    }
    Ok(Outcome::ok(
        clusters.iter().map(|c| format!("{c}\n")).collect(),
    ))
}

pub fn topic_list(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    if !inv.has("c") {
        let (_, mut topics) = read(peers, |c| c.get_all_topic_list())?;
        topics.sort();
        if inv.json {
            let list = topics.into_iter().map(Value::Str).collect();
            return Ok(Outcome::ok(json_text(&Value::Array(list))));
        }
        return Ok(Outcome::ok(
            topics.iter().map(|t| format!("{t}\n")).collect(),
        ));
    }
    let (_, rows) = read(peers, |c| {
        let info = c.get_cluster_info()?;
        let mut rows = Vec::new();
        for cluster in info.cluster_addr_table.keys() {
            let mut topics = c.get_topics_by_cluster(cluster)?;
            topics.sort();
            rows.extend(topics.into_iter().map(|t| (cluster.clone(), t)));
        }
        Ok(rows)
    })?;
    let mut t = Table::new(&[("CLUSTER", "cluster"), ("TOPIC", "topic")]);
    for (cluster, topic) in rows {
        t.push(vec![s(cluster), s(topic)]);
    }
    Ok(Outcome::ok(t.emit(inv.json)))
}

/// One KV item: its value alone (or a JSON object with `--json`).
pub fn kv_item(
    inv: &Invocation,
    peers: &Peers,
    namespace: &str,
    key: &str,
) -> Result<Outcome, Outcome> {
    match read(peers, |c| c.get_kv_config(namespace, key))? {
        (_, Some(v)) if inv.json => Ok(Outcome::ok(json_text(&Value::Object(vec![
            ("namespace".into(), Value::Str(namespace.into())),
            ("key".into(), Value::Str(key.into())),
            ("value".into(), Value::Str(v)),
        ])))),
        (_, Some(v)) => Ok(Outcome::ok(format!("{v}\n"))),
        (addr, None) => Err(Outcome::failed(format!(
            "no KV config item {namespace}/{key} on {addr}"
        ))),
    }
}

pub fn get_kv_config(inv: &Invocation, peers: &Peers) -> Result<Outcome, Outcome> {
    let namespace = inv.req("s");
    if let Some(key) = inv.get("k") {
        return kv_item(inv, peers, namespace, key);
    }
    match read(peers, |c| c.get_kv_list(namespace))? {
        (_, Some(mut entries)) => {
            entries.sort();
            let mut t = Table::new(&[("KEY", "key"), ("VALUE", "value")]);
            for (k, v) in entries {
                t.push(vec![s(k), s(v)]);
            }
            Ok(Outcome::ok(t.emit(inv.json)))
        }
        (addr, None) => Err(Outcome::failed(format!(
            "no KV config namespace {namespace} on {addr}"
        ))),
    }
}

/// Asks every server; the answers, the failures explained, and the exit code.
fn ask_all<T>(
    peers: &Peers,
    f: impl FnMut(&mut Client) -> Result<T, ClientError>,
) -> (Vec<(String, T)>, Vec<Failure>, u8) {
    let mut answers = Vec::new();
    let mut failures = Vec::new();
    for (addr, r) in peers.each(f) {
        match r {
            Ok(v) => answers.push((addr, v)),
            Err(failure) => failures.push(failure),
        }
    }
    let code = exit_code_of_all(answers.len(), &failures);
    (answers, failures, code)
}

/// One section per server: `============ addr ============` and its tables.
fn per_server<T>(answers: &[(String, T)], section: impl Fn(&T) -> String) -> String {
    let mut out = String::new();
    for (addr, v) in answers {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("============ {addr} ============\n"));
        out.push_str(&section(v));
    }
    out
}

pub fn get_namesrv_config(inv: &Invocation, peers: &Peers) -> Outcome {
    config_sections(inv, peers, |c| c.get_namesrv_config())
}

/// A configuration read from every server of `peers` (`ask` gets one server's key/value
/// pairs): one KEY/VALUE section per server, or one JSON object per server with `--json`.
/// Name servers (`getNamesrvConfig`) and controllers (`getControllerConfig`) answer alike.
pub fn config_sections(
    inv: &Invocation,
    peers: &Peers,
    ask: impl FnMut(&mut Client) -> Result<Vec<(String, String)>, ClientError>,
) -> Outcome {
    let (answers, failures, code) = ask_all(peers, ask);
    let stdout = if inv.json {
        let members = answers.into_iter().map(|(addr, entries)| {
            let entries = entries
                .into_iter()
                .map(|(k, v)| (k, Value::Str(v)))
                .collect();
            (addr, Value::Object(entries))
        });
        json_text(&Value::Object(members.collect()))
    } else {
        per_server(&answers, |entries| {
            let mut t = Table::new(&[("KEY", ""), ("VALUE", "")]);
            for (k, v) in entries {
                t.push(vec![s(k.as_str()), s(v.as_str())]);
            }
            t.render()
        })
    };
    Outcome {
        stdout,
        stderr: failures.iter().map(Failure::line).collect(),
        code,
    }
}

fn stats_json(st: &NamesrvStats) -> Value {
    let mut members: Vec<(String, Value)> = st
        .values
        .iter()
        .map(|(k, v)| (k.clone(), Value::Int(*v)))
        .collect();
    let requests = st
        .requests
        .iter()
        .map(|(code, n)| (code.to_string(), Value::Int(*n)));
    members.push(("requests".into(), Value::Object(requests.collect())));
    Value::Object(members)
}

fn stats_text(st: &NamesrvStats) -> String {
    let mut t = Table::new(&[("STAT", ""), ("VALUE", "")]);
    for (k, v) in &st.values {
        t.push(vec![s(k.as_str()), Cell::Int(*v)]);
    }
    let mut r = Table::new(&[("CODE", ""), ("REQUEST", ""), ("SERVED", "")]);
    for (code, n) in &st.requests {
        r.push(vec![
            Cell::Int((*code).into()),
            s(request_name(*code)),
            Cell::Int(*n),
        ]);
    }
    format!("{}\n{}", t.render(), r.render())
}

pub fn stats(inv: &Invocation, peers: &Peers) -> Outcome {
    let (answers, failures, code) = ask_all(peers, |c| c.stats());
    let stdout = if inv.json {
        let members = answers
            .iter()
            .map(|(addr, st)| (addr.clone(), stats_json(st)));
        json_text(&Value::Object(members.collect()))
    } else {
        per_server(&answers, stats_text)
    };
    Outcome {
        stdout,
        stderr: failures.iter().map(Failure::line).collect(),
        code,
    }
}
