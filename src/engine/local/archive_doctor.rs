//! What `circe doctor` checks of the archive (invariant 8): the index agrees with the
//! segments (each named segment and its member list are there, of the size the index says;
//! no segment lies there unnamed; no fewer tombstones than archived tasks), and no archive
//! run was left interrupted (a journal or a staging folder with no run holding the lock).
//! `--repair` finishes or undoes the interrupted run, as the next `circe archive` would.
//! Cheap: a `stat` per segment and one listing of the tombstones, never a read of what the
//! segments hold (`circe archive verify` reads them all).

use super::LocalEngine;
use super::archive_commit::{kept_orphan, only_copy, orphans, recover};
use super::root::list_names;
use crate::engine::Fix;
use crate::error::Result;

/// What doctor says of a damaged or missing segment: circe cannot make it again.
const BY_HAND: &str = "circe cannot mend it: put the segment back from a backup; `circe archive verify` checks them all";

pub(super) fn check(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    let store = &eng.store;
    if !store.archive_dir().is_dir() {
        return Ok(());
    }
    let journal = store.read_journal()?;
    let staging: Vec<String> =
        list_names(&store.tmp_dir())?.into_iter().filter(|n| n.starts_with("archive-")).collect();
    // A segment the index does not name whose originals are gone holds the only copy: said
    // on its own, never rolled back.
    // (One listing, and each unnamed segment's member list read once.)
    let mut orphaned = Vec::new();
    for (p, f) in orphans(eng)? {
        match only_copy(eng, &p, &f) {
            Some(why) => v(8, kept_orphan(&p, &f, &why), Fix::Hand),
            None => orphaned.push((p, f)),
        }
    }
    if journal.is_some() || !staging.is_empty() || !orphaned.is_empty() {
        // A run that holds the lock is working, not interrupted.
        if let Some(_lock) = store.lock_archive(false)? {
            let what = match journal.as_deref().map(crate::archive::plan::Journal::parse) {
                Some(Ok(j)) => {
                    format!(
                        "an archive run was interrupted ({}, state {})",
                        j.run,
                        j.state.as_str()
                    )
                }
                Some(Err(e)) => format!("the archive journal ARCHIVE/journal.json is broken ({e})"),
                None => format!(
                    "an archive run left {} staging folder(s) and {} segment(s) the index does not name (placed before a run's commit point, or let go by retention)",
                    staging.len(),
                    orphaned.len()
                ),
            };
            if repair {
                let done = recover(eng, &mut |_| {})?;
                v(8, format!("{what}: {}", done.join("; ")), Fix::Done);
            } else {
                v(
                    8,
                    format!("{what} (`circe archive` or `circe doctor --repair` finishes it)"),
                    Fix::Repair,
                );
            }
        }
    }
    if let Err(e) = store.expired_last_event() {
        // Fails closed: a log file started afresh (after a rotation) cannot number its
        // first event until it holds a number again.
        let hint = e.hint.as_deref().unwrap_or_default();
        v(
            8,
            format!(
                "{} (while the current log file is empty, as after a rotation, no event can be logged until it is mended: {hint})",
                e.message
            ),
            Fix::Hand,
        );
    }
    let lines = store.segment_lines()?;
    // Every archived task keeps its id by its tombstone: fewer tombstones than the segments
    // hold tasks means an archived id could be opened again (a count: one listing).
    let archived: u64 = lines.iter().map(|l| l.tasks).sum();
    let stones = list_names(&store.archive_dir().join("tombstones"))?;
    if (stones.len() as u64) < archived {
        untombstoned(eng, &lines, &stones, archived, v);
    }
    for l in lines {
        let seg = store.segment_path(&l.period, &l.segment);
        let list = store.list_path(&l.period, &l.segment);
        match std::fs::symlink_metadata(&seg) {
            Ok(m) if m.is_file() && m.len() == l.bytes => {}
            Ok(m) => v(
                8,
                format!(
                    "ARCHIVE/{}/{} is {} bytes, the index says {} ({BY_HAND})",
                    l.period,
                    l.segment,
                    m.len(),
                    l.bytes
                ),
                Fix::Hand,
            ),
            Err(_) => v(
                8,
                format!(
                    "ARCHIVE/{}/{} is named by the index but missing ({BY_HAND})",
                    l.period, l.segment
                ),
                Fix::Hand,
            ),
        }
        if !super::atomic::is_regular(&list) {
            v(
                8,
                format!(
                    "the member list of ARCHIVE/{}/{} is missing ({BY_HAND})",
                    l.period, l.segment
                ),
                Fix::Hand,
            );
        }
    }
    Ok(())
}

/// The segments hold more tasks than there are tombstones: the tasks without one, read from
/// the member lists (only now: a task kept by one run, since it changed, and archived again
/// by the next is counted twice and has one tombstone). A list that cannot be read leaves
/// the count as the finding.
fn untombstoned(
    eng: &LocalEngine,
    lines: &[crate::archive::SegmentLine],
    stones: &[String],
    archived: u64,
    v: &mut dyn FnMut(u8, String, Fix),
) {
    let store = &eng.store;
    let stones: std::collections::HashSet<&str> = stones.iter().map(String::as_str).collect();
    let mut tasks = std::collections::BTreeSet::new();
    for l in lines {
        let list = store.list_path(&l.period, &l.segment);
        let read = super::archive_segment::ListReader::open(&list)
            .and_then(|entries| entries.map(|e| e.map(|e| e.task)).collect::<Result<Vec<_>>>());
        let Ok(t) = read else {
            let n = stones.len();
            v(
                8,
                format!(
                    "the archive holds {archived} task(s) but ARCHIVE/tombstones/ only {n}: an archived task without one could be opened again under its id (put them back from a backup; `circe archive search TASK` says where a task lies)"
                ),
                Fix::Hand,
            );
            return;
        };
        tasks.extend(t.into_iter().flatten());
    }
    let missing: Vec<&String> = tasks.iter().filter(|t| !stones.contains(t.as_str())).collect();
    if let Some(first) = missing.first() {
        let named: Vec<&str> = missing.iter().take(10).map(|t| t.as_str()).collect();
        v(
            8,
            format!(
                "{} archived task(s) have no tombstone in ARCHIVE/tombstones/ ({}{}): such an id could be opened again (put them back from a backup; `circe archive search {first}` says where it lies)",
                missing.len(),
                named.join(", "),
                if missing.len() > 10 { ", ..." } else { "" }
            ),
            Fix::Hand,
        );
    }
}
