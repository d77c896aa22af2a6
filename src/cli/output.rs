//! Output: data on stdout (human text or one JSON document), diagnostics on stderr.
//! A closed stdout (`circe tasks | head`) ends quietly (FS_RULES 14).
//!
//! Two shapes: a one-shot command returns a `Report` (printed once, at the end); a command
//! that prints as it goes (watch, log --follow, demo, replay) writes through `Out`, one line
//! at a time, flushed per line (JSON lines with `--json`), and returns `Report::streamed()`.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// What a command produced: text for people, JSON for programs, and the exit code.
pub struct Report {
    pub human: String,
    pub json: Value,
    pub code: u8,
    /// Diagnostics for stderr (`warning: …`), printed whatever the output format.
    pub warnings: Vec<String>,
}

impl Report {
    /// A command that printed everything through `Out` already.
    pub fn streamed() -> Report {
        Report { human: String::new(), json: Value::Null, code: 0, warnings: Vec::new() }
    }

    pub fn new(human: impl Into<String>, json: impl Serialize) -> Report {
        Report {
            human: human.into(),
            json: serde_json::to_value(json).unwrap_or(Value::Null),
            code: 0,
            warnings: Vec::new(),
        }
    }

    #[must_use]
    pub fn warnings(mut self, warnings: Vec<String>) -> Report {
        self.warnings = warnings;
        self
    }

    #[must_use]
    pub fn code(mut self, code: u8) -> Report {
        self.code = code;
        self
    }

    pub fn print(&self, json: bool) {
        let mut err = std::io::stderr().lock();
        for w in &self.warnings {
            let _ = writeln!(err, "warning: {}", error_safe(w));
        }
        drop(err);
        let mut out = std::io::stdout().lock();
        let r = if json && self.json.is_null() && self.human.is_empty() {
            Ok(()) // streamed
        } else if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&self.json).unwrap_or_default())
        } else if self.human.is_empty() {
            Ok(())
        } else {
            let human = terminal_safe(&self.human);
            if human.ends_with('\n') {
                out.write_all(human.as_bytes())
            } else {
                writeln!(out, "{human}")
            }
        };
        // A reader that went away is not an error (broken pipe); any other failure is.
        if let Err(e) = r.and_then(|()| out.flush()) {
            stdout_failed(&e);
        }
    }
}

/// Why writing to stdout failed, when it did for another reason than a reader that went
/// away (a full disk, `/dev/full`): the command then ends with exit 1 (`stdout_failure`).
static STDOUT_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Note a failed write to stdout: a closed pipe is a reader that went away, not an error.
pub fn stdout_failed(e: &std::io::Error) {
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        let _ = STDOUT_FAILED.set(e.to_string());
    }
}

/// The failure to write stdout, if the command had one (not a closed pipe).
pub fn stdout_failure() -> Option<&'static str> {
    STDOUT_FAILED.get().map(String::as_str)
}

/// Text for a terminal: what other agents wrote (a summary, a body, a chat line) may hold
/// control characters, and an escape sequence would act on the reader's terminal (colour,
/// cursor moves, a title). Every control character but newline, tab and the carriage return
/// of a CRLF line end is shown escaped (`\u{1b}`); so is every character that reorders the
/// text around it when shown (the bidirectional overrides, embeddings, isolates and marks:
/// a summary could otherwise show words in another order than they are). JSON escapes
/// control characters itself and keeps the others: a program reads them in order.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    escaped(s, false)
}

/// An error's, a warning's or a hint's text for a terminal: as `terminal_safe`, and every
/// character that shows nothing (zero-width spaces and joiners, the soft hyphen, the byte
/// order mark) escaped as well. circe's own words hold none, so one there was typed or read
/// (a key `T\u{200b}-1` that looks like `T-1` would read "no task `T-1`"). Messages and
/// chat keep them: a joiner is part of an emoji or of a word in some scripts.
/// And a line of it that would begin as circe's own do (`error:`, `hint:`, `warning:`) is
/// indented: a value typed or read with a line break in it cannot pass for circe's advice.
pub fn error_safe(s: &str) -> std::borrow::Cow<'_, str> {
    const OWN: [&str; 3] = ["\nerror:", "\nhint:", "\nwarning:"];
    let e = escaped(s, true);
    if !OWN.iter().any(|o| e.contains(o)) {
        return e;
    }
    let mut out = e.into_owned();
    for o in OWN {
        out = out.replace(o, &format!("\n  {}", &o[1..]));
    }
    std::borrow::Cow::Owned(out)
}

fn escaped(s: &str, invisible_too: bool) -> std::borrow::Cow<'_, str> {
    let mut chars = s.chars().peekable();
    let mut out: Option<String> = None;
    let mut at = 0;
    while let Some(c) = chars.next() {
        let kept = !(c.is_control() || reorders(c) || invisible_too && invisible(c))
            || matches!(c, '\n' | '\t')
            || c == '\r' && chars.peek() == Some(&'\n');
        match (&mut out, kept) {
            (Some(o), true) => o.push(c),
            (Some(o), false) => o.extend(c.escape_default()),
            (None, false) => {
                let mut o = String::with_capacity(s.len() + 16);
                o.push_str(&s[..at]);
                o.extend(c.escape_default());
                out = Some(o);
            }
            (None, true) => {}
        }
        at += c.len_utf8();
    }
    out.map_or(std::borrow::Cow::Borrowed(s), std::borrow::Cow::Owned)
}

use crate::message::reorders;

/// Characters that take no room when shown: the zero-width space, non-joiner and joiner,
/// the word joiner and the invisible operators, the soft hyphen, the Mongolian vowel
/// separator, the zero-width no-break space (byte order mark).
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{ad}' | '\u{180e}' | '\u{feff}')
}

/// The writer of commands that print as they go: one line at a time on stdout, flushed per
/// line. A reader that went away (a closed pipe) is not an error: `line` says `false` and
/// the command ends with exit 0.
pub struct Out {
    pub json: bool,
    closed: bool,
}

impl Out {
    pub fn new(json: bool) -> Out {
        Out { json, closed: false }
    }

    /// Write one line (a newline is added); `false` once stdout is closed.
    pub fn line(&mut self, text: &str) -> bool {
        if self.closed {
            return false;
        }
        let mut out = std::io::stdout().lock();
        let mut buf = String::with_capacity(text.len() + 1);
        buf.push_str(
            if self.json { std::borrow::Cow::Borrowed(text) } else { terminal_safe(text) }.as_ref(),
        );
        buf.push('\n');
        if let Err(e) = out.write_all(buf.as_bytes()).and_then(|()| out.flush()) {
            stdout_failed(&e);
            self.closed = true;
        }
        !self.closed
    }

    /// With `--json` the object as one line, else `human` (which may hold several lines).
    pub fn item(&mut self, human: &str, json: &impl Serialize) -> bool {
        if self.json {
            let line = serde_json::to_string(json).unwrap_or_default();
            self.line(&line)
        } else {
            self.line(human.strip_suffix('\n').unwrap_or(human))
        }
    }
}

/// Print an error: `error: …` and `hint: …` on stderr; with --json also a JSON object on stdout
/// (on one line for a command whose output is JSON lines).
pub fn print_error(e: &Error, json: bool, one_line: bool) {
    if json {
        let doc = super::vocab::ErrorJson {
            error: super::vocab::ErrorBody {
                kind: e.kind.as_str().to_string(),
                exit_code: e.exit_code(),
                message: e.chain(),
                hint: e.hint.clone(),
                details: e.details.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect(),
            },
        };
        let mut out = std::io::stdout().lock();
        let text =
            if one_line { serde_json::to_string(&doc) } else { serde_json::to_string_pretty(&doc) };
        let _ = writeln!(out, "{}", text.unwrap_or_default());
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {}", error_safe(&e.chain()));
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "hint: {}", error_safe(h));
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_line_that_would_pass_for_circes_own_is_indented() {
        let shown = super::error_safe("request id `a\nhint: rm -rf /`\r\nerror: x\nfine");
        assert_eq!(shown, "request id `a\n  hint: rm -rf /`\r\n  error: x\nfine");
        assert!(matches!(super::error_safe("one\ntwo"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_safe_escapes_control_characters_but_line_ends_and_tabs() {
        let shown = super::terminal_safe("a\u{1b}[31mb\u{7}\tc\r\nd\re\n");
        assert_eq!(shown, "a\\u{1b}[31mb\\u{7}\tc\r\nd\\re\n");
        assert!(matches!(super::terminal_safe("plain\ttext\r\n"), std::borrow::Cow::Borrowed(_)));
        // A right-to-left override would show the text after it reversed: shown escaped.
        assert_eq!(super::terminal_safe("ok \u{202e}yned\u{2066}x"), "ok \\u{202e}yned\\u{2066}x");
        // A joiner in a message stays; in an error it is shown.
        assert_eq!(super::terminal_safe("a\u{200d}b"), "a\u{200d}b");
        assert_eq!(
            super::error_safe("T\u{200b}-1 \u{feff}x\u{ad}"),
            "T\\u{200b}-1 \\u{feff}x\\u{ad}"
        );
        assert!(matches!(super::terminal_safe("naïve ünïcode"), std::borrow::Cow::Borrowed(_)));
    }
}
