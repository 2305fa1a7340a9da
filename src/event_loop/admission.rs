//! Who may take a connection slot: the overall cap, an optional cap per peer address, and a
//! reserve of slots that only addresses which completed a frame recently may use, so that a
//! flood of connections that never finish a request cannot lock out the working clients.
//! One record per address, changed on accept, first whole frame and close (never per request).

use super::Limits;
use std::collections::HashMap;
use std::net::IpAddr;

/// Records kept for addresses with no open connection, beyond the open ones: past this a
/// closed address is forgotten at once (it only loses its standing as a recent client).
const CLOSED_RECORDS_MAX: usize = 65_536;

const PRUNE_EVERY_MS: u64 = 10_000;

#[derive(Debug, Default, Clone, Copy)]
struct AddrRecord {
    open: u32,
    /// Open connections that have completed a frame.
    open_served: u32,
    /// When a closed connection from this address last completed a frame.
    last_frame_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Full,
    PerAddress,
    Reserved,
}

impl Refusal {
    pub fn describe(self, limits: &Limits) -> String {
        match self {
            Refusal::Full => format!("{} connections open, the limit", limits.max_connections),
            Refusal::PerAddress => format!(
                "its address holds {} connections, the per-address limit",
                limits.max_per_address
            ),
            Refusal::Reserved => format!(
                "the last {} of {} slots are kept for addresses that completed a request in the last {} s",
                limits.reserved_for_recent,
                limits.max_connections,
                limits.recent_window_ms / 1000
            ),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Peers {
    by_addr: HashMap<IpAddr, AddrRecord>,
    open_total: usize,
    next_prune_ms: u64,
}

/// One form per address: an IPv4 peer seen through an IPv6 listener counts as itself.
fn key(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Peers {
    pub fn check(&self, ip: IpAddr, limits: &Limits, now_ms: u64) -> Result<(), Refusal> {
        if self.open_total >= limits.max_connections {
            return Err(Refusal::Full);
        }
        let record = self.by_addr.get(&key(ip));
        if limits.max_per_address > 0
            && record.is_some_and(|r| r.open as usize >= limits.max_per_address)
        {
            return Err(Refusal::PerAddress);
        }
        let general = limits
            .max_connections
            .saturating_sub(limits.reserved_for_recent);
        let recent = record.is_some_and(|r| {
            r.open_served > 0
                || r.last_frame_ms
                    .is_some_and(|at| now_ms.saturating_sub(at) <= limits.recent_window_ms)
        });
        if self.open_total >= general && !recent {
            return Err(Refusal::Reserved);
        }
        Ok(())
    }

    pub fn opened(&mut self, ip: IpAddr) {
        self.open_total += 1;
        self.by_addr.entry(key(ip)).or_default().open += 1;
    }

    /// A connection from `ip` completed its first frame.
    pub fn first_frame(&mut self, ip: IpAddr) {
        if let Some(r) = self.by_addr.get_mut(&key(ip)) {
            r.open_served += 1;
        }
    }

    /// `last_frame_ms`: when the closed connection last completed a frame, if it ever did.
    pub fn closed(&mut self, ip: IpAddr, last_frame_ms: Option<u64>) {
        self.open_total = self.open_total.saturating_sub(1);
        let many = self.by_addr.len() > self.open_total + CLOSED_RECORDS_MAX;
        let ip = key(ip);
        let Some(r) = self.by_addr.get_mut(&ip) else {
            return;
        };
        r.open = r.open.saturating_sub(1);
        if let Some(at) = last_frame_ms {
            r.open_served = r.open_served.saturating_sub(1);
            r.last_frame_ms = Some(r.last_frame_ms.map_or(at, |old| old.max(at)));
        }
        if r.open == 0 && (r.last_frame_ms.is_none() || many) {
            self.by_addr.remove(&ip);
        }
    }

    /// Drops stale records of addresses with nothing open.
    pub fn prune(&mut self, now_ms: u64, window_ms: u64) {
        if now_ms < self.next_prune_ms {
            return;
        }
        self.next_prune_ms = now_ms + PRUNE_EVERY_MS;
        self.by_addr.retain(|_, r| {
            r.open > 0
                || r.last_frame_ms
                    .is_some_and(|at| now_ms.saturating_sub(at) <= window_ms)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, per_address: usize, reserved: usize) -> Limits {
        Limits {
            max_connections: max,
            max_per_address: per_address,
            reserved_for_recent: reserved,
            recent_window_ms: 1000,
            ..Limits::default()
        }
    }

    impl Peers {
        fn open_from(&self, ip: IpAddr) -> usize {
            self.by_addr.get(&key(ip)).map_or(0, |r| r.open as usize)
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn the_reserve_is_for_addresses_that_completed_a_frame_recently() {
        let l = limits(3, 0, 1);
        let mut peers = Peers::default();
        // A client completes a frame and leaves.
        peers.opened(ip(1));
        peers.first_frame(ip(1));
        peers.closed(ip(1), Some(100));
        // Two newcomers take the general slots; a third newcomer finds only the reserve.
        peers.opened(ip(2));
        peers.opened(ip(3));
        assert_eq!(peers.check(ip(4), &l, 200), Err(Refusal::Reserved));
        // The working client may come back into it, within the window and not after.
        assert_eq!(peers.check(ip(1), &l, 200), Ok(()));
        assert_eq!(peers.check(ip(1), &l, 1200), Err(Refusal::Reserved));
        peers.opened(ip(1));
        assert_eq!(peers.check(ip(1), &l, 200), Err(Refusal::Full));
    }

    #[test]
    fn an_open_connection_that_completed_a_frame_keeps_its_address_recent() {
        let l = limits(2, 0, 1);
        let mut peers = Peers::default();
        peers.opened(ip(1));
        peers.first_frame(ip(1));
        assert_eq!(peers.check(ip(1), &l, 1_000_000), Ok(()));
        assert_eq!(peers.check(ip(2), &l, 1_000_000), Err(Refusal::Reserved));
    }

    #[test]
    fn the_per_address_cap_counts_open_connections_only() {
        let l = limits(100, 2, 0);
        let mut peers = Peers::default();
        peers.opened(ip(1));
        peers.opened(ip(1));
        assert_eq!(peers.check(ip(1), &l, 0), Err(Refusal::PerAddress));
        assert_eq!(peers.check(ip(2), &l, 0), Ok(()));
        peers.closed(ip(1), None);
        assert_eq!(peers.check(ip(1), &l, 0), Ok(()));
        assert_eq!(peers.open_from(ip(1)), 1);
    }

    #[test]
    fn ipv4_mapped_addresses_are_the_same_peer() {
        let mut peers = Peers::default();
        peers.opened(ip(7));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(peers.open_from(mapped), 1);
    }

    #[test]
    fn records_of_gone_addresses_are_dropped() {
        let mut peers = Peers::default();
        peers.opened(ip(1));
        peers.closed(ip(1), None);
        assert!(peers.by_addr.is_empty(), "never served: forgotten at once");
        peers.opened(ip(2));
        peers.first_frame(ip(2));
        peers.closed(ip(2), Some(10));
        peers.prune(500, 1000);
        assert_eq!(peers.by_addr.len(), 1, "recent: kept");
        peers.prune(20_000, 1000);
        assert!(peers.by_addr.is_empty(), "stale: swept");
    }
}
