//! The second half of an archive run, and what finishes an interrupted one: committing the
//! staged segments (place, summaries, tombstones, one index append: the commit point),
//! removing the originals (each only if it still has the checksum its archived copy was
//! verified against), recovery from the journal or, when it does not read, from the tree, and
//! retention. Every step is idempotent: a second pass skips what is done.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::LocalEngine;
use super::archive_segment::{ListReader, sha256, verify};
use super::archive_unlink::{self, Doomed, remove_file, unchanged};
use super::atomic;
use super::root::{io_err, list_all_names, list_names};
use crate::archive::plan::{Journal, Recovery, State, recovery};
use crate::archive::{Entry, EntryKind, Phase, Progress, SegmentLine, Tombstone};
use crate::error::{Error, Result};
use crate::event::{CIRCE, Event, EventKind};
use crate::fault::crash_point;
use crate::names::TaskId;

fn split(seg: &str) -> (&str, &str) {
    seg.split_once('/').unwrap_or(("", seg))
}

/// Move `src` to `dst` unless that was done already (a roll-forward).
fn place(src: &Path, dst: &Path) -> Result<()> {
    if atomic::is_regular(src) {
        atomic::rename_replace(src, dst).map_err(io_err("cannot move into the archive", dst))
    } else if atomic::is_regular(dst) {
        Ok(())
    } else {
        Err(Error::internal(format!("{} is missing from the staged archive run", src.display()))
            .hint("run `circe doctor --repair`: it rolls the interrupted run back"))
    }
}

/// Place the staged segments, their summaries and tombstones, then append their index
/// lines (the commit point).
pub(super) fn commit(eng: &LocalEngine, staging: &Path, segments: &[String]) -> Result<()> {
    let store = &eng.store;
    let mut dirs = Vec::new();
    for seg in segments {
        let (period, file) = split(seg);
        let dir = store.archive_dir().join(period);
        std::fs::create_dir_all(dir.join("summaries")).map_err(io_err("cannot create", &dir))?;
        let list = store.list_path(period, file);
        let list_name = list.file_name().unwrap_or_default().to_owned();
        place(&staging.join(period).join(&list_name), &list)?;
        place(&staging.join(period).join(file), &store.segment_path(period, file))?;
        crash_point("archive.placed");
        let sdir = staging.join("summaries").join(period);
        for n in list_all_names(&sdir)? {
            place(&sdir.join(&n), &dir.join("summaries").join(&n))?;
        }
        dirs.push(dir.clone());
        dirs.push(dir.join("summaries"));
    }
    let tpath = staging.join("tombstones.jsonl");
    if atomic::is_regular(&tpath) {
        let tdir = store.archive_dir().join("tombstones");
        std::fs::create_dir_all(&tdir).map_err(io_err("cannot create", &tdir))?;
        let f = std::fs::File::open(&tpath).map_err(io_err("cannot read", &tpath))?;
        for line in BufReader::new(f).lines() {
            let line = line.map_err(io_err("cannot read", &tpath))?;
            let Ok(t) = serde_json::from_str::<Tombstone>(&line) else { continue };
            let path = store.tombstone_path(t.task.as_str());
            match atomic::write_new(&path, line.as_bytes(), false) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    store.archive_replace(&path, line.as_bytes(), false)?;
                }
                Err(e) => return Err(Error::io("cannot write", &path, e)),
            }
        }
        dirs.push(tdir);
    }
    for d in &dirs {
        store.sync_dir(d)?;
    }
    crash_point("archive.tombstoned");
    let present: HashSet<String> = store.segment_lines()?.into_iter().map(|l| l.segment).collect();
    // Committed already (a finishing run cut off while it cleared the staging folder): the
    // index names every segment, and nothing is left to append.
    let indexed = |s: &String| present.contains(split(s).1);
    if segments.iter().all(indexed) {
        crash_point("archive.committed");
        return Ok(());
    }
    let staged = staging.join("segments.jsonl");
    let text = atomic::read_regular(&staged).map_err(io_err("cannot read", &staged))?;
    let lines: Vec<SegmentLine> = String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| serde_json::from_str::<SegmentLine>(l).ok())
        .filter(|l| !present.contains(&l.segment))
        .collect();
    store.append_index(&lines)?;
    crash_point("archive.committed");
    Ok(())
}

/// Remove one archived task's originals: under its lock, every original is checked, then its
/// records and its lock file go (the tombstone was committed before: nobody can change the
/// task afterwards); its messages, files in LOGS that are never rewritten, are returned to
/// be unlinked with the batch's in inode order. Kept whole (`None`) when any of them changed
/// since it was archived.
fn remove_task(
    eng: &LocalEngine,
    task: &str,
    entries: &[Entry],
) -> Result<Option<Vec<(u64, PathBuf)>>> {
    let id = TaskId::new(task)?;
    let lock = eng.store.lock_task(&id)?;
    // A change cut off on the task since this run settled the journals (a `done` of its
    // ticket, say) left its events in the lock file, which goes below: they are logged
    // first. (Whatever that change moved is then found changed, and the task kept.)
    if super::root::Store::journal_left(&lock) {
        super::reconcile::settled(eng, &id, &lock)?;
    }
    let root = &eng.store.root;
    let mut messages = Vec::new();
    for e in entries.iter().filter(|e| e.origin.is_some()) {
        let origin = e.origin.as_deref().unwrap_or_default();
        let state = if e.kind == EntryKind::Record && e.mtime_ns.is_none() {
            let kind = origin.rsplit('.').next().unwrap_or_default();
            eng.store.read_record(&id, kind)?.map(|t| (sha256(t.as_bytes()) == e.sha256, 0))
        } else {
            // A record is replaced by rename: a change gives it another mtime (and size).
            unchanged(&root.join(origin), e)?
        };
        match state {
            Some((false, _)) => return Ok(None),
            Some((true, ino)) if e.kind == EntryKind::Message => {
                messages.push((ino, root.join(origin)));
            }
            _ => {}
        }
    }
    eng.store.remove_records_unsynced(&id)?;
    eng.store.remove_task_lock(&id, &lock)?;
    Ok(Some(messages))
}

/// Remove the originals of committed segments. Returns the tasks kept because they changed.
pub(super) fn remove_originals(
    eng: &LocalEngine,
    segments: &[String],
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<String>> {
    let mut kept = Vec::new();
    let mut done = 0u64;
    let mut doomed = Doomed::default();
    for seg in segments {
        let (period, file) = split(seg);
        let mut group: Vec<Entry> = Vec::new();
        let mut batch: Vec<(String, Vec<Entry>)> = Vec::new();
        for e in ListReader::open(&eng.store.list_path(period, file))? {
            let e = e?;
            let of_task = e.member.contains("/tasks/");
            if of_task && group.first().is_some_and(|g| g.task != e.task) {
                batch.push((group[0].task.clone().unwrap_or_default(), std::mem::take(&mut group)));
            }
            if of_task {
                group.push(e);
            } else if let Some(origin) = e.origin.as_deref() {
                let path = eng.store.root.join(origin);
                if let Some((true, ino)) = unchanged(&path, &e)? {
                    doomed.push(ino, path, "archive.file_removed")?;
                }
            }
            if batch.len() >= 1000 {
                done += flush_batch(eng, seg, &mut batch, &mut kept, &mut doomed)?;
                progress(Progress { phase: Phase::Remove, done, total: 0 });
            }
        }
        if !group.is_empty() {
            batch.push((group[0].task.clone().unwrap_or_default(), group));
        }
        done += flush_batch(eng, seg, &mut batch, &mut kept, &mut doomed)?;
        progress(Progress { phase: Phase::Remove, done, total: 0 });
    }
    doomed.flush()?;
    for d in ["LOGS", "TASKS", "LOGS/chat"] {
        let p = eng.store.root.join(d);
        if p.is_dir() {
            eng.store.sync_dir(&p)?;
        }
    }
    crash_point("archive.removed");
    Ok(kept)
}

/// An `archive` event per task (appended before its originals go: at least once), then the
/// removals.
fn flush_batch(
    eng: &LocalEngine,
    seg: &str,
    batch: &mut Vec<(String, Vec<Entry>)>,
    kept: &mut Vec<String>,
    doomed: &mut Doomed,
) -> Result<u64> {
    let mut events: Vec<Event> = Vec::new();
    for (task, _) in batch.iter() {
        let Ok(id) = TaskId::new(task.as_str()) else { continue };
        if eng.store.has_record(&id, "status") {
            let mut e = Event::now(EventKind::Archive, CIRCE).task(&id);
            e.what = Some(format!("archived into ARCHIVE/{seg}"));
            events.push(e);
        }
    }
    super::event_log::append(&eng.store, &mut events)?;
    let n = batch.len() as u64;
    let ids: Vec<TaskId> = batch.iter().filter_map(|(t, _)| TaskId::new(t.as_str()).ok()).collect();
    let entries: std::collections::HashMap<String, Vec<Entry>> = batch.drain(..).collect();
    let removed = super::board::remove_batch(eng, &ids, &mut |ids| {
        let each = archive_unlink::in_parallel(ids, |id| {
            let mine = entries.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            remove_task(eng, id.as_str(), mine)
        })?;
        let mut removed = Vec::new();
        for (id, gone) in ids.iter().zip(each) {
            if let Some(messages) = gone {
                for (ino, path) in messages {
                    doomed.push(ino, path, "archive.message_removed")?;
                }
                removed.push(id.clone());
            }
        }
        Ok(removed)
    })?;
    kept.extend(ids.into_iter().filter(|i| !removed.contains(i)).map(|i| i.to_string()));
    Ok(n)
}

/// What a recovery says of the tasks it kept in place because they changed.
fn keeping(kept: &[String]) -> String {
    if kept.is_empty() {
        return String::new();
    }
    format!(
        "; kept in place, changed since they were archived: {} (archived again when they qualify)",
        kept.join(", ")
    )
}

/// Is a staging folder's process gone? (`archive-<pid>-...`)
fn dead_staging(name: &str) -> bool {
    name.strip_prefix("archive-")
        .and_then(|r| r.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists())
}

/// Finish or undo what an interrupted run left (call holding the archive lock). Returns what
/// was done, for the report.
pub(super) fn recover(
    eng: &LocalEngine,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<String>> {
    let store = &eng.store;
    let mut out = Vec::new();
    // TEST BUILDS ONLY: `archive-no-recover` shows the archive checker failing without it.
    if crate::fault::test_break("archive-no-recover") {
        return Ok(out);
    }
    let journal = store.read_journal()?;
    match recovery(journal.as_deref()) {
        Recovery::Nothing => out.extend(roll_back_orphans(eng)?),
        Recovery::RollBack { staging } => {
            if let Some(s) = staging {
                let _ = std::fs::remove_dir_all(store.tmp_dir().join(&s));
            }
            out.push("rolled back a run interrupted while it staged its segments".into());
        }
        Recovery::Commit { staging, segments, .. } => {
            commit(eng, &store.tmp_dir().join(&staging), &segments)?;
            // As a run does: committed, the journal says "removing" before anything is
            // removed, so a finishing run cut off from here on needs no staging folder (it
            // goes once the journal has, with the dead runs' folders below).
            if let Some(mut j) = journal.as_deref().and_then(|b| Journal::parse(b).ok()) {
                j.state = State::Removing;
                store.write_journal(&j)?;
            }
            let kept = remove_originals(eng, &segments, progress)?;
            out.push(format!(
                "finished a run interrupted while committing ({} segment(s)){}",
                segments.len(),
                keeping(&kept)
            ));
        }
        Recovery::Remove { segments } => {
            let kept = remove_originals(eng, &segments, progress)?;
            out.push(format!(
                "finished removing the originals of {} archived segment(s){}",
                segments.len(),
                keeping(&kept)
            ));
        }
        Recovery::Rebuild { why } => {
            out.push(format!("the journal did not read ({why}); rebuilt from the archive"));
            out.extend(rebuild(eng, progress)?);
        }
    }
    if journal.is_some() {
        store.remove_journal()?;
    }
    for n in list_names(&store.tmp_dir())? {
        if dead_staging(&n) {
            let p = store.tmp_dir().join(&n);
            std::fs::remove_dir_all(&p).map_err(io_err("cannot remove", &p))?;
            out.push(format!("removed the staging folder tmp/{n} of an interrupted run"));
        }
    }
    Ok(out)
}

/// Segment files lying in `ARCHIVE/<period>/` that the index does not name: placed by a run
/// interrupted before its commit point.
pub(super) fn orphans(eng: &LocalEngine) -> Result<Vec<(String, String)>> {
    let known: HashSet<String> =
        eng.store.segment_lines()?.into_iter().map(|l| l.segment).collect();
    let mut out = Vec::new();
    for p in eng.store.periods()? {
        for n in list_names(&eng.store.archive_dir().join(&p))? {
            if n.ends_with(".tar.zst") && !known.contains(&n) {
                out.push((p.clone(), n));
            }
        }
    }
    Ok(out)
}

/// The journal does not read: roll back every uncommitted segment (its originals are all in
/// place: removal starts after the commit point), then redo the newest run's removals.
fn rebuild(eng: &LocalEngine, progress: &mut dyn FnMut(Progress)) -> Result<Vec<String>> {
    let store = &eng.store;
    let mut out = roll_back_orphans(eng)?;
    let lines = store.segment_lines()?;
    if let Some(newest) = lines.iter().map(|l| l.run.clone()).max() {
        let segs: Vec<String> = lines
            .iter()
            .filter(|l| l.run == newest)
            .map(|l| format!("{}/{}", l.period, l.segment))
            .collect();
        remove_originals(eng, &segs, progress)?;
        out.push(format!("checked the removals of the newest run ({newest})"));
    }
    Ok(out)
}

/// Why a segment the index does not name is not a run's cut before its commit point (whose
/// originals are all still in place): an original it lists is gone, or its member list does
/// not read. Such a segment holds the only copy (the index lost its line): never removed.
pub(super) fn only_copy(eng: &LocalEngine, period: &str, file: &str) -> Option<String> {
    if expiring_mark(eng, period, file).exists() {
        return None;
    }
    let entries = match ListReader::open(&eng.store.list_path(period, file)) {
        Ok(entries) => entries,
        Err(e) => return Some(format!("its member list does not read ({})", e.message)),
    };
    for e in entries {
        let Ok(e) = e else { return Some("its member list does not read".into()) };
        if let Some(origin) = e.origin
            && std::fs::symlink_metadata(eng.store.root.join(&origin)).is_err()
        {
            return Some(format!("{origin}, which it holds, is gone"));
        }
    }
    None
}

/// What is said of each segment the index does not name that holds the only copy (kept).
pub(super) fn kept_orphans(eng: &LocalEngine) -> Result<Vec<String>> {
    Ok(orphans(eng)?
        .into_iter()
        .filter_map(|(p, f)| only_copy(eng, &p, &f).map(|why| kept_orphan(&p, &f, &why)))
        .collect())
}

/// What doctor and a run say of a segment the index does not name that holds the only copy.
pub(super) fn kept_orphan(period: &str, file: &str, why: &str) -> String {
    format!(
        "ARCHIVE/{period}/{file} is a segment ARCHIVE/index.jsonl does not name, yet {why}: it holds the only copy, kept (put ARCHIVE/index.jsonl back from a backup; `circe archive verify` reads the segments)"
    )
}

/// Remove segments the index does not name (placed by a run cut before its commit point:
/// their originals are all still in place), with the tombstones and summaries they brought
/// for tasks that are still here. One whose originals are gone is kept (`only_copy`).
fn roll_back_orphans(eng: &LocalEngine) -> Result<Vec<String>> {
    let store = &eng.store;
    let mut out = Vec::new();
    for (period, file) in orphans(eng)? {
        // Retention was deleting it when it was cut off: finished.
        if expiring_mark(eng, &period, &file).exists() {
            delete_expired(eng, &period, &file)?;
            out.push(format!("deleted {period}/{file}: retention let it go"));
            continue;
        }
        // The only copy: kept, and said by the caller (`kept_orphans`).
        if only_copy(eng, &period, &file).is_some() {
            continue;
        }
        let list = store.list_path(&period, &file);
        if let Ok(entries) = ListReader::open(&list) {
            for e in entries.flatten().filter(|e| e.kind == EntryKind::Manifest) {
                let Some(task) = e.task else { continue };
                if TaskId::new(task.as_str()).is_ok_and(|id| store.has_record(&id, "status")) {
                    remove_file(&store.tombstone_path(&task))?;
                    remove_file(
                        &store
                            .archive_dir()
                            .join(&period)
                            .join("summaries")
                            .join(format!("{task}.md")),
                    )?;
                }
            }
        }
        // The segment before its list: cut off in between, what is left is a list no
        // segment goes with, never a segment without the list that says it is no only copy.
        remove_file(&store.segment_path(&period, &file))?;
        remove_file(&list)?;
        out.push(format!("removed {period}/{file}: placed but never committed"));
    }
    out.extend(clear_stale_marks(eng)?);
    Ok(out)
}

/// Retention: delete segments whose newest content is older than `keep_until`: each marked,
/// then the index rewritten without them, then deleted, so a crash leaves a marked orphan
/// that doctor and the next run delete. Tombstones stay.
pub(super) fn expire(
    eng: &LocalEngine,
    keep_until: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<Vec<String>> {
    if keep_until.is_none() {
        return Ok(Vec::new());
    }
    let store = &eng.store;
    let (gone, keep): (Vec<SegmentLine>, Vec<SegmentLine>) = store
        .segment_lines()?
        .into_iter()
        .partition(|l| crate::archive::select::expired(&l.newest, keep_until));
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    // The ids they held are never given again: kept before their lines go.
    let newest = gone.iter().filter_map(|l| l.last_event).max().unwrap_or(0);
    store.keep_expired_last_event(newest)?;
    // Each marked before its line goes: a segment the index no longer names is then known
    // as retention's to delete, not as the only copy of work whose index line was lost.
    let mut dirs: Vec<PathBuf> = Vec::new();
    let marked = (|| {
        for l in &gone {
            let mark = expiring_mark(eng, &l.period, &l.segment);
            match atomic::write_new(&mark, b"", false) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot write", &mark, e)),
            }
            dirs.extend(mark.parent().map(Path::to_path_buf));
        }
        dirs.sort();
        dirs.dedup();
        for d in &dirs {
            store.sync_dir(d)?;
        }
        store.rewrite_index(&keep)
    })();
    // A failure leaves the marks: whether the index still names their segments is for the
    // next run to see (`clear_stale_marks` clears the marks of those it names; the others
    // are retention's to finish: a failed sync may come after the new index was in place).
    marked?;
    crash_point("archive.expired");
    let mut out = Vec::new();
    for l in gone {
        delete_expired(eng, &l.period, &l.segment)?;
        out.push(format!("{}/{}", l.period, l.segment));
    }
    Ok(out)
}

/// Marks of retention beside a segment the index still names (its run failed before the
/// index was rewritten) or beside none: removed, so a later loss of the index line is
/// never read as retention's. Member lists left without their segment go too.
fn clear_stale_marks(eng: &LocalEngine) -> Result<Vec<String>> {
    let named: HashSet<String> =
        eng.store.segment_lines()?.into_iter().map(|l| l.segment).collect();
    let mut out = Vec::new();
    for p in eng.store.periods()? {
        for n in list_names(&eng.store.archive_dir().join(&p))? {
            if let Some(seg) = n.strip_suffix(".expiring") {
                if named.contains(seg) || !eng.store.segment_path(&p, seg).exists() {
                    remove_file(&expiring_mark(eng, &p, seg))?;
                    out.push(format!("removed the stale retention mark {p}/{n}"));
                }
            } else if let Some(stem) = n.strip_suffix(".index.jsonl.zst") {
                // A member list whose segment a rollback removed before it was cut off.
                let seg = format!("{stem}.tar.zst");
                if !named.contains(&seg) && !eng.store.segment_path(&p, &seg).exists() {
                    remove_file(&eng.store.list_path(&p, &seg))?;
                    out.push(format!("removed {p}/{n}: the member list of a segment rolled back"));
                }
            }
        }
    }
    Ok(out)
}

/// `ARCHIVE/<period>/<segment>.expiring`: retention is deleting the segment.
fn expiring_mark(eng: &LocalEngine, period: &str, segment: &str) -> PathBuf {
    eng.store.archive_dir().join(period).join(format!("{segment}.expiring"))
}

/// Delete a segment retention let go: its tasks' summaries, its member list, the segment,
/// then its mark.
fn delete_expired(eng: &LocalEngine, period: &str, segment: &str) -> Result<()> {
    let store = &eng.store;
    let list = store.list_path(period, segment);
    if let Ok(entries) = ListReader::open(&list) {
        for e in entries.flatten().filter(|e| e.kind == EntryKind::Summary) {
            if let Some(t) = e.task {
                remove_file(
                    &store.archive_dir().join(period).join("summaries").join(format!("{t}.md")),
                )?;
            }
        }
    }
    remove_file(&list)?;
    remove_file(&store.segment_path(period, segment))?;
    remove_file(&expiring_mark(eng, period, segment))
}

/// Verify every committed segment against its member list and the index's checksum.
pub(super) fn verify_all(eng: &LocalEngine) -> Result<Vec<(String, Result<u64>)>> {
    let mut out = Vec::new();
    for l in eng.store.segment_lines()? {
        let list = eng.store.list_path(&l.period, &l.segment);
        let r = verify(&eng.store.segment_path(&l.period, &l.segment), &list, Some(&l.sha256))
            .and_then(|n| {
                // Each task it holds keeps its id by its tombstone.
                let tasks = ListReader::open(&list)?
                    .filter_map(std::result::Result::ok)
                    .filter(|e| e.kind == EntryKind::Manifest)
                    .filter_map(|e| e.task);
                for t in tasks {
                    if !eng.store.tombstone_path(&t).is_file() {
                        return Err(Error::internal(format!(
                            "task {t} has no tombstone (ARCHIVE/tombstones/{t}): its id could be opened again"
                        )));
                    }
                }
                Ok(n)
            });
        out.push((format!("{}/{}", l.period, l.segment), r));
    }
    Ok(out)
}
