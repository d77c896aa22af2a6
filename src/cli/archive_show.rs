//! `circe show` for what is archived: a task's summary and bundle, or a message found in
//! the archive by msg_id or file name.

use super::Report;
use super::archive_json::{ArchiveHitJson, ShowArchivedMessageJson, ShowArchivedTaskJson};
use super::show::ShowOutput;
use crate::archive::Bundle;
use crate::archive::query::Query;
use crate::error::Result;
use crate::workspace::Workspace;

/// An archived task: where its bundle is, its files, its summary.
pub fn task(b: &Bundle) -> Report {
    let t = &b.tombstone;
    let mut human = format!(
        "task {} (archived {} on {})\nbundle: {}\nsummary: {}\n\nfiles\n",
        t.task,
        t.status,
        t.archived_at,
        t.bundle(),
        t.summary_path()
    );
    for (origin, bytes) in &b.files {
        human.push_str(&format!("  {origin} ({} bytes)\n", bytes.len()));
    }
    human.push_str(&format!("events: {}\n\n{}", b.events.len(), b.summary));
    Report::new(human, ShowOutput::ArchivedTask(Box::new(ShowArchivedTaskJson::from(b))))
}

/// A message that is only in the archive (by msg_id, prefix or file name): the first match.
pub fn message(ws: &Workspace, key: &str) -> Result<Option<Report>> {
    if !ws.engine.keeps_archive() {
        return Ok(None);
    }
    let q = Query { id: Some(key.to_string()), ..Query::default() };
    let mut hit = None;
    ws.engine.archive_search(&q, &mut |h| {
        hit = Some(h);
        Ok(false)
    })?;
    let Some(h) = hit else { return Ok(None) };
    let origin = h.entry.origin.clone().unwrap_or_default();
    // A task's message: its text from the task's bundle.
    let text = match h.entry.task.as_deref().map(crate::names::TaskId::new) {
        Some(Ok(id)) => ws
            .engine
            .archived_bundle(&id)?
            .and_then(|b| b.files.into_iter().find(|(o, _)| *o == origin))
            .map(|(_, b)| String::from_utf8_lossy(&b).into_owned()),
        // A message of no task: the file itself, from its segment.
        _ => ws.engine.archived_member(&h)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
    };
    let mut human =
        format!("archived in ARCHIVE/{}/{} as {}\n", h.period, h.segment, h.entry.member);
    if let Some(t) = &text {
        human.push('\n');
        human.push_str(t);
    }
    let doc = ShowArchivedMessageJson { archived: ArchiveHitJson::from(h), text };
    Ok(Some(Report::new(human, ShowOutput::ArchivedMessage(Box::new(doc)))))
}
