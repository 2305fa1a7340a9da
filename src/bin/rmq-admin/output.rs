//! Aligned tables whose cells know their JSON type, and JSON text (compact, or indented).

use rmq_namesrv::remoting::json::{self, Value};

/// The type decides how a cell is written in JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Written as "-" in a table and null in JSON.
    None,
    /// A marker: "*" (or nothing) in a table, a boolean in JSON.
    Mark(bool),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Str(s) => s.clone(),
            Cell::Int(i) => i.to_string(),
            Cell::Bool(b) => b.to_string(),
            Cell::None => "-".to_string(),
            Cell::Mark(on) => if *on { "*" } else { "" }.to_string(),
        }
    }

    fn value(&self) -> Value {
        match self {
            Cell::Str(s) => Value::Str(s.clone()),
            Cell::Int(i) => Value::Int(*i),
            Cell::Bool(b) | Cell::Mark(b) => Value::Bool(*b),
            Cell::None => Value::Null,
        }
    }
}

pub fn s(v: impl Into<String>) -> Cell {
    Cell::Str(v.into())
}

/// A string, or [`Cell::None`].
pub fn opt_cell(v: Option<impl Into<String>>) -> Cell {
    v.map_or(Cell::None, s)
}

/// A number, or [`Cell::None`].
pub fn opt_int(v: Option<i64>) -> Cell {
    v.map_or(Cell::None, Cell::Int)
}

/// Columns from `HEADER:jsonKey` words, e.g. `"CLUSTER:cluster BID:brokerId"`.
pub fn columns(spec: &'static str) -> Vec<(&'static str, &'static str)> {
    let column = |c: &'static str| c.split_once(':').unwrap_or((c, ""));
    spec.split_whitespace().map(column).collect()
}

/// Columns: (table header, JSON key).
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<(&'static str, &'static str)>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: &[(&'static str, &'static str)]) -> Table {
        Table::with_rows(columns, [])
    }

    pub fn with_rows(
        columns: &[(&'static str, &'static str)],
        rows: impl IntoIterator<Item = Vec<Cell>>,
    ) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: rows.into_iter().collect(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    pub fn columns(&self) -> &[(&'static str, &'static str)] {
        &self.columns
    }

    pub fn rows(&self) -> &[Vec<Cell>] {
        &self.rows
    }

    /// Left-aligned columns two spaces apart, no trailing spaces.
    pub fn render(&self) -> String {
        let header = self.columns.iter().map(|(h, _)| h.to_string()).collect();
        let cells = self.rows.iter().map(|r| r.iter().map(Cell::text).collect());
        let lines: Vec<Vec<String>> = std::iter::once(header).chain(cells).collect();
        let mut widths = vec![0; self.columns.len()];
        for line in &lines {
            for (w, t) in widths.iter_mut().zip(line) {
                *w = (*w).max(t.chars().count());
            }
        }
        let aligned = |line: &Vec<String>| {
            let padded: Vec<String> = line
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:w$}"))
                .collect();
            format!("{}\n", padded.join("  ").trim_end())
        };
        lines.iter().map(aligned).collect()
    }

    pub fn to_json(&self) -> Value {
        let object = |r: &Vec<Cell>| {
            Value::Object(
                self.columns
                    .iter()
                    .zip(r)
                    .map(|((_, key), cell)| (key.to_string(), cell.value()))
                    .collect(),
            )
        };
        Value::Array(self.rows.iter().map(object).collect())
    }

    pub fn emit(&self, json: bool) -> String {
        if json {
            json_text(&self.to_json())
        } else {
            self.render()
        }
    }
}

pub fn json_text(v: &Value) -> String {
    let mut out = Vec::new();
    json::write_value(&mut out, v);
    out.push(b'\n');
    String::from_utf8_lossy(&out).into_owned()
}

pub fn pretty_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_pretty(&mut out, v, 0);
    out.push(b'\n');
    String::from_utf8_lossy(&out).into_owned()
}

fn indent(out: &mut Vec<u8>, level: usize) {
    out.push(b'\n');
    out.extend_from_slice(&b"  ".repeat(level));
}

/// Arrays and objects one member a line, indented by two spaces a level; empty ones as `[]`, `{}`.
fn write_pretty(out: &mut Vec<u8>, v: &Value, level: usize) {
    let (open, close, members): (u8, u8, Vec<(Option<&str>, &Value)>) = match v {
        Value::Array(items) if !items.is_empty() => {
            (b'[', b']', items.iter().map(|i| (None, i)).collect())
        }
        Value::Object(entries) if !entries.is_empty() => (
            b'{',
            b'}',
            entries.iter().map(|(k, m)| (Some(k.as_str()), m)).collect(),
        ),
        scalar => return json::write_value(out, scalar),
    };
    out.push(open);
    for (k, (key, member)) in members.into_iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        indent(out, level + 1);
        if let Some(key) = key {
            json::write_str(out, key);
            out.extend_from_slice(b": ");
        }
        write_pretty(out, member, level + 1);
    }
    indent(out, level);
    out.push(close);
}

#[cfg(test)]
mod tests;
