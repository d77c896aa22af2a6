//! Output: data on stdout (human text or one JSON document), diagnostics on stderr.
//! A closed stdout (`circe tasks | head`) ends quietly (FS_RULES 14).

use std::io::Write;

use serde::Serialize;
use serde_json::{Value, json};

use crate::error::Error;

/// What a command produced: text for people, JSON for programs, and the exit code.
pub struct Report {
    pub human: String,
    pub json: Value,
    pub code: u8,
}

impl Report {
    pub fn new(human: impl Into<String>, json: impl Serialize) -> Report {
        Report {
            human: human.into(),
            json: serde_json::to_value(json).unwrap_or(Value::Null),
            code: 0,
        }
    }

    /// A command that printed its data itself, as it went (`chat watch`).
    pub fn streamed() -> Report {
        Report { human: String::new(), json: Value::Null, code: 0 }
    }

    #[must_use]
    pub fn code(mut self, code: u8) -> Report {
        self.code = code;
        self
    }

    pub fn print(&self, json: bool) {
        let mut out = std::io::stdout().lock();
        let r = if self.json.is_null() && self.human.is_empty() {
            Ok(())
        } else if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&self.json).unwrap_or_default())
        } else if self.human.is_empty() {
            Ok(())
        } else if self.human.ends_with('\n') {
            out.write_all(self.human.as_bytes())
        } else {
            writeln!(out, "{}", self.human)
        };
        // A reader that went away is not an error (broken pipe).
        let _ = r.and_then(|()| out.flush());
    }
}

/// Print an error: `error: …` and `hint: …` on stderr; with --json also a JSON object on stdout.
pub fn print_error(e: &Error, json: bool) {
    if json {
        let details: serde_json::Map<String, Value> =
            e.details.iter().map(|(k, v)| ((*k).to_string(), Value::from(v.clone()))).collect();
        let doc = json!({"error": {"kind": e.kind.as_str(), "exit_code": e.exit_code(), "message": e.chain(), "hint": e.hint, "details": details}});
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {}", e.chain());
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "hint: {h}");
    }
}

/// Left-aligned columns separated by two spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}
