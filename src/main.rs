//! `rmq-namesrv`: command line -> config -> logging -> event loop; SIGTERM/SIGINT -> clean stop;
//! SIGHUP -> log file reopened, config file read again and its live keys handed to the loop;
//! systemd's notifications (`READY=1`, `STOPPING=1`, the watchdog) when run as `Type=notify`.

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use log::{Level, LevelFilter};
use rmq_namesrv::config::{self, Cli, CliError, NamesrvConfig, Startup};
use rmq_namesrv::logging::{self, LogSettings};
use rmq_namesrv::server::{ControllerSetup, ReloadHandle, Server, StartError, StopHandle};
use rmq_namesrv::systemd::{self, Notifier};
use rmq_namesrv::VERSION;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

fn main() -> ExitCode {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (startup, print) = match config::parse_cli(&args) {
        Ok(Cli::Run(startup)) => (startup, false),
        Ok(Cli::PrintConfig(startup)) => (startup, true),
        Ok(Cli::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Version) => {
            println!("rmq-namesrv {VERSION}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            for line in e.to_string().lines() {
                eprintln!("rmq-namesrv: {line}");
            }
            if matches!(e, CliError::Usage(_)) {
                eprintln!("see rmq-namesrv --help");
            }
            return ExitCode::from(2);
        }
    };
    // Not the name server's defaults for the keys both have.
    let given = |key: &str| startup.given.get(key).cloned();
    let controller = match ControllerSetup::from_config(&startup.config, &given) {
        Ok(controller) => controller,
        Err(e) => {
            eprintln!("rmq-namesrv: {e}");
            return ExitCode::from(2);
        }
    };
    if print {
        return print_config(&startup, controller.as_ref());
    }
    start_logging(&startup.config);
    for warning in &startup.warnings {
        tell(Level::Warn, warning);
    }
    log::info!("{}", startup.config_file_note());
    let loaded = startup.config.clone();
    run(startup.config, controller, started, (args, loaded))
}

/// `-p`: the configuration as a properties file, the Controller's as `#controller: k=v`
/// comments (as properties they would collide with the name server's keys).
fn print_config(startup: &Startup, controller: Option<&ControllerSetup>) -> ExitCode {
    for warning in &startup.warnings {
        eprintln!("rmq-namesrv: warning: {warning}");
    }
    let controller_text = match controller.map(ControllerSetup::describe).transpose() {
        Ok(text) => text,
        Err(e) => {
            eprintln!("rmq-namesrv: controller config: {e}");
            return ExitCode::from(2);
        }
    };
    println!("# {}", startup.config_file_note());
    print!("{}", startup.config.to_properties_text());
    if let Some(text) = controller_text {
        println!(
            "# the embedded Controller's effective settings (enableControllerInNamesrv=true):"
        );
        for line in text.lines() {
            println!("#controller: {line}");
        }
    }
    ExitCode::SUCCESS
}

/// Logs `message` and makes sure it reaches stderr too.
fn tell(level: Level, message: &str) {
    log::log!(level, "{message}");
    if !logging::console_enabled() || level > log::max_level() {
        eprintln!("rmq-namesrv: {message}");
    }
}

fn start_logging(config: &NamesrvConfig) {
    let mut settings = LogSettings {
        // Validated when the config was read.
        level: config.log_level.parse().unwrap_or(LevelFilter::Info),
        file: (!config.log_path.is_empty()).then(|| PathBuf::from(&config.log_path)),
        max_size: config.log_file_max_size,
        max_files: config.log_file_count,
    };
    if let Err(e) = logging::init(&settings) {
        if let Some(path) = settings.file.take() {
            eprintln!(
                "rmq-namesrv: cannot open log file {}: {e}; logging to the console only",
                path.display()
            );
        }
        let _ = logging::init(&settings);
    }
}

/// `reread`: the arguments and the config they gave, for SIGHUP.
fn run(
    config: NamesrvConfig,
    controller: Option<ControllerSetup>,
    started: Instant,
    reread: (Vec<String>, NamesrvConfig),
) -> ExitCode {
    // Signals are caught before the port is bound: a stop sent as soon as the port answers
    // (a supervisor, a test) is a clean stop, not the default action's kill.
    let signals = match catch_signals() {
        Ok(signals) => signals,
        Err(e) => return fail(&format!("cannot watch for signals: {e}")),
    };
    let mut server = match Server::bind_with_controller(config, controller) {
        Ok(server) => server,
        // A bind error names the address; the others say what failed.
        Err(e @ StartError::Bind { .. }) => return fail(&e.to_string()),
        Err(e) => return fail(&format!("cannot start: {e}")),
    };
    let notifier = systemd_notifier();
    let targets = SignalTargets {
        stop: server.stop_handle(),
        notifier: notifier.clone(),
        reload: server.reload_handle(),
        args: reread.0,
        loaded: reread.1,
    };
    if let Err(e) = watch_signals(signals, targets) {
        return fail(&format!("cannot watch for signals: {e}"));
    }
    // Tools and tests read these exact lines to find the ports.
    println!("rmq-namesrv listening on {}", server.local_addr());
    if let Some(addr) = server.controller_addr() {
        println!("rmq-namesrv controller listening on {addr}");
    }
    if let Some(addr) = server.metrics_addr() {
        println!("rmq-namesrv metrics listening on {addr}");
    }
    log::info!(
        "rmq-namesrv {VERSION} listening on {}, started in {} us",
        server.local_addr(),
        started.elapsed().as_micros()
    );
    if let Some(mut notifier) = notifier {
        if let Some(interval) = systemd::watchdog_interval() {
            server.watchdog(notifier.clone(), interval);
        }
        // Every listener is bound: connections queue in the backlog until the loop runs.
        notifier.notify("READY=1");
    }
    let result = server.run();
    match SECOND_SIGNAL.load(Ordering::SeqCst) {
        0 => {}
        signal => exit_after_second_signal(signal),
    }
    let why = STOP_SIGNAL
        .get()
        .map_or(String::new(), |name| format!(" (signal {name})"));
    match result {
        Ok(()) => {
            log::info!(
                "rmq-namesrv stopped{why} after {} s",
                started.elapsed().as_secs()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("event loop failed: {e}")),
    }
}

fn fail(message: &str) -> ExitCode {
    tell(Level::Error, message);
    ExitCode::FAILURE
}

/// systemd's socket, if systemd gave one (an address it cannot be is logged, not fatal).
fn systemd_notifier() -> Option<Notifier> {
    match Notifier::from_env()? {
        Ok(notifier) => Some(notifier),
        Err(e) => {
            log::warn!("NOTIFY_SOCKET is set but unusable ({e}): systemd will not be notified");
            None
        }
    }
}

static STOP_SIGNAL: OnceLock<&'static str> = OnceLock::new();

/// The stop signals so far, counted in the handler itself, and the second one's number: a
/// second signal that comes while the clean stop ends is seen whichever thread runs first.
static STOP_SIGNALS: AtomicUsize = AtomicUsize::new(0);
static SECOND_SIGNAL: AtomicI32 = AtomicI32::new(0);
static EXITING: AtomicBool = AtomicBool::new(false);

/// Catches SIGTERM, SIGINT and SIGHUP from now on (their default action kills the process).
fn catch_signals() -> io::Result<signal_hook::iterator::Signals> {
    for signal in [SIGTERM, SIGINT] {
        let action = move || {
            if STOP_SIGNALS.fetch_add(1, Ordering::SeqCst) >= 1 {
                SECOND_SIGNAL.store(signal, Ordering::SeqCst);
            }
        };
        // SAFETY: the action only touches atomics, which is async-signal-safe.
        unsafe { signal_hook::low_level::register(signal, action) }?;
    }
    signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
}

/// A second stop signal: one line, then exit at once with 128 + its number (from the signal
/// thread or from the end of `run`, whichever comes first; the other waits for the exit).
fn exit_after_second_signal(signal: i32) -> ! {
    if EXITING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    let name = if signal == SIGINT { "INT" } else { "TERM" };
    let first = STOP_SIGNAL.get().copied().unwrap_or(name);
    log::warn!(
        "rmq-namesrv: signal {name} while stopping (signal {first}): exiting now, without \
         finishing in-flight replies and writes"
    );
    log::logger().flush();
    signal_hook::low_level::exit(128 + signal)
}

/// What the signal thread acts on.
struct SignalTargets {
    stop: StopHandle,
    notifier: Option<Notifier>,
    reload: ReloadHandle,
    /// The command line, read again as at start on SIGHUP, and the config it gave then.
    args: Vec<String>,
    loaded: NamesrvConfig,
}

/// On a thread: SIGHUP reloads ([`SignalTargets::reload`]); the first SIGTERM or SIGINT (also
/// one caught before the server was bound) stops the server; a second, while it stops, logs a
/// line and exits at once with 128 + the signal number.
fn watch_signals(
    mut signals: signal_hook::iterator::Signals,
    mut targets: SignalTargets,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGHUP {
                    targets.reload();
                    continue;
                }
                let name = if signal == SIGINT { "INT" } else { "TERM" };
                if STOP_SIGNAL.get().is_some() {
                    exit_after_second_signal(signal);
                }
                let _ = STOP_SIGNAL.set(name);
                log::info!("rmq-namesrv shutting down (signal {name})");
                if let Some(notifier) = targets.notifier.as_mut() {
                    notifier.notify("STOPPING=1");
                }
                targets.stop.stop();
            }
        })?;
    Ok(())
}

impl SignalTargets {
    /// SIGHUP: reopens the log file, reads the config file (and command line) again as at
    /// start, and hands the values of the live keys to the loop, which applies those that
    /// changed, all or nothing. An invalid value applies nothing; changes of start-only keys
    /// are named in one warning. Never stops the server.
    fn reload(&mut self) {
        if let Err(e) = logging::reopen_file() {
            log::warn!("SIGHUP: cannot reopen the log file: {e}");
        }
        let startup = match config::parse_cli(&self.args) {
            Ok(Cli::Run(startup)) => startup,
            // The arguments that started the server ask for a run.
            Ok(_) => return,
            Err(e) => {
                for problem in e.to_string().lines() {
                    log::warn!("SIGHUP: config not reloaded, nothing applied: {problem}");
                }
                return;
            }
        };
        let path = &startup.file.path;
        log::info!("SIGHUP: log file reopened; config file {path} read again");
        for warning in &startup.warnings {
            log::warn!("SIGHUP: {warning}");
        }
        let reload = self.loaded.reload_from(&startup.config);
        if !reload.at_start.is_empty() {
            log::warn!(
                "SIGHUP: {} changed in {path} but take effect at the next start only",
                reload.at_start.join(", ")
            );
        }
        if !self.reload.reload(reload.live) {
            log::warn!(
                "SIGHUP: earlier reloads still wait for the event loop; this one is dropped"
            );
        }
    }
}
