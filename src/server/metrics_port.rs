//! The metrics listener (`metricsExporterType=PROM`), a third listener on the loop: each
//! connection sends an HTTP request head (the loop's HTTP framing, under the same connection,
//! memory and time limits as every peer), is answered and closed. The exposition is written
//! into one reused buffer from the processor's counters, the loop's, the controller's and
//! the process's (docs/operations.md#metrics).

use super::{NameServer, PeerKind, PeerState, StartError};
use crate::config::NamesrvConfig;
use crate::event_loop::{ConnId, Ctx, EventLoop, Handler, ListenerTag, Next};
use crate::metrics::http::{self, Asked};
use crate::metrics::process::{self, FdCounter};
use crate::metrics::{Exposition, Kind};
use log::{debug, info};
use std::net::SocketAddr;

pub(super) const LISTENER: ListenerTag = ListenerTag(2);

/// Connection kinds counted here (the controller's are the rest of the loop's connections).
pub(super) const COUNTED_KINDS: [(PeerKind, &str); 4] = [
    (PeerKind::New, "new"),
    (PeerKind::Broker, "broker"),
    (PeerKind::Client, "client"),
    (PeerKind::Metrics, "metrics"),
];

pub(super) struct MetricsPort {
    addr: SocketAddr,
    body: Vec<u8>,
    start_time: Option<f64>,
    fds: FdCounter,
}

impl MetricsPort {
    /// `None` unless `metricsExporterType=PROM`.
    pub(super) fn bind<H: Handler>(
        config: &NamesrvConfig,
        event_loop: &mut EventLoop<H>,
    ) -> Result<Option<MetricsPort>, StartError> {
        if config.metrics_exporter_type != "PROM" {
            return Ok(None);
        }
        let host = match config.metrics_prom_exporter_host.as_str() {
            "" => config.bind_address.as_str(),
            host => host,
        };
        let addr = super::socket_address(host, config.metrics_prom_exporter_port)?;
        let bound = event_loop
            .listen_http(addr, LISTENER)
            .map_err(|source| StartError::Bind { addr, source })?;
        info!("metrics for Prometheus on http://{bound}/metrics");
        Ok(Some(MetricsPort {
            addr: bound,
            body: Vec::new(),
            start_time: process::start_time_seconds(),
            fds: FdCounter::spawn()?,
        }))
    }

    pub(super) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl NameServer {
    /// Answers one request head and closes the connection once the answer is written.
    pub(super) fn answer_scrape(
        &mut self,
        ctx: &mut Ctx<PeerState>,
        conn: ConnId,
        head: &[u8],
    ) -> Next {
        let asked = http::read_head(head);
        debug!("metrics request from {:?}: {asked:?}", ctx.peer(conn));
        let mut body = self
            .metrics
            .as_mut()
            .map(|m| std::mem::take(&mut m.body))
            .unwrap_or_default();
        body.clear();
        if asked == Asked::Metrics {
            self.write_metrics(ctx, &mut body);
        }
        if let Some(out) = ctx.write_buf(conn) {
            http::write_answer(asked, &body, out);
        }
        if let Some(m) = self.metrics.as_mut() {
            m.body = body;
        }
        ctx.close_when_flushed(conn);
        Next::Hold
    }

    fn write_metrics(&self, ctx: &Ctx<PeerState>, out: &mut Vec<u8>) {
        let mut e = Exposition::new(out);
        self.processor.write_metrics(&mut e);
        write_loop_metrics(&mut e, ctx, &self.conn_kinds);
        if let Some(port) = self.controller.as_ref() {
            port.write_metrics(&mut e, ctx.now_ms());
        }
        if let Some(m) = self.metrics.as_ref() {
            process::write(&mut e, m.start_time, m.fds.open_fds(), self.descriptors);
        }
    }
}

fn write_loop_metrics(e: &mut Exposition<'_>, ctx: &Ctx<PeerState>, kinds: &[usize; 4]) {
    let (l, limits) = (ctx.stats(), ctx.limits());
    let connections = "rmq_namesrv_connections";
    e.family(
        connections,
        Kind::Gauge,
        "Open connections, by kind (new: no request yet; controller: its port and peer links).",
    );
    for ((_, name), n) in COUNTED_KINDS.iter().zip(kinds) {
        e.sample(connections, &[("kind", name)], n);
    }
    let controller = l.connections.saturating_sub(kinds.iter().sum());
    e.sample(connections, &[("kind", "controller")], controller);
    use Kind::{Counter, Gauge};
    #[rustfmt::skip]
    let rows = [
        ("rmq_namesrv_connections_limit", Gauge, "maxConnections (after the open-file limit).", limits.max_connections as u64),
        ("rmq_namesrv_connections_refused_total", Counter, "Connections refused by maxConnections, per-address or reserved-slot admission.", l.refused),
        ("rmq_namesrv_buffered_bytes", Gauge, "Bytes held in all connections' read and write buffers.", l.buffered_bytes as u64),
        ("rmq_namesrv_buffered_bytes_limit", Gauge, "maxBufferedBytes, the memory budget of those buffers.", limits.max_buffered as u64),
        ("rmq_namesrv_received_bytes_total", Counter, "Bytes read from peers.", l.bytes_in),
        ("rmq_namesrv_sent_bytes_total", Counter, "Bytes written to peers.", l.bytes_out),
        ("rmq_namesrv_frame_timeouts_total", Counter, "Connections closed for a request not whole within frameReadTimeoutMillis.", l.frame_timeouts),
        ("rmq_namesrv_closed_over_budget_total", Counter, "Connections closed for not reading their replies while the memory budget was spent.", l.closed_over_budget),
        ("rmq_namesrv_accept_failures_total", Counter, "Failed accepts (out of descriptors).", l.accept_failures),
        ("rmq_namesrv_loop_long_turns_total", Counter, "Event loop turns longer than 2 ms.", l.long_turns),
    ];
    for (name, kind, help, value) in rows {
        e.single(name, kind, help, value);
    }
    e.single(
        "rmq_namesrv_loop_turn_max_seconds",
        Kind::Gauge,
        "The event loop's longest turn since start.",
        l.max_turn_micros as f64 / 1e6,
    );
}
