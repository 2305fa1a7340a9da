//! `rmq-admin`: `mqadmin`'s commands for name servers and controllers (docs/admin.md).

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

/// The `-n` list, else `$NAMESRV_ADDR`.
pub fn namesrv_addrs(inv: &Invocation) -> Vec<String> {
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
            eprintln!("rmq-admin: {}\n\n{}", e.message, e.usage);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (role, addrs, missing) = if inv.command.is_controller() {
        let needs = format!("{} needs -a 'host:port;host:port'", inv.command.name);
        (Role::Controller, parse_addr_list(inv.req("a")), needs)
    } else {
        let needs = "no name server given: use -n 'host:port;host:port' or set NAMESRV_ADDR";
        (Role::NameServer, namesrv_addrs(&inv), needs.to_string())
    };
    let peers = match addrs.is_empty() {
        true => Err(Outcome::usage(missing)),
        false => Peers::of(&inv, addrs, role),
    };
    let ran = peers.and_then(|mut peers| (inv.command.run)(&inv, &mut peers));
    let outcome = ran.unwrap_or_else(|failed| failed);
    print!("{}", outcome.stdout);
    for line in &outcome.stderr {
        eprintln!("rmq-admin: {line}");
    }
    ExitCode::from(outcome.code)
}
