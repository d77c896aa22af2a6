//! The archive's model (PROTOCOLS.md section 17): what leaves the hot folders, where it goes,
//! and the on-disk formats of what it leaves behind (the index, a segment's member list, a
//! task's manifest, tombstones, the run's journal). Pure: the engine does the file work.
//!
//! `select` decides what goes, `summary` writes a task's story for people, `plan` decides how
//! an interrupted run is finished, `query` matches `circe archive search`.

pub mod config;
pub mod plan;
pub mod query;
pub mod select;
pub mod summary;

use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};

use crate::names::TaskId;

/// The version of every archive format below (index lines, member lines, manifests,
/// tombstones, the journal). A reader refuses a newer one instead of misreading it.
pub const FORMAT: u32 = 1;

/// The circe that wrote an archive (kept in manifests and index lines).
pub const CIRCE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A period: the calendar month (UTC) of what is archived, `YYYY-MM`. One folder per period.
pub fn period_of(t: DateTime<Utc>) -> String {
    format!("{:04}-{:02}", t.year(), t.month())
}

/// Is `s` a period name (`YYYY-MM`)?
pub fn is_period(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit)
        && matches!(
            &s[5..],
            "01" | "02" | "03" | "04" | "05" | "06" | "07" | "08" | "09" | "10" | "11" | "12"
        )
}

/// What one archive run is asked to do.
#[derive(Debug, Clone)]
pub struct Request {
    /// The time the run acts at.
    pub now: DateTime<Utc>,
    /// What reached its end (a terminal status, a message's `created_at`, an event) before
    /// this time goes.
    pub cutoff: DateTime<Utc>,
    /// Segments whose newest content is older than this are deleted (`archive.keep`).
    pub keep_until: Option<DateTime<Utc>>,
    /// Count and measure, change nothing.
    pub dry_run: bool,
    /// Chat archive files (`LOGS/chat/<name>`) a chat watcher still reads: kept.
    pub chat_needed: Vec<String>,
    /// Wait for a running archive instead of refusing at once.
    pub wait: bool,
}

/// What a run did (or, for a dry run, would do).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Report {
    pub dry_run: bool,
    pub tasks: u64,
    pub messages: u64,
    pub records: u64,
    /// Event log segments moved into the archive, and the events they hold.
    pub log_segments: u64,
    pub events: u64,
    pub chat_files: u64,
    /// Messages of finished tasks filed from agents' boxes into LOGS first.
    pub filed: u64,
    /// Bytes of the originals that moved.
    pub bytes: u64,
    /// Bytes of the compressed segments written.
    pub archived_bytes: u64,
    /// The segments written (`<period>/<file>`).
    pub segments: Vec<String>,
    /// Segments deleted by `archive.keep`.
    pub expired: Vec<String>,
    /// What an interrupted earlier run left, and what was done about it.
    pub recovered: Vec<String>,
    /// Whether the event log was rotated.
    pub rotated: bool,
    /// Tasks selected but kept in place (they changed during the run).
    pub kept: Vec<String>,
}

impl Report {
    pub fn nothing_done(&self) -> bool {
        self.tasks + self.messages + self.log_segments + self.chat_files + self.filed == 0
            && self.expired.is_empty()
            && self.recovered.is_empty()
            && !self.rotated
    }
}

/// A step of a run, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    pub done: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Scan,
    Write,
    Verify,
    Remove,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Scan => "scanning",
            Phase::Write => "writing",
            Phase::Verify => "verifying",
            Phase::Remove => "removing originals",
        }
    }
}

/// One committed segment: a line of `ARCHIVE/index.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentLine {
    pub v: u32,
    pub period: String,
    /// The file in `ARCHIVE/<period>/` (`<period>.<run>.tar.zst`).
    pub segment: String,
    /// The run that wrote it (`YYYYMMDDTHHMMSSmmmZ`).
    pub run: String,
    /// Size and SHA-256 of the compressed file (`sha256sum` checks it).
    pub bytes: u64,
    pub sha256: String,
    pub created_at: String,
    /// The newest time among what it holds (retention counts from here).
    pub newest: String,
    pub tasks: u64,
    pub messages: u64,
    pub records: u64,
    pub events: u64,
    /// Ids of the event-log lines it holds (whole rotated segments of the log), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_event: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event: Option<u64>,
    pub chat: u64,
    pub circe: String,
}

/// What a member of a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A task record (`TASKS/<id>.status|owner|checks`).
    Record,
    /// A message file (a task's, or a loose one from LOGS).
    Message,
    /// A task's events, extracted from the log (a copy: the log's own lines move as `log`).
    TaskEvents,
    /// A task's manifest.
    Manifest,
    /// A task's summary for people.
    Summary,
    /// A rotated segment of the event log (`LOGS/events-<first>-<last>.jsonl`).
    Log,
    /// An archived chat file or its record (`LOGS/chat/...`).
    Chat,
}

/// One member of a segment: a line of its member list (`<segment>.index.jsonl` beside it,
/// and `index.jsonl` inside it), in the order the members lie in the tar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub kind: EntryKind,
    /// The path inside the tar (`<segment stem>/...`).
    pub member: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Where the original lay, relative to the root (`LOGS/x.md`, `TASKS/T.status`); absent
    /// for what the archive made (manifests, summaries, a task's event extract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    pub bytes: u64,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// A message's headline or the first line of its summary (for search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The original's modification time (ns since the epoch) when it was read: with
    /// `bytes`, what the removal checks before unlinking it (a hand edit changes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime_ns: Option<u64>,
    /// For `log`: the event ids it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_event: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event: Option<u64>,
}

/// A task's manifest (`tasks/<id>/manifest.json` in its segment): its files with their
/// checksums, and the circe that wrote them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub v: u32,
    pub circe: String,
    pub task: String,
    pub archived_at: String,
    pub period: String,
    pub segment: String,
    pub files: Vec<ManifestFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Where it lay, relative to the root; `restore --to DIR` puts it at `DIR/<origin>`.
    pub origin: String,
    pub bytes: u64,
    pub sha256: String,
}

/// `ARCHIVE/tombstones/<task>`: the task was archived; its id is never used again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    pub v: u32,
    pub task: TaskId,
    pub period: String,
    pub segment: String,
    pub archived_at: String,
    /// The task's last status (completed, failed or expired).
    pub status: String,
}

impl Tombstone {
    /// The text `ARCHIVE/tombstones/<task>` holds (and a database root's `tombstones` row):
    /// one JSON object, no newline.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read a tombstone's text; `what` names where it lies (a file, a row), `task` its task.
    pub fn parse(text: &[u8], what: &str, task: &str) -> crate::error::Result<Tombstone> {
        let t: Tombstone = serde_json::from_slice(text).map_err(|e| {
            crate::error::Error::internal(format!("{what} does not read: {e}")).hint(format!(
                "a tombstone is one JSON object (section 17: v, task, period, segment, archived_at, status); `circe archive search {task}` says where the task lies, to write it again"
            ))
        })?;
        check_format(t.v, what)?;
        Ok(t)
    }

    /// Where a person finds the task: its summary, and its bundle in the segment.
    pub fn summary_path(&self) -> String {
        format!("ARCHIVE/{}/summaries/{}.md", self.period, self.task)
    }

    /// The folder the task's members lie under inside its segment (`tar --zstd -xf` writes
    /// them there).
    pub fn members(&self) -> String {
        format!("{}/tasks/{}/", segment_stem(&self.segment), self.task)
    }

    pub fn bundle(&self) -> String {
        format!(
            "ARCHIVE/{}/{} (members {}/tasks/{}/)",
            self.period,
            self.segment,
            segment_stem(&self.segment),
            self.task
        )
    }
}

/// A segment's file name without `.tar.zst`: the folder its members lie under.
pub fn segment_stem(segment: &str) -> &str {
    segment.strip_suffix(".tar.zst").unwrap_or(segment)
}

/// A task as the archive keeps it (`Engine::archived_bundle`).
#[derive(Debug, Clone)]
pub struct Bundle {
    pub tombstone: Tombstone,
    pub manifest: Option<Manifest>,
    /// (origin, bytes): each file as it lay, byte for byte.
    pub files: Vec<(String, Vec<u8>)>,
    pub events: Vec<crate::event::Event>,
    pub summary: String,
}

/// One thing `circe archive search` found.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub period: String,
    pub segment: String,
    #[serde(flatten)]
    pub entry: Entry,
    /// The line of the member's text that matched, when the search was by text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// Check a newer format is refused: `what` names the file for the error.
pub fn check_format(v: u32, what: &str) -> crate::error::Result<()> {
    if v > FORMAT {
        return Err(crate::error::Error::refused(format!(
            "{what} is of archive format {v}; this circe reads up to {FORMAT}"
        ))
        .hint("upgrade circe"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        let t = crate::clock::parse("2026-11-30T23:59:59Z").unwrap();
        assert_eq!(period_of(t), "2026-11");
        assert!(is_period("2026-11"));
        for bad in ["2026-13", "2026-1", "202611", "2026-11x", "../..-1", "2026-00"] {
            assert!(!is_period(bad), "{bad}");
        }
    }

    #[test]
    fn newer_formats_are_refused() {
        assert!(check_format(FORMAT, "x").is_ok());
        let e = check_format(FORMAT + 1, "ARCHIVE/index.jsonl").unwrap_err();
        assert_eq!(e.kind, crate::error::Kind::Refused);
        assert!(e.message.contains("ARCHIVE/index.jsonl"));
    }
}
