//! `rmq-bench`: heartbeat and route load generator for RocketMQ name servers (ours, the Java
//! one, any other), speaking the real wire protocol.
//!
//! * [`args`] parses the command line by hand;
//! * [`payload`] builds realistic 5.x registration bodies for a simulated cluster;
//! * [`wire`] prepares request frames once and reads response headers without allocating;
//! * [`engine`] drives every connection from one mio thread with pipelining;
//! * [`hist`] is the latency histogram; [`report`] prints the summary, JSON and /proc samples;
//! * [`workloads`] composes them into register / heartbeat / route / mixed / expire;
//! * [`canned`] is the no-work server that measures the generator's own ceiling.

mod args;
mod canned;
mod engine;
mod hist;
mod payload;
mod report;
mod wire;
mod workloads;

use args::Workload;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let options = match args::parse(&argv) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rmq-bench: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match options.workload {
        Workload::Help => {
            print!("{}", args::USAGE);
            ExitCode::SUCCESS
        }
        Workload::Canned => match canned::serve(&options.listen, options.body_bytes) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rmq-bench canned: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            let json = options.json;
            match workloads::run(options) {
                Ok(report) => {
                    if json {
                        println!("{}", report.json());
                    } else {
                        print!("{}", report.text());
                    }
                    if report.total_errors() > 0 {
                        ExitCode::from(1)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => {
                    eprintln!("rmq-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
