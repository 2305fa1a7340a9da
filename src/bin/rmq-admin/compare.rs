//! `--all`: a read asked of every name server of `-n`, the answers side by side (docs/admin.md).

use crate::cli::Invocation;
use crate::outcome::{Outcome, EXIT_DISAGREE, EXIT_FAILED};
use crate::output::{json_text, s, Cell, Table};
use crate::peers::Peers;
use rmq_namesrv::client::{Client, ClientError};
use rmq_namesrv::remoting::json::Value;

pub struct Answer {
    pub sections: Vec<(&'static str, Table)>,
    /// Whether the thing asked for exists there (when nowhere, the read fails).
    pub found: bool,
}

impl Answer {
    pub fn table(name: &'static str, table: Table) -> Answer {
        Answer {
            sections: vec![(name, table)],
            found: true,
        }
    }
}

/// Section `k` of every answer (same command, so same sections and columns): its name, the
/// merged table, and whether some row is not on every server.
fn merge(answers: &[(String, Answer)], k: usize) -> (&'static str, Table, bool) {
    let (name, first) = &answers[0].1.sections[k];
    let mut columns = vec![("DIFF", "differs"), ("NAMESRV", "namesrv")];
    columns.extend_from_slice(first.columns());
    // Distinct rows in order of first appearance, with the servers that have each.
    let mut distinct: Vec<(&Vec<Cell>, Vec<&str>)> = Vec::new();
    for (addr, answer) in answers {
        for row in answer.sections[k].1.rows() {
            match distinct.iter_mut().find(|(r, _)| *r == row) {
                Some((_, holders)) => holders.push(addr),
                None => distinct.push((row, vec![addr])),
            }
        }
    }
    let mut table = Table::new(&columns);
    let mut differs = false;
    for (row, holders) in &distinct {
        let partial = holders.len() < answers.len();
        differs |= partial;
        for addr in holders {
            let head = [Cell::Mark(partial), s(*addr)];
            table.push(head.into_iter().chain(row.iter().cloned()).collect());
        }
    }
    for (addr, answer) in answers.iter().filter(|_| !distinct.is_empty()) {
        if answer.sections[k].1.rows().is_empty() {
            let none = first.columns().iter().map(|_| Cell::None);
            let head = [Cell::Mark(true), s(addr.as_str())];
            table.push(head.into_iter().chain(none).collect());
        }
    }
    (name, table, differs)
}

fn render(inv: &Invocation, title: Option<&str>, merged: &[(&str, Table, bool)]) -> String {
    if inv.json {
        return match merged {
            [(_, one, _)] => json_text(&one.to_json()),
            many => json_text(&Value::Object(
                many.iter()
                    .map(|(name, t, _)| (name.to_string(), t.to_json()))
                    .collect(),
            )),
        };
    }
    let tables: Vec<String> = merged.iter().map(|(_, t, _)| t.render()).collect();
    title.map(|t| format!("{t}\n\n")).unwrap_or_default() + &tables.join("\n")
}

/// `what` names the thing asked for ("topic T") when no server has it; `title` heads the text.
pub fn read_all<T>(
    inv: &Invocation,
    peers: &mut Peers,
    what: &str,
    title: Option<&str>,
    ask: impl FnMut(&mut Client) -> Result<T, ClientError>,
    answer_of: impl Fn(&T) -> Answer,
) -> Outcome {
    let (answers, failures) = peers.ask_all(ask);
    if answers.is_empty() {
        return Outcome::from_failures(peers.role, &failures);
    }
    let answers: Vec<(String, Answer)> = answers
        .into_iter()
        .map(|(addr, v)| (addr, answer_of(&v)))
        .collect();
    let mut outcome = Outcome::of_all(String::new(), answers.len(), &failures);
    if answers.iter().all(|(_, a)| !a.found) {
        outcome.stderr.push(format!(
            "{what} not found on any of the {} name servers that answered",
            answers.len()
        ));
        outcome.code = EXIT_FAILED;
        return outcome;
    }
    let sections = answers[0].1.sections.len();
    let merged: Vec<_> = (0..sections).map(|k| merge(&answers, k)).collect();
    if answers.len() > 1 && merged.iter().any(|(_, _, differs)| *differs) {
        outcome.stderr.push(format!(
            "the name servers disagree: rows marked * are not on all {} that answered",
            answers.len()
        ));
        outcome.code = EXIT_DISAGREE;
    }
    outcome.stdout = render(inv, title, &merged);
    outcome
}
