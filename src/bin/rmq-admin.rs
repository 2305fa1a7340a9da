//! `rmq-admin`: look at and change name servers without a JVM. Command names and flags follow
//! RocketMQ's `mqadmin` where it has them (`-n` name server list, `-t` topic, `-c` cluster,
//! `-b` broker name, `-s/-k/-v` namespace/key/value), limited to the name-server side.
//!
//! Reads go to one server of the `-n` list (random start, next one if it is unreachable, as
//! Java clients do); writes go to every server of the list, because name servers do not
//! replicate, and report one row per server. Output is an aligned table, or JSON with
//! `--json`. Exit codes: 0 ok, 1 a server answered with an error or "not found", 2 usage
//! error, 3 no server reachable. Arguments are parsed by hand: the runtime dependencies are
//! fixed.

use rmq_namesrv::client::api::NamesrvStats;
use rmq_namesrv::client::nameserver_set::parse_addr_list;
use rmq_namesrv::client::{Client, ClientError, NameServerSet, Strategy};
use rmq_namesrv::remoting::codes::request_name;
use rmq_namesrv::remoting::json::{self, Value};
use rmq_namesrv::route::model::{ClusterInfo, Dialect, TopicRouteData};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

const EXIT_OK: u8 = 0;
const EXIT_SERVER_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_UNREACHABLE: u8 = 3;
const DEFAULT_TIMEOUT_MS: u64 = 3000;

/// One option of a command: short letter, long name, takes a value, required, help.
struct Opt {
    short: char,
    long: &'static str,
    value: bool,
    required: bool,
    help: &'static str,
}

const fn opt(short: char, long: &'static str, required: bool, help: &'static str) -> Opt {
    Opt {
        short,
        long,
        value: true,
        required,
        help,
    }
}

struct Command {
    name: &'static str,
    about: &'static str,
    opts: &'static [Opt],
}

const COMMANDS: &[Command] = &[
    Command {
        name: "clusterList",
        about: "List clusters and their brokers (id, address, zone)",
        opts: &[opt('c', "clusterName", false, "only this cluster")],
    },
    Command {
        name: "brokerList",
        about: "List broker groups: master, slaves, zone, acting-master flag",
        opts: &[opt('c', "clusterName", false, "only this cluster")],
    },
    Command {
        name: "topicRoute",
        about: "Show the route of a topic (brokers and queues)",
        opts: &[opt('t', "topic", true, "topic name")],
    },
    Command {
        name: "topicList",
        about: "List all topics; with -c, per cluster",
        opts: &[Opt {
            short: 'c',
            long: "clusterModel",
            value: false,
            required: false,
            help: "list topics per cluster",
        }],
    },
    Command {
        name: "getKvConfig",
        about: "Show a KV config item, or a whole namespace without -k",
        opts: &[
            opt('s', "namespace", true, "namespace"),
            opt('k', "key", false, "key"),
        ],
    },
    Command {
        name: "updateKvConfig",
        about: "Create or update a KV config item on every name server",
        opts: &[
            opt('s', "namespace", true, "namespace"),
            opt('k', "key", true, "key"),
            opt('v', "value", true, "value"),
        ],
    },
    Command {
        name: "deleteKvConfig",
        about: "Delete a KV config item on every name server",
        opts: &[
            opt('s', "namespace", true, "namespace"),
            opt('k', "key", true, "key"),
        ],
    },
    Command {
        name: "getNamesrvConfig",
        about: "Show the configuration of every name server",
        opts: &[],
    },
    Command {
        name: "updateNamesrvConfig",
        about: "Change one configuration property on every name server",
        opts: &[
            opt('k', "key", true, "property name"),
            opt('v', "value", true, "property value"),
        ],
    },
    Command {
        name: "wipeWritePerm",
        about: "Wipe a broker's write permission on every name server",
        opts: &[opt('b', "brokerName", true, "broker name")],
    },
    Command {
        name: "addWritePerm",
        about: "Restore a broker's write permission on every name server",
        opts: &[opt('b', "brokerName", true, "broker name")],
    },
    Command {
        name: "deleteTopic",
        about: "Delete a topic's route on every name server (brokers are not touched)",
        opts: &[
            opt('t', "topic", true, "topic name"),
            opt('c', "clusterName", false, "only this cluster's queues"),
        ],
    },
    Command {
        name: "stats",
        about: "Show each name server's statistics (rmq-namesrv extension, code 29001)",
        opts: &[],
    },
    Command {
        name: "help",
        about: "List the commands, or show one command's options",
        opts: &[],
    },
];

fn general_usage() -> String {
    let mut s = String::from(
        "usage: rmq-admin [-n 'host:port;host:port'] [--json] [--timeout MS] <command> [options]\n\n\
         Global options:\n  \
         -n, --namesrvAddr LIST  name servers, ';'-separated (default: $NAMESRV_ADDR)\n  \
         --json                  machine-readable output\n  \
         --timeout MS            connect and call timeout (default 3000)\n\n\
         Commands:\n",
    );
    let width = COMMANDS.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in COMMANDS {
        s.push_str(&format!("  {:width$}  {}\n", c.name, c.about));
    }
    s.push_str(
        "\nExit codes: 0 ok, 1 server error or not found, 2 usage error, 3 no name server reachable.\n\
         'rmq-admin help <command>' shows a command's options.\n",
    );
    s
}

fn command_usage(c: &Command) -> String {
    let mut s = format!("usage: rmq-admin {}", c.name);
    for o in c.opts {
        let arg = if o.value {
            format!("-{} <{}>", o.short, o.long)
        } else {
            format!("-{}", o.short)
        };
        if o.required {
            s.push_str(&format!(" {arg}"));
        } else {
            s.push_str(&format!(" [{arg}]"));
        }
    }
    s.push_str(&format!("\n\n{}\n", c.about));
    if !c.opts.is_empty() {
        s.push_str("\nOptions:\n");
        for o in c.opts {
            s.push_str(&format!("  -{}, --{:14} {}\n", o.short, o.long, o.help));
        }
    }
    s
}

/// The parsed command line.
struct Invocation {
    command: &'static Command,
    /// Option values by short letter; flags map to "true".
    values: BTreeMap<char, String>,
    namesrv: Option<String>,
    json: bool,
    timeout: Duration,
}

impl Invocation {
    fn get(&self, short: char) -> Option<&str> {
        self.values.get(&short).map(String::as_str)
    }
    /// A value the parser already checked is present (required options).
    fn req(&self, short: char) -> &str {
        self.get(short).unwrap_or_default()
    }
}

enum Parsed {
    Run(Invocation),
    Help(String),
}

fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let mut namesrv = None;
    let mut json_out = false;
    let mut timeout = Duration::from_millis(DEFAULT_TIMEOUT_MS);
    let mut command: Option<&'static Command> = None;
    let mut rest: Vec<&str> = Vec::new();
    let mut i = 0;
    let take = |i: &mut usize, name: &str| -> Result<String, String> {
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| format!("{name} needs a value"))
    };
    while i < args.len() {
        let a = args[i].as_str();
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a, None),
        };
        match flag {
            "-n" | "--namesrvAddr" => {
                namesrv = Some(match inline {
                    Some(v) => v,
                    None => take(&mut i, flag)?,
                })
            }
            "--json" => json_out = true,
            "--timeout" => {
                let v = match inline {
                    Some(v) => v,
                    None => take(&mut i, flag)?,
                };
                let ms: u64 = v
                    .parse()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| format!("--timeout needs milliseconds > 0, got {v:?}"))?;
                timeout = Duration::from_millis(ms);
            }
            "-h" | "--help" => {
                return Ok(Parsed::Help(match command {
                    Some(c) if c.name != "help" => command_usage(c),
                    _ => general_usage(),
                }))
            }
            _ if command.is_none() && !a.starts_with('-') => {
                command = Some(
                    COMMANDS
                        .iter()
                        .find(|c| c.name.eq_ignore_ascii_case(a))
                        .ok_or_else(|| format!("unknown command {a:?}"))?,
                );
            }
            _ => rest.push(a),
        }
        i += 1;
    }
    let command = command.ok_or("no command given")?;
    let mut values = BTreeMap::new();
    let mut positional = Vec::new();
    let mut k = 0;
    while k < rest.len() {
        let a = rest[k];
        let found = if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            command
                .opts
                .iter()
                .find(|o| o.long == name)
                .map(|o| (o, inline))
        } else if let Some(short) = a.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            command
                .opts
                .iter()
                .find(|o| short.starts_with(o.short))
                .map(|o| (o, None))
        } else if !a.starts_with('-') || a == "-" {
            positional.push(a.to_string());
            k += 1;
            continue;
        } else {
            None
        };
        let Some((o, inline)) = found else {
            return Err(format!("unknown option {a} for {}", command.name));
        };
        let value = if !o.value {
            "true".to_string()
        } else if let Some(v) = inline {
            v.to_string()
        } else {
            k += 1;
            rest.get(k)
                .map(|v| v.to_string())
                .ok_or_else(|| format!("-{} needs a value", o.short))?
        };
        values.insert(o.short, value);
        k += 1;
    }
    if command.name == "help" {
        return Ok(Parsed::Help(match positional.first() {
            Some(name) => match COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name)) {
                Some(c) => command_usage(c),
                None => return Err(format!("unknown command {name:?}")),
            },
            None => general_usage(),
        }));
    }
    if let Some(p) = positional.first() {
        return Err(format!("unexpected argument {p:?} for {}", command.name));
    }
    for o in command.opts.iter().filter(|o| o.required) {
        if !values.get(&o.short).is_some_and(|v| !v.trim().is_empty()) {
            return Err(format!("{} needs -{} <{}>", command.name, o.short, o.long));
        }
    }
    Ok(Parsed::Run(Invocation {
        command,
        values,
        namesrv,
        json: json_out,
        timeout,
    }))
}

// ------------------------------------------------------------------ output

/// A table cell; the type decides how it is written in JSON.
enum Cell {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Written as "-" in a table and null in JSON.
    None,
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Str(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Bool(b) => b.to_string(),
            Cell::None => "-".to_string(),
        }
    }
    fn value(&self) -> Value {
        match self {
            Cell::Str(s) => Value::Str(s.clone()),
            Cell::Int(i) => Value::Int(*i),
            Cell::Bool(b) => Value::Bool(*b),
            Cell::None => Value::Null,
        }
    }
}

fn s(v: impl Into<String>) -> Cell {
    Cell::Str(v.into())
}

fn opt_cell(v: Option<&String>) -> Cell {
    v.map_or(Cell::None, |s| Cell::Str(s.clone()))
}

/// Columns: (table header, JSON key).
struct Table {
    columns: Vec<(&'static str, &'static str)>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(columns: &[(&'static str, &'static str)]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// Left-aligned columns two spaces apart, no trailing spaces.
    fn render(&self) -> String {
        let texts: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(Cell::text).collect())
            .collect();
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .map(|(h, _)| h.chars().count())
            .collect();
        for row in &texts {
            for (w, t) in widths.iter_mut().zip(row) {
                *w = (*w).max(t.chars().count());
            }
        }
        let line = |cells: Vec<&str>| -> String {
            let mut out = String::new();
            for (k, (c, w)) in cells.iter().zip(&widths).enumerate() {
                if k > 0 {
                    out.push_str("  ");
                }
                out.push_str(c);
                let pad = w.saturating_sub(c.chars().count());
                out.push_str(&" ".repeat(pad));
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
            out
        };
        let mut out = line(self.columns.iter().map(|(h, _)| *h).collect());
        for row in &texts {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        out
    }

    fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    Value::Object(
                        self.columns
                            .iter()
                            .zip(r)
                            .map(|((_, key), cell)| (key.to_string(), cell.value()))
                            .collect(),
                    )
                })
                .collect(),
        )
    }
}

fn json_text(v: &Value) -> String {
    let mut out = Vec::new();
    json::write_value(&mut out, v);
    out.push(b'\n');
    String::from_utf8_lossy(&out).into_owned()
}

/// What a command produced: text for stdout and an exit code; errors already went to stderr.
struct Outcome {
    stdout: String,
    code: u8,
}

fn ok(stdout: String) -> Outcome {
    Outcome {
        stdout,
        code: EXIT_OK,
    }
}

fn exit_code_of(e: &ClientError) -> u8 {
    match e {
        ClientError::Io(_) => EXIT_UNREACHABLE,
        _ => EXIT_SERVER_ERROR,
    }
}

fn fail(e: &ClientError) -> Outcome {
    eprintln!("rmq-admin: {e}");
    Outcome {
        stdout: String::new(),
        code: exit_code_of(e),
    }
}

fn not_found(msg: String) -> Outcome {
    eprintln!("rmq-admin: {msg}");
    Outcome {
        stdout: String::new(),
        code: EXIT_SERVER_ERROR,
    }
}

/// Exit code for per-server results: any error answer wins over unreachable servers.
fn worst<T>(results: &[(String, Result<T, ClientError>)]) -> u8 {
    let errors = results.iter().filter_map(|(_, r)| r.as_ref().err());
    errors.fold(EXIT_OK, |acc, e| match (acc, exit_code_of(e)) {
        (EXIT_SERVER_ERROR, _) | (_, EXIT_SERVER_ERROR) => EXIT_SERVER_ERROR,
        (_, c) => c,
    })
}

fn report_errors<T>(results: &[(String, Result<T, ClientError>)]) {
    for (addr, r) in results {
        if let Err(e) = r {
            eprintln!("rmq-admin: {addr}: {e}");
        }
    }
}

fn emit(inv: &Invocation, table: &Table) -> String {
    if inv.json {
        json_text(&table.to_json())
    } else {
        table.render()
    }
}

// ------------------------------------------------------------------ commands

/// Cluster info and the `-c` cluster filter, checked to name a known cluster.
fn cluster_info_filtered<'a>(
    inv: &'a Invocation,
    set: &mut NameServerSet,
) -> Result<(ClusterInfo, Option<&'a str>), Outcome> {
    let info = set.call(|c| c.get_cluster_info()).map_err(|e| fail(&e))?;
    let only = inv.get('c');
    if let Some(c) = only {
        if !info.cluster_addr_table.contains_key(c) {
            return Err(not_found(format!("cluster {c} not found")));
        }
    }
    Ok((info, only))
}

fn cluster_list(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let (info, only) = match cluster_info_filtered(inv, set) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
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
        for name in names {
            let Some(b) = info.broker_addr_table.get(&name) else {
                continue;
            };
            for (id, addr) in &b.broker_addrs {
                t.push(vec![
                    s(cluster.as_str()),
                    s(name.as_str()),
                    Cell::Int(*id),
                    s(addr.as_str()),
                    opt_cell(b.zone_name.as_ref()),
                ]);
            }
        }
    }
    ok(emit(inv, &t))
}

fn broker_list(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let (info, only) = match cluster_info_filtered(inv, set) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
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
    ok(emit(inv, &t))
}

fn perm_text(perm: i32) -> String {
    let mut s = String::new();
    s.push(if perm & 4 != 0 { 'R' } else { '-' });
    s.push(if perm & 2 != 0 { 'W' } else { '-' });
    s.push(if perm & 1 != 0 { 'X' } else { '-' });
    s
}

fn topic_route(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let topic = inv.req('t');
    let route: TopicRouteData = match set.call(|c| c.get_route(topic)) {
        Ok(Some(r)) => r,
        Ok(None) => {
            return not_found(format!(
                "topic {topic} not found (no route on {})",
                set.last_addr().unwrap_or("the name server")
            ))
        }
        Err(e) => return fail(&e),
    };
    if inv.json {
        let mut out = Vec::new();
        route.encode(Dialect::Standard, &mut out);
        out.push(b'\n');
        return ok(String::from_utf8_lossy(&out).into_owned());
    }
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
    out.push('\n');
    out.push_str(&brokers.render());
    out.push('\n');
    out.push_str(&queues.render());
    let filters: Vec<_> = route
        .filter_server_table
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if !filters.is_empty() {
        let mut t = Table::new(&[("BROKER_ADDRESS", ""), ("FILTER_SERVERS", "")]);
        for (addr, servers) in filters {
            t.push(vec![s(addr.as_str()), s(servers.join(","))]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    ok(out)
}

fn topic_list(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    if inv.get('c').is_none() {
        let mut topics = match set.call(|c| c.get_all_topic_list()) {
            Ok(t) => t,
            Err(e) => return fail(&e),
        };
        topics.sort();
        if inv.json {
            return ok(json_text(&Value::Array(
                topics.into_iter().map(Value::Str).collect(),
            )));
        }
        return ok(topics.iter().map(|t| format!("{t}\n")).collect());
    }
    let rows = set.call(|c| {
        let info = c.get_cluster_info()?;
        let mut rows = Vec::new();
        for cluster in info.cluster_addr_table.keys() {
            let mut topics = c.get_topics_by_cluster(cluster)?;
            topics.sort();
            rows.extend(topics.into_iter().map(|t| (cluster.clone(), t)));
        }
        Ok(rows)
    });
    let rows = match rows {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let mut t = Table::new(&[("CLUSTER", "cluster"), ("TOPIC", "topic")]);
    for (cluster, topic) in rows {
        t.push(vec![s(cluster), s(topic)]);
    }
    ok(emit(inv, &t))
}

fn get_kv_config(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let namespace = inv.req('s');
    if let Some(key) = inv.get('k') {
        return match set.call(|c| c.get_kv_config(namespace, key)) {
            Ok(Some(v)) if inv.json => ok(json_text(&Value::Object(vec![
                ("namespace".into(), Value::Str(namespace.into())),
                ("key".into(), Value::Str(key.into())),
                ("value".into(), Value::Str(v)),
            ]))),
            Ok(Some(v)) => ok(format!("{v}\n")),
            Ok(None) => not_found(format!("no KV config item {namespace}/{key}")),
            Err(e) => fail(&e),
        };
    }
    match set.call(|c| c.get_kv_list(namespace)) {
        Ok(Some(mut entries)) => {
            entries.sort();
            let mut t = Table::new(&[("KEY", "key"), ("VALUE", "value")]);
            for (k, v) in entries {
                t.push(vec![s(k), s(v)]);
            }
            ok(emit(inv, &t))
        }
        Ok(None) => not_found(format!("no KV config namespace {namespace}")),
        Err(e) => fail(&e),
    }
}

/// A write sent to every server: one row per server with OK or the error.
fn write_all<T>(
    inv: &Invocation,
    set: &mut NameServerSet,
    count_column: Option<(&'static str, &'static str)>,
    f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    count: impl Fn(&T) -> i64,
) -> Outcome {
    let results = set.call_all(f);
    report_errors(&results);
    let mut columns = vec![("NAMESRV", "namesrv"), ("RESULT", "result")];
    columns.extend(count_column);
    let mut t = Table::new(&columns);
    for (addr, r) in &results {
        let mut row = vec![s(addr.as_str())];
        match r {
            Ok(v) => {
                row.push(s("OK"));
                if count_column.is_some() {
                    row.push(Cell::Int(count(v)));
                }
            }
            Err(e) => {
                row.push(s(e.to_string()));
                if count_column.is_some() {
                    row.push(Cell::None);
                }
            }
        }
        t.push(row);
    }
    Outcome {
        stdout: emit(inv, &t),
        code: worst(&results),
    }
}

fn get_namesrv_config(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let results = set.call_all(|c| c.get_namesrv_config());
    report_errors(&results);
    let code = worst(&results);
    if inv.json {
        let members = results
            .into_iter()
            .filter_map(|(addr, r)| {
                let entries = r.ok()?;
                Some((
                    addr,
                    Value::Object(
                        entries
                            .into_iter()
                            .map(|(k, v)| (k, Value::Str(v)))
                            .collect(),
                    ),
                ))
            })
            .collect();
        return Outcome {
            stdout: json_text(&Value::Object(members)),
            code,
        };
    }
    let mut out = String::new();
    for (addr, r) in results {
        let Ok(entries) = r else { continue };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("============ {addr} ============\n"));
        let mut t = Table::new(&[("KEY", ""), ("VALUE", "")]);
        for (k, v) in entries {
            t.push(vec![s(k), s(v)]);
        }
        out.push_str(&t.render());
    }
    Outcome { stdout: out, code }
}

fn stats_json(st: &NamesrvStats) -> Value {
    let mut members: Vec<(String, Value)> = st
        .values
        .iter()
        .map(|(k, v)| (k.clone(), Value::Int(*v)))
        .collect();
    members.push((
        "requests".into(),
        Value::Object(
            st.requests
                .iter()
                .map(|(code, n)| (code.to_string(), Value::Int(*n)))
                .collect(),
        ),
    ));
    Value::Object(members)
}

fn stats(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    let results = set.call_all(|c| c.stats());
    report_errors(&results);
    let code = worst(&results);
    if inv.json {
        let members = results
            .iter()
            .filter_map(|(addr, r)| Some((addr.clone(), stats_json(r.as_ref().ok()?))))
            .collect();
        return Outcome {
            stdout: json_text(&Value::Object(members)),
            code,
        };
    }
    let mut out = String::new();
    for (addr, r) in &results {
        let Ok(st) = r else { continue };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("============ {addr} ============\n"));
        let mut t = Table::new(&[("STAT", ""), ("VALUE", "")]);
        for (k, v) in &st.values {
            t.push(vec![s(k.as_str()), Cell::Int(*v)]);
        }
        out.push_str(&t.render());
        out.push('\n');
        let mut r = Table::new(&[("CODE", ""), ("REQUEST", ""), ("SERVED", "")]);
        for (code, n) in &st.requests {
            r.push(vec![
                Cell::Int((*code).into()),
                s(request_name(*code)),
                Cell::Int(*n),
            ]);
        }
        out.push_str(&r.render());
    }
    Outcome { stdout: out, code }
}

fn run(inv: &Invocation, set: &mut NameServerSet) -> Outcome {
    match inv.command.name {
        "clusterList" => cluster_list(inv, set),
        "brokerList" => broker_list(inv, set),
        "topicRoute" => topic_route(inv, set),
        "topicList" => topic_list(inv, set),
        "getKvConfig" => get_kv_config(inv, set),
        "updateKvConfig" => {
            let (ns, k, v) = (inv.req('s'), inv.req('k'), inv.req('v'));
            write_all(inv, set, None, |c| c.put_kv_config(ns, k, v), |_| 0)
        }
        "deleteKvConfig" => {
            let (ns, k) = (inv.req('s'), inv.req('k'));
            write_all(inv, set, None, |c| c.delete_kv_config(ns, k), |_| 0)
        }
        "getNamesrvConfig" => get_namesrv_config(inv, set),
        "updateNamesrvConfig" => {
            let (k, v) = (inv.req('k'), inv.req('v'));
            write_all(
                inv,
                set,
                None,
                |c| c.update_namesrv_config(&[(k, v)]),
                |_| 0,
            )
        }
        "wipeWritePerm" => {
            let b = inv.req('b');
            write_all(
                inv,
                set,
                Some(("TOPICS", "wipeTopicCount")),
                |c| c.wipe_write_perm(b),
                |n| i64::from(*n),
            )
        }
        "addWritePerm" => {
            let b = inv.req('b');
            write_all(
                inv,
                set,
                Some(("TOPICS", "addTopicCount")),
                |c| c.add_write_perm(b),
                |n| i64::from(*n),
            )
        }
        "deleteTopic" => {
            let (t, c) = (inv.req('t'), inv.get('c'));
            write_all(inv, set, None, |cl| cl.delete_topic(t, c), |_| 0)
        }
        "stats" => stats(inv, set),
        other => {
            eprintln!("rmq-admin: command {other} is not implemented");
            Outcome {
                stdout: String::new(),
                code: EXIT_USAGE,
            }
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let inv = match parse_args(&args) {
        Ok(Parsed::Run(inv)) => inv,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // The named command's usage when there is one, else the general one.
            let usage = args
                .iter()
                .find_map(|a| COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(a)))
                .filter(|c| c.name != "help")
                .map_or_else(general_usage, command_usage);
            eprintln!("rmq-admin: {e}\n\n{usage}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let list = inv
        .namesrv
        .clone()
        .or_else(|| std::env::var("NAMESRV_ADDR").ok())
        .unwrap_or_default();
    let addrs = parse_addr_list(&list);
    if addrs.is_empty() {
        eprintln!(
            "rmq-admin: no name server given: use -n 'host:port;host:port' or set NAMESRV_ADDR"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let mut set = match NameServerSet::new(addrs, Strategy::RandomStartRoundRobin) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rmq-admin: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    set.set_timeout(inv.timeout);
    let outcome = run(&inv, &mut set);
    print!("{}", outcome.stdout);
    ExitCode::from(outcome.code)
}
