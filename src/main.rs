//! `rmq-namesrv`: command line -> config -> logging -> event loop.

use rmq_namesrv::config::{self, Cli};
use rmq_namesrv::logging::{self, LogSettings};
use rmq_namesrv::server::Server;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match config::parse_cli(&args) {
        Ok(Cli::Run(c)) => c,
        Ok(Cli::PrintConfig(c)) => {
            print!("{}", c.to_properties_text());
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Version) => {
            println!(
                "rmq-namesrv {} (git {})",
                env!("CARGO_PKG_VERSION"),
                env!("RMQ_GIT_REV")
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rmq-namesrv: {e}\n\n{}", config::usage());
            return ExitCode::from(2);
        }
    };
    let level = logging::parse_level(&config.log_level).unwrap_or(log::LevelFilter::Info);
    let file = (!config.log_path.is_empty()).then(|| PathBuf::from(&config.log_path));
    let mut settings = LogSettings {
        level,
        file,
        max_size: config.log_file_max_size,
        max_files: config.log_file_count,
    };
    if let Err(e) = logging::init(&settings) {
        eprintln!(
            "rmq-namesrv: cannot open log file {:?} ({e}); logging to the console only",
            settings.file
        );
        settings.file = None;
        let _ = logging::init(&settings);
    }
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            log::error!("rmq-namesrv failed to start: {e}");
            eprintln!("rmq-namesrv failed to start: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Tools and tests read this exact line to find the port.
    println!("rmq-namesrv listening on {}", server.local_addr());
    log::info!(
        "rmq-namesrv {} (git {}) listening on {}, started in {} us",
        env!("CARGO_PKG_VERSION"),
        env!("RMQ_GIT_REV"),
        server.local_addr(),
        started.elapsed().as_micros()
    );
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("event loop failed: {e}");
            ExitCode::FAILURE
        }
    }
}
