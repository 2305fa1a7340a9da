//! The loop's limits (`maxConnections` kept under the open-file limit, raised as far as
//! allowed) and the settings read per frame, from the config; refreshed after updates.

use crate::config::NamesrvConfig;
use crate::event_loop;
use crate::event_loop::Limits;
use crate::remoting::command::DecodeLimits;
use log::{debug, info, warn};

pub(super) fn loop_limits(c: &NamesrvConfig, descriptors: Option<u64>) -> Limits {
    let max_connections = connection_cap(c.max_connections, descriptors);
    Limits {
        write_high_water: c.conn_write_high_water as usize,
        write_hard_cap: c.conn_write_hard_cap as usize,
        idle_ms: (c.server_channel_max_idle_time_seconds.max(0) as u64) * 1000,
        frame_timeout_ms: c.frame_read_timeout_millis,
        max_buffered: usize::try_from(c.max_buffered_bytes).unwrap_or(usize::MAX),
        max_connections,
        max_per_address: c.max_connections_per_address as usize,
        reserved_for_recent: max_connections * c.reserved_connections_percent as usize / 100,
        bulk_line_limit: c.registration_backlog_limit as usize,
        listen_backlog: c.server_socket_backlog,
        ..Limits::default()
    }
}

/// Descriptors kept free beside the connections.
pub(super) fn descriptor_headroom(limit: u64) -> u64 {
    32 + limit / 32
}

/// `maxConnections`, lowered to what the open-file limit leaves room for (past it `accept`
/// fails instead of refusing cleanly).
pub(super) fn connection_cap(max_connections: u32, descriptors: Option<u64>) -> usize {
    let fit = descriptors.map_or(u64::MAX, |limit| {
        limit.saturating_sub(descriptor_headroom(limit)).max(1)
    });
    u64::from(max_connections).min(fit) as usize
}

/// The inverse of [`connection_cap`].
pub(super) fn descriptors_wanted(max_connections: u32) -> u64 {
    (u64::from(max_connections) + 32) * 32 / 31 + 1
}

/// Raised to what `maxConnections` needs (up to the hard limit, as the JVM does); warns when
/// still too low.
pub(super) fn prepare_descriptors(c: &NamesrvConfig) -> Option<u64> {
    let before = event_loop::descriptor_limit()?;
    let now = event_loop::raise_descriptor_limit(descriptors_wanted(c.max_connections))?;
    if now.soft > before.soft {
        info!(
            "open-file limit raised from {} to {} for maxConnections={}",
            before.soft, now.soft, c.max_connections
        );
    }
    let table = descriptors_wanted(c.max_connections)
        .min(now.soft)
        .min(event_loop::PRESIZED_DESCRIPTORS_MAX);
    if let Err(e) = event_loop::presize_descriptor_table(table) {
        debug!("descriptor table not grown to {table} descriptors: {e}");
    }
    let cap = connection_cap(c.max_connections, Some(now.soft));
    if cap < c.max_connections as usize {
        warn!(
            "maxConnections={} does not fit the open-file limit ({} descriptors, hard limit {}; {} kept for files and outbound connections): accepting at most {cap} connections; raise LimitNOFILE (systemd) or ulimit -n",
            c.max_connections,
            now.soft,
            now.hard,
            descriptor_headroom(now.soft)
        );
    }
    Some(now.soft)
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) frame_max: u32,
    pub(super) decode: DecodeLimits,
    pub(super) scan_interval_ms: u64,
    pub(super) registration_budget: usize,
}

impl Settings {
    pub(super) fn from_config(c: &NamesrvConfig) -> Self {
        Settings {
            frame_max: c.frame_max_length,
            decode: DecodeLimits {
                max_header_len: c.max_header_length as usize,
                max_ext_fields: c.max_ext_fields as usize,
                json: c.json_limits(),
            },
            scan_interval_ms: c.scan_not_active_broker_interval.max(1) as u64,
            registration_budget: c.registration_budget_per_iteration.max(1) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_stays_below_the_open_file_limit() {
        assert_eq!(connection_cap(65_536, Some(64)), 30);
        assert_eq!(connection_cap(65_536, Some(1024)), 960);
        assert_eq!(connection_cap(100, Some(1024)), 100);
        assert_eq!(connection_cap(100, None), 100);
        for max in [100u32, 65_536, 1_000_000] {
            let wanted = descriptors_wanted(max);
            assert_eq!(connection_cap(max, Some(wanted)), max as usize);
            assert!(
                connection_cap(max, Some(wanted - 2)) < max as usize,
                "{max}"
            );
        }
    }

    #[test]
    fn loop_limits_follow_the_config() {
        let mut c = NamesrvConfig {
            max_connections: 1000,
            reserved_connections_percent: 5,
            frame_read_timeout_millis: 1234,
            max_buffered_bytes: 8 << 20,
            max_connections_per_address: 7,
            ..NamesrvConfig::default()
        };
        c.server_socket_backlog = 4096;
        let l = loop_limits(&c, Some(1_000_000));
        assert_eq!(l.max_connections, 1000);
        assert_eq!(l.listen_backlog, 4096);
        assert_eq!(l.reserved_for_recent, 50);
        assert_eq!((l.frame_timeout_ms, l.max_buffered), (1234, 8 << 20));
        assert_eq!(l.max_per_address, 7);
        c.max_connections = 65_536;
        assert_eq!(loop_limits(&c, Some(64)).reserved_for_recent, 1);
    }
}
