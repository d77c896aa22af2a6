//! The message model shared by both on-disk formats.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use super::{Format, Priority, status};
use crate::clock;

/// One message, as parsed from a file or built by a command. Header values are kept as
/// written (addresses, statuses), so rendering gives the same text back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Message {
    pub format: Format,
    pub msg_id: Option<String>,
    /// The sender as written: `engineer`, or TX `mesh/agent`.
    pub from: Option<String>,
    /// An agent, a role, or `all`; TX `mesh/agent` too.
    pub to: Option<String>,
    /// CIRCE `intent`, TX `type`.
    pub intent: Option<String>,
    pub task_id: Option<String>,
    /// As written; see `status_normalized`.
    pub status: Option<String>,
    /// CIRCE `created_at`, TX `timestamp`.
    #[serde(serialize_with = "time")]
    pub created_at: Option<DateTime<Utc>>,
    pub in_reply_to: Option<String>,
    pub headline: Option<String>,
    pub priority: Option<Priority>,
    #[serde(serialize_with = "time")]
    pub deadline: Option<DateTime<Utc>>,
    pub tags: Vec<String>,
    /// Per-sender sequence number.
    pub seq: Option<u64>,
    /// The epoch of the sender's counter `seq` was taken in (absent: 0); a reset starts a
    /// new one (PROTOCOLS.md section 14).
    pub seq_epoch: Option<u64>,
    /// Unknown headers in their original order; keys and values as written.
    #[serde(serialize_with = "ordered_map")]
    pub extra: Vec<(String, String)>,
    /// Everything after the header block, verbatim.
    pub body: String,
}

/// The agent part of an address: the last `/` segment (`core/core` -> `core`, `qa` -> `qa`).
pub fn agent_of(addr: &str) -> &str {
    addr.rsplit('/').next().unwrap_or(addr)
}

impl Message {
    /// An empty message in the given format.
    pub fn new(format: Format) -> Message {
        Message { format, ..Message::default() }
    }

    /// The sender's agent name, without a TX mesh prefix.
    pub fn from_agent(&self) -> Option<&str> {
        self.from.as_deref().map(agent_of)
    }

    /// The recipient's agent or role name (or `all`), without a TX mesh prefix.
    pub fn to_agent(&self) -> Option<&str> {
        self.to.as_deref().map(agent_of)
    }

    /// One line saying what the message is about (`summary_of`), at most 120 characters.
    pub fn summary(&self) -> Option<String> {
        summary_of(self.headline.as_deref(), &self.body).map(|s| clip(s, 120))
    }

    /// The status mapped onto the CIRCE set (`complete` -> `completed`, ...).
    pub fn status_normalized(&self) -> Option<&'static str> {
        self.status.as_deref().and_then(status::normalize)
    }
}

/// What a message is about, in one line as written: its headline, else the first line of
/// text (not a heading) of its `## Summary` section, else its first line of text. `None`
/// when it has none. Every one-line form (inbox, thread, chat, archive summary) starts here.
pub fn summary_of<'m>(headline: Option<&'m str>, body: &'m str) -> Option<&'m str> {
    let text = |l: &&str| !l.is_empty() && !l.starts_with('#');
    if let Some(h) = headline.map(str::trim).filter(|h| !h.is_empty()) {
        return Some(h);
    }
    let mut lines = body.lines().map(str::trim);
    if lines.by_ref().any(|l| l.eq_ignore_ascii_case("## summary")) {
        let section = lines.take_while(|l| !l.starts_with("## ")).find(text);
        if section.is_some() {
            return section;
        }
    }
    body.lines().map(str::trim).find(text)
}

/// A character that changes the order text is shown in (Unicode's bidirectional controls):
/// escaped wherever text another agent wrote is shown to people.
pub fn reorders(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

/// `s` kept on one line of a file people read (an archived task's summary): line breaks and
/// tabs written `\n`, `\r`, `\t` (as `error::one_line`), and every other control character
/// and every character that reorders the text shown around it escaped (`\u{1b}`), so that a
/// note can neither make a line of its own nor act on the terminal that shows the file.
pub fn one_line_shown(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || reorders(c)) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || reorders(c) => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `s` cut to at most `max` characters, with `…` as the last one when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

#[expect(clippy::ref_option, reason = "serde's serialize_with passes a reference to the field")]
fn time<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_some(&clock::format(*t)),
        None => s.serialize_none(),
    }
}

fn ordered_map<S: Serializer>(extra: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(extra.len()))?;
    for (k, v) in extra {
        map.serialize_entry(k, v)?;
    }
    map.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors() {
        assert_eq!(agent_of("core/core"), "core");
        assert_eq!(agent_of("research-abc123/interviewer"), "interviewer");
        assert_eq!(agent_of("qa"), "qa");
        let mut m = Message::new(Format::FrontMatter);
        m.from = Some("brain/brain".into());
        m.to = Some("all".into());
        m.status = Some("complete".into());
        assert_eq!(m.from_agent(), Some("brain"));
        assert_eq!(m.to_agent(), Some("all"));
        assert_eq!(m.status_normalized(), Some("completed"));
    }

    #[test]
    fn summary_is_the_headline_or_the_summary_section() {
        let mut m = Message::new(Format::Circe);
        assert_eq!(m.summary(), None);
        m.body = "## Context\nsome\n\n## Summary\n\nImplement JWT\nmore\n".into();
        assert_eq!(m.summary().as_deref(), Some("Implement JWT"));
        m.body = "# Title\nfirst words\n".into();
        assert_eq!(m.summary().as_deref(), Some("first words"));
        m.headline = Some("the headline".into());
        assert_eq!(m.summary().as_deref(), Some("the headline"));
        // A blank headline is none; the section ends at the next `## ` heading, and an empty
        // one gives way to the body's first line.
        assert_eq!(summary_of(Some("  "), "text"), Some("text"));
        assert_eq!(summary_of(None, "intro\n## Summary\n\n## Context\nlater"), Some("intro"));
        assert_eq!(summary_of(None, "## Summary\n### sub\n  one  \n"), Some("one"));
        assert_eq!(summary_of(None, "# only a heading"), None);
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
    }

    #[test]
    fn json_keeps_extra_order_and_formats_times() {
        let mut m = Message::new(Format::Circe);
        m.created_at = clock::parse("2025-11-21T17:00:00Z");
        m.extra = vec![("zeta".into(), "1".into()), ("alpha".into(), "2".into())];
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains(r#""created_at":"2025-11-21T17:00:00Z""#), "{json}");
        assert!(json.contains(r#""extra":{"zeta":"1","alpha":"2"}"#), "{json}");
        assert!(json.contains(r#""format":"circe""#), "{json}");
    }
}
