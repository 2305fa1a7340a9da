//! raft-rs logs through `slog`; this drain forwards its records to the `log` facade, so
//! Raft's lines land in the same file in the same layout.

use slog::{Drain, Level, OwnedKVList, Record, KV};
use std::fmt::{self, Write};

pub const TARGET: &str = "raft";

/// Forwards slog records to `log` (level for level; critical becomes error).
pub struct LogDrain;

impl Drain for LogDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let level = match record.level() {
            Level::Critical | Level::Error => log::Level::Error,
            Level::Warning => log::Level::Warn,
            Level::Info => log::Level::Info,
            Level::Debug => log::Level::Debug,
            Level::Trace => log::Level::Trace,
        };
        if !log::log_enabled!(target: TARGET, level) {
            return Ok(());
        }
        let mut text = KeyValues(String::new());
        // Formatting into a String cannot fail; a value that refuses is left out.
        let _ = record.kv().serialize(record, &mut text);
        let _ = values.serialize(record, &mut text);
        log::log!(target: TARGET, level, "raft: {}{}", record.msg(), text.0);
        Ok(())
    }
}

struct KeyValues(String);

impl slog::Serializer for KeyValues {
    fn emit_arguments(&mut self, key: slog::Key, value: &fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}

pub fn logger() -> slog::Logger {
    slog::Logger::root(LogDrain.fuse(), slog::o!())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_their_values_reach_the_log_facade_without_panicking() {
        let logger = logger().new(slog::o!("raft_id" => 2));
        slog::info!(logger, "became leader"; "term" => 3);
        slog::debug!(logger, "debug line"; "index" => 7u64);
        use slog::Serializer;
        let mut kv = KeyValues(String::new());
        kv.emit_arguments("term", &format_args!("{}", 3)).unwrap();
        assert_eq!(kv.0, " term=3");
    }
}
