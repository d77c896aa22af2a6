//! The `--json` documents of `circe archive` (run, search, restore, verify) and of `circe
//! show` for archived work, in the shared vocabulary (section 11: `task_id`, `null` for what
//! is absent, lists under plural keys), with their schemas.

use schemars::JsonSchema;
use serde::Serialize;

use super::schema_defs::EventDef;
use crate::archive::{Bundle, Hit, Report};
use crate::event::Event;

/// `circe archive --json` (and `--dry-run`): what the run moved, or would move.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveJson {
    pub dry_run: bool,
    pub task_count: u64,
    pub message_count: u64,
    pub record_count: u64,
    /// Event-log segments moved, and the events they hold.
    pub log_segment_count: u64,
    pub event_count: u64,
    pub chat_file_count: u64,
    /// Messages of finished tasks filed from agents' boxes into LOGS first.
    pub filed_count: u64,
    /// Bytes of the originals that moved.
    pub bytes: u64,
    /// Bytes of the compressed segments written.
    pub archived_bytes: u64,
    /// The segments written, each by its file name (`<period>.<run>.tar.zst`, lying in
    /// `ARCHIVE/<period>/`), as `show` and `archive search` name a `segment`.
    pub segments: Vec<String>,
    /// Segments deleted by `archive.keep` (file names, as `segments`).
    pub expired: Vec<String>,
    /// What an interrupted earlier run left, and what was done about it.
    pub recovered: Vec<String>,
    /// Whether the event log was rotated.
    pub rotated: bool,
    /// Task ids selected but kept in place (they changed during the run).
    pub kept: Vec<String>,
}

/// A segment's file name from the engine's `<period>/<file>` (its place under ARCHIVE/):
/// the period is the name's first part already.
fn segment_name(s: &str) -> String {
    s.rsplit_once('/').map_or(s, |(_, name)| name).to_string()
}

impl From<Report> for ArchiveJson {
    fn from(r: Report) -> ArchiveJson {
        ArchiveJson {
            dry_run: r.dry_run,
            task_count: r.tasks,
            message_count: r.messages,
            record_count: r.records,
            log_segment_count: r.log_segments,
            event_count: r.events,
            chat_file_count: r.chat_files,
            filed_count: r.filed,
            bytes: r.bytes,
            archived_bytes: r.archived_bytes,
            segments: r.segments.iter().map(|s| segment_name(s)).collect(),
            expired: r.expired.iter().map(|s| segment_name(s)).collect(),
            recovered: r.recovered,
            rotated: r.rotated,
            kept: r.kept,
        }
    }
}

/// One archived file a search found.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveHitJson {
    /// `ARCHIVE/<period>/<segment>` holds it.
    pub period: String,
    pub segment: String,
    /// Its path inside the segment's tar.
    pub member: String,
    /// `record`, `message`, `task_events`, `manifest`, `summary`, `log` or `chat`.
    pub kind: String,
    pub task_id: Option<String>,
    /// Where it lay in the root (`LOGS/x.md`), `null` for what the archive made.
    pub origin: Option<String>,
    pub bytes: u64,
    pub sha256: String,
    pub msg_id: Option<String>,
    pub created_at: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub intent: Option<String>,
    pub summary: Option<String>,
    /// The line that matched, for a search by text.
    pub line: Option<String>,
}

impl From<Hit> for ArchiveHitJson {
    fn from(h: Hit) -> ArchiveHitJson {
        let e = h.entry;
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        ArchiveHitJson {
            period: h.period,
            segment: h.segment,
            member: e.member,
            kind,
            task_id: e.task,
            origin: e.origin,
            bytes: e.bytes,
            sha256: e.sha256,
            msg_id: e.msg_id,
            created_at: e.created_at,
            from: e.from,
            to: e.to,
            intent: e.intent,
            summary: e.summary,
            line: h.line,
        }
    }
}

/// `circe archive search --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSearchJson {
    /// The first `--limit` hits (100 by default).
    pub hits: Vec<ArchiveHitJson>,
    /// How many hits the search found, those past `--limit` included.
    pub hit_count: usize,
    /// True when `hits` holds fewer than `hit_count` (`--limit` cut them).
    pub truncated: bool,
    /// Segments that could not be read, each with why (the others were searched).
    pub passed_over: Vec<String>,
}

/// `circe archive restore --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveRestoreJson {
    pub task_id: String,
    /// The files written, under the folder given.
    pub written: Vec<String>,
    /// The folder the task's members lie under in its segment (`<stem>/tasks/<task>/`).
    pub bundle: String,
}

/// A segment that does not verify.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BadSegmentJson {
    pub segment: String,
    pub problem: String,
}

/// `circe archive verify --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveVerifyJson {
    /// Segments read back.
    pub segment_count: usize,
    pub bad: Vec<BadSegmentJson>,
}

/// An archived task's file.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchivedFileJson {
    /// Where it lay in the root; `restore --to DIR` writes it at `DIR/<origin>`.
    pub origin: String,
    pub bytes: u64,
    /// From the task's manifest (`null` when the manifest does not name it).
    pub sha256: Option<String>,
}

/// `circe show TASK --json` for an archived task.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowArchivedTaskJson {
    pub task_id: String,
    /// Its last status (completed, failed or expired).
    pub status: String,
    pub archived_at: String,
    pub period: String,
    pub segment: String,
    /// The folder its members lie under in the segment (`<stem>/tasks/<task>/`).
    pub bundle: String,
    /// `ARCHIVE/<period>/summaries/<task>.md`.
    pub summary_file: String,
    pub files: Vec<ArchivedFileJson>,
    #[schemars(with = "Vec<EventDef>")]
    pub events: Vec<Event>,
    /// The summary's text.
    pub summary: String,
}

impl From<&Bundle> for ShowArchivedTaskJson {
    fn from(b: &Bundle) -> ShowArchivedTaskJson {
        let t = &b.tombstone;
        let sha = |origin: &str| {
            b.manifest
                .as_ref()
                .and_then(|m| m.files.iter().find(|f| f.origin == origin))
                .map(|f| f.sha256.clone())
        };
        ShowArchivedTaskJson {
            task_id: t.task.to_string(),
            status: t.status.clone(),
            archived_at: t.archived_at.clone(),
            period: t.period.clone(),
            segment: t.segment.clone(),
            bundle: t.members(),
            summary_file: t.summary_path(),
            files: b
                .files
                .iter()
                .map(|(o, bytes)| ArchivedFileJson {
                    origin: o.clone(),
                    bytes: bytes.len() as u64,
                    sha256: sha(o),
                })
                .collect(),
            events: b.events.clone(),
            summary: b.summary.clone(),
        }
    }
}

/// `circe show KEY --json` for a message found only in the archive.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowArchivedMessageJson {
    pub archived: ArchiveHitJson,
    /// Its text, when it is a task's message (from the task's bundle).
    pub text: Option<String>,
}
