//! The event log's model: what happened, one typed event per line of `LOGS/events.jsonl`.
//!
//! Pure: the engine stores and reads lines; this module says what a line is. Format
//! version 3 (PROTOCOLS.md section 10): every line is one JSON object whose first field is
//! `id`, a number that is strictly increasing and gap-free per root (assigned by the engine
//! under the log's lock), and whose second is `v`, this format's version. A reader refuses a
//! line of a newer version instead of misreading it, and skips lines written before ids
//! existed (version 1 had neither field).

mod cursor;
mod kind;

use serde::{Deserialize, Serialize};

pub use cursor::Cursor;
pub use kind::{ALL_KINDS, EventKind};

use crate::error::{Error, Result};
use crate::names::{AgentName, TaskId};
use crate::task::Status;

/// The version of the line format this circe writes and reads.
pub const FORMAT: u32 = 3;

/// The acting name circe itself uses for what it does on its own (repairs, lease expiry
/// noticed by cron, escalations). No agent may be called this.
pub const CIRCE: &str = "circe";

/// A message file an event is about: its box (`new`, `inbox:<a>`, `workspace:<a>`, `logs`)
/// and its file name, so a consumer (a watch hook) needs no search to open it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
}

/// One event. Fields that do not apply to its kind are absent from the line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the root's log: 1, 2, 3, ... with no gaps (0 until the engine assigns it).
    pub id: u64,
    /// The line format's version (`FORMAT`).
    pub v: u32,
    /// When it happened (RFC 3339, milliseconds, UTC).
    pub ts: String,
    pub event: EventKind,
    /// Who did it: an agent, or `circe`.
    pub agent: String,
    /// The task's id: `task_id`, as in every other JSON circe prints (format 2 wrote `task`,
    /// still read).
    #[serde(default, rename = "task_id", alias = "task", skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskId>,
    /// The task's status before and after (always statuses, never placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Status>,
    /// The task's epoch after the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The message files this event put somewhere (a delivery names one per recipient).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// The message's `to` (an agent, a role, `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressed_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// The previous owner (release, expiry, park, takeover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forced: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// How a check was recorded: `run` or `asserted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// The argv of `check --run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// What a repair did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// The consumer (cursor name) a `dead_letter` is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    /// A `skip`: the stale message's sender, its number and epoch (absent when 0), and the
    /// receiver's lastSeen of that sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<u64>,
}

impl Event {
    /// The message file this event means for `agent`: its own INBOX copy when the event
    /// names one (a message to a role or to `all` names every recipient's), else the first.
    pub fn file_for(&self, agent: Option<&str>) -> Option<&FileRef> {
        let own = agent.map(|a| format!("inbox:{a}"));
        own.and_then(|b| self.files.iter().find(|f| f.mailbox == b)).or_else(|| self.files.first())
    }

    /// A new event of `kind` by `agent` at `ts`, with every optional field absent.
    pub fn new(kind: EventKind, agent: &str, ts: String) -> Event {
        Event {
            id: 0,
            v: FORMAT,
            ts,
            event: kind,
            agent: agent.to_string(),
            task: None,
            from: None,
            to: None,
            epoch: None,
            files: Vec::new(),
            msg_id: None,
            intent: None,
            addressed_to: None,
            in_reply_to: None,
            owner: None,
            attempts: None,
            expiries: None,
            note: None,
            reason: None,
            forced: false,
            check: None,
            passed: None,
            how: None,
            command: None,
            exit_code: None,
            seconds: None,
            what: None,
            consumer: None,
            sender: None,
            seq: None,
            seq_epoch: None,
            last_seen: None,
        }
    }

    /// An event stamped with the current time (`CIRCE_NOW` when pinned).
    pub fn now(kind: EventKind, agent: &str) -> Event {
        Event::new(kind, agent, crate::clock::stamp_ms(crate::clock::now()))
    }

    #[must_use]
    pub fn task(mut self, task: &TaskId) -> Event {
        self.task = Some(task.clone());
        self
    }

    /// A lifecycle move: the status before and after, and the epoch after.
    #[must_use]
    pub fn moved(mut self, from: Option<Status>, to: Status, epoch: u64) -> Event {
        self.from = from;
        self.to = Some(to);
        self.epoch = Some(epoch);
        self
    }

    #[must_use]
    pub fn file(mut self, mailbox: String, file: String) -> Event {
        self.files.push(FileRef { mailbox, file });
        self
    }

    /// Does this event concern `agent`: done by it, or about its boxes or its task?
    pub fn concerns_agent(&self, agent: &AgentName) -> bool {
        let a = agent.as_str();
        self.agent == a
            || self.owner.as_deref() == Some(a)
            || self.addressed_to.as_deref() == Some(a)
            || self
                .files
                .iter()
                .any(|f| f.mailbox.split_once(':').is_some_and(|(_, owner)| owner == a))
    }

    /// The JSON line (without its newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The id of a line that is a whole event (its id, and JSON to its end): a line once torn
/// by a failed write and ended by a later append carries an id but is damage, not an event.
pub fn whole_line_id(line: &str) -> Option<u64> {
    line_id(line).filter(|_| serde_json::from_str::<serde::de::IgnoredAny>(unmarked(line)).is_ok())
}

/// A line without the byte-order mark an editor may put before the log's first line: the
/// event is read as if it were not there (as a message's or a record's is).
fn unmarked(line: &str) -> &str {
    line.strip_prefix('\u{feff}').unwrap_or(line)
}

/// What one line of the log holds.
#[derive(Debug)]
pub enum Line {
    Event(Box<Event>),
    /// A line written before events had ids (format 1): kept, never delivered to a cursor.
    Legacy,
}

/// Parse one line (without its newline).
pub fn parse_line(line: &str) -> Result<Line> {
    #[derive(Deserialize)]
    struct Head {
        id: Option<u64>,
        v: Option<u32>,
    }
    let line = unmarked(line);
    let head: Head = serde_json::from_str(line)
        .map_err(|e| Error::internal(format!("event log line is not JSON: {e}")))?;
    match (head.id, head.v) {
        (None, _) | (_, None) => Ok(Line::Legacy),
        (Some(id), Some(v)) if v > FORMAT => Err(newer_format(id, v)),
        (Some(_), Some(_)) => serde_json::from_str::<Event>(line)
            .map(|e| Line::Event(Box::new(e)))
            .map_err(|e| Error::internal(format!("event log line does not parse: {e}"))),
    }
}

/// A line of a format newer than this circe reads, event `id`: refused, not misread (the
/// reader adds where it lies).
pub fn newer_format(id: u64, v: u32) -> Error {
    Error::refused(format!(
        "the event log holds a line of format {v} (event {id}); this circe reads up to {FORMAT}"
    ))
    .detail("event_id", id.to_string())
    .hint("upgrade circe if a newer one wrote it; a line added by hand is for a person to remove (`circe doctor` names it)")
}

/// The format of a database row's line when it is newer than this circe reads: `Some(v)`.
/// There the row's id column is the event's id (circe writes the line with id 0), so a line
/// is judged by its `v` whether or not it holds an id.
pub fn newer_format_of_row(line: &str) -> Option<u32> {
    #[derive(Deserialize)]
    struct Head {
        v: Option<u32>,
    }
    if unmarked(line).starts_with("{\"id\":") {
        return newer_format_of(line);
    }
    serde_json::from_str::<Head>(unmarked(line)).ok()?.v.filter(|v| *v > FORMAT)
}

/// The format of a line with an id when it is newer than this circe reads: `Some(v)`.
/// circe writes `{"id":N,"v":V,...`, read without parsing the rest; a line in another order
/// is parsed for its head.
pub fn newer_format_of(line: &str) -> Option<u32> {
    #[derive(Deserialize)]
    struct Head {
        v: Option<u32>,
    }
    let line = unmarked(line);
    let rest = line.strip_prefix("{\"id\":")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let v = if let Some(r) = rest[digits..].strip_prefix(",\"v\":") {
        r[..r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len())].parse().ok()
    } else {
        serde_json::from_str::<Head>(line).ok()?.v
    };
    v.filter(|v| *v > FORMAT)
}

/// The id of a line circe wrote (`{"id":N,...`), read without parsing the rest.
pub fn line_id(line: &str) -> Option<u64> {
    let rest = unmarked(line).strip_prefix("{\"id\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_id_first() {
        let mut e = Event::new(EventKind::Claim, "engineer", "2025-11-21T17:00:00.000Z".into())
            .task(&TaskId::new("AUTH-012").unwrap())
            .moved(Some(Status::New), Status::Claimed, 1)
            .file("inbox:engineer".into(), "x.md".into());
        e.id = 42;
        let line = e.to_line();
        assert!(line.starts_with("{\"id\":42,\"v\":3,"), "{line}");
        assert!(line.contains("\"task_id\":\"AUTH-012\""), "{line}");
        assert!(!line.contains("null"), "absent fields are left out: {line}");
        assert_eq!(line_id(&line), Some(42));
        match parse_line(&line).unwrap() {
            Line::Event(back) => assert_eq!(*back, e),
            Line::Legacy => panic!("not legacy"),
        }
    }

    #[test]
    fn format_2_lines_name_the_task_task() {
        let v2 = r#"{"id":7,"v":2,"ts":"x","event":"claim","agent":"qa","task":"T-1"}"#;
        match parse_line(v2).unwrap() {
            Line::Event(e) => assert_eq!(e.task.unwrap().as_str(), "T-1"),
            Line::Legacy => panic!("not legacy"),
        }
    }

    #[test]
    fn legacy_and_newer_lines() {
        let v1 = r#"{"ts":"2025-11-21T17:00:00.000Z","event":"claim","agent":"qa"}"#;
        assert!(matches!(parse_line(v1).unwrap(), Line::Legacy));
        assert_eq!(line_id(v1), None);
        let v9 = r#"{"id":1,"v":9,"ts":"x","event":"claim","agent":"qa"}"#;
        assert_eq!(parse_line(v9).unwrap_err().kind, crate::error::Kind::Refused);
        assert!(parse_line("{\"id\":1,").is_err(), "a torn line is not an event");
        assert!(parse_line(v9).unwrap_err().message.contains("(event 1)"));
        assert_eq!(newer_format_of(v9), Some(9));
        let reordered = r#"{"id":1,"ts":"x","v":12,"event":"claim","agent":"qa"}"#;
        assert_eq!(newer_format_of(reordered), Some(12));
        let v3 = r#"{"id":1,"v":3,"ts":"x","event":"claim","agent":"qa"}"#;
        assert_eq!(newer_format_of(v3), None);
        assert_eq!(newer_format_of(v1), None);
        // A database row's line: with id 0 as circe writes it, or with no id at all.
        assert_eq!(newer_format_of_row(r#"{"id":0,"v":9,"ts":"x"}"#), Some(9));
        assert_eq!(newer_format_of_row(r#"{"v":9,"ts":"x","event":"claim"}"#), Some(9));
        assert_eq!(newer_format_of_row(r#"{"id":0,"v":3,"ts":"x"}"#), None);
        assert_eq!(newer_format_of_row("not json"), None);
    }

    #[test]
    fn unknown_kinds_from_newer_writers_still_parse() {
        let l = r#"{"id":3,"v":2,"ts":"x","event":"teleport","agent":"qa"}"#;
        match parse_line(l).unwrap() {
            Line::Event(e) => assert_eq!(e.event, EventKind::Other),
            Line::Legacy => panic!(),
        }
    }
}
