//! The name servers of `-n` (or the controllers of `-a`) and how a command reaches them.
//!
//! Reads go to one server: a random one first (as Java clients pick), the next of the list
//! when it cannot be reached or is not a name server, so one stale address in a list does not
//! break reads. Writes go to every server in list order, one fresh connection each, because
//! name servers do not replicate. Each failure is kept with its address and explained
//! ([`Failure`]).

use crate::outcome::{Failure, Role};
use rmq_namesrv::client::{Client, ClientError};
use std::time::Duration;

pub struct Peers {
    addrs: Vec<String>,
    timeout: Duration,
    role: Role,
}

/// A start index that differs between runs (std's per-process random hash keys).
fn random_below(n: usize) -> usize {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() % n.max(1) as u64) as usize
}

impl Peers {
    pub fn new(addrs: Vec<String>, timeout: Duration) -> Peers {
        Peers {
            addrs,
            timeout,
            role: Role::NameServer,
        }
    }

    /// Controllers (`-a`): the same reach, failures explained as a controller's.
    pub fn controllers(addrs: Vec<String>, timeout: Duration) -> Peers {
        Peers {
            addrs,
            timeout,
            role: Role::Controller,
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Connects to `addr` and runs `f` on the connection.
    fn on<T>(
        &self,
        addr: &str,
        f: &mut impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, Failure> {
        let explain = |e: &ClientError| Failure::from_client_as(self.role, addr, e);
        let mut client =
            Client::connect(addr, self.timeout).map_err(|e| explain(&ClientError::Io(e)))?;
        f(&mut client).map_err(|e| explain(&e))
    }

    /// Runs `f` on one server, trying the next while failures say another may do better.
    /// Returns the address that answered with the value, or every failure.
    pub fn read<T>(
        &self,
        mut f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<(String, T), Vec<Failure>> {
        let n = self.addrs.len();
        let start = random_below(n);
        let mut failures = Vec::new();
        for k in 0..n {
            let addr = &self.addrs[(start + k) % n];
            match self.on(addr, &mut f) {
                Ok(v) => return Ok((addr.clone(), v)),
                Err(failure) if failure.try_next() => failures.push(failure),
                Err(failure) => return Err(vec![failure]),
            }
        }
        Err(failures)
    }

    /// Runs `f` on every server in list order: one result per address.
    pub fn each<T>(
        &self,
        mut f: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Vec<(String, Result<T, Failure>)> {
        self.addrs
            .iter()
            .map(|addr| (addr.clone(), self.on(addr, &mut f)))
            .collect()
    }
}
