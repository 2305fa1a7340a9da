//! Valid names, broker addresses and topic configs, checked at the wire so that no value a
//! client cannot use ends up in a route (Java checks none); docs/operations.md lists the rules.

use super::header::{NameLimits, ParseError};

/// The name characters, as remarks show them.
const NAME_CHARS_TEXT: &str = "A-Z a-z 0-9 and . _ - % |";

/// `PermName`'s bits: inherit 1, write 2, read 4, priority 8.
const PERM_BITS: i32 = 0b1111;

impl NameLimits {
    /// Cluster and broker names and addresses: Java takes any length; we bound it.
    fn check_length(&self, field: &'static str, value: &str) -> Result<(), ParseError> {
        if value.len() > self.max_name_length {
            let max = self.max_name_length;
            return invalid(format!("{field} is longer than {max} bytes"));
        }
        Ok(())
    }

    pub(crate) fn check_broker_name(
        &self,
        field: &'static str,
        value: &str,
    ) -> Result<(), ParseError> {
        self.check_length(field, value)?;
        if value.is_empty() {
            return invalid(format!("{field} is empty"));
        }
        let is_name_char =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '%' | '|');
        match value.chars().find(|c| !is_name_char(*c)) {
            Some(ch) => invalid(format!(
                "{field} contains {ch:?}; allowed: {NAME_CHARS_TEXT}"
            )),
            None => Ok(()),
        }
    }

    /// A broker or HA address: bounded, and `host:port`.
    pub(crate) fn check_address(&self, field: &'static str, value: &str) -> Result<(), ParseError> {
        self.check_length(field, value)?;
        let bad = |reason| invalid(format!("{field} {value:?} is not host:port: {reason}"));
        let Some((host, port)) = value.rsplit_once(':') else {
            return bad("no port");
        };
        let port_ok = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && (1..=65_535).contains(&port.parse::<u32>().unwrap_or(0));
        if !port_ok {
            return bad("the port must be 1..=65535");
        }
        if host.is_empty() {
            return bad("no host");
        }
        if !valid_host(host) {
            return bad("the host must be a DNS name, an IPv4 address or an IPv6 literal");
        }
        Ok(())
    }

    /// Topics reported by brokers: Java takes them as they are; we only bound their length.
    pub(super) fn check_topic_name(&self, topic: &str) -> Result<(), ParseError> {
        if topic.is_empty() || topic.len() > self.max_topic_name_length {
            let (len, max) = (topic.len(), self.max_topic_name_length);
            return invalid(format!(
                "topic name of {len} bytes is outside 1..={max} (maxTopicNameLength)"
            ));
        }
        Ok(())
    }

    /// `[readQueueNums, writeQueueNums, perm]`; inlined: a changed registration checks each.
    #[inline]
    pub(super) fn check_topic_values(
        &self,
        topic: &str,
        [read, write, perm]: [i32; 3],
    ) -> Result<(), ParseError> {
        let max = self.max_queue_nums;
        for (field, value) in [("readQueueNums", read), ("writeQueueNums", write)] {
            if !(0..=max).contains(&value) {
                return invalid(format!(
                    "topic {topic}: {field} {value} is outside 0..={max} (maxQueueNums)"
                ));
            }
        }
        if perm & !PERM_BITS != 0 {
            return invalid(format!(
                "topic {topic}: perm {perm} is not made of the permission bits inherit 1, write 2, \
                 read 4, priority 8 (0..=15)"
            ));
        }
        Ok(())
    }

    /// Admin calls that create or delete a topic validate its name as Java's TopicValidator.
    pub(super) fn validate_topic(&self, topic: &str) -> Result<(), ParseError> {
        let legal = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-');
        let remark = if topic.trim().is_empty() {
            "The specified topic is blank."
        } else if !topic.bytes().all(legal) {
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        } else if topic.len() > self.max_topic_name_length {
            "The specified topic is longer than topic max length."
        } else {
            return Ok(());
        };
        invalid(remark.to_string())
    }
}

fn invalid<T>(remark: String) -> Result<T, ParseError> {
    Err(ParseError::Invalid(remark))
}

fn valid_host(host: &str) -> bool {
    let is_ipv6_byte = |b: u8| b.is_ascii_hexdigit() || b == b':' || b == b'.';
    if let Some(inner) = host.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return false;
        };
        // An optional zone: `fe80::1%eth0`.
        let (literal, zone) = match inner.split_once('%') {
            Some((l, z)) => (l, Some(z)),
            None => (inner, None),
        };
        let zone_ok = match zone {
            None => true,
            Some(z) => {
                !z.is_empty()
                    && z.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            }
        };
        return literal.contains(':') && literal.bytes().all(is_ipv6_byte) && zone_ok;
    }
    if host.contains(':') {
        return host.bytes().all(is_ipv6_byte);
    }
    host.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(value: &str) -> Result<(), String> {
        let limits = NameLimits::default();
        limits
            .check_broker_name("brokerName", value)
            .map_err(|e| e.to_string())
    }

    fn address(value: &str) -> Result<(), String> {
        let limits = NameLimits::default();
        limits
            .check_address("brokerAddr", value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn names_real_peers_use_pass() {
        for ok in [
            "DefaultCluster",
            "broker-a",
            "broker_b",
            "ip-10-0-0-1.ec2.internal",
            "DEFAULT_BROKER",
            "rocketmq-broker-0",
            "a|b%c",
        ] {
            assert_eq!(name(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn names_with_separators_quotes_or_control_characters_are_refused_by_field() {
        assert_eq!(name(""), Err("brokerName is empty".into()));
        assert_eq!(
            name("a,b"),
            Err("brokerName contains ','; allowed: A-Z a-z 0-9 and . _ - % |".into())
        );
        for bad in [
            "a\"b", "a\0b", "a b", "a:b", "a/b", "a\\b", "brøker", "a\nb",
        ] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn addresses_as_java_and_rust_brokers_build_them_pass() {
        for ok in [
            "10.0.0.1:10911",
            "172.21.156.94:10911",
            "127.0.0.1:1",
            "broker-0.broker.svc.cluster.local:10911",
            "localhost:65535",
            "[::1]:10911",
            "[fe80::1%eth0]:10911",
            "[2001:db8::10.0.0.1]:10911",
            "2001:db8::1:10911",
        ] {
            assert_eq!(address(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn addresses_that_break_route_parsers_are_refused_with_the_reason() {
        assert_eq!(
            address("10.0.0.1"),
            Err("brokerAddr \"10.0.0.1\" is not host:port: no port".into())
        );
        assert_eq!(
            address("6.6.6.6:10911,\"\0"),
            Err(
                "brokerAddr \"6.6.6.6:10911,\\\"\\0\" is not host:port: the port must be 1..=65535"
                    .into()
            )
        );
        assert_eq!(
            address(":10911"),
            Err("brokerAddr \":10911\" is not host:port: no host".into())
        );
        for bad in [
            "h:0",
            "h:65536",
            "h:+1",
            "h:",
            "a,b:1",
            "a b:1",
            "a\"b:1",
            "[::1:1",
            "[]:1",
            "[fe80::1%]:1",
            "[fe80::1%e/0]:1",
            "::g:1",
            "h\0:1",
        ] {
            assert!(address(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn topic_values_must_fit_queue_bounds_and_the_permission_bits() {
        let limits = NameLimits {
            max_queue_nums: 1024,
            ..NameLimits::default()
        };
        let check = |values| {
            limits
                .check_topic_values("T", values)
                .map_err(|e| e.to_string())
        };
        assert_eq!(check([0, 0, 0]), Ok(()));
        assert_eq!(check([1024, 8, 15]), Ok(()));
        assert_eq!(
            check([-1, 8, 6]),
            Err("topic T: readQueueNums -1 is outside 0..=1024 (maxQueueNums)".into())
        );
        assert_eq!(
            check([8, i32::MAX, 6]),
            Err("topic T: writeQueueNums 2147483647 is outside 0..=1024 (maxQueueNums)".into())
        );
        assert_eq!(
            check([8, 8, 255]),
            Err("topic T: perm 255 is not made of the permission bits inherit 1, write 2, read 4, priority 8 (0..=15)".into())
        );
        assert!(check([8, 8, -1]).is_err());
        assert!(check([8, 8, 16]).is_err());
    }
}
