//! CIDR ranges of the allow lists, matching IPv4-mapped IPv6 peers too, and the allow-list
//! check both ports make (the name server's and the controller's).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    /// Host bits cleared.
    network: IpAddr,
    prefix_len: u8,
}

impl Cidr {
    /// `a.b.c.d/n`, `v6/n`, or a bare address; host bits are cleared (10.1.2.3/8 = 10.0.0.0/8).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let text = s.trim();
        let (addr_text, prefix_text) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR"))?;
        let max = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        let prefix_len = match prefix_text {
            None => max,
            Some(p) => {
                // Digits only: u8::from_str would also take "+8".
                if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("{text:?} has a malformed prefix length"));
                }
                match p.parse::<u8>() {
                    Ok(n) if n <= max => n,
                    _ => return Err(format!("{text:?}: prefix length must be 0..={max}")),
                }
            }
        };
        let bits = as_v6(addr) & mask(prefix_len, addr);
        let network = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(bits as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(bits)),
        };
        Ok(Cidr {
            network,
            prefix_len,
        })
    }

    /// A comma-separated allow list (`NamesrvConfig::set` refused entries that do not parse).
    pub fn parse_list(text: &str) -> Vec<Cidr> {
        text.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .filter_map(|e| Cidr::parse(e).ok())
            .collect()
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        as_v6(ip) & mask(self.prefix_len, self.network) == as_v6(self.network)
    }
}

/// Whether `peer` is inside `list` (an empty list, or no peer: in-process, lets it in).
pub fn allows(list: &[Cidr], peer: Option<IpAddr>) -> bool {
    match peer {
        Some(ip) => list.is_empty() || list.iter().any(|c| c.contains(ip)),
        None => true,
    }
}

/// Request `code` from `peer` past the allow list `key` (`list`): `Err` holds the remark both
/// ports answer `NO_PERMISSION` with.
pub fn check_allowed(
    key: &str,
    list: &[Cidr],
    code: i32,
    peer: Option<IpAddr>,
) -> Result<(), String> {
    match allows(list, peer) {
        true => Ok(()),
        false => Err(format!(
            "request {code} is not allowed from this address ({key})"
        )),
    }
}

/// Every address as IPv6, IPv4 ones mapped, so one comparison matches both families.
fn as_v6(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The mask of a prefix of `network`'s family, over the IPv6 form.
fn mask(prefix_len: u8, network: IpAddr) -> u128 {
    let bits = u32::from(prefix_len) + if network.is_ipv4() { 96 } else { 0 };
    u128::MAX.checked_shl(128 - bits.min(128)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl std::fmt::Display for Cidr {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}/{}", self.network, self.prefix_len)
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_matches_ipv4_ranges() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains(ip("10.1.2.3")));
        assert!(net.contains(ip("10.1.255.255")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(!net.contains(ip("::1")));
        let host = Cidr::parse("127.0.0.1").unwrap();
        assert_eq!(host, Cidr::parse("127.0.0.1/32").unwrap());
        assert!(host.contains(ip("127.0.0.1")));
        assert!(!host.contains(ip("127.0.0.2")));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        // Host bits are cleared.
        assert_eq!(
            Cidr::parse("10.1.2.3/8").unwrap(),
            Cidr::parse("10.0.0.0/8").unwrap()
        );
        assert_eq!(Cidr::parse("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
    }

    #[test]
    fn cidr_matches_ipv6_ranges() {
        let net = Cidr::parse("2001:db8::/32").unwrap();
        assert!(net.contains(ip("2001:db8:1::5")));
        assert!(!net.contains(ip("2001:db9::1")));
        assert!(!net.contains(ip("10.0.0.1")));
        let host = Cidr::parse("::1").unwrap();
        assert_eq!(host, Cidr::parse("::1/128").unwrap());
        assert!(host.contains(ip("::1")));
        assert!(!host.contains(ip("::2")));
        assert!(Cidr::parse("::/0").unwrap().contains(ip("fe80::1")));
    }

    #[test]
    fn cidr_matches_ipv4_mapped_peers_against_ipv4_ranges() {
        let net = Cidr::parse("192.168.0.0/16").unwrap();
        assert!(net.contains(ip("::ffff:192.168.3.4")));
        assert!(!net.contains(ip("::ffff:192.169.3.4")));
        let mapped = Cidr::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.contains(ip("10.9.9.9")));
        assert!(!mapped.contains(ip("11.0.0.1")));
    }

    #[test]
    fn cidr_rejects_bad_input() {
        for bad in [
            "",
            "/8",
            "10.0.0.0/",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/+8",
            "10.0.0.0/-1",
            "10.0.0/8",
            "256.0.0.1",
            "host.example",
            "10.0.0.0/8/8",
            "::1/1x",
            "1.2.3.4 /8",
            "fe80::1%eth0",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad:?}");
        }
    }
}
