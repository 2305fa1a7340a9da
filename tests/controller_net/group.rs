//! Three real `rmq-namesrv` processes as one controller group on loopback ports (each a name
//! server too), that a test can SIGKILL and restart one at a time. Included with
//! `#[path = "controller_net/group.rs"] mod group;` beside `mod common;` and
//! `#[path = "common/child.rs"] mod child;`.
#![allow(dead_code)]

use crate::child;
use crate::common::{wait_until, TempDir};
use rmq_namesrv::client::Client;
use rmq_namesrv::remoting::command::RemotingCommand;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub const NODES: usize = 3;

/// Loopback ports free right now (the daemons bind them a moment later).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}

pub struct Member {
    child: Option<Child>,
    file: String,
    /// Its console log (stderr), appended to by every life.
    log: std::path::PathBuf,
    /// The controller's address (fixed: it is in `controllerDLegerPeers`).
    pub controller: String,
    /// The name server's address of the current life (an ephemeral port).
    pub namesrv: String,
}

impl Member {
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("member log");
        let (child, mut lines) = child::spawn_announcing(&["-c", &self.file], Stdio::from(log));
        let mut next = |prefix: &str| -> String {
            let line = lines.next().and_then(Result::ok).unwrap_or_default();
            line.strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                .to_string()
        };
        self.namesrv = next("rmq-namesrv listening on ");
        let announced = next("rmq-namesrv controller listening on ");
        assert_eq!(announced, self.controller);
        // Keep draining stdout so the daemon never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the time until it exited.
    fn terminate(&mut self) -> Duration {
        let Some(mut child) = self.child.take() else {
            return Duration::ZERO;
        };
        let started = Instant::now();
        // SAFETY: kill(2) on our own child's pid (not yet reaped, so not reused) with a
        // signal number; it touches no memory.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = child.wait();
        started.elapsed()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// 1005 from this member (None while it is down or does not answer).
    pub fn metadata(&self) -> Option<RemotingCommand> {
        self.child.as_ref()?;
        let mut c = Client::connect(&self.controller, Duration::from_secs(1)).ok()?;
        c.request(1005, &[], b"").ok().filter(|r| r.code == 0)
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub struct ProcessGroup {
    pub members: Vec<Member>,
    _dir: TempDir,
}

impl ProcessGroup {
    /// Three members; `extra` lines go into each one's config file.
    pub fn start(extra: &str) -> ProcessGroup {
        Self::start_with(extra, |_| {})
    }

    /// As [`start`](Self::start), `seed` given the store path (members' stores below it)
    /// before any member starts.
    pub fn start_with(extra: &str, seed: impl FnOnce(&std::path::Path)) -> ProcessGroup {
        let dir = TempDir::new("ctrl-group");
        let ports = free_ports(NODES);
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("n{i}-127.0.0.1:{p}"))
            .collect();
        let mut members = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let path = dir.join(&format!("namesrv-{i}.conf"));
            let text = format!(
                "bindAddress=127.0.0.1\nlistenPort=0\nlogPath=\nkvConfigPath={}\n\
                 enableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n\
                 controllerDLegerPeers={}\ncontrollerDLegerSelfId=n{i}\n\
                 controllerStorePath={}\n{extra}\n",
                dir.join(&format!("kv-{i}.json")).display(),
                peers.join(";"),
                dir.join("store").display(),
            );
            std::fs::write(&path, text).expect("config");
            members.push(Member {
                child: None,
                file: path.to_string_lossy().into_owned(),
                log: dir.join(&format!("namesrv-{i}.log")),
                controller: format!("127.0.0.1:{port}"),
                namesrv: String::new(),
            });
        }
        seed(&dir.join("store"));
        for m in &mut members {
            m.start();
        }
        ProcessGroup { members, _dir: dir }
    }

    pub fn controllers(&self) -> Vec<String> {
        self.members.iter().map(|m| m.controller.clone()).collect()
    }

    /// The member that leads and serves, if one does now.
    pub fn serving_leader(&self) -> Option<usize> {
        (0..NODES).find(|&i| {
            self.members[i]
                .metadata()
                .is_some_and(|m| m.ext("raftServing") == Some("true"))
        })
    }

    pub fn wait_for_leader(&self, timeout: Duration) -> Option<usize> {
        let mut found = None;
        wait_until(timeout, || {
            found = self.serving_leader();
            found.is_some()
        });
        found
    }

    /// Member `i`'s store (`rmq-controller-n<i>`).
    pub fn store(&self, i: usize) -> std::path::PathBuf {
        self._dir.join(&format!("store/rmq-controller-n{i}"))
    }

    pub fn kill9(&mut self, i: usize) {
        self.members[i].kill9();
    }

    pub fn restart(&mut self, i: usize) {
        self.members[i].start();
    }

    /// SIGTERM to member `i`; how long it took to exit.
    pub fn terminate(&mut self, i: usize) -> Duration {
        self.members[i].terminate()
    }
}
