//! `circe archive`: what finished long enough ago leaves the hot folders (PROTOCOLS.md
//! section 17). The engine does the run; this decides its terms from circe.yaml and the
//! flags, rotates the chat channel when it is due, and tells the engine which chat archives a
//! watcher still reads.

use std::time::Duration;

use crate::archive::{Progress, Report, Request};
use crate::chat::archive::{ArchiveRecord, Step, records, resolve};
use crate::error::{Error, Result};
use crate::workspace::Workspace;

/// The flags of one run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Overrides `archive.after`.
    pub older_than: Option<Duration>,
    pub dry_run: bool,
    pub wait: bool,
}

/// `t - d`, never panicking (a clock far out is an error, like every time circe computes).
fn minus(t: chrono::DateTime<chrono::Utc>, d: Duration) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::TimeDelta::from_std(d).ok().and_then(|d| t.checked_sub_signed(d)).ok_or_else(|| {
        Error::internal(format!(
            "{} minus {}s is out of range",
            crate::clock::stamp(t),
            d.as_secs()
        ))
    })
}

/// Run the archive once.
pub fn run(ws: &Workspace, o: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Report> {
    let now = ws.now();
    let cutoff = minus(now, o.older_than.unwrap_or_else(|| ws.config.archive.after()))?;
    let keep_until = ws.config.archive.keep().map(|k| minus(now, k)).transpose()?;
    let chat_needed =
        if ws.engine.local_folder().is_some() { chat(ws, cutoff, o.dry_run)? } else { Vec::new() };
    let req = Request { now, cutoff, keep_until, dry_run: o.dry_run, chat_needed, wait: o.wait };
    ws.engine.archive(&req, progress)
}

/// Rotate the chat channel when it has lines and was started before the cutoff (its newest
/// archive record is older; with none, its file was made before it), then name the chat archives a saved chat cursor
/// still reads (they stay in LOGS/chat/).
fn chat(
    ws: &Workspace,
    cutoff: chrono::DateTime<chrono::Utc>,
    dry_run: bool,
) -> Result<Vec<String>> {
    let Ok(ch) = crate::chat::channel(ws) else { return Ok(Vec::new()) };
    let recs: Vec<ArchiveRecord> = records(&ch.archive_records()?);
    let Some(live) = ch.open()? else { return needed_archives(ws, &ch) };
    // The live file began at the newest archive's time; a channel never archived, when its
    // file was made.
    let started = match recs.iter().filter_map(|r| crate::clock::parse(&r.archived_at)).max() {
        Some(t) => t,
        None => chrono::DateTime::<chrono::Utc>::from(live.started()?),
    };
    if live.size()? > 0 && !dry_run && started < cutoff {
        crate::chat::archive::run(ws, None)?;
    }
    needed_archives(ws, &ch)
}

/// The chat archives (their stems) a saved chat cursor still reads.
fn needed_archives(ws: &Workspace, ch: &crate::engine::local::ChatFile) -> Result<Vec<String>> {
    let recs: Vec<ArchiveRecord> = records(&ch.archive_records()?);
    let live = ch.id_now()?;
    let mut needed = Vec::new();
    for (kind, name) in ws.engine.cursors()? {
        if kind != "chat" {
            continue;
        }
        let bytes = ws.engine.read_cursor(&kind, &name)?.unwrap_or_default();
        match crate::chat::cursor::Cursor::parse(name.as_str(), &bytes) {
            Ok(Ok(c)) => {
                for s in resolve(&recs, live, c.id(), c.position()) {
                    if let Step::Archive { name, .. } = s {
                        needed.push(name);
                    }
                }
            }
            // A cursor that does not read: keep every chat archive (the safe side).
            _ => needed.extend(recs.iter().map(|r| r.archive.clone())),
        }
    }
    // `archive` in a record names `<stem>.md`'s stem.
    let mut stems: Vec<String> =
        needed.into_iter().map(|n| n.trim_end_matches(".md").to_string()).collect();
    stems.sort();
    stems.dedup();
    Ok(stems)
}

/// Up to `max` events after `from`, wherever they are: from the archive for ids that left
/// the hot log (old rotated segments), then from the hot log. For `circe log` and any reader
/// of history: `Engine::read_events` alone reads only what LOGS still holds.
pub fn events(
    ws: &Workspace,
    from: crate::event::Cursor,
    max: usize,
) -> Result<Vec<crate::event::Event>> {
    let hot = ws.engine.read_events(from, max)?;
    if hot.first().is_some_and(|e| e.id == from.next_id()) {
        return Ok(hot);
    }
    // The next ids are not in LOGS (or LOGS holds none after `from`): ask the archive.
    let mut out = ws.engine.archived_events(from, max)?;
    if out.is_empty() {
        return Ok(hot);
    }
    if out.len() < max {
        let after = out.last().map_or(from, |e| crate::event::Cursor::after(e.id));
        out.extend(ws.engine.read_events(after, max - out.len())?);
    }
    Ok(out)
}
