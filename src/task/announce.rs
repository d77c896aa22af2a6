//! How lifecycle changes reach the coordinator: always as events in LOGS/events.jsonl;
//! with `announce: inbox` also as a message in every coordinator's INBOX.

use super::record::StatusRecord;
use crate::config::Announce;
use crate::error::Result;
use crate::workspace::Workspace;

/// A status change worth telling the coordinator about (`status_update`).
pub fn status_changed(ws: &Workspace, by: &str, rec: &StatusRecord) -> Result<()> {
    if ws.config.announce != Announce::Inbox {
        return Ok(());
    }
    let text = format!("task {} is now {} (epoch {})", rec.task_id, rec.status.as_str(), rec.epoch);
    crate::boxes::notify_coordinators(ws, by, "status_update", &rec.task_id, &text)
}

/// Something the coordinator must act on (a parked task): sent whatever `announce` says.
pub fn tell_coordinators(ws: &Workspace, by: &str, task: &str, text: &str) -> Result<()> {
    crate::boxes::notify_coordinators(ws, by, "escalate", task, text)
}
