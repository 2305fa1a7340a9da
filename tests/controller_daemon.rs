//! The embedded Controller through the real `rmq-namesrv` binary: refusals at start (one line,
//! exit code 2), `-p`, the controller port announced on stdout, and crash safety under
//! SIGKILL (every acknowledged change is there after a restart).

#[path = "common/child.rs"]
mod child;
mod common;

use common::TempDir;
use std::process::{Command, Output, Stdio};

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rmq-namesrv"))
}

/// A config file in `dir` with the name server on loopback ports and files in `dir`.
fn config_file(dir: &TempDir, lines: &str) -> String {
    let path = dir.join("namesrv.conf");
    let text = format!(
        "bindAddress=127.0.0.1\nlistenPort=0\nlogPath=\nkvConfigPath={}\n{lines}",
        dir.join("kvConfig.json").display()
    );
    std::fs::write(&path, text).expect("config file");
    path.to_string_lossy().into_owned()
}

fn run(args: &[&str]) -> Output {
    binary()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run rmq-namesrv")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[cfg(not(feature = "controller"))]
#[test]
fn enabling_the_controller_in_a_build_without_it_is_refused_saying_how_to_get_it() {
    let dir = TempDir::new("ctrl-daemon");
    let file = config_file(&dir, "enableControllerInNamesrv=true\n");
    for args in [vec!["-c", file.as_str()], vec!["-c", file.as_str(), "-p"]] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("enableControllerInNamesrv=true"), "{err}");
        assert!(err.contains("--features controller"), "{err}");
        assert!(out.stdout.is_empty(), "nothing printed, nothing started");
    }
    // The command line counts as much as the file.
    let plain = config_file(&dir, "");
    let out = run(&["-c", &plain, "--enableControllerInNamesrv=true"]);
    assert_eq!(out.status.code(), Some(2));
}

#[cfg(feature = "controller")]
mod with_controller {
    use super::*;
    use rmq_namesrv::client::Client;
    use std::process::Child;
    use std::time::Duration;

    const PEERS: &str = "controllerDLegerPeers=n0-127.0.0.1:0\ncontrollerDLegerSelfId=n0\n";

    fn controller_file(dir: &TempDir, more: &str) -> String {
        let store = dir.join("store");
        config_file(
            dir,
            &format!(
                "enableControllerInNamesrv=true\n{PEERS}controllerStorePath={}\n{more}",
                store.display()
            ),
        )
    }

    #[test]
    fn an_unwritable_controller_store_stops_the_start_naming_it() {
        let dir = TempDir::new("ctrl-store");
        // procfs takes no new directories, even from root.
        let file = config_file(
            &dir,
            &format!("enableControllerInNamesrv=true\n{PEERS}controllerStorePath=/proc/self/rmq\n"),
        );
        let out = run(&["-c", &file]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            err.contains(
                "cannot start: controllerStorePath: cannot write in /proc/self/rmq/rmq-controller-n0: "
            ),
            "{err}"
        );
    }

    #[test]
    fn settings_the_controller_cannot_run_with_are_refused_naming_the_key() {
        let dir = TempDir::new("ctrl-daemon");
        let cases = [
            ("controllerType=jRaft\n", "controllerType=jRaft"),
            ("controllerDLegerSelfId=n1\n", "controllerDLegerSelfId=n1"),
            (
                "electMasterMaxRetryCount=many\n",
                "electMasterMaxRetryCount=many",
            ),
        ];
        for (line, named) in cases {
            let file = controller_file(&dir, line);
            let out = run(&["-c", &file]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{line}: {err}");
            assert_eq!(err.lines().count(), 1, "{line}: {err}");
            assert!(err.starts_with("rmq-namesrv: controller config: "), "{err}");
            assert!(err.contains(named), "{line}: {err}");
        }
        // The controller's port cannot be the name server's.
        let file = controller_file(&dir, "");
        let out = run(&[
            "-c",
            &file,
            "--listenPort=19876",
            "--controllerDLegerPeers=n0-127.0.0.1:19876",
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("port 19876"), "{}", stderr(&out));
        // A group's peer links are plain TCP: an enforcing TLS port would refuse them.
        let out = run(&[
            "-c",
            &file,
            "--tls.server.mode=enforcing",
            "--controllerDLegerPeers=n0-127.0.0.1:0;n1-127.0.0.1:1;n2-127.0.0.1:2",
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(
            err.contains("tls.server.mode=enforcing with a group of 3"),
            "{err}"
        );
    }

    #[test]
    fn print_config_shows_the_controllers_effective_settings() {
        let dir = TempDir::new("ctrl-daemon");
        let file = controller_file(&dir, "electMasterMaxRetryCount=7\n");
        let out = run(&["-c", &file, "-p", "--scanInactiveMasterInterval=1234"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).expect("text");
        let controller: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("#controller: "))
            .collect();
        for line in [
            "electMasterMaxRetryCount=7",
            "scanInactiveMasterInterval=1234",
            "controllerDLegerPeers=n0-127.0.0.1:0",
            // Not set anywhere: the controller's default, not the name server's.
            "configBlackList=configBlackList;configStorePath;controllerSnapshotEvents;controllerPeerSecret",
        ] {
            assert!(controller.contains(&line), "{line} in {controller:?}");
        }
        let namesrv = format!(
            "\nconfigBlackList={};{}\n",
            rmq_namesrv::config::JAVA_CONFIG_BLACK_LIST,
            rmq_namesrv::config::PROTECTED_KEYS
        );
        assert!(text.contains(&namesrv), "{text}");
    }

    /// A running binary with its two ports.
    struct Daemon {
        child: Child,
        namesrv: String,
        controller: String,
    }

    impl Daemon {
        fn start(file: &str) -> Daemon {
            Daemon::start_logging(&["-c", file], Stdio::null())
        }

        /// With these arguments, its console log (stderr) going to `log`.
        fn start_logging(args: &[&str], log: Stdio) -> Daemon {
            let (child, mut lines) = child::spawn_announcing(args, log);
            let mut next = |prefix: &str| -> String {
                let line = lines.next().and_then(Result::ok).unwrap_or_default();
                line.strip_prefix(prefix)
                    .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                    .to_string()
            };
            let namesrv = next("rmq-namesrv listening on ");
            let controller = next("rmq-namesrv controller listening on ");
            Daemon {
                child,
                namesrv,
                controller,
            }
        }

        fn controller_client(&self) -> Client {
            Client::connect(&self.controller, Duration::from_secs(10)).expect("connect")
        }

        fn kill(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl Drop for Daemon {
        fn drop(&mut self) {
            self.kill();
        }
    }

    #[test]
    fn the_binary_announces_both_ports_and_serves_the_controller() {
        let dir = TempDir::new("ctrl-daemon");
        let daemon = Daemon::start(&controller_file(&dir, ""));
        let mut c = daemon.controller_client();
        let resp = c.request(1005, &[], b"").expect("1005");
        assert_eq!(resp.code, 0);
        assert_eq!(
            resp.ext("controllerLeaderAddress"),
            Some(daemon.controller.as_str())
        );
        let mut ns = Client::connect(&daemon.namesrv, Duration::from_secs(10)).expect("ns");
        assert_eq!(ns.request(1005, &[], b"").expect("answer").code, 3);
    }

    /// Keeps `window` applications in flight and collects the acknowledged ones until
    /// `until` of them were acknowledged.
    fn apply_until(c: &mut Client, round: usize, until: usize, acked: &mut Vec<String>) {
        const WINDOW: i32 = 8;
        let name = |opaque: i32| format!("set-{round}-{opaque}");
        let mut next = 1;
        for _ in 0..WINDOW {
            c.send_raw(&common::apply_frame(next, &name(next)))
                .expect("send");
            next += 1;
        }
        let mut oldest = 1;
        let mut seen = 0;
        while seen < until {
            let resp = c.read_response(oldest).expect("an answer");
            assert_eq!(resp.code, 0, "{:?}", resp.remark);
            acked.push(name(oldest));
            seen += 1;
            oldest += 1;
            c.send_raw(&common::apply_frame(next, &name(next)))
                .expect("send");
            next += 1;
        }
    }

    #[test]
    fn acknowledged_changes_survive_sigkill_of_the_real_binary() {
        let dir = TempDir::new("ctrl-daemon-crash");
        // Small snapshot interval: kills land in snapshots and log cuts too.
        let file = controller_file(&dir, "controllerSnapshotEvents=5\n");
        let mut acked = Vec::new();
        for round in 0..4 {
            let mut daemon = Daemon::start(&file);
            let mut c = daemon.controller_client();
            apply_until(&mut c, round, 20 + round * 17, &mut acked);
            // SIGKILL with applications still in flight.
            daemon.kill();
        }
        let daemon = Daemon::start(&file);
        let mut c = daemon.controller_client();
        for name in &acked {
            let resp = c
                .request(1012, &[("clusterName", "c"), ("brokerName", name)], b"")
                .expect("1012");
            assert_eq!(
                resp.ext("nextBrokerId"),
                Some("2"),
                "{name} was acknowledged, then lost"
            );
        }
    }

    /// A restart replays the store without logging its history again (one summary line),
    /// and a controller key set in the file and on the command line is not called unknown.
    #[test]
    fn a_restart_replays_silently_and_applied_keys_are_not_called_unknown() {
        let dir = TempDir::new("ctrl-daemon-replay");
        let file = controller_file(&dir, "controllerSnapshotEvents=1000\n");
        let args = ["-c", file.as_str(), "--controllerSnapshotEvents=1000"];
        let log_of = |life: &str| dir.join(&format!("console-{life}.log"));
        let console = |life: &str| {
            Stdio::from(std::fs::File::create(log_of(life)).expect("console log file"))
        };
        let mut first = Daemon::start_logging(&args, console("first"));
        let mut c = first.controller_client();
        let mut acked = Vec::new();
        apply_until(&mut c, 0, 30, &mut acked);
        first.kill();
        let first_log = std::fs::read_to_string(log_of("first")).expect("first log");
        assert!(
            first_log.matches("gives id 1 to").count() >= 30,
            "each change is logged once when it happens"
        );
        let second = Daemon::start_logging(&args, console("second"));
        let mut c = second.controller_client();
        let resp = c
            .request(
                1012,
                &[("clusterName", "c"), ("brokerName", &acked[0])],
                b"",
            )
            .expect("1012");
        assert_eq!(resp.ext("nextBrokerId"), Some("2"), "recovered");
        drop(second);
        let log = std::fs::read_to_string(log_of("second")).expect("second log");
        assert!(!log.contains("gives id"), "the replay is silent:\n{log}");
        assert_eq!(
            log.matches("broker sets recovered from").count(),
            1,
            "one summary line:\n{log}"
        );
        assert!(!log.contains("unknown key"), "{log}");
    }
}
