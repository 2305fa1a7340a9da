//! Which name server each route client uses (`--strategy`), chosen through the library's
//! `NameServerSet` as a fleet of clients would choose: random gives every client its own set
//! (each Java client process picks its own start); `fewest` waits until the chosen server
//! counts the new connection so that the next choice sees it.

use rmq_namesrv::client::nameserver_set::Load;
use rmq_namesrv::client::{NameServerSet, Strategy, TlsConnector};
use std::time::{Duration, Instant};

/// How long `fewest` waits for a server to count a connection just opened.
const COUNTED_WITHIN: Duration = Duration::from_secs(5);

/// One set for every client (under random each client gets its own).
pub struct Picker(NameServerSet);

impl Picker {
    /// A picker for `strategy` (None: round-robin); `fewest` asks the servers over `tls`.
    pub fn new(
        addrs: &[String],
        strategy: Option<Strategy>,
        tls: Option<TlsConnector>,
    ) -> Result<Picker, String> {
        let strategy = strategy.unwrap_or(Strategy::RoundRobin);
        let mut set = NameServerSet::new(addrs.to_vec(), strategy).map_err(|e| e.to_string())?;
        set.set_tls(tls);
        Ok(Picker(set))
    }

    pub fn strategy(&self) -> Strategy {
        self.0.strategy()
    }

    /// The server (index into the list) of the next client.
    pub fn next(&mut self) -> Result<usize, String> {
        if self.strategy() == Strategy::RandomStartRoundRobin {
            // A random choice asks no server: no TLS needed.
            return Ok(Picker::new(self.0.addrs(), Some(self.strategy()), None)?
                .0
                .choose());
        }
        Ok(self.0.choose())
    }

    /// Called once a client's connection to server `s` is open: under `fewest`, waits until
    /// `s` counts it (a server without the stats extension is not waited for).
    pub fn opened(&mut self, s: usize) -> Result<(), String> {
        if !matches!(self.strategy(), Strategy::LeastLoaded { .. }) {
            return Ok(());
        }
        let addr = self.0.addrs()[s].clone();
        let Some(before) = self.0.ranking().iter().find_map(|(a, load)| match load {
            Load::Connections(n) if *a == addr.as_str() => Some(*n),
            _ => None,
        }) else {
            return Ok(());
        };
        let deadline = Instant::now() + COUNTED_WITHIN;
        loop {
            let now = self.0.call_at(s, |c| c.stats()).map(|st| st.connections);
            if now.as_ref().is_ok_and(|n| *n > before) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{addr} did not count a new client connection within {COUNTED_WITHIN:?} \
                     ({before} before, now {now:?})"
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
