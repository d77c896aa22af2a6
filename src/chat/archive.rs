//! `circe chat archive`: the finished part of the channel moves into `LOGS/chat/` by rename
//! under the writers' lock, and a record (`LOGS/chat/<name>.json`) says where every old
//! position went, so that cursors stay valid (`resolve`).

use serde::{Deserialize, Serialize};

use super::scanner::Position;
use crate::engine::ChatLog;
use crate::engine::local::{ArchiveIds, FileId};
use crate::error::{Error, Result};
use crate::workspace::Workspace;

pub const RECORD_VERSION: u32 = 1;

/// `LOGS/chat/<name>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRecord {
    pub version: u32,
    /// `<name>.md` in `LOGS/chat/`.
    pub archive: String,
    pub archived_at: String,
    /// The channel file before, the archive file, the channel file after.
    pub old: FileId,
    pub archive_id: FileId,
    pub new: FileId,
    /// Where the kept part began in the old file (its whole length when all of it moved).
    pub split_offset: u64,
    pub split_line: u64,
}

/// One stretch of reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read `LOGS/chat/<name>.md` (file `id`) from `from` to its end.
    Archive { name: String, id: FileId, from: Position },
    /// Read the live channel from `from` on.
    Live { from: Position },
    /// The place is lost (the file was replaced or rewritten by hand): say why, and read
    /// the live channel from the start.
    Restart { why: String },
}

/// Where reading goes on from `pos` in file `id`, given the archive records and the live
/// channel's identity. Follows a chain of archives (across an archive cut off before its new
/// channel took the name: `successor`); a file no record knows is a restart.
pub fn resolve(
    records: &[ArchiveRecord],
    live: Option<FileId>,
    id: FileId,
    pos: Position,
) -> Vec<Step> {
    let mut steps = Vec::new();
    let (mut id, mut pos) = (id, pos);
    for _ in 0..=2 * records.len() {
        if Some(id) == live {
            steps.push(Step::Live { from: pos });
            return steps;
        }
        if let Some(r) = records.iter().rev().find(|r| r.archive_id == id) {
            steps.push(Step::Archive { name: r.archive.clone(), id, from: pos });
            (id, pos) = (r.new, Position::START);
        } else if let Some(r) = records.iter().rev().find(|r| r.old == id) {
            pos = past(r, pos, &mut steps);
            id = r.new;
        } else if pos == Position::START
            && let Some(next) = successor(records, live, id)
        {
            // An archive cut off before its new channel took the name: the file that did (a
            // later archive's old file, or the live channel) goes on from its start. Only
            // from the start of that new channel (where a record leads): a cursor inside a
            // file is in a file that was there, and a file replaced by hand is a restart.
            (id, pos) = (next, Position::START);
        } else {
            break;
        }
    }
    steps.push(Step::Restart { why: "the chat file was replaced".into() });
    steps
}

/// Where reading goes on from `pos` in file `id` when the file that has that number now (the
/// live channel, or an archive) is another one: `chat archive --before` renamed the kept
/// part over file `id`, which freed its number, and the filesystem gave it to a later file.
/// The way on starts at the earliest such archive (a place from a later file with the number
/// reads again what came between: repeated, not lost). `None` when no `--before` archive
/// replaced a file `id`.
pub fn resolve_replaced(
    records: &[ArchiveRecord],
    live: Option<FileId>,
    id: FileId,
    pos: Position,
) -> Option<Vec<Step>> {
    let r = records.iter().filter(|r| r.old == id && r.archive_id != id).min_by(|a, b| {
        (a.archived_at.as_str(), a.archive.as_str())
            .cmp(&(b.archived_at.as_str(), b.archive.as_str()))
    })?;
    let mut steps = Vec::new();
    let pos = past(r, pos, &mut steps);
    steps.extend(resolve(records, live, r.new, pos));
    Some(steps)
}

/// Where reading goes on from `pos` in file `id` when no file has that number now: as
/// `resolve`, except when more than one `--before` archive replaced a file of that number
/// (reused in between) and none kept it: the cursor cannot tell which it was in, and goes on
/// from the earliest (what came between is read again, not lost).
pub fn resolve_gone(
    records: &[ArchiveRecord],
    live: Option<FileId>,
    id: FileId,
    pos: Position,
) -> Vec<Step> {
    let kept = records.iter().any(|r| r.archive_id == id);
    let splits = records.iter().filter(|r| r.old == id && r.archive_id != id).count();
    if !kept
        && splits > 1
        && let Some(steps) = resolve_replaced(records, live, id, pos)
    {
        return steps;
    }
    resolve(records, live, id, pos)
}

/// Where `pos` in the old file of archive `r` went: before the split, the rest of the archive
/// (pushed onto `steps`) and then the new channel's start; at or after it, the same bytes in
/// the new channel.
fn past(r: &ArchiveRecord, pos: Position, steps: &mut Vec<Step>) -> Position {
    if pos.offset >= r.split_offset {
        return Position {
            offset: pos.offset - r.split_offset,
            line: pos.line.saturating_sub(r.split_line - 1).max(1),
        };
    }
    steps.push(Step::Archive { name: r.archive.clone(), id: r.archive_id, from: pos });
    Position::START
}

/// The file that took the place of `id`, the new channel of an archive cut off before it
/// was renamed into place (the next `chat say` made a fresh channel instead): the first
/// file that is no record's new channel, archived after that archive (else the live
/// channel). `None` when `id` is no record's new channel.
fn successor(records: &[ArchiveRecord], live: Option<FileId>, id: FileId) -> Option<FileId> {
    let from =
        records.iter().filter(|r| r.new == id).max_by(|a, b| a.archived_at.cmp(&b.archived_at))?;
    let is_new = |f: FileId| records.iter().any(|r| r.new == f);
    records
        .iter()
        .filter(|r| r.archived_at > from.archived_at && !is_new(r.old))
        .min_by(|a, b| a.archived_at.cmp(&b.archived_at))
        .map(|r| r.old)
        .or_else(|| live.filter(|l| *l != id && !is_new(*l)))
}

/// Parse every record; unreadable ones are left out (they cannot be followed anyway).
pub fn records(texts: &[(String, String)]) -> Vec<ArchiveRecord> {
    texts.iter().filter_map(|(_, t)| serde_json::from_str(t).ok()).collect()
}

/// The byte offset where line `line` (1-based) starts. Refused when the line continues a
/// message (it is indented) or lies past the end.
pub fn split_at_line(data: &[u8], line: u64) -> Result<usize> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(data.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1))
        .collect();
    let lines = starts.len() as u64 - u64::from(data.last() == Some(&b'\n') || data.is_empty());
    let idx = usize::try_from(line.saturating_sub(1)).unwrap_or(usize::MAX);
    let Some(&at) = starts.get(idx).filter(|_| line >= 1) else {
        return Err(Error::refused(format!("the chat channel has {lines} lines; no line {line}"))
            .hint("--before names the first line to keep"));
    };
    if matches!(data.get(at), Some(b' ' | b'\t')) {
        return Err(Error::refused(format!("line {line} continues the message above it"))
            .hint("--before must name a line that is not indented (the first line to keep)"));
    }
    Ok(at)
}

/// What `chat archive` did.
#[derive(Debug, Serialize)]
pub struct Archived {
    pub archive: Option<String>,
    pub bytes: u64,
    pub lines: u64,
}

/// Archive the channel (all of it, or the lines before `before`).
pub fn run(ws: &Workspace, before: Option<u64>) -> Result<Archived> {
    if let Some(log) = ws.engine.chat_log() {
        return run_log(ws, log, before);
    }
    let chat = super::channel(ws)?;
    let lock = chat.lock()?;
    let Some((old, data)) = chat.read_locked(&lock)? else {
        return Err(Error::not_found(format!("no chat channel at {}", chat.path().display()))
            .hint("the first `circe --agent NAME chat say --to TO TEXT` makes it"));
    };
    let split = match before {
        None => data.len(),
        Some(l) => split_at_line(&data, l)?,
    };
    let lines = super::scanner::newlines(&data[..split]);
    if split == 0 {
        return Ok(Archived { archive: None, bytes: 0, lines: 0 });
    }
    let now = crate::clock::now();
    let stem = format!("chat-{}", now.format("%Y%m%dT%H%M%S%3fZ"));
    let name = chat.free_archive_name(&lock, &stem);
    let keep = before.map(|_| split);
    let at = crate::clock::stamp_ms(now);
    let record = |ids: &ArchiveIds| {
        let r = ArchiveRecord {
            version: RECORD_VERSION,
            archive: name.clone(),
            archived_at: at.clone(),
            old: ids.old,
            archive_id: ids.archive,
            new: ids.new,
            split_offset: split as u64,
            split_line: lines + 1,
        };
        serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
    };
    let ids = chat.archive(&lock, &name, old, keep, &data, &record)?;
    Ok(Archived {
        archive: Some(ids.archive_path.display().to_string()),
        bytes: split as u64,
        lines,
    })
}

/// Archive a channel the engine keeps: its entries before the cut are marked as the
/// archive's (`LOGS/chat/<name>` in a mirror).
fn run_log(ws: &Workspace, log: &dyn ChatLog, before: Option<u64>) -> Result<Archived> {
    if log.chat_last()? == 0 {
        return Err(Error::not_found(format!("no chat channel in {}", ws.engine.location()))
            .hint("the first `circe --agent NAME chat say --to TO TEXT` makes it"));
    }
    let stem = format!("chat-{}", crate::clock::now().format("%Y%m%dT%H%M%S%3fZ"));
    let split = |data: &[u8]| match before {
        None => Ok(data.len()),
        Some(l) => split_at_line(data, l),
    };
    Ok(match log.chat_archive(&stem, &split)? {
        Some(a) => Archived {
            archive: Some(format!("LOGS/chat/{}", a.name)),
            bytes: a.bytes,
            lines: a.lines,
        },
        None => Archived { archive: None, bytes: 0, lines: 0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ino: u64) -> FileId {
        FileId { dev: 1, ino }
    }

    fn rec(old: u64, archive: u64, new: u64, split_offset: u64, split_line: u64) -> ArchiveRecord {
        ArchiveRecord {
            version: 1,
            archive: format!("a{old}"),
            archived_at: String::new(),
            old: id(old),
            archive_id: id(archive),
            new: id(new),
            split_offset,
            split_line,
        }
    }

    #[test]
    fn positions_follow_archives() {
        let p = |offset, line| Position { offset, line };
        // Whole archive: the old file is the archive; read its rest, then the new file.
        let whole = [rec(10, 10, 11, 500, 21)];
        assert_eq!(
            resolve(&whole, Some(id(11)), id(10), p(300, 12)),
            [
                Step::Archive { name: "a10".into(), id: id(10), from: p(300, 12) },
                Step::Live { from: Position::START }
            ]
        );
        // Partial: past the split, the same bytes now start at 0 of the new file.
        let part = [rec(10, 20, 11, 500, 21)];
        assert_eq!(
            resolve(&part, Some(id(11)), id(10), p(600, 25)),
            [Step::Live { from: p(100, 5) }]
        );
        assert_eq!(
            resolve(&part, Some(id(11)), id(10), p(300, 12)),
            [
                Step::Archive { name: "a10".into(), id: id(20), from: p(300, 12) },
                Step::Live { from: Position::START }
            ]
        );
        // A cursor saved inside the archive file itself.
        assert_eq!(resolve(&part, Some(id(11)), id(20), p(400, 15)).len(), 2);
        // A chain of two archives.
        let chain = [rec(10, 10, 11, 500, 21), rec(11, 30, 12, 50, 3)];
        assert_eq!(
            resolve(&chain, Some(id(12)), id(10), p(500, 21)),
            [
                Step::Archive { name: "a10".into(), id: id(10), from: p(500, 21) },
                Step::Archive { name: "a11".into(), id: id(30), from: Position::START },
                Step::Live { from: Position::START }
            ]
        );
        // Unknown file: start over.
        assert!(matches!(resolve(&whole, Some(id(11)), id(99), p(1, 1))[0], Step::Restart { .. }));
    }

    /// An archive cut off before its new channel (13) took the name: the next `say` made a
    /// fresh channel (11), archived later. A reader behind goes on through it, skipping
    /// nothing, and so does the live channel when nothing was archived after.
    #[test]
    fn a_cut_off_archive_is_followed_by_the_file_that_took_its_place() {
        let p = |offset, line| Position { offset, line };
        let at = |mut r: ArchiveRecord, t: &str| {
            r.archived_at = t.into();
            r
        };
        let chain = [at(rec(10, 10, 13, 500, 21), "1"), at(rec(11, 11, 12, 50, 3), "2")];
        assert_eq!(
            resolve(&chain, Some(id(12)), id(10), p(300, 12)),
            [
                Step::Archive { name: "a10".into(), id: id(10), from: p(300, 12) },
                Step::Archive { name: "a11".into(), id: id(11), from: Position::START },
                Step::Live { from: Position::START }
            ]
        );
        assert_eq!(
            resolve(&chain[..1], Some(id(11)), id(10), p(300, 12)),
            [
                Step::Archive { name: "a10".into(), id: id(10), from: p(300, 12) },
                Step::Live { from: Position::START }
            ]
        );
        // A cursor inside a new channel that was there, replaced by hand since: a restart.
        let placed = [at(rec(10, 10, 11, 500, 21), "1")];
        assert!(matches!(
            resolve(&placed, Some(id(14)), id(11), p(40, 3))[..],
            [Step::Restart { .. }]
        ));
    }

    /// A `--before` archive replaced file 10 (its number freed), and a whole archive's new
    /// channel took the number: a place in the first file 10 goes on by the split's record.
    #[test]
    fn a_place_in_a_replaced_file_goes_on_from_its_split() {
        let p = |offset, line| Position { offset, line };
        let chain = [rec(10, 20, 11, 60, 4), rec(11, 11, 10, 60, 4)];
        assert_eq!(
            resolve_replaced(&chain, Some(id(10)), id(10), p(40, 3)).unwrap(),
            [
                Step::Archive { name: "a10".into(), id: id(20), from: p(40, 3) },
                Step::Archive { name: "a11".into(), id: id(11), from: Position::START },
                Step::Live { from: Position::START }
            ]
        );
        // Past the split: on in the kept part.
        assert_eq!(
            resolve_replaced(&chain, Some(id(10)), id(10), p(80, 5)).unwrap(),
            [
                Step::Archive { name: "a11".into(), id: id(11), from: p(20, 2) },
                Step::Live { from: Position::START }
            ]
        );
        // No split replaced file 11 (a whole archive keeps its file).
        assert_eq!(resolve_replaced(&chain, Some(id(10)), id(11), p(40, 3)), None);
    }

    /// File 10 was split by a `--before` archive, its number reused by a later file that was
    /// split too, and no file has it now: a place from the first goes on from the first
    /// split (the latest record alone would skip all between the two).
    #[test]
    fn a_number_split_twice_goes_on_from_the_first_split() {
        let p = |offset, line| Position { offset, line };
        let at = |r: ArchiveRecord, t: &str, name: &str| ArchiveRecord {
            archived_at: t.into(),
            archive: name.into(),
            ..r
        };
        // 10 split (kept part 11), 11 archived whole (new channel: number 10 again), that
        // 10 split too (kept part 13, the live channel).
        let chain = [
            at(rec(10, 20, 11, 60, 4), "2026-01-01T00:00:00Z", "first"),
            at(rec(11, 11, 10, 0, 1), "2026-01-02T00:00:00Z", "whole"),
            at(rec(10, 22, 13, 30, 2), "2026-01-03T00:00:00Z", "second"),
        ];
        assert_eq!(
            resolve_gone(&chain, Some(id(13)), id(10), p(40, 3)),
            [
                Step::Archive { name: "first".into(), id: id(20), from: p(40, 3) },
                Step::Archive { name: "whole".into(), id: id(11), from: Position::START },
                Step::Archive { name: "second".into(), id: id(22), from: Position::START },
                Step::Live { from: Position::START }
            ]
        );
        // The latest record alone maps the place into the second split's kept part.
        let skipped = resolve(&chain, Some(id(13)), id(10), p(40, 3));
        assert_eq!(skipped, [Step::Live { from: p(10, 2) }]);
    }

    #[test]
    fn split_lines() {
        let d = b"[a-to-b]: x\n  more\n[a-to-b]: y\n";
        assert_eq!(split_at_line(d, 1).unwrap(), 0);
        assert_eq!(split_at_line(d, 3).unwrap(), 19);
        assert_eq!(split_at_line(d, 4).unwrap(), d.len());
        assert!(split_at_line(d, 2).is_err());
        assert!(split_at_line(d, 5).is_err());
        assert!(split_at_line(d, 0).is_err());
    }
}
