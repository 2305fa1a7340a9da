//! The real `rmq-namesrv` binary as a child process, for tests that must kill it (SIGKILL) or
//! measure its own memory (RSS in /proc/<pid>/status). Included with
//! `#[path = "common/child.rs"] mod child;` by the tests that need it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The binary started with `args`, stdin closed, stdout piped (it announces its ports there,
/// a line each), stderr to `stderr`; the child and its stdout's lines.
pub fn spawn_announcing(args: &[&str], stderr: Stdio) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn rmq-namesrv");
    let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, lines)
}

/// A running server; killed (SIGKILL) and reaped when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub addr: String,
}

impl ServerProcess {
    /// Starts the binary with `args` and waits for its "rmq-namesrv listening on ADDR" line.
    pub fn spawn(args: &[String]) -> ServerProcess {
        Self::spawn_with_stderr(args, Stdio::null())
    }

    /// As [`ServerProcess::spawn`], with the server's stderr (its console log) sent to `stderr`.
    pub fn spawn_with_stderr(args: &[String], stderr: Stdio) -> ServerProcess {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (child, lines) = spawn_announcing(&args, stderr);
        Self::announced(child, lines)
    }

    /// A command that ends by exec-ing the binary (a wrapper such as `unshare`), stdout piped.
    pub fn spawn_command(command: &mut Command) -> ServerProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server's command");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self::announced(child, lines)
    }

    /// Waits for the "rmq-namesrv listening on ADDR" line of a started server.
    fn announced(mut child: Child, mut lines: Lines<BufReader<ChildStdout>>) -> ServerProcess {
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        let addr = match line.strip_prefix("rmq-namesrv listening on ") {
            Some(addr) => addr.to_string(),
            _ => {
                let _ = child.kill();
                let status = child.wait();
                panic!("server did not start: first line {line:?}, exit {status:?}");
            }
        };
        ServerProcess { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB (VmRSS), None once the process is gone.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn client(&self) -> rmq_namesrv::client::Client {
        rmq_namesrv::client::Client::connect(&self.addr, Duration::from_secs(5)).expect("connect")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
