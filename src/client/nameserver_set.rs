//! `NameServerSet`: independent name servers, one cached [`Client`] each, ordered for a call by
//! a [`Strategy`] (seeded, so tests can predict the order).

use super::api::ClientError;
use super::{Client, TlsConnector};
use crate::remoting::codes::response;
use std::io;
use std::time::{Duration, Instant};

/// How a [`NameServerSet`] picks the server for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Java's clients: start at a random index, move to the next when one fails and stay there.
    RandomStartRoundRobin,
    /// Always the server at this index; no failover.
    Pinned(usize),
    /// Every call starts at the next index (call k at index k mod n), like the Go client.
    RoundRobin,
    /// The server with the fewest connections (the stats extension); those without stats rank
    /// after, unreachable ones last, ties random. Re-ranked after a failover or `refresh`.
    LeastLoaded { refresh: Duration },
}

/// The `--strategy` values `rmq-admin` and `rmq-bench` take.
const STRATEGY_NAMES: &str = "random|pinned:N|pinned:HOST:PORT|round-robin|fewest";

impl Strategy {
    /// Reads `--strategy` (`pinned:N` counts from 0 into `addrs`; `fewest` ranks every time).
    pub fn parse(text: &str, addrs: &[String]) -> Result<Strategy, String> {
        let text = text.trim();
        Ok(match text {
            "random" => Strategy::RandomStartRoundRobin,
            "round-robin" => Strategy::RoundRobin,
            "fewest" => Strategy::LeastLoaded {
                refresh: Duration::ZERO,
            },
            _ => {
                let which = text.strip_prefix("pinned:").ok_or_else(|| {
                    format!("unknown strategy {text:?}: use one of {STRATEGY_NAMES}")
                })?;
                let index = which.parse::<usize>().ok();
                let index = index.or_else(|| addrs.iter().position(|a| a == which));
                let Some(i) = index.filter(|i| *i < addrs.len()) else {
                    return Err(format!(
                        "pinned:{which} names no server of the list ({}): give an index from 0 \
                         to {} or one of its addresses",
                        addrs.join(";"),
                        addrs.len().saturating_sub(1)
                    ));
                };
                Strategy::Pinned(i)
            }
        })
    }

    /// The name [`Strategy::parse`] reads (`pinned:N` with the index).
    pub fn name(&self) -> String {
        match self {
            Strategy::RandomStartRoundRobin => "random".into(),
            Strategy::Pinned(i) => format!("pinned:{i}"),
            Strategy::RoundRobin => "round-robin".into(),
            Strategy::LeastLoaded { .. } => "fewest".into(),
        }
    }
}

/// How one server did in the last least-loaded ranking (exposed for tools and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Load {
    Connections(i64),
    /// The server answered, but not the stats extension (code given).
    NoStats(i32),
    Unreachable,
}

/// splitmix64: tiny, seedable, good enough to pick a start index.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A seed that differs between processes and calls (std's random hash keys plus the clock).
fn fresh_seed() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let nanos = now.map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()))
}

/// Splits `host:port;host:port` (also accepts `,` and whitespace) into addresses.
pub fn parse_addr_list(list: &str) -> Vec<String> {
    list.split([';', ',', ' ', '\t', '\n'])
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

pub struct NameServerSet {
    addrs: Vec<String>,
    strategy: Strategy,
    timeout: Duration,
    /// Connections are made over TLS when set.
    tls: Option<TlsConnector>,
    conns: Vec<Option<Client>>,
    rng: Rng,
    /// RandomStartRoundRobin: index of the server in use (chosen on first use).
    sticky: Option<usize>,
    /// RoundRobin: calls started so far.
    calls: usize,
    /// LeastLoaded: server indices best first, with their loads, and when that was measured.
    ranking: Vec<(usize, Load)>,
    ranked_at: Option<Instant>,
    last_used: Option<usize>,
}

impl NameServerSet {
    /// Fails on an empty list or a pinned index out of range.
    pub fn new(addrs: Vec<String>, strategy: Strategy) -> io::Result<NameServerSet> {
        Self::with_seed(addrs, strategy, fresh_seed())
    }

    /// A set whose random choices are fixed by `seed` (tests).
    pub fn with_seed(
        addrs: Vec<String>,
        strategy: Strategy,
        seed: u64,
    ) -> io::Result<NameServerSet> {
        let n = addrs.len();
        let invalid = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        match strategy {
            _ if n == 0 => invalid("empty name server list".into()),
            Strategy::Pinned(i) if i >= n => {
                invalid(format!("pinned index {i} outside a list of {n}"))
            }
            _ => Ok(NameServerSet {
                addrs,
                strategy,
                timeout: Duration::from_secs(3),
                tls: None,
                conns: (0..n).map(|_| None).collect(),
                rng: Rng(seed),
                sticky: None,
                calls: 0,
                ranking: Vec::new(),
                ranked_at: None,
                last_used: None,
            }),
        }
    }

    /// Connect and per-call timeout (default 3 s, RocketMQ's default for admin calls).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        for c in self.conns.iter_mut().flatten() {
            c.set_timeout(timeout);
        }
    }

    /// New connections use TLS (`Some`) or not; open ones are kept.
    pub fn set_tls(&mut self, tls: Option<TlsConnector>) {
        self.tls = tls;
    }

    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Address of the server that answered the last successful call.
    pub fn last_addr(&self) -> Option<&str> {
        self.last_used.map(|i| self.addrs[i].as_str())
    }

    /// The latest least-loaded ranking (empty for other strategies or before the first call).
    pub fn ranking(&self) -> Vec<(&str, Load)> {
        self.ranking
            .iter()
            .map(|(i, l)| (self.addrs[*i].as_str(), l.clone()))
            .collect()
    }

    /// The indices the next call would try, in order (LeastLoaded may rank first).
    pub fn next_order(&mut self) -> Vec<usize> {
        self.order(false)
    }

    fn rotated(&self, start: usize) -> Vec<usize> {
        let n = self.addrs.len();
        (0..n).map(|k| (start + k) % n).collect()
    }

    fn order(&mut self, advance: bool) -> Vec<usize> {
        let n = self.addrs.len();
        match self.strategy {
            Strategy::Pinned(i) => vec![i],
            Strategy::RandomStartRoundRobin => {
                let start = *self.sticky.get_or_insert_with(|| self.rng.below(n));
                self.rotated(start)
            }
            Strategy::RoundRobin => {
                let start = self.calls % n;
                if advance {
                    self.calls = self.calls.wrapping_add(1);
                }
                self.rotated(start)
            }
            Strategy::LeastLoaded { refresh } => {
                if self.ranked_at.map_or(true, |at| at.elapsed() >= refresh) {
                    self.rank();
                }
                self.ranking.iter().map(|(i, _)| *i).collect()
            }
        }
    }

    fn rank(&mut self) {
        let n = self.addrs.len();
        // Shuffled, then a stable sort: clients starting together do not all pick one server.
        let mut shuffled: Vec<usize> = (0..n).collect();
        for k in (1..n).rev() {
            let j = self.rng.below(k + 1);
            shuffled.swap(k, j);
        }
        let mut ranking = Vec::with_capacity(n);
        for i in shuffled {
            let load = match self.attempt(i, |c| c.stats()) {
                Ok(s) => Load::Connections(s.connections),
                Err(ClientError::Response { code, .. }) if code != response::GO_AWAY => {
                    Load::NoStats(code)
                }
                Err(_) => Load::Unreachable,
            };
            ranking.push((i, load));
        }
        ranking.sort_by_key(|(_, load)| match load {
            Load::Connections(c) => (0, *c),
            Load::NoStats(_) => (1, 0),
            Load::Unreachable => (2, 0),
        });
        self.ranking = ranking;
        self.ranked_at = Some(Instant::now());
    }

    /// One attempt on server `i`; a reused connection failing other than by timeout is reopened
    /// once (a healthy server may have closed it as idle).
    fn attempt<T>(
        &mut self,
        i: usize,
        mut f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut reused = self.conns[i].is_some();
        loop {
            let client = match &mut self.conns[i] {
                Some(c) => c,
                slot @ None => {
                    let (addr, tls) = (&self.addrs[i], self.tls.as_ref());
                    let c =
                        Client::connect_with(addr, self.timeout, tls).map_err(ClientError::Io)?;
                    slot.insert(c)
                }
            };
            match f(client) {
                Ok(v) => return Ok(v),
                Err(e @ ClientError::Response { .. }) if !e.is_failover() => return Err(e),
                Err(e) => {
                    self.conns[i] = None;
                    let retry = reused
                        && matches!(&e, ClientError::Io(io) if io.kind() != io::ErrorKind::TimedOut);
                    if !retry {
                        return Err(e);
                    }
                    reused = false;
                }
            }
        }
    }

    /// Runs `f` on the strategy's server, moving on after the errors `try_next` accepts; fails
    /// with every error met, by server index.
    pub fn call_until<T>(
        &mut self,
        mut f: impl FnMut(&mut Client) -> Result<T, ClientError>,
        try_next: impl Fn(&ClientError) -> bool,
    ) -> Result<T, Vec<(usize, ClientError)>> {
        let order = self.order(true);
        let mut failures = Vec::new();
        for (attempt, &i) in order.iter().enumerate() {
            match self.attempt(i, &mut f) {
                Err(e) if try_next(&e) => failures.push((i, e)),
                result => {
                    self.last_used = Some(i);
                    match self.strategy {
                        Strategy::RandomStartRoundRobin => self.sticky = Some(i),
                        Strategy::LeastLoaded { .. } if attempt > 0 => self.ranked_at = None,
                        _ => {}
                    }
                    return result.map_err(|e| {
                        failures.push((i, e));
                        failures
                    });
                }
            }
        }
        if matches!(self.strategy, Strategy::LeastLoaded { .. }) {
            self.ranked_at = None;
        }
        Err(failures)
    }

    /// Runs `f` on server `i`, whatever the strategy, without failover.
    pub fn call_at<T>(
        &mut self,
        i: usize,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if i >= self.addrs.len() {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no server {i} in a list of {}", self.addrs.len()),
            )));
        }
        self.attempt(i, f)
    }

    /// Runs `f` on every server, in list order (writes and `--all` reads).
    pub fn call_each<T>(
        &mut self,
        mut f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Vec<(usize, Result<T, ClientError>)> {
        (0..self.addrs.len())
            .map(|i| (i, self.attempt(i, &mut f)))
            .collect()
    }

    /// The server for the next call, for tools that open their own connections.
    pub fn choose(&mut self) -> usize {
        self.order(true).first().copied().unwrap_or(0)
    }
}
