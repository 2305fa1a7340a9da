//! The command line, mqnamesrv-like, and which file is the config file (docs/configuration.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::properties::{entries, PropertiesFile};
use super::table::Applies;
use super::{unknown_key_message, NamesrvConfig, SetOutcome};

#[derive(Debug)]
pub enum Cli {
    Run(Startup),
    PrintConfig(Startup),
    Help(String),
    Version,
}

#[derive(Debug)]
pub struct Startup {
    pub config: NamesrvConfig,
    /// Unknown keys, each naming where it was.
    pub warnings: Vec<String>,
    pub file: ConfigFile,
    /// Every key the file and the command line set, as given: the Controller reads its keys
    /// here (two are name-server keys with other defaults).
    pub given: BTreeMap<String, String>,
}

/// Why a file is the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOrigin {
    CommandLine,
    ConfigStorePath,
    WorkingDirectory,
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: String,
    pub origin: FileOrigin,
    pub was_read: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// A malformed argument (main adds a pointer to --help).
    Usage(String),
    /// A config file that cannot be read or holds an invalid value.
    Config(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(message) | CliError::Config(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for CliError {}

#[derive(Default)]
struct Args {
    config_file: Option<String>,
    print_config: bool,
    help: bool,
    version: bool,
    overrides: Vec<(String, String)>,
}

fn read_args(args: &[String]) -> Result<Args, CliError> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-c" | "--configFile" => match it.next() {
                Some(file) => out.config_file = Some(file.clone()),
                None => return Err(CliError::Usage(format!("{arg} needs a file name"))),
            },
            "-p" | "--printConfigItem" => out.print_config = true,
            "-h" | "--help" => out.help = true,
            "-v" | "-V" | "--version" => out.version = true,
            other => match other.strip_prefix("--").map(|kv| kv.split_once('=')) {
                Some(Some(("configFile", file))) => out.config_file = Some(file.to_string()),
                Some(Some((key, value))) if !key.is_empty() => {
                    out.overrides.push((key.to_string(), value.to_string()))
                }
                Some(None) if other.len() > 2 => {
                    return Err(CliError::Usage(format!(
                        "{other} needs a value: {other}=VALUE"
                    )))
                }
                _ => return Err(CliError::Usage(format!("unexpected argument {other:?}"))),
            },
        }
    }
    Ok(out)
}

/// `-c`; else `--configStorePath`; else `./namesrv.conf` if it exists; else the default.
fn choose_file(args: &Args, working_dir: &Path, default_store: &str) -> (String, FileOrigin) {
    if let Some(path) = &args.config_file {
        return (path.clone(), FileOrigin::CommandLine);
    }
    let store_override = args
        .overrides
        .iter()
        .rev()
        .find(|(k, _)| k == "configStorePath");
    if let Some((_, path)) = store_override {
        return (path.trim().to_string(), FileOrigin::ConfigStorePath);
    }
    let local = working_dir.join("namesrv.conf");
    if local.is_file() {
        return (
            local.to_string_lossy().into_owned(),
            FileOrigin::WorkingDirectory,
        );
    }
    (default_store.to_string(), FileOrigin::Default)
}

impl Startup {
    /// For the startup log and `-p`: which file was read and where updates are written.
    pub fn config_file_note(&self) -> String {
        let ConfigFile {
            path,
            origin,
            was_read,
        } = &self.file;
        let why = match origin {
            FileOrigin::CommandLine => "-c",
            FileOrigin::ConfigStorePath => "--configStorePath",
            FileOrigin::WorkingDirectory => "./namesrv.conf, no -c given",
            FileOrigin::Default => "configStorePath, no -c given and no ./namesrv.conf",
        };
        let store = &self.config.config_store_path;
        if !*was_read {
            let none = match origin {
                FileOrigin::Default => "no -c given, no ./namesrv.conf, and ",
                _ => "",
            };
            return format!(
                "no config file: {none}{path} ({}) does not exist yet; runtime config updates \
                 will be written to {store} and read at the next start",
                why.split(',').next().unwrap_or(why)
            );
        }
        if store == path {
            format!("config file {path} ({why}); runtime config updates are written back to it")
        } else if *origin == FileOrigin::WorkingDirectory {
            format!(
                "config file {path} ({why}; never written); runtime config updates are written \
                 to {store}, not read at start while ./namesrv.conf is found"
            )
        } else {
            format!("config file {path} ({why}); runtime config updates are written to {store}")
        }
    }

    /// Sets one key given at `place`: an unknown key is a warning, an invalid value an error.
    fn set(&mut self, key: &str, value: &str, place: &str) -> Result<(), String> {
        self.given.insert(key.to_string(), value.to_string());
        match self.config.set(key, value) {
            SetOutcome::Applied => {}
            SetOutcome::Unknown => {
                (self.warnings).push(format!("{place}: {}", unknown_key_message(key)))
            }
            SetOutcome::Invalid(reason) => return Err(reason),
        }
        Ok(())
    }

    /// Applies the config file's entries; Ok(false) when an optional file is absent. Every
    /// invalid value is named, a line each.
    fn load_file(&mut self, required: bool) -> Result<bool, CliError> {
        let path = self.file.path.clone();
        let file = match PropertiesFile::read(Path::new(&path)) {
            Ok(file) => file,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                return Err(CliError::Config(format!(
                    "cannot read config file {path}: {e}"
                )))
            }
        };
        let found = entries(&file.text).map_err(|e| CliError::Config(format!("{path}: {e}")))?;
        let mut problems = Vec::new();
        for entry in found {
            let place = format!("{path} line {}", entry.line);
            if let Err(reason) = self.set(&entry.key, &entry.value, &place) {
                problems.push(format!("{place}: {reason}"));
            }
        }
        match problems.is_empty() {
            true => Ok(true),
            false => Err(CliError::Config(problems.join("\n"))),
        }
    }
}

fn parse_in(args: &[String], working_dir: &Path, default_store: &str) -> Result<Cli, CliError> {
    let args = read_args(args)?;
    if args.help {
        return Ok(Cli::Help(usage()));
    }
    if args.version {
        return Ok(Cli::Version);
    }
    let (path, origin) = choose_file(&args, working_dir, default_store);
    let mut startup = Startup {
        config: NamesrvConfig::default(),
        warnings: Vec::new(),
        file: ConfigFile {
            path: path.clone(),
            origin,
            was_read: false,
        },
        given: BTreeMap::new(),
    };
    startup.config.config_store_path = default_store.to_string();
    startup.file.was_read = startup.load_file(origin == FileOrigin::CommandLine)?;
    // As mqnamesrv: a named config file is where updates are written, whatever it says inside.
    // A file merely found in the working directory (a checkout's) is only read: updates go
    // to configStorePath (its value in that file, else the default).
    if origin != FileOrigin::WorkingDirectory {
        startup.config.config_store_path = path;
    }
    for (key, value) in &args.overrides {
        startup
            .set(key, value, &format!("command line --{key}"))
            .map_err(|reason| CliError::Usage(format!("--{key}={value}: {reason}")))?;
    }
    Ok(if args.print_config {
        Cli::PrintConfig(startup)
    } else {
        Cli::Run(startup)
    })
}

/// Parses the arguments without the program name.
pub fn parse_cli(args: &[String]) -> Result<Cli, CliError> {
    let working_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    parse_in(
        args,
        &working_dir,
        &NamesrvConfig::default().config_store_path,
    )
}

/// The -h text: the options, then every key with when a change applies and its default.
pub fn usage() -> String {
    let mut text = String::from(
        "usage: rmq-namesrv [-c FILE] [-p] [-h] [-v] [--key=value ...]\n\
         \n\
         \x20 -c, --configFile FILE    read properties from FILE; runtime config updates are\n\
         \x20                          written back to it. Without -c: the --configStorePath\n\
         \x20                          file, else ./namesrv.conf if it exists (only read:\n\
         \x20                          updates go to configStorePath), else configStorePath's\n\
         \x20                          default (read if it exists)\n\
         \x20 -p, --printConfigItem    print the effective configuration and exit\n\
         \x20 -h, --help               print this help and exit\n\
         \x20 -v, -V, --version        print the version and exit\n\
         \x20 --key=value              set any property (after the file, in order),\n\
         \x20                          e.g. --listenPort=9876 --logLevel=debug\n\
         \n\
         Properties, their defaults, and when a change takes effect (live: at once, through\n\
         UPDATE_NAMESRV_CONFIG; start: at the next start; reported: accepted, Java's only):\n",
    );
    for key in NamesrvConfig::keys() {
        let applies = match NamesrvConfig::applies(key) {
            Some(Applies::Live) => "live",
            Some(Applies::AtStart) => "start",
            _ => "reported",
        };
        let default = NamesrvConfig::default_text(key).unwrap_or_default();
        let line = format!("  {key:<38} {applies:<9} {default}");
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::fs;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Parses with an empty working directory and a default store inside `dir`.
    fn parse(dir: &TempDir, list: &[&str]) -> Result<Cli, CliError> {
        let store = dir.join("home-namesrv.properties");
        parse_in(&args(list), dir.path(), &store.to_string_lossy())
    }

    fn run(dir: &TempDir, list: &[&str]) -> Startup {
        match parse(dir, list) {
            Ok(Cli::Run(startup)) => startup,
            other => panic!("{list:?}: {other:?}"),
        }
    }

    #[test]
    fn cli_loads_the_file_then_applies_overrides_in_order() {
        let dir = TempDir::new("cli");
        let file = dir.join("ns.properties");
        fs::write(
            &file,
            "listenPort=9000\r\nconfigStorePath=/elsewhere\norderMessageEnable=true\n",
        )
        .unwrap();
        let path = file.to_string_lossy().into_owned();
        let s = run(
            &dir,
            &[
                "-c",
                &path,
                "--listenPort=0",
                "--logLevel=warn",
                "--logLevel=error",
            ],
        );
        assert_eq!(s.config.listen_port, 0);
        assert!(s.config.order_message_enable);
        assert_eq!(s.config.config_store_path, path);
        assert_eq!(s.config.log_level, "error");
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        assert_eq!(
            s.file,
            ConfigFile {
                path: path.clone(),
                origin: FileOrigin::CommandLine,
                was_read: true
            }
        );
        assert!(s.config_file_note().contains("written back to it"));
        match parse(&dir, &["--configFile", &path, "-p"]).unwrap() {
            Cli::PrintConfig(s) => assert_eq!(s.config.listen_port, 9000),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            run(&dir, &[&format!("--configFile={path}")])
                .config
                .listen_port,
            9000
        );
    }

    #[test]
    fn without_c_the_working_directory_file_is_the_config_file() {
        let dir = TempDir::new("cli-local");
        assert_eq!(run(&dir, &[]).config.listen_port, 9876);
        let local = dir.join("namesrv.conf");
        fs::write(&local, "listenPort=9001\n").unwrap();
        let s = run(&dir, &["--logLevel=debug"]);
        assert_eq!(s.config.listen_port, 9001);
        assert_eq!(s.file.origin, FileOrigin::WorkingDirectory);
        // Read, never written: updates go to configStorePath.
        let store = dir.join("home-namesrv.properties");
        assert_eq!(s.config.config_store_path, store.to_string_lossy());
        assert_eq!(
            s.config_file_note(),
            format!(
                "config file {} (./namesrv.conf, no -c given; never written); runtime config \
                 updates are written to {}, not read at start while ./namesrv.conf is found",
                local.display(),
                store.display()
            )
        );
        // Unless the file itself names where updates go.
        let chosen = dir.join("chosen.properties");
        fs::write(&local, format!("configStorePath={}\n", chosen.display())).unwrap();
        let s = run(&dir, &[]);
        assert_eq!(s.config.config_store_path, chosen.to_string_lossy());
        // An explicit configStorePath is the operator's choice of file.
        let other = dir.join("other.properties");
        let s = run(&dir, &[&format!("--configStorePath={}", other.display())]);
        assert_eq!(s.config.listen_port, 9876);
        assert_eq!(s.file.origin, FileOrigin::ConfigStorePath);
        assert!(!s.file.was_read);
    }

    #[test]
    fn without_any_file_the_default_store_is_named_and_read_when_it_exists() {
        let dir = TempDir::new("cli-default");
        let s = run(&dir, &[]);
        let expected = NamesrvConfig {
            config_store_path: dir.join("home-namesrv.properties").to_string_lossy().into(),
            ..NamesrvConfig::default()
        };
        assert_eq!(s.config, expected);
        assert_eq!(s.file.origin, FileOrigin::Default);
        assert!(!s.file.was_read);
        let store = dir.join("home-namesrv.properties");
        assert_eq!(
            s.config_file_note(),
            format!(
                "no config file: no -c given, no ./namesrv.conf, and {0} (configStorePath) does \
                 not exist yet; runtime config updates will be written to {0} and read at the \
                 next start",
                store.display()
            )
        );
        // What an update wrote there is read at the next start.
        fs::write(
            dir.join("home-namesrv.properties"),
            "waitSecondsForService=9\n",
        )
        .unwrap();
        let s = run(&dir, &[]);
        assert_eq!(s.config.wait_seconds_for_service, 9);
        assert!(s.file.was_read);
    }

    #[test]
    fn unknown_keys_are_warnings_naming_where_and_the_closest_key() {
        let dir = TempDir::new("cli-unknown");
        let file = dir.join("ns.conf");
        fs::write(
            &file,
            "# c\nscanNotActivBrokerInterval=100\ncontrollerDLegerPeers=n0-127.0.0.1:9878\n",
        )
        .unwrap();
        let path = file.to_string_lossy().into_owned();
        let s = run(&dir, &["-c", &path, "--listenPrt=1", "--brandNewKey=7"]);
        assert_eq!(
            s.warnings,
            [
                format!("{path} line 2: unknown key scanNotActivBrokerInterval (did you mean scanNotActiveBrokerInterval?)"),
                "command line --listenPrt: unknown key listenPrt (did you mean listenPort?)".to_string(),
                "command line --brandNewKey: unknown key brandNewKey".to_string(),
            ]
        );
        // Kept and reported, as Java does; the Controller's key is known and readable.
        assert_eq!(s.config.get("brandNewKey").as_deref(), Some("7"));
        assert_eq!(
            s.config.get("controllerDLegerPeers").as_deref(),
            Some("n0-127.0.0.1:9878")
        );
    }

    #[test]
    fn given_holds_only_what_the_file_and_command_line_set() {
        let dir = TempDir::new("cli-given");
        let file = dir.join("ns.conf");
        fs::write(&file, "configBlackList=a\nscanInactiveMasterInterval=100\n").unwrap();
        let path = file.to_string_lossy().into_owned();
        let s = run(&dir, &["-c", &path, "--scanInactiveMasterInterval=200"]);
        assert_eq!(
            s.given.get("configBlackList").map(String::as_str),
            Some("a")
        );
        assert_eq!(
            s.given
                .get("scanInactiveMasterInterval")
                .map(String::as_str),
            Some("200")
        );
        // A name-server default is not something anybody set.
        assert_eq!(s.given.get("scanNotActiveBrokerInterval"), None);
        assert!(s.config.get("scanNotActiveBrokerInterval").is_some());
    }

    #[test]
    fn an_invalid_value_in_the_file_names_the_file_line_and_key() {
        let dir = TempDir::new("cli-bad");
        let file = dir.join("bad.properties");
        fs::write(&file, "listenPort=1\n\norderMessageEnable=yes\n").unwrap();
        let path = file.to_string_lossy().into_owned();
        assert_eq!(
            parse(&dir, &["-c", &path]).unwrap_err(),
            CliError::Config(format!(
                "{path} line 3: orderMessageEnable: \"yes\" is not true or false"
            ))
        );
        fs::write(&file, "scanNotActiveBrokerInterval=0\nlistenPort=x\n").unwrap();
        assert_eq!(
            parse(&dir, &["-c", &path]).unwrap_err(),
            CliError::Config(format!(
                "{path} line 1: scanNotActiveBrokerInterval: 0 is outside 1..=3600000\n\
                 {path} line 2: listenPort: \"x\" is not an integer"
            ))
        );
    }

    #[test]
    fn cli_help_and_version() {
        let dir = TempDir::new("cli-help");
        match parse(&dir, &["-h"]).unwrap() {
            Cli::Help(text) => {
                assert_eq!(text, usage());
                assert!(text.contains("--key=value"));
                assert!(text
                    .lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>()
                        == ["scanNotActiveBrokerInterval", "live", "5000"]));
                assert!(text
                    .lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>()
                        == ["listenPort", "start", "9876"]));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&dir, &["--help"]).unwrap(), Cli::Help(_)));
        assert!(matches!(parse(&dir, &["--version"]).unwrap(), Cli::Version));
        assert!(matches!(parse(&dir, &["-v"]).unwrap(), Cli::Version));
    }

    #[test]
    fn cli_errors_are_values() {
        let dir = TempDir::new("cli-err");
        let usage_error = |list: &[&str]| matches!(parse(&dir, list), Err(CliError::Usage(_)));
        assert!(usage_error(&["-c"]));
        assert!(usage_error(&["--configFile"]));
        assert!(usage_error(&["--listenPort=70000"]));
        assert!(usage_error(&["--listenPort"]));
        assert!(usage_error(&["--orderMessageEnable=1"]));
        assert!(usage_error(&["stray"]));
        assert!(usage_error(&["-x"]));
        assert!(usage_error(&["--"]));
        assert_eq!(
            parse(&dir, &["--listenPort=abc"]).unwrap_err().to_string(),
            "--listenPort=abc: listenPort: \"abc\" is not an integer"
        );
        assert!(matches!(
            parse(&dir, &["-c", "/nonexistent/rmq-namesrv/none.properties"]),
            Err(CliError::Config(_))
        ));
    }
}
