//! `rmq-admin` run as a process: its exit code and output, for the tests of its commands.
//! Included with `#[path = "common/admin_run.rs"] mod admin_run;` by the tests that need it.
#![allow(dead_code)]

use rmq_namesrv::remoting::json::{self, Value};
use std::process::Command;

/// One run of `rmq-admin`.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `rmq-admin args...`, with NAMESRV_ADDR set to `env` (removed when None).
pub fn admin_env(args: &[&str], env: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rmq-admin"));
    cmd.args(args).env_remove("NAMESRV_ADDR");
    if let Some(list) = env {
        cmd.env("NAMESRV_ADDR", list);
    }
    let out = cmd.output().expect("rmq-admin runs");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// The run's stdout, after checking it exited 0.
pub fn ok(run: &Run) -> &str {
    assert_eq!(
        run.code, 0,
        "stderr: {}\nstdout: {}",
        run.stderr, run.stdout
    );
    &run.stdout
}

/// `--json` output, parsed.
pub fn parse(text: &str) -> Value {
    json::parse(text.as_bytes()).expect("--json output parses")
}
