//! `rmq-admin`: look at and change name servers without a JVM. Command names and flags follow
//! RocketMQ's `mqadmin` where it has them (`-n` name server list, `-t` topic, `-c` cluster,
//! `-b` broker name, `-s/-k/-v` namespace/key/value), for the name-server side and, with
//! `-a`, a RocketMQ controller (the commands `mqadmin` has for it).
//!
//! * [`cli`]: the command table, usage texts and the argument parser;
//! * [`peers`]: reaching the servers of `-n` (reads to one picked by `--strategy`, or to all
//!   with `--all`; writes to all);
//! * [`reads`] and [`writes`]: the name-server commands; [`controller`]: the controller's;
//! * [`compare`]: `--all`, every server's answer side by side;
//! * [`outcome`]: exit codes and per-address error explanations;
//! * [`output`]: tables and JSON.
//!
//! Output is an aligned table (JSON where `mqadmin` prints JSON), or JSON with `--json`.
//! Errors go to stderr, one line per failing server, each starting with its address.

mod cli;
mod compare;
mod controller;
mod outcome;
mod output;
mod peers;
mod reads;
mod writes;

use cli::{Invocation, Parsed};
use outcome::{Outcome, Role, EXIT_USAGE};
use peers::Peers;
use rmq_namesrv::client::nameserver_set::parse_addr_list;
use std::process::ExitCode;

fn run(inv: &Invocation, peers: &mut Peers) -> Outcome {
    let result = match inv.command.name {
        "clusterList" => reads::cluster_list(inv, peers),
        "brokerList" => reads::broker_list(inv, peers),
        "topicRoute" => reads::topic_route(inv, peers),
        "topicClusterList" => reads::topic_cluster_list(inv, peers),
        "topicList" => reads::topic_list(inv, peers),
        "getKvConfig" => reads::get_kv_config(inv, peers),
        "getNamesrvConfig" => Ok(reads::get_namesrv_config(inv, peers)),
        "stats" => Ok(reads::stats(inv, peers)),
        "updateKvConfig" => Ok(writes::update_kv_config(inv, peers)),
        "deleteKvConfig" => Ok(writes::delete_kv_config(inv, peers)),
        "updateOrderConf" => Ok(writes::update_order_conf(inv, peers)),
        "updateNamesrvConfig" => Ok(writes::update_namesrv_config(inv, peers)),
        "wipeWritePerm" => Ok(writes::wipe_write_perm(inv, peers)),
        "addWritePerm" => Ok(writes::add_write_perm(inv, peers)),
        "deleteTopic" => Ok(writes::delete_topic(inv, peers)),
        other => Err(Outcome::usage(format!(
            "command {other} is not implemented"
        ))),
    };
    result.unwrap_or_else(|failed| failed)
}

/// The `-n` list, else `$NAMESRV_ADDR`.
fn namesrv_addrs(inv: &Invocation) -> Vec<String> {
    let list = inv
        .namesrv
        .clone()
        .or_else(|| std::env::var("NAMESRV_ADDR").ok())
        .unwrap_or_default();
    parse_addr_list(&list)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let inv = match cli::parse(&args) {
        Ok(Parsed::Run(inv)) => inv,
        Ok(Parsed::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rmq-admin: {}\n\n{}", e.message, e.usage());
            return ExitCode::from(e.code());
        }
    };
    let addrs = namesrv_addrs(&inv);
    let outcome = if inv.command.is_controller() {
        controller::run(&inv, addrs)
    } else if addrs.is_empty() {
        eprintln!(
            "rmq-admin: no name server given: use -n 'host:port;host:port' or set NAMESRV_ADDR"
        );
        return ExitCode::from(EXIT_USAGE);
    } else {
        match Peers::of(&inv, addrs, Role::NameServer) {
            Ok(mut peers) => run(&inv, &mut peers),
            Err(usage) => usage,
        }
    };
    print!("{}", outcome.stdout);
    for line in &outcome.stderr {
        eprintln!("rmq-admin: {line}");
    }
    ExitCode::from(outcome.code)
}
