//! The name-server workloads: each encodes its frames, opens its connections, runs its phases
//! on the [`Engine`] and returns a [`Report`].
//!
//! Simulated brokers register first (phase `setup`) with every name server of `-n`, on
//! connections that stay open for the whole run (a name server unregisters a broker whose
//! connection closes); route clients are spread over the servers by `--strategy`.

use crate::args::{Options, Workload};
use crate::controller;
use crate::engine::{Engine, NoWatch, Template, Watch};
use crate::payload::BROKER_VERSION;
use crate::report::{int, num, text, Mark, Report};
use crate::servers::Picker;
use crate::transport;
use rmq_namesrv::client::api::RegisterOptions;
use rmq_namesrv::event_loop::descriptor_limit;
use rmq_namesrv::remoting::command::RemotingCommand;
use rmq_namesrv::remoting::json::Value;
use rmq_namesrv::request::{GetRouteInfo, QueryDataVersion, Request};
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Route clients: their class, how many per name server, the route templates per server.
type Clients = (usize, Vec<usize>, Vec<Rc<[u32]>>);

/// Ample time for setup registrations.
const SETUP_LIMIT: Duration = Duration::from_secs(600);
/// Distinct bodies per broker that `--churn` cycles through.
const CHURN_VARIANTS: usize = 4;

pub struct Bench {
    pub o: Options,
    /// The name servers, in `-n` order.
    addrs: Vec<SocketAddr>,
    pub engine: Engine,
    pub report: Report,
}

pub fn resolve(addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("cannot resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("no address for {addr}"))
}

impl Bench {
    fn new(o: Options, stop: Arc<AtomicBool>) -> Result<Bench, String> {
        let addrs: Result<Vec<_>, _> = o.namesrv.iter().map(|a| resolve(a)).collect();
        let addrs = addrs?;
        let mut engine = Engine::new(&o, stop).map_err(|e| format!("poll: {e}"))?;
        engine.tls = transport::tls(&o, &addrs)?;
        let report = Report::new(o.workload.name(), o.namesrv.join(";"), o.pid);
        Ok(Bench {
            o,
            addrs,
            engine,
            report,
        })
    }

    pub fn param(&mut self, k: &str, v: Value) {
        self.report.param(k, v);
    }

    /// Checks the open-files limit for the run's connections; records the cluster's parameters.
    fn begin(&mut self, broker_conns: usize, clients: usize) -> Result<(), String> {
        let conns = broker_conns * self.addrs.len() + clients;
        if let Some(limit) = descriptor_limit().map(|l| l.soft as usize) {
            if conns + 32 > limit {
                return Err(format!(
                    "{conns} connections need more open files than the limit of {limit}: raise it \
                     (ulimit -n) or multiplex brokers with --conns"
                ));
            }
        }
        if self.o.topic_list.is_empty() {
            self.param("brokers", int(self.o.layout.brokers));
            self.param("topics_per_broker", int(self.o.layout.topics));
            self.param("broker_conns", int(self.broker_conns()));
            if !self.o.layout.run_tag.is_empty() {
                self.param("tag", text(&self.o.layout.run_tag));
                let layout = &self.o.layout;
                let last = layout.broker(layout.brokers.saturating_sub(1)).broker_addr;
                let range = format!("{}..{last}", layout.broker(0).broker_addr);
                self.param("broker_addrs", text(&range));
            }
        } else {
            self.param("topics", int(self.o.topic_list.len()));
        }
        if self.addrs.len() > 1 {
            self.param("name_servers", int(self.addrs.len()));
        }
        Ok(())
    }

    fn broker_conns(&self) -> usize {
        let brokers = self.o.layout.brokers;
        self.o.conns.unwrap_or(brokers).clamp(1, brokers.max(1))
    }

    /// Registration templates of every broker: `[broker][variant]`, variant 0 = steady (whose
    /// mean size is the `body_bytes` parameter).
    fn register_templates(&mut self, variants: usize, timeout_ms: Option<u64>) -> Vec<Vec<u32>> {
        let options = RegisterOptions {
            heartbeat_timeout_millis: timeout_ms.and_then(|t| i64::try_from(t).ok()),
            ..RegisterOptions::default()
        };
        let (mut out, mut steady_bytes) = (Vec::with_capacity(self.o.layout.brokers), 0);
        for b in 0..self.o.layout.brokers {
            let mut ids = Vec::with_capacity(variants + 1);
            for v in 0..=variants {
                let body = self.o.layout.register_body(b, v);
                steady_bytes += if v == 0 { body.len() } else { 0 };
                let id = self.o.layout.broker(b);
                let register = id.registration(&body, &options, BROKER_VERSION);
                let request = Request::RegisterBroker(register).encode(BROKER_VERSION);
                let t = Template::new(self.o.header, &request, BROKER_VERSION);
                ids.push(self.engine.add_template(t));
            }
            out.push(ids);
        }
        let mean = steady_bytes / self.o.layout.brokers.max(1);
        self.param("body_bytes", int(mean));
        out
    }

    /// Plan of broker connection `c`: its brokers' templates (brokers are dealt out round
    /// robin), interleaved so that each broker's consecutive requests cycle through `variants`.
    fn broker_plan(&self, c: usize, per_broker: &[Vec<u32>], variants: &[usize]) -> Rc<[u32]> {
        let brokers = (c..self.o.layout.brokers).step_by(self.broker_conns());
        let plan = variants
            .iter()
            .flat_map(|&v| brokers.clone().map(move |b| per_broker[b][v]));
        plan.collect::<Vec<_>>().into()
    }

    fn replan_brokers(&mut self, class: usize, per_broker: &[Vec<u32>], variants: &[usize]) {
        let plans: Vec<Rc<[u32]>> = (0..self.broker_conns())
            .map(|c| self.broker_plan(c, per_broker, variants))
            .collect();
        self.engine
            .replan(class, |i| plans[i % plans.len()].clone());
    }

    /// Opens the broker connections (class "register"), registers every broker once (phase
    /// `setup`; any failure aborts the run) and, with `churn`, switches to the churned bodies.
    fn registered_brokers(
        &mut self,
        rate: Option<f64>,
        depth: usize,
        churn: bool,
        timeout_ms: Option<u64>,
    ) -> Result<usize, String> {
        let variants: Vec<usize> = (1..=CHURN_VARIANTS).filter(|_| churn).collect();
        let regs = self.register_templates(variants.len(), timeout_ms);
        let class = self.engine.add_class("register", None);
        for addr in self.addrs.clone() {
            for c in 0..self.broker_conns() {
                let plan = self.broker_plan(c, &regs, &[0]);
                self.engine.connect(addr, class, plan, 0, depth)?;
            }
        }
        self.phase("setup", &[class], false, &mut NoWatch, (SETUP_LIMIT, true));
        self.engine.classes[class].rate = rate;
        let expected = (self.o.layout.brokers * self.addrs.len()) as u64;
        let stats = self.report.phases.last().map_or(&[][..], |p| &p.classes);
        let ok = stats.iter().all(|(_, s)| s.errors() == 0)
            && stats.iter().map(|(_, s)| s.ops).sum::<u64>() >= expected;
        // Cut short by Ctrl-C: not a failure, the report says it was interrupted.
        if !ok && !self.engine.stopped() {
            let (brokers, text) = (self.o.layout.brokers, self.report.text());
            return Err(format!(
                "setup registration of {brokers} brokers failed:\n{text}"
            ));
        }
        if churn {
            self.replan_brokers(class, &regs, &variants);
        }
        Ok(class)
    }

    /// Route templates in lookup order, one list per name server (equal bytes, distinct ids:
    /// a watch can tell which server answered). The ids are consecutive, server by server.
    fn route_templates(&mut self) -> Vec<Rc<[u32]>> {
        let topics = if self.o.topic_list.is_empty() {
            self.o.layout.all_user_topics()
        } else {
            self.o.topic_list.clone()
        };
        let version = self.o.version;
        let mut per_server = Vec::with_capacity(self.addrs.len());
        for _ in 0..self.addrs.len() {
            let ids = topics.iter().map(|t| {
                let lookup = Request::GetRouteInfo(GetRouteInfo::new(t, version));
                let tmpl = Template::new(self.o.header, &lookup.encode(version), version);
                self.engine.add_template(tmpl)
            });
            per_server.push(ids.collect::<Vec<_>>().into());
        }
        per_server
    }

    /// Opens `--clients` route clients (class "route") where `--strategy` says, each cycling
    /// through its server's [`Self::route_templates`].
    fn open_clients(&mut self, rate: Option<f64>) -> Result<Clients, String> {
        let routes = self.route_templates();
        let class = self.engine.add_class("route", rate);
        let tls = self.engine.tls.as_ref().map(|t| t.connector.clone());
        let mut picker = Picker::new(&self.o.namesrv, self.o.strategy, tls)?;
        let mut per_server = vec![0; self.addrs.len()];
        let k = self.o.clients;
        self.param("clients", int(k));
        for i in 0..k {
            let s = picker.next()?;
            // Spread the clients' starting points over the topic list.
            let start = i * routes[s].len() / k;
            let addr = self.addrs[s];
            self.engine
                .connect(addr, class, routes[s].clone(), start, self.o.depth)?;
            picker.opened(s)?;
            per_server[s] += 1;
        }
        if self.addrs.len() > 1 {
            let counts: Vec<String> = per_server.iter().map(usize::to_string).collect();
            self.param("strategy", text(&picker.strategy().name()));
            self.param("clients_per_server", text(&counts.join(",")));
        }
        Ok((class, per_server, routes))
    }

    fn timed(&mut self, name: &str, classes: &[usize], main: bool) {
        self.phase(name, classes, main, &mut NoWatch, (self.o.duration, false));
    }

    /// Runs a phase of `classes` (see [`Engine::run_phase`]). The main phases (the first of
    /// them is the headline) are the measured span of the /proc readings.
    pub fn phase(
        &mut self,
        name: &str,
        classes: &[usize],
        main: bool,
        watch: &mut dyn Watch,
        until: (Duration, bool),
    ) {
        let servers_gone = self.report.phases.iter().any(|p| p.all_closed.is_some());
        if self.engine.stopped() || servers_gone {
            return; // Ctrl-C, or nothing left to measure: no new phase
        }
        if main && self.report.main_wall.is_zero() {
            self.report.marks[1] = Mark::now(self.o.pid);
            self.report.main_phase = self.report.phases.len();
        }
        let result = self.engine.run_phase(name, classes, until, watch);
        if main {
            self.report.marks[2] = Mark::now(self.o.pid);
            self.report.main_wall += result.elapsed;
        }
        if let Some(peers) = &result.all_closed {
            let failure = format!("every connection to {peers} closed during phase {name}");
            eprintln!("rmq-bench: {failure}: stopping");
            self.report.failures.push(failure);
        }
        self.report.phases.push(result);
    }

    pub fn finish(mut self) -> Report {
        self.report.interrupted = self.engine.stopped();
        self.report
    }
}

/// Runs the workload of `o`; raising `stop` ends it early with the results so far.
pub fn run(mut o: Options, stop: Arc<AtomicBool>) -> Result<Report, String> {
    if o.workload == Workload::Controller {
        if let Some(mode) = o.failover {
            return controller::failover::run(&o, mode, &stop);
        }
        o.namesrv.clear(); // the throughput run needs no name server
    }
    let b = Bench::new(o, stop)?;
    match b.o.workload {
        Workload::Register => register(b),
        Workload::Heartbeat => heartbeat(b),
        Workload::Route => route(b),
        Workload::Mixed => mixed(b),
        Workload::Expire => expire(b),
        Workload::Controller => controller::throughput::run(b),
        _ => Err("not a load workload of the engine".into()),
    }
}

fn register(mut b: Bench) -> Result<Report, String> {
    b.begin(b.broker_conns(), 0)?;
    b.param("mode", text(if b.o.churn { "churn" } else { "steady" }));
    b.param("depth", int(b.o.depth));
    if let Some(r) = b.o.rate {
        b.param("rate_per_s", num(r, 3));
    }
    let class = b.registered_brokers(b.o.rate, b.o.depth, b.o.churn, None)?;
    b.timed("main", &[class], true);
    Ok(b.finish())
}

fn heartbeat(mut b: Bench) -> Result<Report, String> {
    b.begin(b.broker_conns(), 0)?;
    let op = if b.o.op_query { "query" } else { "heartbeat" };
    b.param("op", text(op));
    b.param("depth", int(b.o.depth));
    let class = b.registered_brokers(b.o.rate, b.o.depth, false, None)?;
    b.engine.classes[class].name = op.into();
    let mut beats = Vec::with_capacity(b.o.layout.brokers);
    for i in 0..b.o.layout.brokers {
        let id = b.o.layout.broker(i);
        // The dataVersion of the steady body: the server answers changed=false.
        let mut body = Vec::new();
        let request = if b.o.op_query {
            b.o.layout.data_version(i, 0).encode(&mut body);
            Request::QueryDataVersion(QueryDataVersion::new(id.broker_ref(), &body))
                .encode(BROKER_VERSION)
        } else {
            id.heartbeat()
        };
        let t = Template::new(b.o.header, &request, BROKER_VERSION);
        beats.push(vec![b.engine.add_template(t)]);
    }
    b.replan_brokers(class, &beats, &[0]);
    b.timed("main", &[class], true);
    Ok(b.finish())
}

fn route(mut b: Bench) -> Result<Report, String> {
    let with_brokers = b.o.topic_list.is_empty();
    let broker_conns = if with_brokers { b.broker_conns() } else { 0 };
    b.begin(broker_conns, b.o.clients)?;
    b.param("depth", int(b.o.depth));
    b.param("version", int(b.o.version));
    if with_brokers {
        b.registered_brokers(None, 1, false, None)?;
    }
    let (class, ..) = b.open_clients(b.o.rate)?;
    b.timed("main", &[class], true);
    Ok(b.finish())
}

fn mixed(mut b: Bench) -> Result<Report, String> {
    b.begin(b.broker_conns(), b.o.clients)?;
    b.param("route_rate_per_s", num(b.o.route_rate, 3));
    b.param("version", int(b.o.version));
    b.param("storm", text(if b.o.churn { "churn" } else { "steady" }));
    if let Some(r) = b.o.rate {
        b.param("storm_rate_per_s", num(r, 3));
    }
    let storm = b.registered_brokers(b.o.rate, 1, b.o.churn, None)?;
    let (lookups, ..) = b.open_clients(Some(b.o.route_rate))?;
    b.timed("quiet", &[lookups], false);
    b.timed("storm", &[lookups, storm], true);
    Ok(b.finish())
}

/// Watches user topics disappear from routes, on every name server: one entry per
/// (name server, topic), indexed by route template id.
#[derive(Default)]
struct ExpiryWatch {
    /// Template id -> entry index, for the probe class's templates.
    first_template: u32,
    alive: Vec<bool>,
    /// Entries watched (those of servers with a probing client).
    watched: usize,
    remaining: usize,
    first_gone: Option<Instant>,
    all_gone: Option<Instant>,
}

impl Watch for ExpiryWatch {
    fn on_response(&mut self, template: u32, answer: &RemotingCommand) {
        let i = template.wrapping_sub(self.first_template) as usize;
        if answer.code == 17 && self.alive.get(i) == Some(&true) {
            self.alive[i] = false;
            self.remaining -= 1;
            let now = Instant::now();
            self.first_gone.get_or_insert(now);
            if self.remaining == 0 {
                self.all_gone = Some(now);
            }
        }
    }
    fn finished(&self) -> bool {
        self.remaining == 0
    }
    fn progress(&self) -> String {
        format!("  routes left {}/{}", self.remaining, self.watched)
    }
}

fn expire(mut b: Bench) -> Result<Report, String> {
    b.o.topic_list.clear();
    b.begin(b.broker_conns(), b.o.clients)?;
    b.param("heartbeat_timeout_ms", int(b.o.timeout_ms));
    b.param("route_rate_per_s", num(b.o.route_rate, 3));
    let brokers = b.registered_brokers(None, 1, false, Some(b.o.timeout_ms))?;
    b.engine.classes[brokers].closes_expected = true;
    // The brokers' last registrations were just answered: their timeout runs from here.
    let stopped = Instant::now();
    let (probe, per_server, routes) = b.open_clients(Some(b.o.route_rate))?;
    b.engine.classes[probe].expected_codes = vec![17];
    // Only the routes of servers that have a probing client are watched.
    let servers = routes.iter().zip(&per_server);
    let alive: Vec<bool> = servers.flat_map(|(r, k)| vec![*k > 0; r.len()]).collect();
    let watched = alive.iter().filter(|a| **a).count();
    let mut watch = ExpiryWatch {
        first_template: routes.first().and_then(|r| r.first()).copied().unwrap_or(0),
        alive,
        watched,
        remaining: watched,
        ..ExpiryWatch::default()
    };
    b.phase("expire", &[probe], true, &mut watch, (b.o.max_wait, false));
    let secs = |t: Option<Instant>| num(t.map_or(-1.0, |t| (t - stopped).as_secs_f64()), 3);
    let timeout_s = b.o.timeout_ms as f64 / 1000.0;
    let left = watch.remaining;
    let mut report = b.finish();
    report.result("routes_watched", int(watched), "topics");
    report.result("routes_left", int(left), "topics");
    report.result("first_route_gone_after", secs(watch.first_gone), "s");
    report.result("all_routes_gone_after", secs(watch.all_gone), "s");
    if let Some(t) = watch.all_gone {
        let lag = (t - stopped).as_secs_f64() - timeout_s;
        report.result("expiry_lag_beyond_timeout", num(lag, 3), "s");
    }
    if left > 0 && !report.interrupted {
        // Routes that never went away are the failure this workload exists to catch.
        let failure = format!("{left} routes still present when the wait ended");
        report.failures.push(failure);
    }
    Ok(report)
}
