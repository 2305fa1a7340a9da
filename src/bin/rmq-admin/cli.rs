//! The table of commands, their usage, and a parser of commons-cli's forms (`-tT`, `--topic=T`).

use rmq_namesrv::client::TlsOptions;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::outcome::{Outcome, Ran, EXIT_CODES_HELP};
use crate::peers::Peers;
use crate::{controller, reads, writes};

const DEFAULT_TIMEOUT_MS: u64 = 3000;

/// Short names are a letter, or two where `mqadmin` has them (`-bn`), or none (some globals).
pub struct Opt {
    pub short: &'static str,
    pub long: &'static str,
    pub value: bool,
    pub required: bool,
    pub help: &'static str,
}

const fn opt(short: &'static str, long: &'static str, required: bool, help: &'static str) -> Opt {
    Opt {
        short,
        long,
        value: true,
        required,
        help,
    }
}

const fn flag(short: &'static str, long: &'static str, help: &'static str) -> Opt {
    Opt {
        value: false,
        ..opt(short, long, false, help)
    }
}

impl Opt {
    /// `-t <topic>`, or `-l` for a flag.
    fn arg(&self) -> String {
        match self.value {
            true => format!("-{} <{}>", self.short, self.long),
            false => format!("-{}", self.short),
        }
    }

    fn name(&self) -> String {
        if self.short.is_empty() {
            format!("--{}", self.long)
        } else {
            format!("-{}", self.short)
        }
    }
}

/// Runs a command against the servers of `-n` (or, for a controller command, `-a`).
pub type Runner = fn(&Invocation, &mut Peers) -> Ran;

pub struct Command {
    pub name: &'static str,
    pub about: &'static str,
    pub run: Runner,
    pub opts: &'static [Opt],
}

impl Command {
    pub fn is_controller(&self) -> bool {
        self.opts.iter().any(|o| o.short == "a")
    }
}

const fn cmd(
    name: &'static str,
    about: &'static str,
    run: Runner,
    opts: &'static [Opt],
) -> Command {
    Command {
        name,
        about,
        run,
        opts,
    }
}

// Options several commands share.
const TOPIC: Opt = opt("t", "topic", true, "topic name");
const ONLY_CLUSTER: Opt = opt("c", "clusterName", false, "only this cluster");
const NAMESPACE: Opt = opt("s", "namespace", true, "namespace");
const KEY: Opt = opt("k", "key", true, "key");
const BROKER: Opt = opt("b", "brokerName", true, "broker name");
const PROPERTY: Opt = opt("k", "key", true, "property name");
const PROPERTY_VALUE: Opt = opt("v", "value", true, "property value");
const CONTROLLER: Opt = opt("a", "controllerAddress", true, CONTROLLER_HELP);
const CONTROLLERS: Opt = opt("a", "controllerAddress", true, CONTROLLERS_HELP);
const CONTROLLER_HELP: &str =
    "controllers, ';'-separated (their controllerDLegerPeers ports, not the name server's)";
const CONTROLLERS_HELP: &str = "controllers, ';'-separated: every one is asked";

#[rustfmt::skip]
pub const COMMANDS: &[Command] = &[
    cmd("clusterList", "List clusters and their brokers (id, address, zone)", |i, p| reads::cluster_read(i, p, reads::cluster_table), &[ONLY_CLUSTER]),
    cmd("brokerList", "List broker groups: master, slaves, zone, acting-master flag", |i, p| reads::cluster_read(i, p, reads::broker_table), &[ONLY_CLUSTER]),
    cmd("topicRoute", "Show the route of a topic as JSON (as mqadmin does); -l for tables", reads::topic_route, &[
        TOPIC,
        flag("l", "list", "brokers and queues as tables instead of JSON"),
    ]),
    cmd("topicClusterList", "List the clusters that serve a topic", reads::topic_cluster_list, &[TOPIC]),
    cmd("topicList", "List all topics; with -c, per cluster", reads::topic_list, &[
        flag("c", "clusterModel", "list topics per cluster"),
    ]),
    cmd("getKvConfig", "Show a KV config item, or a whole namespace without -k", reads::get_kv_config, &[
        NAMESPACE,
        opt("k", "key", false, "key"),
    ]),
    cmd("updateKvConfig", "Create or update a KV config item on every name server", |i, p| writes::write_all(i, p, None, |c| writes::done(c.put_kv_config(i.req("s"), i.req("k"), i.req("v")))), &[
        NAMESPACE,
        KEY,
        opt("v", "value", true, "value"),
    ]),
    cmd("deleteKvConfig", "Delete a KV config item on every name server", |i, p| writes::write_all(i, p, None, |c| writes::done(c.delete_kv_config(i.req("s"), i.req("k")))), &[NAMESPACE, KEY]),
    cmd("updateOrderConf", "Get, put or delete a topic's order conf (KV namespace ORDER_TOPIC_CONFIG)", writes::update_order_conf, &[
        TOPIC,
        opt("m", "method", true, "get, put or delete"),
        opt("v", "orderConf", false, "for put: brokerName:queues;brokerName:queues"),
    ]),
    cmd("getNamesrvConfig", "Show the configuration of every name server", |i, p| reads::config_sections(i, p, |c| c.get_namesrv_config()), &[]),
    cmd("updateNamesrvConfig", "Change one configuration property on every name server", |i, p| writes::write_all(i, p, None, |c| writes::done(c.update_namesrv_config(&[(i.req("k"), i.req("v"))]))), &[PROPERTY, PROPERTY_VALUE]),
    cmd("wipeWritePerm", "Wipe a broker's write permission on every name server", |i, p| writes::write_perm(i, p, true), &[BROKER]),
    cmd("addWritePerm", "Restore a broker's write permission on every name server", |i, p| writes::write_perm(i, p, false), &[BROKER]),
    cmd("deleteTopic", "Delete a topic's route on every name server (brokers are NOT touched)", writes::delete_topic, &[
        TOPIC,
        opt("c", "clusterName", false, "only this cluster's queues"),
    ]),
    cmd("stats", "Show each name server's statistics (rmq-namesrv extension, code 29001)", reads::stats, &[]),
    cmd("getControllerMetaData", "Show a controller group: its peers and which one leads (needs -a, not -n)", controller::metadata, &[CONTROLLER]),
    cmd("getSyncStateSet", "Show broker sets' master, epochs and in-sync replicas, from the controller", controller::sync_state_set, &[
        CONTROLLER,
        opt("b", "brokerName", false, "this broker set"),
        opt("c", "clusterName", false, "every broker set of this cluster (asks -n for them)"),
    ]),
    cmd("electMaster", "Make a broker its set's master (the controller elects it if it is electable)", controller::elect_master, &[
        CONTROLLER,
        opt("c", "clusterName", true, "the broker's cluster"),
        opt("bn", "brokerName", true, "the broker set"),
        opt("b", "brokerId", true, "the controller id of the broker to make master"),
    ]),
    cmd("cleanBrokerMetadata", "Remove broker ids, or a whole broker set, from the controller", controller::clean_broker_metadata, &[
        CONTROLLER,
        opt("bn", "brokerName", true, "the broker set"),
        opt("c", "clusterName", false, "the set's cluster (needed unless -l)"),
        opt("b", "brokerControllerIdsToClean", false, "ids to remove, e.g. 1;2 (default: the whole set)"),
        flag("l", "cleanLivingBroker", "remove the whole set even while brokers are alive"),
    ]),
    cmd("getControllerConfig", "Show the configuration of every controller of -a", controller::get_config, &[CONTROLLERS]),
    cmd("updateControllerConfig", "Change one configuration property on every controller of -a", controller::update_config, &[CONTROLLERS, PROPERTY, PROPERTY_VALUE]),
    // Answered by the parser, before any server is asked.
    cmd("help", "List the commands, or show one command's options", |_, _| Ok(Outcome::ok(general_usage())), &[]),
];

pub fn find_command(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name.eq_ignore_ascii_case(name))
}

/// Described by [`GLOBAL_OPTIONS_HELP`].
const GLOBAL_OPTS: &[Opt] = &[
    opt("n", "namesrvAddr", false, ""),
    opt("", "strategy", false, ""),
    flag("", "all", ""),
    flag("", "json", ""),
    opt("", "timeout", false, ""),
    flag("", "tls", ""),
    opt("", "tls-trust", false, ""),
    opt("", "tls-cert", false, ""),
    opt("", "tls-key", false, ""),
    flag("h", "help", ""),
    flag("V", "version", ""),
];

pub const GLOBAL_OPTIONS_HELP: &str = "\
Global options:
  -n, --namesrvAddr LIST  name servers, ';'-separated (default: $NAMESRV_ADDR);
                          controller commands take -a <controllers> instead
  --strategy S            which server (or controller) a read asks; writes go to every one:
                          random (default, what Java's mqadmin does), pinned:N|HOST:PORT,
                          round-robin, fewest (see docs/admin.md)
  --all                   reads ask every name server and compare the answers (exit 5 if
                          they differ)
  --json                  machine-readable output
  --timeout MS            connect and call timeout (default 3000)
  -V, --version           print the version and exit
  --tls                   connect over TLS, as Java clients with tls.enable=true: the server's
                          certificate is NOT verified unless --tls-trust is given
  --tls-trust FILE        CA certificates (PEM) the server's certificate must lead to, its host
                          name or IP checked (tls.client.authServer=true, tls.client.trustCertPath)
  --tls-cert FILE         this client's certificate chain (PEM), for servers that require one
                          (tls.client.certPath)
  --tls-key FILE          its private key, PEM, unencrypted (tls.client.keyPath)
";

pub fn general_usage() -> String {
    let mut s = format!(
        "usage: rmq-admin [-n 'host:port;host:port'] [--strategy S | --all] [--json] \
         [--timeout MS] [--tls ...] <command> [options]\n\n{GLOBAL_OPTIONS_HELP}\nCommands:\n"
    );
    let width = COMMANDS.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in COMMANDS {
        s.push_str(&format!("  {:width$}  {}\n", c.name, c.about));
    }
    s + "\n" + EXIT_CODES_HELP + "'rmq-admin help <command>' shows a command's options.\n"
}

pub fn command_usage(c: &Command) -> String {
    let mut s = format!("usage: rmq-admin {}", c.name);
    for o in c.opts {
        let (open, close) = if o.required { ("", "") } else { ("[", "]") };
        s.push_str(&format!(" {open}{}{close}", o.arg()));
    }
    s.push_str(&format!("\n\n{}\n", c.about));
    if !c.opts.is_empty() {
        s.push_str("\nOptions:\n");
        let names: Vec<String> = c
            .opts
            .iter()
            .map(|o| format!("-{}, --{}", o.short, o.long))
            .collect();
        let width = names.iter().map(String::len).max().unwrap_or(0).max(18);
        for (o, name) in c.opts.iter().zip(&names) {
            s.push_str(&format!("  {name:width$} {}\n", o.help));
        }
    }
    s
}

pub struct Invocation {
    pub command: &'static Command,
    /// Option values by short name; flags map to "true".
    values: BTreeMap<&'static str, String>,
    pub namesrv: Option<String>,
    pub strategy: Option<String>,
    pub all: bool,
    pub json: bool,
    pub timeout: Duration,
    /// `--tls` and its files; None: plain TCP.
    pub tls: Option<TlsOptions>,
}

impl Invocation {
    pub fn get(&self, short: &str) -> Option<&str> {
        self.values.get(short).map(String::as_str)
    }

    /// A required option (the parser checked it is there).
    pub fn req(&self, short: &str) -> &str {
        self.get(short).unwrap_or_default()
    }

    pub fn has(&self, short: &str) -> bool {
        self.values.contains_key(short)
    }
}

pub enum Parsed {
    Run(Invocation),
    /// Printed as it is, exit 0: a usage text or the version.
    Help(String),
}

pub struct UsageError {
    pub message: String,
    /// The usage of the command given, else the general one.
    pub usage: String,
}

fn usage_of(command: Option<&Command>) -> String {
    match command {
        Some(c) if c.name != "help" => command_usage(c),
        _ => general_usage(),
    }
}

fn is_option(arg: &str) -> bool {
    arg.len() > 1 && arg.starts_with('-')
}

/// The option `arg` names, with its attached value (`--topic=T`, `-tT`; `-bn` before `-b`).
fn find_opt<'a>(opts: &'static [Opt], arg: &'a str) -> Option<(&'static Opt, Option<&'a str>)> {
    if let Some(long) = arg.strip_prefix("--").filter(|l| !l.is_empty()) {
        let (name, inline) = long
            .split_once('=')
            .map_or((long, None), |(n, v)| (n, Some(v)));
        return opts.iter().find(|o| o.long == name).map(|o| (o, inline));
    }
    let short = arg.strip_prefix('-')?;
    if let Some(o) = opts.iter().find(|o| o.short.len() > 1 && o.short == short) {
        return Some((o, None));
    }
    let letter = short.chars().next()?;
    let rest = &short[letter.len_utf8()..];
    opts.iter()
        .find(|o| o.short.len() == 1 && o.short.starts_with(letter))
        .map(|o| (o, (!rest.is_empty()).then_some(rest)))
}

/// The value of `o`: attached (`inline`), else the argument at `*next`.
fn take_value(
    o: &Opt,
    arg: &str,
    inline: Option<&str>,
    args: &[&str],
    next: &mut usize,
) -> Result<String, String> {
    match (o.value, inline) {
        (false, None) => Ok("true".into()),
        (false, Some(_)) => Err(format!("{} takes no value: {arg}", o.name())),
        (true, Some(v)) => Ok(v.into()),
        (true, None) => {
            *next += 1;
            let v = args.get(*next - 1);
            v.map(|v| v.to_string())
                .ok_or_else(|| format!("{} needs a value", o.name()))
        }
    }
}

pub fn parse(args: &[String]) -> Result<Parsed, UsageError> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mut globals, mut command, mut rest) = (BTreeMap::new(), None, Vec::new());
    let fail = |message, command| UsageError {
        message,
        usage: usage_of(command),
    };
    let mut k = 0;
    while k < args.len() {
        let arg = args[k];
        k += 1;
        if let Some((o, inline)) = find_opt(GLOBAL_OPTS, arg) {
            let value = take_value(o, arg, inline, &args, &mut k);
            globals.insert(o.long, value.map_err(|m| fail(m, command))?);
        } else if command.is_none() && !is_option(arg) {
            let found = find_command(arg);
            command = Some(found.ok_or_else(|| fail(format!("unknown command {arg:?}"), None))?);
        } else {
            rest.push(arg);
        }
    }
    invocation(command, globals, &rest).map_err(|m| fail(m, command))
}

/// The command's options from `rest`, checked with the global ones.
fn invocation(
    command: Option<&'static Command>,
    mut globals: BTreeMap<&str, String>,
    rest: &[&str],
) -> Result<Parsed, String> {
    let timeout = match globals.remove("timeout") {
        None => DEFAULT_TIMEOUT_MS,
        Some(v) => v
            .trim()
            .parse()
            .ok()
            .filter(|ms| *ms > 0)
            .ok_or_else(|| format!("--timeout needs milliseconds > 0, got {v:?}"))?,
    };
    if globals.contains_key("version") {
        return Ok(Parsed::Help(format!(
            "rmq-admin {}\n",
            rmq_namesrv::VERSION
        )));
    }
    let help = globals.contains_key("help");
    let Some(c) = command else {
        return match help {
            true => Ok(Parsed::Help(general_usage())),
            false => Err("no command given".into()),
        };
    };
    if help {
        return Ok(Parsed::Help(usage_of(command)));
    }
    let (mut values, mut words) = (BTreeMap::new(), Vec::new());
    let mut k = 0;
    while k < rest.len() {
        let arg = rest[k];
        k += 1;
        match find_opt(c.opts, arg) {
            Some((o, inline)) => {
                values.insert(o.short, take_value(o, arg, inline, rest, &mut k)?);
            }
            None if is_option(arg) => return Err(format!("unknown option {arg} for {}", c.name)),
            None => words.push(arg),
        }
    }
    if c.name == "help" {
        let Some(name) = words.first() else {
            return Ok(Parsed::Help(general_usage()));
        };
        let c = find_command(name).ok_or_else(|| format!("unknown command {name:?}"))?;
        return Ok(Parsed::Help(command_usage(c)));
    }
    if let Some(p) = words.first() {
        return Err(format!("unexpected argument {p:?} for {}", c.name));
    }
    for o in c.opts.iter().filter(|o| o.required) {
        if !values.get(o.short).is_some_and(|v| !v.trim().is_empty()) {
            return Err(format!("{} needs {}", c.name, o.arg()));
        }
    }
    let all = globals.contains_key("all");
    if all && globals.contains_key("strategy") {
        return Err("--all asks every server; --strategy picks one: give one of them".into());
    }
    if all && c.is_controller() {
        let name = c.name;
        return Err(format!(
            "--all is for name-server reads; {name} asks the controllers of -a"
        ));
    }
    let tls = TlsOptions::from_flags(
        globals.contains_key("tls"),
        globals.remove("tls-trust"),
        globals.remove("tls-cert"),
        globals.remove("tls-key"),
    )?;
    Ok(Parsed::Run(Invocation {
        command: c,
        values,
        namesrv: globals.remove("namesrvAddr"),
        strategy: globals.remove("strategy"),
        all,
        json: globals.contains_key("json"),
        timeout: Duration::from_millis(timeout),
        tls,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> Invocation {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        match parse(&args) {
            Ok(Parsed::Run(inv)) => inv,
            Ok(Parsed::Help(_)) => panic!("{line}: help"),
            Err(e) => panic!("{line}: {}", e.message),
        }
    }

    fn error(line: &str) -> String {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        match parse(&args) {
            Err(e) => e.message,
            Ok(_) => panic!("{line} parsed"),
        }
    }

    #[test]
    fn option_values_attached_separate_or_long() {
        for line in [
            "topicRoute -tT2",
            "topicRoute -t T2",
            "topicRoute --topic T2",
            "topicRoute --topic=T2",
            "-tT2 topicRoute",
        ] {
            assert_eq!(run(line).get("t"), Some("T2"), "{line}");
        }
        let inv = run("-n127.0.0.1:9876 --json updateOrderConf -tT -mput -vb:4 --timeout=50");
        assert_eq!(inv.namesrv.as_deref(), Some("127.0.0.1:9876"));
        assert!(inv.json);
        assert_eq!(
            (inv.req("t"), inv.req("m"), inv.req("v")),
            ("T", "put", "b:4")
        );
        assert_eq!(inv.timeout, Duration::from_millis(50));
        assert!(run("topicRoute -t T -l").has("l"));
    }

    #[test]
    fn two_letter_short_names_are_matched_whole() {
        let inv = run("electMaster -a h:1 -c C -bn broker-a -b 2");
        assert_eq!((inv.req("bn"), inv.req("b")), ("broker-a", "2"));
        let inv = run("cleanBrokerMetadata -a h:1 --brokerName=x -b 1;2 -l");
        assert_eq!((inv.req("bn"), inv.req("b")), ("x", "1;2"));
        assert!(inv.has("l"));
        assert_eq!(
            error("electMaster -a h:1 -c C -b 2"),
            "electMaster needs -bn <brokerName>"
        );
    }

    #[test]
    fn strategy_and_all_are_global_options() {
        let inv = run("--strategy pinned:1 topicRoute -t T");
        assert_eq!(inv.strategy.as_deref(), Some("pinned:1"));
        assert!(!inv.all);
        let inv = run("clusterList --all");
        assert!(inv.all && inv.strategy.is_none());
        assert_eq!(
            run("--strategy=fewest stats").strategy.as_deref(),
            Some("fewest")
        );
        assert!(error("--all --strategy random clusterList").contains("give one of them"));
        assert!(error("--all getControllerMetaData -a h:1").contains("controllers of -a"));
    }

    #[test]
    fn tls_options_are_global() {
        assert_eq!(run("clusterList").tls, None);
        let inv = run("--tls clusterList --tls-trust=ca.pem --tls-cert c.pem --tls-key k.pem");
        let tls = inv.tls.expect("--tls");
        assert_eq!(tls.trust, Some("ca.pem".into()));
        assert_eq!(tls.identity, Some(("c.pem".into(), "k.pem".into())));
        assert!(error("clusterList --tls-trust ca.pem").contains("need --tls"));
        assert!(error("--tls clusterList --tls-key k.pem").contains("go together"));
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert_eq!(error("topicRoute"), "topicRoute needs -t <topic>");
        assert_eq!(error("topicRoute -t"), "-t needs a value");
        assert_eq!(error("topicRoute -x y"), "unknown option -x for topicRoute");
        assert_eq!(error("topicList -cx"), "-c takes no value: -cx");
        assert_eq!(error("nope"), "unknown command \"nope\"");
        assert_eq!(
            error("--timeout 0 stats"),
            "--timeout needs milliseconds > 0, got \"0\""
        );
    }
}
