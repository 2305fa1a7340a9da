//! A server running on its own thread, stopped (and joined) when its handle is dropped.

use rmq_namesrv::config::NamesrvConfig;
use rmq_namesrv::server::{ControllerSetup, Server, StartError, StopHandle};
use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;

pub struct ServerHandle {
    addr: SocketAddr,
    controller_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    stop: StopHandle,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.controller_addr
    }

    /// The Prometheus endpoint (`metricsExporterType=PROM`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn stop(mut self) -> io::Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<()> {
        self.stop.stop();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("event loop thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Err(e) = self.stop_and_join() {
            eprintln!("event loop ended with an error: {e}");
        }
    }
}

/// Returns once it is listening.
pub fn start(config: NamesrvConfig) -> Result<ServerHandle, StartError> {
    start_with_controller(config, None)
}

pub fn start_with_controller(
    config: NamesrvConfig,
    controller: Option<ControllerSetup>,
) -> Result<ServerHandle, StartError> {
    let server = Server::bind_with_controller(config, controller)?;
    let addr = server.local_addr();
    let controller_addr = server.controller_addr();
    let metrics_addr = server.metrics_addr();
    let stop = server.stop_handle();
    let thread = std::thread::Builder::new()
        .name("event-loop".into())
        .spawn(move || server.run())?;
    Ok(ServerHandle {
        addr,
        controller_addr,
        metrics_addr,
        stop,
        thread: Some(thread),
    })
}
