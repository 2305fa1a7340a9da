//! The servers of `-n` (or `-a`): a read asks one picked by `--strategy`, a write every one.

use crate::cli::Invocation;
use crate::outcome::{Failure, Outcome, Role};
use rmq_namesrv::client::tls::NO_VERIFY_WARNING;
use rmq_namesrv::client::{Client, ClientError, NameServerSet, Strategy, TlsConnector};
use std::io;
use std::time::Duration;

pub struct Peers {
    set: NameServerSet,
    pub timeout: Duration,
    pub role: Role,
    /// `--tls`: every connection, the set's and [`Peers::connect`]'s, is TLS.
    tls: Option<TlsConnector>,
}

impl Peers {
    pub fn of(inv: &Invocation, addrs: Vec<String>, role: Role) -> Result<Peers, Outcome> {
        let strategy = match &inv.strategy {
            Some(text) => Strategy::parse(text, &addrs).map_err(Outcome::usage)?,
            None => Strategy::RandomStartRoundRobin,
        };
        let mut set =
            NameServerSet::new(addrs, strategy).map_err(|e| Outcome::usage(e.to_string()))?;
        set.set_timeout(inv.timeout);
        let tls = match &inv.tls {
            None => None,
            Some(options) => {
                let connector = options.connector().map_err(Outcome::usage)?;
                // Once per run: getSyncStateSet -c opens the name servers' set too.
                static WARNED: std::sync::Once = std::sync::Once::new();
                if options.trust.is_none() {
                    WARNED.call_once(|| eprintln!("rmq-admin: {NO_VERIFY_WARNING}"));
                }
                Some(connector)
            }
        };
        set.set_tls(tls.clone());
        Ok(Peers {
            set,
            timeout: inv.timeout,
            role,
            tls,
        })
    }

    /// A connection of its own to `addr` (a controller the others named).
    pub fn connect(&self, addr: &str) -> io::Result<Client> {
        Client::connect_with(addr, self.timeout, self.tls.as_ref())
    }

    fn explain(&self, i: usize, e: &ClientError) -> Failure {
        Failure::from_client_as(self.role, &self.set.addrs()[i], e)
    }

    /// The address that answered, or the outcome explaining the failures.
    pub fn read<T>(
        &mut self,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<(String, T), Outcome> {
        let role = self.role;
        let try_next = |e: &ClientError| Failure::from_client_as(role, "", e).try_next();
        match self.set.call_until(f, try_next) {
            Ok(v) => Ok((self.set.last_addr().unwrap_or_default().to_string(), v)),
            Err(errors) => {
                let mut failures: Vec<Failure> =
                    errors.iter().map(|(i, e)| self.explain(*i, e)).collect();
                if failures.last().is_some_and(|f| !f.try_next()) {
                    failures.drain(..failures.len() - 1);
                }
                Err(Outcome::from_failures(role, &failures))
            }
        }
    }
    pub fn each<T>(
        &mut self,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Vec<(String, Result<T, Failure>)> {
        let results = self.set.call_each(f);
        results
            .into_iter()
            .map(|(i, r)| {
                let addr = self.set.addrs()[i].clone();
                (addr, r.map_err(|e| self.explain(i, &e)))
            })
            .collect()
    }

    /// Every server in list order: the answers by address, and the failures.
    pub fn ask_all<T>(
        &mut self,
        f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> (Vec<(String, T)>, Vec<Failure>) {
        let (mut answers, mut failures) = (Vec::new(), Vec::new());
        for (addr, r) in self.each(f) {
            match r {
                Ok(v) => answers.push((addr, v)),
                Err(failure) => failures.push(failure),
            }
        }
        (answers, failures)
    }
}
