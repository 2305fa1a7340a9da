//! Deployment files and logging, checked from outside: the systemd unit (with
//! `systemd-analyze verify` where it can run, and always by parsing), the example configs,
//! and the rotating log file through the public API.

mod common;

use common::TempDir;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rmq_namesrv::logging::{self, LogSettings, RotatingFile};

/// Every property key of NamesrvConfig (specs/config-api.md), Java spelling.
const EXPECTED_KEYS: &[&str] = &[
    "rocketmqHome",
    "kvConfigPath",
    "configStorePath",
    "productEnvName",
    "clusterTest",
    "orderMessageEnable",
    "returnOrderTopicConfigToBroker",
    "clientRequestThreadPoolNums",
    "clientRequestThreadPoolQueueCapacity",
    "defaultThreadPoolNums",
    "defaultThreadPoolQueueCapacity",
    "scanNotActiveBrokerInterval",
    "unRegisterBrokerQueueCapacity",
    "supportActingMaster",
    "enableAllTopicList",
    "enableTopicList",
    "notifyMinBrokerIdChanged",
    "enableControllerInNamesrv",
    "needWaitForService",
    "waitSecondsForService",
    "deleteTopicWithBrokerRegistration",
    "configBlackList",
    "bindAddress",
    "listenPort",
    "serverWorkerThreads",
    "serverCallbackExecutorThreads",
    "serverSelectorThreads",
    "serverOnewaySemaphoreValue",
    "serverAsyncSemaphoreValue",
    "serverChannelMaxIdleTimeSeconds",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "writeBufferHighWaterMark",
    "writeBufferLowWaterMark",
    "serverSocketBacklog",
    "serverNettyWorkerGroupEnable",
    "serverPooledByteBufAllocatorEnable",
    "enableShutdownGracefully",
    "shutdownWaitTimeSeconds",
    "useEpollNativeSelector",
    "frameMaxLength",
    "serializeType",
    "logPath",
    "logLevel",
    "logFileMaxSize",
    "logFileCount",
    "maxConnections",
    "maxHeaderLength",
    "maxExtFields",
    "maxJsonDepth",
    "maxJsonStringLength",
    "maxTopicsPerRegistration",
    "maxInflatedBodyLength",
    "decodeOnLoopMaxBytes",
    "maxNameLength",
    "maxTopicNameLength",
    "maxQueueNums",
    "maxBrokers",
    "maxTopics",
    "maxTopicsPerBroker",
    "connWriteHighWater",
    "connWriteHardCap",
    "maxBufferedBytes",
    "frameReadTimeoutMillis",
    "maxConnectionsPerAddress",
    "reservedConnectionsPercent",
    "registrationBacklogLimit",
    "registrationBudgetPerIteration",
    "routeCacheMaxBytes",
    "kvMaxKeyLength",
    "kvMaxValueLength",
    "kvMaxEntries",
    "kvMaxTotalBytes",
    "adminAllowList",
    "brokerAllowList",
    "metricsExporterType",
    "metricsPromExporterHost",
    "metricsPromExporterPort",
    "tls.server.mode",
    "tls.server.certPath",
    "tls.server.keyPath",
    "tls.server.keyPassword",
    "tls.server.trustCertPath",
    "tls.server.need.client.auth",
    "tls.config.file",
];

const UNIT_PATH: &str = "deploy/rmq-namesrv.service";
const EXAMPLE_CONFIG_PATH: &str = "deploy/namesrv.conf";
const LOCAL_CONFIG_PATH: &str = "namesrv.conf";

fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// systemd unit
// ---------------------------------------------------------------------------------------------

/// One `Key=Value` of a unit file with the section it is in.
struct UnitEntry {
    section: String,
    key: String,
    value: String,
}

/// Every line must be blank, a comment, a `[Section]` or a `Key=Value` inside a section.
fn parse_unit(text: &str) -> Result<Vec<UnitEntry>, String> {
    let mut entries = Vec::new();
    let mut section: Option<String> = None;
    for (number, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: not Key=Value: {raw:?}", number + 1));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("line {}: bad key {key:?}", number + 1));
        }
        if value.ends_with('\\') {
            return Err(format!(
                "line {}: continuation lines are not expected",
                number + 1
            ));
        }
        let Some(section) = section.clone() else {
            return Err(format!("line {}: {key} outside any section", number + 1));
        };
        entries.push(UnitEntry {
            section,
            key: key.to_string(),
            value: value.trim().to_string(),
        });
    }
    Ok(entries)
}

fn unit_values<'a>(entries: &'a [UnitEntry], section: &str, key: &str) -> Vec<&'a str> {
    entries
        .iter()
        .filter(|e| e.section == section && e.key == key)
        .map(|e| e.value.as_str())
        .collect()
}

#[test]
fn unit_file_parses_and_has_the_required_settings() {
    let entries = parse_unit(&repo_file(UNIT_PATH)).unwrap_or_else(|e| panic!("{UNIT_PATH}: {e}"));
    let service = |key: &str| unit_values(&entries, "Service", key);

    let exec_start = service("ExecStart");
    assert_eq!(exec_start.len(), 1, "exactly one ExecStart");
    assert!(
        exec_start[0].starts_with("/usr/local/bin/rmq-namesrv ")
            && exec_start[0].contains("-c /etc/rmq-namesrv/namesrv.conf"),
        "ExecStart = {:?}",
        exec_start[0]
    );
    let runs_unprivileged = service("User")
        .iter()
        .any(|u| !u.is_empty() && *u != "root")
        || service("DynamicUser").contains(&"yes");
    assert!(runs_unprivileged, "User= (not root) or DynamicUser=yes");
    assert_eq!(service("Restart"), ["on-failure"]);
    // READY=1 once the ports are bound, and the event loop's watchdog.
    assert_eq!(service("Type"), ["notify"]);
    assert_eq!(service("NotifyAccess"), ["main"]);
    assert_eq!(service("ExecReload"), ["/bin/kill -HUP $MAINPID"]);
    let watchdog = service("WatchdogSec");
    assert!(
        watchdog.len() == 1 && watchdog[0].trim_end_matches('s').parse::<u32>().is_ok(),
        "WatchdogSec = {watchdog:?}"
    );
    assert_eq!(service("LimitNOFILE"), ["131072"]);
    assert_eq!(service("NoNewPrivileges"), ["yes"]);
    assert_eq!(service("ProtectSystem"), ["strict"]);
    assert_eq!(service("ProtectHome"), ["yes"]);
    assert_eq!(service("PrivateTmp"), ["yes"]);
    let after = unit_values(&entries, "Unit", "After").join(" ");
    assert!(
        after
            .split_whitespace()
            .any(|u| u == "network-online.target"),
        "After={after}"
    );
}

/// The unit's descriptor limit leaves room for the example config's maxConnections, with the
/// descriptors the server keeps free beside connections (32 + 1/32 of the limit), so the cap
/// is not lowered at start.
#[test]
fn unit_descriptor_limit_fits_the_example_max_connections() {
    let entries = parse_unit(&repo_file(UNIT_PATH)).unwrap_or_else(|e| panic!("{UNIT_PATH}: {e}"));
    let limit: u64 = unit_values(&entries, "Service", "LimitNOFILE")[0]
        .parse()
        .expect("a number");
    let properties = parse_properties(&repo_file(EXAMPLE_CONFIG_PATH)).expect("example config");
    let max: u64 = properties
        .iter()
        .find(|(k, _)| k == "maxConnections")
        .map(|(_, v)| v.parse().expect("a number"))
        .expect("maxConnections");
    assert!(
        max <= limit - (32 + limit / 32),
        "{max} connections, {limit} descriptors"
    );
}

/// The directories the example config writes to must be writable under ProtectSystem=strict.
#[test]
fn unit_makes_the_example_configs_state_and_log_dirs_writable() {
    let entries = parse_unit(&repo_file(UNIT_PATH)).unwrap_or_else(|e| panic!("{UNIT_PATH}: {e}"));
    let mut writable: Vec<PathBuf> = Vec::new();
    for e in entries.iter().filter(|e| e.section == "Service") {
        let base = match e.key.as_str() {
            "ReadWritePaths" => "/",
            "StateDirectory" => "/var/lib",
            "LogsDirectory" => "/var/log",
            _ => continue,
        };
        for word in e.value.split_whitespace() {
            // A leading '-' makes a ReadWritePaths entry optional.
            let relative = word.trim_start_matches('-').trim_start_matches('/');
            writable.push(Path::new(base).join(relative));
        }
    }
    let properties = parse_properties(&repo_file(EXAMPLE_CONFIG_PATH)).expect("example config");
    for key in ["kvConfigPath", "logPath"] {
        let value = properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let path = Path::new(&value);
        assert!(path.is_absolute(), "{key}={value} should be absolute");
        assert!(
            writable
                .iter()
                .any(|dir| path.starts_with(Path::new("/").join(dir))),
            "{key}={value} is not under a writable dir {writable:?}"
        );
    }
}

#[test]
fn unit_passes_systemd_analyze_verify_where_it_can_run() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze not available: the parse check stands alone");
        return;
    }
    let dir = TempDir::new("verify");
    // verify checks that ExecStart's binary exists; point it at one that does.
    let stand_in = if Path::new("/bin/true").exists() {
        PathBuf::from("/bin/true")
    } else {
        std::env::current_exe().expect("current exe")
    };
    let unit = repo_file(UNIT_PATH).replace(
        "ExecStart=/usr/local/bin/rmq-namesrv",
        &format!("ExecStart={}", stand_in.display()),
    );
    assert!(unit.contains(&format!("ExecStart={} -c", stand_in.display())));

    // A minimal unit with the same dependencies tells whether verify works here at all.
    let control = format!(
        "[Unit]\nDescription=control\nWants=network-online.target\nAfter=network-online.target\n\
         [Service]\nExecStart={}\n",
        stand_in.display()
    );
    let control_path = dir.path().join("rmq-control.service");
    fs::write(&control_path, control).expect("write control unit");
    let control_run = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&control_path)
        .output();
    let usable = match &control_run {
        Ok(out) => {
            out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("rmq-control")
        }
        Err(_) => false,
    };
    if !usable {
        eprintln!("systemd-analyze verify cannot run here: {control_run:?}; parse check only");
        return;
    }

    let unit_path = dir.path().join("rmq-namesrv.service");
    fs::write(&unit_path, unit).expect("write unit");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path)
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("rmq-namesrv"))
        .collect();
    assert!(out.status.success(), "verify failed: {stderr}");
    assert!(complaints.is_empty(), "verify complained: {complaints:#?}");
}

// ---------------------------------------------------------------------------------------------
// configs
// ---------------------------------------------------------------------------------------------

/// The subset of java.util.Properties these files use: comments, blank lines and single-line
/// `key=value` / `key:value` / `key value` with `\`-escapes in keys.
fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut properties = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let trailing_backslashes = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing_backslashes % 2 == 1 {
            return Err(format!(
                "line {}: continuation lines are not expected",
                number + 1
            ));
        }
        let mut key = String::new();
        let mut chars = line.chars();
        let mut escaped = false;
        for c in chars.by_ref() {
            if escaped {
                key.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '=' || c == ':' || c.is_whitespace() {
                break;
            } else {
                key.push(c);
            }
        }
        let rest = chars.as_str().trim_start();
        let value = rest
            .strip_prefix(['=', ':'])
            .unwrap_or(rest)
            .trim_start()
            .to_string();
        properties.push((key, value));
    }
    Ok(properties)
}

fn expected_keys() -> BTreeSet<String> {
    EXPECTED_KEYS.iter().map(|k| k.to_string()).collect()
}

#[test]
fn expected_key_list_has_no_duplicates() {
    assert_eq!(expected_keys().len(), EXPECTED_KEYS.len());
}

#[test]
fn example_config_sets_every_key_exactly_once() {
    let properties = parse_properties(&repo_file(EXAMPLE_CONFIG_PATH)).expect("parse");
    let keys: Vec<&str> = properties.iter().map(|(k, _)| k.as_str()).collect();
    let unique: BTreeSet<String> = keys.iter().map(|k| k.to_string()).collect();
    assert_eq!(unique.len(), keys.len(), "a key is set twice");
    let missing: Vec<_> = expected_keys().difference(&unique).cloned().collect();
    let unknown: Vec<_> = unique.difference(&expected_keys()).cloned().collect();
    assert!(missing.is_empty(), "missing keys: {missing:?}");
    assert!(unknown.is_empty(), "unknown keys: {unknown:?}");
}

#[test]
fn every_key_in_the_example_config_has_a_comment_with_its_default() {
    let text = repo_file(EXAMPLE_CONFIG_PATH);
    let mut comment_block: Vec<&str> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(comment) = trimmed.strip_prefix('#') {
            comment_block.push(comment);
        } else if trimmed.is_empty() {
            comment_block.clear();
        } else {
            let key = trimmed.split(['=', ':']).next().unwrap_or_default();
            let block = comment_block.join("\n");
            assert!(
                block.contains("Default:") && block.trim().len() > "Default:".len() + 10,
                "{key} needs a comment saying what it does and its default"
            );
            comment_block.clear();
        }
    }
}

#[test]
fn example_config_puts_state_and_logs_in_the_systemd_dirs() {
    let properties = parse_properties(&repo_file(EXAMPLE_CONFIG_PATH)).expect("parse");
    let value = |key: &str| {
        properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    };
    assert!(value("kvConfigPath").starts_with("/var/lib/rmq-namesrv/"));
    assert!(value("logPath").starts_with("/var/log/rmq-namesrv/"));
    assert_eq!(value("listenPort"), "9876");
    assert!(value("logLevel").parse::<log::LevelFilter>().is_ok());
}

#[test]
fn every_key_in_the_example_config_says_when_a_change_takes_effect_as_the_server_does() {
    use rmq_namesrv::config::{Applies, NamesrvConfig};
    let text = repo_file(EXAMPLE_CONFIG_PATH);
    let mut comment_block: Vec<&str> = Vec::new();
    let mut checked = 0;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(comment) = trimmed.strip_prefix('#') {
            comment_block.push(comment);
            continue;
        }
        if !trimmed.is_empty() {
            let key = trimmed.split(['=', ':']).next().unwrap_or_default();
            let marker = match NamesrvConfig::applies(key) {
                Some(Applies::Live) => "[live]",
                Some(Applies::AtStart) => "[start]",
                Some(Applies::ReportedOnly) => "[reported]",
                None => panic!("{key} is not a key of the server"),
            };
            let last = comment_block.last().copied().unwrap_or_default();
            assert!(
                last.trim_end().ends_with(marker),
                "{key}: {last:?} should end with {marker}"
            );
            checked += 1;
        }
        comment_block.clear();
    }
    assert_eq!(checked, EXPECTED_KEYS.len());
}

#[test]
fn the_binary_reads_the_example_configs_without_a_warning() {
    for (file, port) in [(EXAMPLE_CONFIG_PATH, "9876"), (LOCAL_CONFIG_PATH, "9876")] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
            .args(["-c", &path.to_string_lossy(), "-p"])
            .output()
            .expect("run rmq-namesrv -p");
        assert!(out.status.success(), "{file}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{file}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.lines().any(|l| l == format!("listenPort={port}")),
            "{file}"
        );
    }
}

/// The unit logs to one place: the example config sets a log file in the unit's logs
/// directory and the unit does not send stdout/stderr anywhere but the journal (where the
/// binary writes no log lines when it has a file: tests/daemon.rs checks that).
#[test]
fn unit_logs_to_one_place_by_default() {
    let entries = parse_unit(&repo_file(UNIT_PATH)).unwrap_or_else(|e| panic!("{UNIT_PATH}: {e}"));
    let service = |key: &str| unit_values(&entries, "Service", key);
    for key in ["StandardOutput", "StandardError"] {
        let values = service(key);
        assert!(values.iter().all(|v| *v == "journal"), "{key}={values:?}");
    }
    assert_eq!(service("LogsDirectory"), ["rmq-namesrv"]);
    let properties = parse_properties(&repo_file(EXAMPLE_CONFIG_PATH)).expect("parse");
    let log_path = properties
        .iter()
        .find(|(k, _)| k == "logPath")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    assert!(log_path.starts_with("/var/log/rmq-namesrv/"), "{log_path}");
    let text = repo_file(EXAMPLE_CONFIG_PATH);
    assert!(text.contains("Under systemd the log goes to exactly one place"));
    assert!(repo_file(UNIT_PATH).contains("Logs go to one place"));
}

#[test]
fn local_config_sets_only_the_port_and_mentions_only_known_keys() {
    let text = repo_file(LOCAL_CONFIG_PATH);
    assert!(
        text.contains("deploy/namesrv.conf"),
        "header should point to the full example"
    );
    let properties = parse_properties(&text).expect("parse");
    assert_eq!(properties, [("listenPort".to_string(), "9876".to_string())]);

    // Commented-out settings must still be real keys, and the paths stay at their defaults.
    let commented: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect();
    for key in &commented {
        assert!(
            expected_keys().contains(key),
            "commented key {key} is unknown"
        );
    }
    assert!(commented.iter().any(|k| k == "kvConfigPath"));
    assert!(commented.iter().any(|k| k == "logPath"));
}

// ---------------------------------------------------------------------------------------------
// logging
// ---------------------------------------------------------------------------------------------

fn numbered(path: &Path, n: u32) -> PathBuf {
    PathBuf::from(format!("{}.{n}", path.display()))
}

#[test]
fn rotating_file_keeps_max_files_old_files_and_whole_lines() {
    let dir = TempDir::new("rotate");
    let path = dir.path().join("logs/namesrv.log");
    let mut log = RotatingFile::open(&path, 256, 4).expect("open");
    for i in 0..500 {
        log.write_line(format!("2024-01-01T00:00:00Z INFO registered broker-{i:03}\n").as_bytes());
    }
    drop(log);

    let files = fs::read_dir(path.parent().expect("parent"))
        .expect("read dir")
        .count();
    assert_eq!(files, 5, "the live file and four rotated ones");
    assert!(!numbered(&path, 5).exists());

    // Reading oldest to newest gives consecutive whole lines ending with the last one written.
    let mut lines = Vec::new();
    for file in [4, 3, 2, 1]
        .iter()
        .map(|&n| numbered(&path, n))
        .chain([path.clone()])
    {
        let text = fs::read_to_string(&file).expect("read log file");
        assert!(text.len() <= 256, "{} is over max_size", file.display());
        assert!(text.ends_with('\n'), "{} ends mid-line", file.display());
        lines.extend(text.lines().map(str::to_string));
    }
    let first = 500 - lines.len();
    let expected: Vec<String> = (first..500)
        .map(|i| format!("2024-01-01T00:00:00Z INFO registered broker-{i:03}"))
        .collect();
    assert_eq!(lines, expected);
}

#[test]
fn init_writes_timestamped_lines_to_the_file_and_a_second_init_is_a_no_op() {
    let dir = TempDir::new("init");
    let path = dir.path().join("a/b/namesrv.log");
    let settings = LogSettings {
        level: log::LevelFilter::Info,
        file: Some(path.clone()),
        max_size: 1 << 20,
        max_files: 2,
    };
    logging::init(&settings).expect("first init");
    log::info!("deploy test marker");
    log::debug!("below the level");
    logging::init(&settings).expect("second init is a no-op");
    log::logger().flush();

    let text = fs::read_to_string(&path).expect("log file");
    let line = text
        .lines()
        .find(|l| l.contains("deploy test marker"))
        .unwrap_or_else(|| panic!("marker missing in {text:?}"));
    // Java's layout: "yyyy-MM-dd HH:mm:ss,SSS LEVEL thread - message", local time.
    let stamp: Vec<char> = line.chars().take(23).collect();
    assert!(
        stamp.len() == 23
            && stamp[4] == '-'
            && stamp[10] == ' '
            && stamp[13] == ':'
            && stamp[19] == ',',
        "{line}"
    );
    let thread = std::thread::current().name().unwrap_or("-").to_string();
    assert!(
        line[23..].starts_with(&format!(" INFO {thread} - deploy test marker")),
        "{line}"
    );
    assert!(!text.contains("below the level"));
}

// ---------------------------------------------------------------------------------------------
// install.sh
// ---------------------------------------------------------------------------------------------

const INSTALL_SH: &str = "deploy/install.sh";

/// Where cargo put the binaries under test (what `BIN_DIR` points install.sh at).
fn built_bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A command that runs `sh install.sh args...` as an unprivileged user: as is when the tests
/// are not root, else as nobody through setpriv, when that user can read the checkout and the
/// binaries. None when there is no way to drop root here.
fn unprivileged_install(args: &[String]) -> Option<Command> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(INSTALL_SH);
    if !is_root() {
        let mut cmd = Command::new("sh");
        cmd.arg(&script).args(args);
        return Some(cmd);
    }
    let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let readable = Command::new("setpriv")
        .args(nobody)
        .args(["sh", "-c", "test -r \"$1\" && test -x \"$2\"", "sh"])
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_rmq-namesrv"))
        .status()
        .is_ok_and(|s| s.success());
    if !readable {
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(nobody).arg("sh").arg(&script).args(args);
    Some(cmd)
}

/// Runs install.sh with `args`, unprivileged when possible (else as the current user, which
/// DESTDIR makes safe too). Returns (exit code, stdout, stderr).
fn run_install(args: &[String]) -> (i32, String, String) {
    let mut cmd = unprivileged_install(args).unwrap_or_else(|| {
        let mut cmd = Command::new("sh");
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(INSTALL_SH))
            .args(args);
        cmd
    });
    let out = cmd
        .env_remove("DESTDIR")
        .env_remove("PREFIX")
        .output()
        .expect("sh runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A staging directory anyone may write (the script may run as nobody).
fn staging_dir(label: &str) -> TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new(label);
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

fn rmq_user_exists() -> bool {
    Command::new("getent")
        .args(["passwd", "rmq"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn install_sh_stages_every_file_under_destdir_without_root() {
    let dir = staging_dir("stage");
    let stage = dir.path().join("root");
    let user_before = rmq_user_exists();
    let args = vec![
        format!("DESTDIR={}", stage.display()),
        format!("BIN_DIR={}", built_bin_dir().display()),
    ];
    let (code, stdout, stderr) = run_install(&args);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains(&format!("staged under {}", stage.display())),
        "{stdout}"
    );

    for binary in ["rmq-namesrv", "rmq-admin", "rmq-bench"] {
        let staged = stage.join("usr/local/bin").join(binary);
        let built = built_bin_dir().join(binary);
        assert_eq!(
            fs::read(&staged).unwrap_or_else(|e| panic!("{}: {e}", staged.display())),
            fs::read(&built).expect("built binary"),
            "{binary} copied as built"
        );
    }
    let conf = stage.join("etc/rmq-namesrv/namesrv.conf");
    assert_eq!(
        fs::read_to_string(&conf).expect("conf"),
        repo_file(EXAMPLE_CONFIG_PATH)
    );
    let example = stage.join("etc/rmq-namesrv/namesrv.conf.example");
    assert_eq!(
        fs::read_to_string(example).expect("example"),
        repo_file(EXAMPLE_CONFIG_PATH)
    );
    let unit = stage.join("etc/systemd/system/rmq-namesrv.service");
    assert_eq!(
        fs::read_to_string(&unit).expect("unit"),
        repo_file(UNIT_PATH)
    );
    assert!(stage.join("var/lib/rmq-namesrv").is_dir());
    assert!(stage.join("var/log/rmq-namesrv").is_dir());
    assert_eq!(
        rmq_user_exists(),
        user_before,
        "a staged install creates no user"
    );

    // Again: the operator's config is kept, the example refreshed.
    fs::write(&conf, "listenPort=9999\n").expect("edit conf");
    let (code, stdout, stderr) = run_install(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("keeping existing"), "{stdout}");
    assert_eq!(
        fs::read_to_string(&conf).expect("conf"),
        "listenPort=9999\n"
    );

    // PREFIX moves the binaries, and the unit's ExecStart follows them.
    let mut with_prefix = args.clone();
    with_prefix.push("PREFIX=/opt/rmq".into());
    let (code, _, stderr) = run_install(&with_prefix);
    assert_eq!(code, 0, "{stderr}");
    assert!(stage.join("opt/rmq/bin/rmq-namesrv").is_file());
    let text = fs::read_to_string(&unit).expect("unit");
    let entries = parse_unit(&text).expect("unit parses");
    assert_eq!(
        unit_values(&entries, "Service", "ExecStart"),
        ["/opt/rmq/bin/rmq-namesrv -c /etc/rmq-namesrv/namesrv.conf"]
    );
}

#[test]
fn install_sh_refuses_without_root_only_when_installing_onto_the_machine() {
    let bin_dir = format!("BIN_DIR={}", built_bin_dir().display());
    match unprivileged_install(std::slice::from_ref(&bin_dir)) {
        Some(mut cmd) => {
            let out = cmd.env_remove("DESTDIR").output().expect("sh runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert!(out.stdout.is_empty(), "nothing was done before refusing");
            assert!(
                stderr.starts_with("install.sh: installing onto this machine"),
                "{stderr}"
            );
            assert!(
                stderr.contains("needs root") && stderr.contains("DESTDIR="),
                "{stderr}"
            );
        }
        None => eprintln!("skipped the refusal check: cannot drop root here"),
    }
    // Bad settings are refused before anything happens, whoever runs the script.
    let dir = staging_dir("bad-args");
    let destdir = format!("DESTDIR={}", dir.path().display());
    for bad in ["PREFIX=opt/rmq", "PREFIX=/opt/my rmq", "FOO=1"] {
        let (code, stdout, stderr) = run_install(&[destdir.clone(), bin_dir.clone(), bad.into()]);
        assert_eq!(code, 2, "{bad}: {stdout}{stderr}");
        assert!(stderr.starts_with("install.sh: "), "{stderr}");
    }
    assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 0);
}
