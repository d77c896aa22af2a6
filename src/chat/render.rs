//! Writing a message in the channel's line form: `[sender-to-recipient] @ [a, b]: text`,
//! continuation lines indented by two spaces. What `circe chat say` appends.

use crate::error::{Error, Result};

/// The text of a message, normalised: `\r\n` read as `\n`, a trailing `\r` on a line
/// dropped, blank lines at the start and end dropped, the first line's leading whitespace
/// dropped (the grammar's `\s*` after the colon would eat it). Empty text is refused.
pub fn normalise_text(text: &str) -> Result<Vec<String>> {
    // A byte-order mark (an editor's, before text piped in) is no part of what is said.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Neither engine keeps a NUL in a line of text (PostgreSQL refuses it in text).
    if let Some(at) = text.find('\0') {
        let line = 1 + text[..at].matches('\n').count();
        return Err(Error::refused(format!("the message holds a NUL byte (line {line})"))
            .hint("chat messages are text: remove it (a file meant to be shared goes in a message: `circe --agent NAME send --to TO --intent inform --body-file FILE`)"));
    }
    let mut lines: Vec<String> =
        text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let Some(first) = first else {
        return Err(Error::usage("the message is empty")
            .hint("give the text as arguments, or on standard input"));
    };
    lines.drain(..first);
    lines[0] = lines[0].trim_start().to_string();
    Ok(lines)
}

/// The bytes to append for one message: the first line, then every further line indented
/// by two spaces, each ending in `\n`.
pub fn render(sender: &str, recipient: &str, cc: &[String], lines: &[String]) -> String {
    let mut out = format!("[{sender}-to-{recipient}]");
    if !cc.is_empty() {
        out.push_str(&format!(" @ [{}]", cc.join(", ")));
    }
    out.push_str(": ");
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("  ");
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}
