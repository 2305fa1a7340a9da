//! The metrics endpoint from outside: HTTP requests over TCP, scrapes read with Prometheus's
//! own text parser (Python's `prometheus_client`, which this project did not write), and the
//! metric names the Grafana dashboard's queries use.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One HTTP exchange: what the server answered before it closed the connection.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends `request` as it is and reads until the server closes.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> io::Result<Answer> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(request)?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let text = String::from_utf8_lossy(&all).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

pub fn get(addr: SocketAddr, path: &str) -> Answer {
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nAccept: */*\r\n\r\n");
    exchange(addr, request.as_bytes()).expect("HTTP exchange")
}

/// `GET /metrics`, checked to be a 200 in the 0.0.4 text format.
pub fn scrape(addr: SocketAddr) -> String {
    let a = get(addr, "/metrics");
    assert_eq!(a.status, 200, "{}", a.head);
    assert!(
        a.head.contains("Content-Type: text/plain; version=0.0.4"),
        "{}",
        a.head
    );
    let length = format!("Content-Length: {}", a.body.len());
    assert!(a.head.contains(&length), "{} ({length})", a.head);
    a.body
}

/// Samples as Prometheus's parser read them.
#[derive(Debug, Default)]
pub struct Samples {
    /// Family name -> type (`counter`, `gauge`, `histogram`).
    pub families: BTreeMap<String, String>,
    pub samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Samples {
    /// The sum of the samples named `name` whose labels include `labels` (None: no such sample).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching = self.samples.iter().filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        });
        matching.map(|(_, _, v)| *v).reduce(|a, b| a + b)
    }

    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|(n, _, _)| n == name)
    }
}

const PARSER: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    print("F\t%s\t%s" % (family.name, family.type))
    for s in family.samples:
        labels = "\x1f".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        print("S\t%s\t%s\t%r" % (s.name, labels, float(s.value)))
"#;

/// Whether python3 with `prometheus_client` is there (else says loudly why a test skips).
pub fn parser_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client.parser"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIPPING the Prometheus parser checks: python3 with prometheus_client is not installed (pip install prometheus_client)"
        );
    }
    ok
}

/// `text` read by `prometheus_client.parser`; panics if it refuses the text.
pub fn parse(text: &str) -> Samples {
    let mut child = Command::new("python3")
        .args(["-c", PARSER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(text.as_bytes())
        .expect("write to the parser");
    drop(stdin);
    let out = child.wait_with_output().expect("parser output");
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut samples = Samples::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields[..] {
            ["F", name, kind] => {
                samples.families.insert(name.into(), kind.into());
            }
            ["S", name, labels, value] => {
                let labels = labels
                    .split('\x1f')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let value = value.parse().expect("a float");
                samples.samples.push((name.into(), labels, value));
            }
            _ => panic!("unexpected parser line {line:?}"),
        }
    }
    samples
}

/// PromQL words that take a parenthesised label list, and other words that are not names.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &["and", "or", "unless", "offset", "bool"];

/// The metric names one PromQL expression reads: identifiers outside `{...}` label matchers,
/// `[...]` ranges and label lists, neither called (functions) nor aggregating (`sum by`).
pub fn metric_names(expr: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut depth = 0;
    for c in expr.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let spaced = plain
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace(',', " ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (word, next) = (tokens[i], tokens.get(i + 1).copied().unwrap_or(""));
        i += 1;
        if GROUPING.contains(&word) && next == "(" {
            i += tokens[i..]
                .iter()
                .position(|t| *t == ")")
                .map_or(tokens.len(), |p| p + 1);
            continue;
        }
        let identifier = word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        if identifier && next != "(" && !GROUPING.contains(&next) && !KEYWORDS.contains(&word) {
            names.push(word.to_string());
        }
    }
    names
}

/// (panel title, expression) of every query of every panel (rows' panels included).
pub fn dashboard_queries(json: &str) -> Vec<(String, String)> {
    use rmq_namesrv::remoting::json::{parse_with, Limits, Value};
    let limits = Limits {
        max_depth: 64,
        max_string_len: 1 << 20,
    };
    let root = parse_with(json.as_bytes(), &limits).expect("the dashboard is JSON");
    let mut out = Vec::new();
    fn walk(panels: &[Value], out: &mut Vec<(String, String)>) {
        for panel in panels {
            let title = panel.get("title").and_then(Value::as_str).unwrap_or("");
            let targets = panel
                .get("targets")
                .and_then(Value::as_array)
                .unwrap_or(&[]);
            for t in targets {
                if let Some(expr) = t.get("expr").and_then(Value::as_str) {
                    out.push((title.to_string(), expr.to_string()));
                }
            }
            if let Some(inner) = panel.get("panels").and_then(Value::as_array) {
                walk(inner, out);
            }
        }
    }
    walk(
        root.get("panels")
            .and_then(Value::as_array)
            .expect("panels"),
        &mut out,
    );
    out
}
