//! Command line: `rmq-bench <workload> -n host:port [options]`, parsed by hand into one
//! `Options` value whose defaults depend on the workload.

use crate::payload::Layout;
use rmq_namesrv::client::nameserver_set::parse_addr_list;
use rmq_namesrv::client::{Strategy, TlsOptions};
use rmq_namesrv::remoting::command::SerializeType;
use std::time::Duration;

pub const USAGE: &str = "\
rmq-bench: load generator for RocketMQ name servers, over the real wire protocol.

usage: rmq-bench <workload> -n 'host:port[;host:port...]' [options]
       rmq-bench canned [-l host:port] [--body-bytes N]
       rmq-bench help | --version | -V

workloads:
  register    N simulated brokers re-register (steady body, or --churn)
  heartbeat   registered brokers loop BROKER_HEARTBEAT (904) or QUERY_DATA_VERSION (322)
  route       K clients loop GET_ROUTEINFO_BY_TOPIC over the registered topics
  mixed       route lookups at a fixed rate, first quiet, then during a registration storm
  expire      N brokers with a short heartbeat timeout go silent: time until their routes are gone
  canned      a no-work server answering every frame with SUCCESS: the generator's ceiling
  controller  1012, 1003 and 1001 for N broker sets on --controller; or time a --failover

common options:
  -n, --namesrv LIST        name servers, ';'-separated (default: $NAMESRV_ADDR)
  --strategy S              route clients' server: round-robin (default), random, pinned:N|HOST:PORT, fewest
  -d, --duration T          timed phase: 10, 10s, 500ms (default 10s); Ctrl-C: results so far
  --json                    print the result as one JSON object
  --quiet                   no progress line on stderr
  --pid PID                 sample the server's RSS and CPU time from /proc
  --hgrm FILE               latency distributions, HdrHistogram text: FILE.PHASE-CLASS per class
  --header json|rocketmq    request header codec (default json)
  --tag TEXT                a fleet's own broker names and addresses (fleets share a server)

TLS (name-server workloads; a build with the tls feature):
  --tls                     connect over TLS, as Java clients with tls.enable=true: the server's
                            certificate is NOT verified unless --tls-trust is given
  --tls-trust FILE          CA certificates (PEM) the server's certificate must lead to, its
                            host or IP checked (tls.client.authServer=true, tls.client.trustCertPath)
  --tls-cert FILE           client certificate chain, PEM (tls.client.certPath)
  --tls-key FILE            its private key, PEM, unencrypted (tls.client.keyPath)

cluster layout (register, heartbeat, route, mixed, expire):
  --brokers N               simulated broker masters (default 100; route 10, expire 10000)
  --topics M                user topics per broker (default 100; expire 10)
  --conns C                 broker connections (default: one per broker)

register / heartbeat / mixed storm:
  --churn                   change dataVersion and topics on every registration
  --rate R                  brokers' ops/s: 500 or 1000/30s (default: full speed)
  --depth D                 requests in flight per connection (default 1; heartbeat 8, route 16, expire 4)
  --op heartbeat|query      heartbeat workload request: 904 or 322 (default heartbeat)

route / mixed / expire:
  --clients K               route client connections (default 16; expire 4)
  --version V               header version (default 479; below 401 the legacy route dialect)
  --route-rate R            route lookups per second in mixed/expire (default 10000)
  --topic T[,T...]          look up these existing topics instead of registering brokers

expire:
  --timeout-ms T            heartbeatTimeoutMillis of each registration (default 3000)
  --max-wait T              give up waiting for expiry after this long (default 120s)

controller:
  --controller HOST:PORT    the controller; required
  --brokers N               broker sets (default 1000)
  --clients K / --depth D   connections (default 8) and requests in flight (default 16)
  --failover crash|hang     the master's connections close or its heartbeats stop
  --rounds R                failover rounds (default 3)
  --timeout-ms T            brokers' heartbeat timeout (default 10000)

canned:
  -l, --listen HOST:PORT    address to listen on (default 127.0.0.1:0, printed)
  --body-bytes N            body size of every reply (default 0)

docs/performance.md: what each workload measures, its output fields and defaults.
";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Workload {
    #[default]
    Help,
    Register,
    Heartbeat,
    Route,
    Mixed,
    Expire,
    Canned,
    Controller,
    Version,
}

/// Each workload's name on the command line and in reports.
const WORKLOADS: [(&str, Workload); 7] = [
    ("register", Workload::Register),
    ("heartbeat", Workload::Heartbeat),
    ("route", Workload::Route),
    ("mixed", Workload::Mixed),
    ("expire", Workload::Expire),
    ("canned", Workload::Canned),
    ("controller", Workload::Controller),
];

impl Workload {
    pub fn name(self) -> &'static str {
        WORKLOADS
            .iter()
            .find(|(_, w)| *w == self)
            .map_or("help", |(name, _)| name)
    }
}

/// How `controller --failover` ends the master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// Its connections close (kill -9): the controller sees the close at once.
    Crash,
    /// Its heartbeats stop, connections stay open: found by the heartbeat timeout.
    Hang,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub workload: Workload,
    /// The name servers of `-n` (or `$NAMESRV_ADDR`).
    pub namesrv: Vec<String>,
    /// `--strategy`, checked against `namesrv`; None: round-robin.
    pub strategy: Option<Strategy>,
    strategy_text: Option<String>,
    pub duration: Duration,
    pub json: bool,
    pub quiet: bool,
    pub pid: Option<u32>,
    /// `--hgrm FILE`: where the latency distributions go (see `Report::write_hgrm`).
    pub hgrm: Option<String>,
    /// `--header`: the requests' header codec.
    pub header: SerializeType,
    /// `--brokers`, `--topics`, `--tag` (`controller`: its broker sets and their tag).
    pub layout: Layout,
    pub conns: Option<usize>,
    pub churn: bool,
    pub rate: Option<f64>,
    /// Requests in flight per connection (mixed: the route clients').
    pub depth: usize,
    pub op_query: bool,
    pub clients: usize,
    pub version: i32,
    pub route_rate: f64,
    pub topic_list: Vec<String>,
    pub timeout_ms: u64,
    pub max_wait: Duration,
    pub listen: String,
    pub body_bytes: usize,
    pub controller: Option<String>,
    pub failover: Option<Failover>,
    pub rounds: usize,
    /// `--tls` and its files; None: plain TCP.
    pub tls: Option<TlsOptions>,
    /// `--tls`, `--tls-trust`, `--tls-cert`, `--tls-key` as given.
    tls_flags: (bool, Option<String>, Option<String>, Option<String>),
}

/// `10`, `10s`, `500ms`, `2m`.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    // "ms" before "s" and "m".
    let units = [("ms", 0.001), ("s", 1.0), ("m", 60.0)];
    let (num, mult) = units
        .iter()
        .find_map(|(unit, mult)| Some((v.strip_suffix(unit)?, *mult)))
        .unwrap_or((v, 1.0));
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad duration {v:?}"))?;
    if !(x >= 0.0 && x.is_finite()) {
        return Err(format!("bad duration {v:?}"));
    }
    Ok(Duration::from_secs_f64(x * mult))
}

/// `500` ops/s, or `1000/30s` (1,000 ops every 30 seconds).
pub fn parse_rate(v: &str) -> Result<f64, String> {
    let (n, per) = match v.split_once('/') {
        Some((n, per)) => (n, parse_duration(per)?.as_secs_f64()),
        None => (v, 1.0),
    };
    let n: f64 = n.trim().parse().map_err(|_| format!("bad rate {v:?}"))?;
    if !(n > 0.0 && per > 0.0 && n.is_finite()) {
        return Err(format!("bad rate {v:?}"));
    }
    Ok(n / per)
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{flag}: not a number: {v:?}"))
}

fn workload_of(name: &str) -> Result<Workload, String> {
    match name {
        "help" | "-h" | "--help" => Ok(Workload::Help),
        "version" | "-V" | "--version" => Ok(Workload::Version),
        _ => WORKLOADS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, w)| *w)
            .ok_or_else(|| format!("unknown workload {name:?}")),
    }
}

/// The options a workload starts from.
fn defaults(workload: Workload) -> Options {
    // Brokers send heartbeats oneway and never wait for an answer: pipelining is what they
    // do, and at depth 1 the syscall round trip bounds both sides equally.
    let (brokers, topics, clients, depth, timeout_ms) = match workload {
        Workload::Heartbeat => (100, 100, 16, 8, 3_000),
        Workload::Route => (10, 100, 16, 16, 3_000),
        Workload::Mixed => (100, 100, 16, 16, 3_000),
        Workload::Expire => (10_000, 10, 4, 4, 3_000),
        Workload::Controller => (1_000, 100, 8, 16, 10_000),
        _ => (100, 100, 16, 1, 3_000),
    };
    Options {
        workload,
        duration: Duration::from_secs(10),
        layout: Layout {
            brokers,
            topics,
            ..Layout::default()
        },
        clients,
        depth,
        version: 479,
        route_rate: 10_000.0,
        timeout_ms,
        max_wait: Duration::from_secs(120),
        listen: "127.0.0.1:0".into(),
        rounds: 3,
        ..Options::default()
    }
}

/// Gives an option its value on demand (inline `--flag=value` or the next argument).
type ValueOf<'a> = dyn FnMut() -> Result<String, String> + 'a;

/// Sets option `flag`; `Ok(false)`: unknown option.
fn set(o: &mut Options, flag: &str, value: &mut ValueOf) -> Result<bool, String> {
    match flag {
        "-n" | "--namesrv" => o.namesrv = parse_addr_list(&value()?),
        "--strategy" => o.strategy_text = Some(value()?),
        "-d" | "--duration" => o.duration = parse_duration(&value()?)?,
        "--json" => o.json = true,
        "--quiet" | "-q" => o.quiet = true,
        "--pid" => o.pid = Some(number(flag, &value()?)?),
        "--hgrm" => o.hgrm = Some(value()?),
        "--header" => {
            o.header = match value()?.as_str() {
                "json" | "JSON" => SerializeType::Json,
                "rocketmq" | "ROCKETMQ" | "binary" => SerializeType::RocketMq,
                v => return Err(format!("--header: json or rocketmq, not {v:?}")),
            }
        }
        "--tag" => o.layout.run_tag = value()?,
        "--brokers" => o.layout.brokers = number(flag, &value()?)?,
        "--topics" => o.layout.topics = number(flag, &value()?)?,
        "--conns" => o.conns = Some(number(flag, &value()?)?),
        "--churn" => o.churn = true,
        "--rate" => o.rate = Some(parse_rate(&value()?)?),
        "--depth" => o.depth = number(flag, &value()?)?,
        "--op" => {
            o.op_query = match value()?.as_str() {
                "heartbeat" | "904" => false,
                "query" | "322" => true,
                v => return Err(format!("--op: heartbeat or query, not {v:?}")),
            }
        }
        "--clients" => o.clients = number(flag, &value()?)?,
        "--version" => o.version = number(flag, &value()?)?,
        "--route-rate" => o.route_rate = parse_rate(&value()?)?,
        "--topic" => o.topic_list.extend(
            value()?
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from),
        ),
        "--timeout-ms" => o.timeout_ms = number(flag, &value()?)?,
        "--max-wait" => o.max_wait = parse_duration(&value()?)?,
        "-l" | "--listen" => o.listen = value()?,
        "--body-bytes" => o.body_bytes = number(flag, &value()?)?,
        "--controller" => o.controller = Some(value()?.trim().to_string()),
        "--failover" => {
            o.failover = Some(match value()?.as_str() {
                "crash" => Failover::Crash,
                "hang" => Failover::Hang,
                v => return Err(format!("--failover: crash or hang, not {v:?}")),
            })
        }
        "--rounds" => o.rounds = number(flag, &value()?)?,
        "--tls" => o.tls_flags.0 = true,
        "--tls-trust" => o.tls_flags.1 = Some(value()?),
        "--tls-cert" => o.tls_flags.2 = Some(value()?),
        "--tls-key" => o.tls_flags.3 = Some(value()?),
        _ => return Ok(false),
    }
    Ok(true)
}

fn check(o: &Options) -> Result<(), String> {
    if o.tls.is_some() && matches!(o.workload, Workload::Controller | Workload::Canned) {
        return Err("--tls is for the name-server workloads".into());
    }
    if o.workload == Workload::Controller {
        if o.controller.is_none() {
            return Err("controller needs --controller host:port (the controller's port)".into());
        }
        if o.failover.is_some() && o.namesrv.is_empty() {
            return Err(
                "controller --failover needs -n (the name servers the brokers register with)"
                    .into(),
            );
        }
        if o.layout.brokers == 0 || o.clients == 0 || o.depth == 0 || o.rounds == 0 {
            return Err("--brokers, --clients, --depth and --rounds must be at least 1".into());
        }
        return Ok(());
    }
    let needs_server = !matches!(
        o.workload,
        Workload::Canned | Workload::Help | Workload::Version
    );
    if needs_server && o.namesrv.is_empty() {
        return Err("no name server: give -n 'host:port;host:port' or set NAMESRV_ADDR".into());
    }
    if o.layout.brokers == 0 && o.topic_list.is_empty() && needs_server {
        return Err("--brokers must be at least 1".into());
    }
    if o.conns == Some(0) || o.depth == 0 || o.clients == 0 {
        return Err("--conns, --depth and --clients must be at least 1".into());
    }
    Ok(())
}

/// Parses the arguments after the program name; `env_namesrv`: `$NAMESRV_ADDR`.
pub fn parse(args: &[String], env_namesrv: Option<&str>) -> Result<Options, String> {
    let Some(first) = args.first() else {
        return Err("no workload given".into());
    };
    let mut o = defaults(workload_of(first)?);
    o.namesrv = parse_addr_list(env_namesrv.unwrap_or_default());
    let mut it = args[1..].iter();
    while let Some(arg) = it.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        if !set(&mut o, flag, &mut value)? {
            return Err(format!("unknown option {flag:?}"));
        }
    }
    if let Some(text) = &o.strategy_text {
        let strategy = Strategy::parse(text, &o.namesrv).map_err(|e| format!("--strategy: {e}"))?;
        o.strategy = Some(strategy);
    }
    let (tls, trust, cert, key) = std::mem::take(&mut o.tls_flags);
    o.tls = TlsOptions::from_flags(tls, trust, cert, key)?;
    check(&o)?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn durations_and_rates_parse() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
        assert!((parse_rate("1000/30s").unwrap() - 33.333).abs() < 0.01);
        assert_eq!(parse_rate("500").unwrap(), 500.0);
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn workload_defaults_and_flags() {
        let o = parse(
            &args("route -n 127.0.0.1:9876 --depth=4 --version 317 -d 1s"),
            None,
        )
        .unwrap();
        assert_eq!(o.workload, Workload::Route);
        assert_eq!(o.layout.brokers, 10);
        assert_eq!(o.depth, 4);
        assert_eq!(o.version, 317);
        assert_eq!(o.duration, Duration::from_secs(1));
        let o = parse(&args("expire -n h:1"), None).unwrap();
        assert_eq!(
            (o.layout.brokers, o.layout.topics, o.clients),
            (10_000, 10, 4)
        );
        assert!(parse(&args("register"), None).is_err());
        assert!(parse(&args("register -n h:1 --bogus"), None).is_err());
        assert!(parse(&args("canned"), None).is_ok());
        let o = parse(&args("controller --controller h:9878"), None).unwrap();
        assert_eq!(
            (o.layout.brokers, o.clients, o.timeout_ms),
            (1_000, 8, 10_000)
        );
        assert!(parse(&args("controller"), None).is_err());
        assert!(parse(&args("controller --controller h:1 --failover crash"), None).is_err());
        let o = parse(
            &args("controller --controller h:1 --failover hang -n n:1"),
            None,
        )
        .unwrap();
        assert_eq!(o.failover, Some(Failover::Hang));
    }

    #[test]
    fn strategies_are_read_against_the_name_server_list() {
        let o = parse(&args("route -n a:1;b:2"), None).unwrap();
        assert_eq!(o.strategy, None);
        let o = parse(&args("route -n a:1;b:2 --strategy pinned:b:2"), None).unwrap();
        assert_eq!(o.strategy, Some(Strategy::Pinned(1)));
        let o = parse(&args("route --strategy=random -n a:1"), None).unwrap();
        assert_eq!(o.strategy, Some(Strategy::RandomStartRoundRobin));
        assert!(parse(&args("route -n a:1 --strategy pinned:1"), None).is_err());
        assert!(parse(&args("route -n a:1 --strategy nearest"), None).is_err());
    }

    #[test]
    fn tls_flags_make_tls_options_for_name_server_workloads() {
        assert_eq!(parse(&args("route -n a:1"), None).unwrap().tls, None);
        let o = parse(&args("heartbeat -n a:1 --tls --tls-trust=ca.pem"), None).unwrap();
        assert_eq!(o.tls.unwrap().trust, Some("ca.pem".into()));
        assert!(parse(&args("route -n a:1 --tls-trust ca.pem"), None).is_err());
        assert!(parse(&args("controller --controller h:1 --tls"), None).is_err());
    }

    #[test]
    fn name_server_lists_come_from_n_or_the_environment() {
        let o = parse(&args("route -n a:1;b:2"), Some("env:3")).unwrap();
        assert_eq!(o.namesrv, ["a:1", "b:2"]);
        let o = parse(&args("route"), Some("env:3; env:4")).unwrap();
        assert_eq!(o.namesrv, ["env:3", "env:4"]);
        let e = parse(&args("route"), None).unwrap_err();
        assert!(e.contains("NAMESRV_ADDR"), "{e}");
    }
}
