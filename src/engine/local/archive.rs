//! `circe archive` in the local engine: one run, from the lock to the last removal
//! (PROTOCOLS.md section 17). The rules are `crate::archive`'s; the finding is
//! `archive_scan`, the staging buckets `archive_buckets`, the bundles and segments
//! `archive_build` and `archive_segment`, committing, removing and recovering
//! `archive_commit`.
//!
//! Order of a run: lock (never waiting unless asked) -> finish or undo an interrupted run ->
//! retention -> select -> file the finished tasks' messages into LOGS -> rotate the log if due
//! -> scan -> journal `staging` -> write and verify the segments in a staging folder ->
//! journal `committing` -> place them, summaries, tombstones, one index append (the commit
//! point) -> journal `removing` -> remove each original whose checksum still matches -> end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::LocalEngine;
use super::archive_buckets::{Buckets, bucket_index, bucket_of, unescape};
use super::archive_build::Build;
use super::archive_commit as commit;
use super::archive_scan::{self as scan, Selection, Sink};
use super::root::io_err;
use crate::archive::plan::{Journal, State};
use crate::archive::{FORMAT, Phase, Progress, Report, Request, SegmentLine};
use crate::error::{Error, Result};
use crate::fault::crash_point;
use crate::names::TaskId;

/// Run the archive (or, with `dry_run`, count what it would do).
pub(super) fn run(
    eng: &LocalEngine,
    req: &Request,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report> {
    if req.dry_run {
        return dry_run(eng, req);
    }
    let Some(_lock) = eng.store.lock_archive(req.wait)? else {
        let holder = eng.store.archive_holder();
        return Err(Error::conflict(format!("an archive run is in progress ({holder})"))
            .detail("holder", holder)
            .hint("wait for it, or pass --wait; under cron exit 4 means another run is doing the work"));
    };
    crash_point("archive.locked");
    // The events a cut-off send left in its journal are logged first: once the segments
    // since it move into the archive, the journal could not tell that they were logged.
    // (Best effort: what cannot be finished now, doctor reports.)
    let _ = crate::engine::Engine::finish_deliveries(eng, None);
    // And the events a cut-off task change left in its task's lock file (for each task no
    // command is at work on; what is left, doctor reports).
    // (TEST BUILDS ONLY: `archive-no-settle` skips this, standing for a change cut off after
    // it, during the run.)
    if let Ok(left) = eng.store.task_journals_left()
        && !crate::fault::test_break("archive-no-settle")
    {
        for (task, lock) in left {
            let _ = super::reconcile::settled(eng, &task, &lock);
        }
    }
    let mut report = Report { recovered: commit::recover(eng, progress)?, ..Report::default() };
    report.recovered.extend(commit::kept_orphans(eng)?);
    report.expired = commit::expire(eng, req.keep_until)?;
    let stamps = scan::stamps(eng)?;
    let sel = scan::select(eng, req.cutoff)?;
    report.filed = scan::file_messages(eng, &sel, false)?;
    crash_point("archive.filed");
    if crate::archive::select::rotate_due(scan::oldest_current(eng)?, req.cutoff) {
        report.rotated = super::event_log::rotate(&eng.store)?.is_some();
        crash_point("archive.rotated");
    }
    // A run that takes no task and changed nothing need not read LOGS again when nothing
    // changed since the last such run (`scan::quiet_logs`).
    let quiet = (sel.tasks.is_empty() && report.filed == 0 && !report.rotated)
        .then(|| scan::quiet_logs(eng, &stamps, req.cutoff))
        .flatten();
    let run_id =
        format!("{}-{}", req.now.format("%Y%m%dT%H%M%S%3fZ"), crate::clock::random_suffix());
    let staging_name = format!("archive-{}-{run_id}", std::process::id());
    let staging = eng.store.tmp_dir().join(&staging_name);
    let mut journal = Journal {
        v: FORMAT,
        run: run_id.clone(),
        state: State::Staging,
        pid: std::process::id(),
        host: super::host_name(),
        started_at: crate::clock::stamp(req.now),
        staging: staging_name,
        segments: Vec::new(),
    };
    let logs = Logs { quiet, stamps: &stamps };
    let staged = match stage(eng, req, &sel, logs, &staging, &journal, &mut report, progress) {
        Ok(s) => s,
        Err(e) => {
            // Nothing outside the staging folder changed: undo it, and say what failed.
            let _ = std::fs::remove_dir_all(&staging);
            let _ = eng.store.remove_journal();
            return Err(e);
        }
    };
    if staged.is_empty() {
        // Nothing was staged after all (what the scan found was gone when it was read): the
        // journal `stage` may have written goes too, or doctor would take the run for one
        // cut off.
        eng.store.remove_journal()?;
        std::fs::remove_dir_all(&staging).map_err(io_err("cannot remove", &staging))?;
        return Ok(report);
    }
    journal.segments = staged.iter().map(|l| format!("{}/{}", l.period, l.segment)).collect();
    journal.state = State::Committing;
    eng.store.write_journal(&journal)?;
    crash_point("archive.committing");
    commit::commit(eng, &staging, &journal.segments)?;
    journal.state = State::Removing;
    eng.store.write_journal(&journal)?;
    crash_point("archive.removing");
    let kept = commit::remove_originals(eng, &journal.segments, progress)?;
    report.kept = kept;
    eng.store.remove_journal()?;
    crash_point("archive.done");
    std::fs::remove_dir_all(&staging).map_err(io_err("cannot remove", &staging))?;
    report.segments = journal.segments;
    Ok(report)
}

/// Counts what a run would take; changes nothing (takes no lock, recovers nothing).
fn dry_run(eng: &LocalEngine, req: &Request) -> Result<Report> {
    let sel = scan::select(eng, req.cutoff)?;
    let mut c = Counter::default();
    let filed = scan::file_messages(eng, &sel, true)?;
    let seen = scan::scan_messages(eng, &sel, req.cutoff, &mut c)?;
    let cursors = scan::event_cursors(eng)?;
    let logs = scan::scan_events(eng, &sel, req.cutoff, &cursors, &seen.segments, &mut c)?;
    let chat = scan::chat_items(eng, req.cutoff, &req.chat_needed)?;
    let mut records = 0;
    for id in sel.tasks.keys() {
        for kind in ["status", "checks", "owner"] {
            if let Some(t) = eng.store.read_record(id, kind)? {
                records += 1;
                c.bytes += t.len() as u64;
            }
        }
    }
    Ok(Report {
        dry_run: true,
        tasks: sel.tasks.len() as u64,
        messages: c.messages + filed,
        records,
        log_segments: logs.len() as u64,
        events: logs.iter().map(|l| l.last + 1 - l.first).sum(),
        chat_files: (chat.len() * scan::ChatItem::EXTS.len()) as u64,
        filed,
        bytes: c.bytes
            + logs.iter().map(|l| l.bytes).sum::<u64>()
            + chat.iter().map(|c| c.bytes).sum::<u64>(),
        expired: eng
            .store
            .segment_lines()?
            .into_iter()
            .filter(|l| crate::archive::select::expired(&l.newest, req.keep_until))
            .map(|l| format!("{}/{}", l.period, l.segment))
            .collect(),
        ..Report::default()
    })
}

#[derive(Default)]
struct Counter {
    messages: u64,
    bytes: u64,
}

impl Sink for Counter {
    fn wants_sizes(&self) -> bool {
        true
    }
    fn task_message(&mut self, _: &TaskId, _: &str, bytes: u64) -> Result<()> {
        self.messages += 1;
        self.bytes += bytes;
        Ok(())
    }
    fn task_event(&mut self, _: &TaskId, _: &str) -> Result<()> {
        Ok(())
    }
    fn loose(&mut self, _: &str, _: &str, bytes: u64) -> Result<()> {
        self.messages += 1;
        self.bytes += bytes;
        Ok(())
    }
}

/// How the run reads LOGS: from the last quiet run's hint when it holds, else in full (and
/// then remembered when there is nothing to do).
struct Logs<'a> {
    quiet: Option<scan::LogsSeen>,
    stamps: &'a scan::Stamps,
}

/// Find, write and verify the run's segments in `staging`. Returns their index lines (also
/// saved as `segments.jsonl` in the staging folder for a roll-forward).
#[expect(clippy::too_many_arguments, reason = "the run's parts, each used once")]
fn stage(
    eng: &LocalEngine,
    req: &Request,
    sel: &Selection,
    from: Logs<'_>,
    staging: &Path,
    journal: &Journal,
    report: &mut Report,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<SegmentLine>> {
    let run = journal.run.as_str();
    std::fs::create_dir_all(staging).map_err(io_err("cannot create", staging))?;
    let nbuckets = (sel.tasks.len() / 1000).clamp(1, 256);
    let mut buckets = Buckets::new(staging, nbuckets)?;
    progress(Progress { phase: Phase::Scan, done: 0, total: sel.tasks.len() as u64 });
    let full = from.quiet.is_none();
    let seen = match from.quiet {
        Some(seen) => seen,
        None => scan::scan_messages(eng, sel, req.cutoff, &mut buckets)?,
    };
    let cursors = scan::event_cursors(eng)?;
    let logs = scan::scan_events(eng, sel, req.cutoff, &cursors, &seen.segments, &mut buckets)?;
    let chat = scan::chat_items(eng, req.cutoff, &req.chat_needed)?;
    let (bucket_paths, loose_path) = buckets.close()?;
    crash_point("archive.scanned");
    let loose_count =
        BufReader::new(File::open(&loose_path).map_err(io_err("cannot read", &loose_path))?)
            .lines()
            .count();
    if sel.tasks.is_empty() && loose_count == 0 && logs.is_empty() && chat.is_empty() {
        if full {
            scan::remember(eng, from.stamps, &seen);
        }
        return Ok(Vec::new()); // nothing to do: no journal was ever written
    }
    // From here on the staging folder is the journal's (a crash before leaves a folder of a
    // dead process, which the next run removes).
    eng.store.write_journal(journal)?;
    crash_point("archive.journal");
    let mut build = Build::new(eng, staging, run, req)?;
    let total = sel.tasks.len() as u64;
    for bucket in &bucket_paths {
        let mut groups: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
        let file = File::open(bucket).map_err(io_err("cannot read", bucket))?;
        for line in BufReader::new(file).lines() {
            let line = line.map_err(io_err("cannot read", bucket))?;
            let mut parts = line.splitn(3, '\t');
            let (Some(k), Some(t), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let g = groups.entry(t.to_string()).or_default();
            if k == "m" { g.0.push(unescape(rest)) } else { g.1.push(rest.to_string()) }
        }
        let ids: Vec<TaskId> = sel
            .tasks
            .keys()
            .filter(|id| bucket_of(id.as_str(), bucket_paths.len()) == bucket_index(bucket))
            .cloned()
            .collect();
        for id in ids {
            let (mut names, events) = groups.remove(id.as_str()).unwrap_or_default();
            names.sort();
            build.task(&id, &sel.tasks[&id], &names, &events)?;
            progress(Progress { phase: Phase::Write, done: build.report.tasks, total });
        }
    }
    let file = File::open(&loose_path).map_err(io_err("cannot read", &loose_path))?;
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io_err("cannot read", &loose_path))?;
        if let Some((period, name)) = line.split_once('\t') {
            build.loose(period, &unescape(name))?;
        }
    }
    for l in &logs {
        build.log(l)?;
    }
    for c in &chat {
        build.chat(c)?;
    }
    crash_point("archive.written");
    report.bytes = build.report.bytes;
    let staged = build.finish(progress)?;
    let mut text = String::new();
    for (line, _) in &staged {
        text.push_str(&serde_json::to_string(line).unwrap_or_default());
        text.push('\n');
    }
    super::atomic::write_new(&staging.join("segments.jsonl"), text.as_bytes(), eng.store.sync)
        .map_err(io_err("cannot write", staging))?;
    eng.store.sync_dir(staging)?;
    crash_point("archive.staged");
    let lines: Vec<SegmentLine> = staged.into_iter().map(|(l, _)| l).collect();
    report.tasks = lines.iter().map(|l| l.tasks).sum();
    report.records = lines.iter().map(|l| l.records).sum();
    report.messages = lines.iter().map(|l| l.messages).sum();
    report.chat_files = lines.iter().map(|l| l.chat).sum();
    report.log_segments = logs.len() as u64;
    report.events = logs.iter().map(|l| l.last + 1 - l.first).sum();
    report.archived_bytes = lines.iter().map(|l| l.bytes).sum();
    Ok(lines)
}
