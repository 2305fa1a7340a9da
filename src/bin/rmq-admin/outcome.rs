//! Exit codes, and errors explained per address.

use rmq_namesrv::client::ClientError;
use rmq_namesrv::controller::codes as controller_codes;
use rmq_namesrv::remoting::codes::{response, response_name};
use std::io;

pub const EXIT_OK: u8 = 0;
/// As [`EXIT_CODES_HELP`] says.
pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_UNREACHABLE: u8 = 3;
pub const EXIT_PARTIAL: u8 = 4;
pub const EXIT_DISAGREE: u8 = 5;

pub const EXIT_CODES_HELP: &str =
    "Exit codes: 0 ok; 1 error answer, not found, or a peer that is not a name server (or\n\
     controller); 2 usage error; 3 no server reachable; 4 partial: some servers failed;\n\
     5 --all: the name servers' answers differ (before 4 when both are true).\n";

/// What kind of server a command talks to decides how failures are explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    NameServer,
    /// Embedded or standalone (`-a`).
    Controller,
}

impl Role {
    pub fn noun(self) -> &'static str {
        match self {
            Role::NameServer => "name server",
            Role::Controller => "controller",
        }
    }

    pub fn column(self) -> (&'static str, &'static str) {
        match self {
            Role::NameServer => ("NAMESRV", "namesrv"),
            Role::Controller => ("CONTROLLER", "controller"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Unreachable,
    /// Something answered, but not what a name server answers.
    NotNameServer,
    /// A name server answered with an error, or with "not found".
    Refused,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub addr: String,
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(addr: &str, kind: FailureKind, message: String) -> Failure {
        Failure {
            addr: addr.to_string(),
            kind,
            message,
        }
    }

    pub fn from_client_as(role: Role, addr: &str, e: &ClientError) -> Failure {
        let (kind, message) = explain(role, e);
        Failure::new(addr, kind, message)
    }

    pub fn line(&self) -> String {
        format!("{}: {}", self.addr, self.message)
    }

    /// Whether a read should ask the next server.
    pub fn try_next(&self) -> bool {
        self.kind != FailureKind::Refused
    }
}

/// "HTTP" read as a frame length is 1213486160: say so, it is the common wrong port.
fn http_hint(detail: &str) -> &'static str {
    if detail.contains("1213486160") {
        ": it speaks HTTP"
    } else {
        ""
    }
}

/// What `e` says about a peer that should be a `role` ("not supported": likely a wrong port).
fn explain(role: Role, e: &ClientError) -> (FailureKind, String) {
    let noun = role.noun();
    match e {
        ClientError::Io(io) => match io.kind() {
            io::ErrorKind::UnexpectedEof => (
                FailureKind::NotNameServer,
                format!(
                    "connection closed without an answer (not a RocketMQ {noun}, or one shutting \
                     down)"
                ),
            ),
            io::ErrorKind::ConnectionRefused => (
                FailureKind::Unreachable,
                "connection refused (nothing listens there)".into(),
            ),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                (FailureKind::Unreachable, format!("no answer: {io}"))
            }
            _ => (FailureKind::Unreachable, io.to_string()),
        },
        ClientError::Decode(detail) => (
            FailureKind::NotNameServer,
            format!(
                "answered something that is not a {noun}'s answer ({detail}){}",
                http_hint(detail)
            ),
        ),
        ClientError::Response { code, remark } => {
            let name = match role {
                Role::NameServer => response_name(*code),
                Role::Controller => controller_codes::response_name(*code),
            };
            let mut text = format!("{name} ({code})");
            if let Some(r) = remark.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
                text = format!("{text}: {r}");
            }
            let (kind, why) = match (*code, role) {
                (response::REQUEST_CODE_NOT_SUPPORTED, Role::NameServer) => (
                    FailureKind::NotNameServer,
                    ": not a name server (a broker answers so), or one without this request",
                ),
                (response::REQUEST_CODE_NOT_SUPPORTED, Role::Controller) => (
                    FailureKind::NotNameServer,
                    ": not a controller (a name server's port answers so: give the controller's \
                     port, this node's entry of controllerDLegerPeers)",
                ),
                (response::GO_AWAY, Role::NameServer) => {
                    (FailureKind::Unreachable, " (shutting down)")
                }
                _ => (FailureKind::Refused, ""),
            };
            (kind, format!("{text}{why}"))
        }
    }
}

/// `Err`: the outcome decided early (a failure, or the comparison of `--all`).
pub type Ran = Result<Outcome, Outcome>;

pub struct Outcome {
    pub stdout: String,
    pub stderr: Vec<String>,
    pub code: u8,
}

impl Outcome {
    pub fn ok(stdout: String) -> Outcome {
        Outcome {
            stdout,
            stderr: Vec::new(),
            code: EXIT_OK,
        }
    }

    pub fn failed(message: String) -> Outcome {
        Outcome {
            stdout: String::new(),
            stderr: vec![message],
            code: EXIT_FAILED,
        }
    }

    pub fn usage(message: String) -> Outcome {
        Outcome {
            code: EXIT_USAGE,
            ..Outcome::failed(message)
        }
    }

    pub fn of_all(stdout: String, succeeded: usize, failures: &[Failure]) -> Outcome {
        Outcome {
            stdout,
            stderr: failures.iter().map(Failure::line).collect(),
            code: exit_code_of_all(succeeded, failures),
        }
    }

    pub fn from_failures(role: Role, failures: &[Failure]) -> Outcome {
        let stderr = match failures {
            [one] => vec![one.line()],
            many => {
                let mut lines = vec![format!("no {} of {} answered:", role.noun(), many.len())];
                lines.extend(many.iter().map(|f| format!("  {}", f.line())));
                lines
            }
        };
        Outcome {
            stdout: String::new(),
            stderr,
            code: exit_code_of_all(0, failures),
        }
    }
}

pub fn exit_code_of_all(succeeded: usize, failures: &[Failure]) -> u8 {
    match (succeeded, failures.is_empty()) {
        (_, true) => EXIT_OK,
        (0, false) if failures.iter().all(|f| f.kind == FailureKind::Unreachable) => {
            EXIT_UNREACHABLE
        }
        (0, false) => EXIT_FAILED,
        _ => EXIT_PARTIAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: FailureKind) -> Failure {
        Failure::new("h:1", kind, String::new())
    }

    #[test]
    fn mixed_results_are_partial_and_total_failures_keep_their_kind() {
        let unreachable = failure(FailureKind::Unreachable);
        let refused = failure(FailureKind::Refused);
        assert_eq!(exit_code_of_all(2, &[]), EXIT_OK);
        let one = |f: &Failure| vec![f.clone()];
        assert_eq!(exit_code_of_all(1, &one(&unreachable)), EXIT_PARTIAL);
        assert_eq!(exit_code_of_all(1, &one(&refused)), EXIT_PARTIAL);
        assert_eq!(exit_code_of_all(0, &one(&unreachable)), EXIT_UNREACHABLE);
        assert_eq!(exit_code_of_all(0, &[unreachable, refused]), EXIT_FAILED);
    }

    #[test]
    fn peers_that_are_not_name_servers_are_called_so() {
        let closed = ClientError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        let f = Failure::from_client_as(Role::NameServer, "h:1", &closed);
        assert_eq!(f.kind, FailureKind::NotNameServer);
        assert!(f
            .line()
            .starts_with("h:1: connection closed without an answer"));
        let garbage = ClientError::Decode("frame length 1213486160 (+4) exceeds 67108864".into());
        let f = Failure::from_client_as(Role::NameServer, "h:1", &garbage);
        assert!(f.message.ends_with("it speaks HTTP"), "{}", f.message);
        let unknown = ClientError::Response {
            code: response::REQUEST_CODE_NOT_SUPPORTED,
            remark: Some("request type 106 not supported".into()),
        };
        assert_eq!(
            Failure::from_client_as(Role::NameServer, "h:1", &unknown).kind,
            FailureKind::NotNameServer
        );
    }
}
