//! A whole chat message (first line and continuation lines) and its JSON line, the
//! reference server's output shape.

use serde::Serialize;

use super::line::ChatLine;

/// A message as found in the channel file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub sender: String,
    pub recipient: String,
    pub broadcast: Vec<String>,
    /// The body; continuation lines joined with `\n` (unless `--first-line-only`).
    pub message: String,
    /// The physical line of the first line, 1-based, as `grep -n` counts.
    pub line_number: u64,
    pub ambiguous: bool,
}

impl ChatMessage {
    pub fn new(line: ChatLine, line_number: u64) -> ChatMessage {
        ChatMessage {
            sender: line.sender,
            recipient: line.recipient,
            broadcast: line.broadcast,
            message: line.body,
            line_number,
            ambiguous: line.ambiguous,
        }
    }

    /// The JSON object the reference server prints for this message, detected at
    /// `timestamp` (ISO-8601 UTC with milliseconds).
    pub fn json<'a>(&'a self, timestamp: &'a str) -> ChatJson<'a> {
        ChatJson {
            timestamp,
            sender: &self.sender,
            recipient: &self.recipient,
            broadcast: &self.broadcast,
            message: &self.message,
            line_number: self.line_number,
            ambiguous: self.ambiguous,
        }
    }

    /// One JSON line (no newline), fields in the reference's order.
    pub fn json_line(&self, timestamp: &str) -> String {
        serde_json::to_string(&self.json(timestamp)).unwrap_or_default()
    }
}

/// The reference's fields in its order; `ambiguous` (circe's addition) only when true.
#[derive(Debug, Serialize)]
pub struct ChatJson<'a> {
    pub timestamp: &'a str,
    pub sender: &'a str,
    pub recipient: &'a str,
    pub broadcast: &'a [String],
    pub message: &'a str,
    pub line_number: u64,
    #[serde(skip_serializing_if = "is_false")]
    pub ambiguous: bool,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if signature")]
fn is_false(b: &bool) -> bool {
    !*b
}
