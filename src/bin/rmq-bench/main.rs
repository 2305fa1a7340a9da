//! `rmq-bench`: load generator for RocketMQ name servers (ours, the Java one, any other) and
//! controllers, over the real wire protocol. [`workloads`] and [`controller`] prepare the runs
//! (bodies from [`payload`], name servers picked by [`servers`]) that [`engine`] drives and
//! [`report`] prints; [`canned`] is the no-work server that shows the generator's own ceiling.

mod args;
mod canned;
mod controller;
mod engine;
mod hist;
mod payload;
mod report;
mod servers;
mod transport;
mod workloads;

use args::Workload;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Exit code of a run ended by Ctrl-C (128 + SIGINT, as a shell reports it).
const EXIT_INTERRUPTED: u8 = 130;

/// The first SIGINT/SIGTERM raises the flag (the run stops and reports); a second one exits
/// at once, from signal-hook's handler.
fn stop_on_signals() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    Ok(stop)
}

/// Runs a workload and prints its report.
fn load(options: args::Options) -> ExitCode {
    let (json, quiet, hgrm) = (options.json, options.quiet, options.hgrm.clone());
    let result = stop_on_signals().and_then(|stop| workloads::run(options, stop));
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("rmq-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    if json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    match hgrm.map(|file| report.write_hgrm(&file)).transpose() {
        Err(e) => {
            eprintln!("rmq-bench: {e}");
            return ExitCode::FAILURE;
        }
        Ok(Some(files)) if !quiet && !files.is_empty() => {
            eprintln!("rmq-bench: latency distributions in {}", files.join(", "))
        }
        Ok(_) => {}
    }
    if report.interrupted {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if report.total_errors() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let env_namesrv = std::env::var("NAMESRV_ADDR").ok();
    let options = match args::parse(&argv, env_namesrv.as_deref()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rmq-bench: {e}\nTry 'rmq-bench help' for the workloads and options.");
            return ExitCode::from(2);
        }
    };
    match options.workload {
        Workload::Help => print!("{}", args::USAGE),
        Workload::Version => println!("rmq-bench {}", rmq_namesrv::VERSION),
        Workload::Canned => {
            if let Err(e) = canned::serve(&options.listen, options.body_bytes) {
                eprintln!("rmq-bench canned: {e}");
                return ExitCode::FAILURE;
            }
        }
        _ => return load(options),
    }
    ExitCode::SUCCESS
}
