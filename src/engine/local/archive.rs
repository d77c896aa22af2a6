//! `circe archive` in the local engine: one run, from the lock to the last removal
//! (PROTOCOLS.md section 17). The rules are `crate::archive`'s; the finding is
//! `archive_scan`, the segments `archive_segment`, committing, removing and recovering
//! `archive_commit`.
//!
//! Order of a run: lock (never waiting unless asked) -> finish or undo an interrupted run ->
//! retention -> select -> file the finished tasks' messages into LOGS -> rotate the log if due
//! -> scan -> journal `staging` -> write and verify the segments in a staging folder ->
//! journal `committing` -> place them, summaries, tombstones, one index append (the commit
//! point) -> journal `removing` -> remove each original whose checksum still matches -> end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::LocalEngine;
use super::archive_commit as commit;
use super::archive_scan::{self as scan, ChatItem, LogSeg, Selected, Selection, Sink};
use super::archive_segment::{SegmentWriter, Written};
use super::fault::{crash_point, io_step};
use super::root::io_err;
use crate::archive::plan::{Journal, State};
use crate::archive::summary::{self, ThreadItem};
use crate::archive::{
    CIRCE_VERSION, Entry, EntryKind, FORMAT, Manifest, ManifestFile, Phase, Progress, Report,
    Request, SegmentLine, Tombstone,
};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::message::{self, Mode};
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
        let holder = eng
            .store
            .read_journal()?
            .and_then(|b| Journal::parse(&b).ok())
            .map_or_else(|| "another process".to_string(), |j| j.holder());
        return Err(Error::conflict(format!("an archive run is in progress ({holder})"))
            .detail("holder", holder)
            .hint("wait for it, or pass --wait; under cron exit 4 means another run is doing the work"));
    };
    crash_point("archive.locked");
    let mut report = Report { recovered: commit::recover(eng, progress)?, ..Report::default() };
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
        chat_files: chat.len() as u64,
        filed,
        bytes: c.bytes + logs.iter().map(|l| l.bytes).sum::<u64>(),
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

/// Bucket files in the staging folder: what belongs to each task, spread by a hash of its
/// id, so that one bucket at a time is gathered in memory.
struct Buckets {
    files: Vec<BufWriter<File>>,
    paths: Vec<PathBuf>,
    loose: BufWriter<File>,
    loose_path: PathBuf,
}

fn staged_file(path: &Path) -> Result<BufWriter<File>> {
    io_step().map_err(io_err("cannot create", path))?;
    let f = File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err("cannot create", path))?;
    Ok(BufWriter::with_capacity(16 * 1024, f))
}

fn bucket_of(task: &str, n: usize) -> usize {
    let h = task
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    usize::try_from(h % n as u64).unwrap_or(0)
}

impl Buckets {
    fn new(dir: &Path, n: usize) -> Result<Buckets> {
        let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("bucket-{i:04}"))).collect();
        let files = paths.iter().map(|p| staged_file(p)).collect::<Result<_>>()?;
        let loose_path = dir.join("loose");
        Ok(Buckets { files, paths, loose: staged_file(&loose_path)?, loose_path })
    }

    fn put(&mut self, task: &TaskId, line: &str) -> Result<()> {
        let i = bucket_of(task.as_str(), self.files.len());
        io_step()
            .and_then(|()| self.files[i].write_all(line.as_bytes()))
            .map_err(io_err("cannot write", &self.paths[i]))
    }

    fn close(self) -> Result<(Vec<PathBuf>, PathBuf)> {
        for (mut f, p) in self.files.into_iter().zip(&self.paths) {
            f.flush().map_err(io_err("cannot write", p))?;
        }
        let mut l = self.loose;
        l.flush().map_err(io_err("cannot write", &self.loose_path))?;
        Ok((self.paths, self.loose_path))
    }
}

impl Sink for Buckets {
    fn task_message(&mut self, task: &TaskId, name: &str, _: u64) -> Result<()> {
        self.put(task, &format!("m\t{task}\t{name}\n"))
    }
    fn task_event(&mut self, task: &TaskId, line: &str) -> Result<()> {
        self.put(task, &format!("e\t{task}\t{line}\n"))
    }
    fn loose(&mut self, period: &str, name: &str, _: u64) -> Result<()> {
        io_step()
            .and_then(|()| self.loose.write_all(format!("{period}\t{name}\n").as_bytes()))
            .map_err(io_err("cannot write", &self.loose_path))
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
            if k == "m" { g.0.push(rest.to_string()) } else { g.1.push(rest.to_string()) }
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
            build.loose(period, name)?;
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

fn bucket_index(p: &Path) -> usize {
    p.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("bucket-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Per segment being written: its writer and what it holds.
struct Seg {
    w: SegmentWriter,
    line: SegmentLine,
}

struct Build<'a> {
    eng: &'a LocalEngine,
    staging: PathBuf,
    run: String,
    now: String,
    mtime: u64,
    segs: BTreeMap<String, Seg>,
    tombstones: BufWriter<File>,
    tombstones_path: PathBuf,
    report: Report,
}

fn entry(kind: EntryKind, task: Option<&TaskId>, origin: Option<String>) -> Entry {
    Entry {
        kind,
        member: String::new(),
        task: task.map(ToString::to_string),
        origin,
        bytes: 0,
        sha256: String::new(),
        msg_id: None,
        created_at: None,
        from: None,
        to: None,
        intent: None,
        summary: None,
        mtime_ns: None,
        first_event: None,
        last_event: None,
    }
}

impl<'a> Build<'a> {
    fn new(eng: &'a LocalEngine, staging: &Path, run: &str, req: &Request) -> Result<Build<'a>> {
        let tombstones_path = staging.join("tombstones.jsonl");
        Ok(Build {
            eng,
            staging: staging.to_path_buf(),
            run: run.to_string(),
            now: crate::clock::stamp(req.now),
            mtime: u64::try_from(req.now.timestamp()).unwrap_or(0),
            segs: BTreeMap::new(),
            tombstones: staged_file(&tombstones_path)?,
            tombstones_path,
            report: Report::default(),
        })
    }

    fn seg(&mut self, period: &str) -> Result<&mut Seg> {
        if !self.segs.contains_key(period) {
            let dir = self.staging.join(period);
            std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
            let sdir = self.staging.join("summaries").join(period);
            std::fs::create_dir_all(&sdir).map_err(io_err("cannot create", &sdir))?;
            let name = format!("{period}.{}.tar.zst", self.run);
            let w = SegmentWriter::create(&dir, &name, self.mtime)?;
            let line = SegmentLine {
                v: FORMAT,
                period: period.to_string(),
                segment: name,
                run: self.run.clone(),
                bytes: 0,
                sha256: String::new(),
                created_at: self.now.clone(),
                newest: String::new(),
                tasks: 0,
                messages: 0,
                records: 0,
                events: 0,
                first_event: None,
                last_event: None,
                chat: 0,
                circe: CIRCE_VERSION.to_string(),
            };
            self.segs.insert(period.to_string(), Seg { w, line });
        }
        Ok(self.segs.get_mut(period).expect("inserted above"))
    }

    /// One task's bundle: records, messages, its events, summary, manifest.
    #[expect(clippy::too_many_lines, reason = "one bundle, member after member")]
    fn task(
        &mut self,
        id: &TaskId,
        sel: &Selected,
        names: &[String],
        events: &[String],
    ) -> Result<()> {
        let store = self.eng.store.clone();
        let seg_name = format!("{}.{}.tar.zst", sel.period, self.run);
        let mut files = Vec::new();
        // Read again now (the selection keeps only the period: memory stays flat).
        let tasks_dir = store.root.join("TASKS");
        let Some((status, status_mtime)) = read_original(&tasks_dir.join(format!("{id}.status")))?
        else {
            return Ok(());
        };
        let rec = crate::task::StatusRecord::parse(id, &String::from_utf8_lossy(&status))?;
        let mut checks = crate::task::Checks::new();
        let now = self.now.clone();
        let mut moved = 0u64;
        let seg = self.seg(&sel.period)?;
        for kind in ["status", "checks", "owner"] {
            let (text, mtime) = if kind == "status" {
                (status.clone(), status_mtime)
            } else {
                let Some(x) = read_original(&tasks_dir.join(format!("{id}.{kind}")))? else {
                    continue;
                };
                x
            };
            if kind == "checks" {
                checks = crate::task::record::parse_checks(id, &String::from_utf8_lossy(&text))
                    .unwrap_or_default();
            }
            let origin = format!("TASKS/{id}.{kind}");
            let mut en = entry(EntryKind::Record, Some(id), Some(origin.clone()));
            en.mtime_ns = Some(mtime);
            let e = seg.w.add_bytes(en, &format!("tasks/{id}/{origin}"), &text)?;
            files.push(ManifestFile { origin, bytes: e.bytes, sha256: e.sha256 });
            seg.line.records += 1;
        }
        let mut thread = Vec::new();
        for name in names {
            let Some((bytes, mtime)) = read_original(&store.root.join("LOGS").join(name))? else {
                continue;
            };
            let m = message::parse_bytes(&bytes, Mode::Draft).ok();
            // Bucketed by its file name: its header must agree (headers are the truth), or
            // it stays in LOGS for a later run to sort out.
            if m.as_ref().and_then(|m| m.task_id.as_deref()).is_some_and(|t| t != id.as_str()) {
                continue;
            }
            let origin = format!("LOGS/{name}");
            let mut en = entry(EntryKind::Message, Some(id), Some(origin.clone()));
            en.mtime_ns = Some(mtime);
            if let Some(m) = &m {
                en.msg_id.clone_from(&m.msg_id);
                en.created_at = m.created_at.map(crate::clock::stamp);
                en.from.clone_from(&m.from);
                en.to.clone_from(&m.to);
                en.intent.clone_from(&m.intent);
                en.summary = Some(summary::summary_line(m.headline.as_deref(), &m.body));
                thread.push(ThreadItem {
                    created_at: en.created_at.clone().unwrap_or_default(),
                    from: en.from.clone().unwrap_or_default(),
                    to: en.to.clone().unwrap_or_default(),
                    intent: en.intent.clone().unwrap_or_default(),
                    summary: en.summary.clone().unwrap_or_default(),
                });
            }
            let e = seg.w.add_bytes(en, &format!("tasks/{id}/{origin}"), &bytes)?;
            files.push(ManifestFile { origin, bytes: e.bytes, sha256: e.sha256 });
            seg.line.messages += 1;
            moved += bytes.len() as u64;
        }
        thread.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let mut evs: Vec<Event> = events
            .iter()
            .filter_map(|l| match crate::event::parse_line(l) {
                Ok(crate::event::Line::Event(e)) => Some(*e),
                _ => None,
            })
            .collect();
        evs.sort_by_key(|e| e.id);
        let ev_text: String = events.iter().map(|l| format!("{l}\n")).collect();
        seg.w.add_bytes(
            entry(EntryKind::TaskEvents, Some(id), None),
            &format!("tasks/{id}/events.jsonl"),
            ev_text.as_bytes(),
        )?;
        let md = summary::render(&rec, &checks, &evs, &thread, &now);
        seg.w.add_bytes(
            entry(EntryKind::Summary, Some(id), None),
            &format!("tasks/{id}/summary.md"),
            md.as_bytes(),
        )?;
        let manifest = Manifest {
            v: FORMAT,
            circe: CIRCE_VERSION.to_string(),
            task: id.to_string(),
            archived_at: now.clone(),
            period: sel.period.clone(),
            segment: seg_name.clone(),
            files,
        };
        let mtext = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
        seg.w.add_bytes(
            entry(EntryKind::Manifest, Some(id), None),
            &format!("tasks/{id}/manifest.json"),
            mtext.as_bytes(),
        )?;
        seg.line.tasks += 1;
        seg.line.newest = seg.line.newest.clone().max(rec.updated_at.clone());
        self.report.bytes += moved;
        let sdir = self.staging.join("summaries").join(&sel.period);
        super::atomic::write_new(&sdir.join(format!("{id}.md")), md.as_bytes(), false)
            .map_err(io_err("cannot write", &sdir))?;
        let t = Tombstone {
            v: FORMAT,
            task: id.clone(),
            period: sel.period.clone(),
            segment: seg_name,
            archived_at: now,
            status: rec.status.as_str().to_string(),
        };
        let line = serde_json::to_string(&t).unwrap_or_default() + "\n";
        io_step()
            .and_then(|()| self.tombstones.write_all(line.as_bytes()))
            .map_err(io_err("cannot write", &self.tombstones_path))?;
        self.report.tasks += 1;
        Ok(())
    }

    /// A message of no task that stays, old enough.
    fn loose(&mut self, period: &str, name: &str) -> Result<()> {
        let Some((bytes, mtime)) = read_original(&self.eng.store.root.join("LOGS").join(name))?
        else {
            return Ok(());
        };
        let m = message::parse_bytes(&bytes, Mode::Draft).ok();
        let origin = format!("LOGS/{name}");
        let mut en = entry(EntryKind::Message, None, Some(origin.clone()));
        en.mtime_ns = Some(mtime);
        if let Some(m) = &m {
            en.task.clone_from(&m.task_id);
            en.msg_id.clone_from(&m.msg_id);
            en.created_at = m.created_at.map(crate::clock::stamp);
            en.from.clone_from(&m.from);
            en.to.clone_from(&m.to);
            en.intent.clone_from(&m.intent);
            en.summary = Some(summary::summary_line(m.headline.as_deref(), &m.body));
        }
        let newest = en.created_at.clone().unwrap_or_default();
        let seg = self.seg(period)?;
        seg.w.add_bytes(en, &format!("loose/{origin}"), &bytes)?;
        seg.line.messages += 1;
        seg.line.newest = seg.line.newest.clone().max(newest);
        self.report.bytes += bytes.len() as u64;
        Ok(())
    }

    /// A rotated segment of the event log, whole.
    fn log(&mut self, l: &LogSeg) -> Result<()> {
        let path = self.eng.store.root.join("LOGS").join(&l.name);
        let (mut f, len) =
            super::atomic::open_regular(&path).map_err(io_err("cannot read", &path))?;
        let origin = format!("LOGS/{}", l.name);
        let mut en = entry(EntryKind::Log, None, Some(origin.clone()));
        en.mtime_ns = mtime_of(&f);
        en.first_event = Some(l.first);
        en.last_event = Some(l.last);
        let seg = self.seg(&l.period)?;
        seg.w.add(en, &format!("log/{origin}"), len, &mut f)?;
        seg.line.events += l.last + 1 - l.first;
        seg.line.first_event = Some(seg.line.first_event.map_or(l.first, |x| x.min(l.first)));
        seg.line.last_event = Some(seg.line.last_event.map_or(l.last, |x| x.max(l.last)));
        seg.line.newest = seg.line.newest.clone().max(l.newest.clone());
        self.report.bytes += len;
        Ok(())
    }

    /// An archived chat file and its record.
    fn chat(&mut self, c: &ChatItem) -> Result<()> {
        for ext in ["md", "json"] {
            let path =
                self.eng.store.root.join("LOGS").join("chat").join(format!("{}.{ext}", c.stem));
            let (mut f, len) =
                super::atomic::open_regular(&path).map_err(io_err("cannot read", &path))?;
            let origin = format!("LOGS/chat/{}.{ext}", c.stem);
            let mut en = entry(EntryKind::Chat, None, Some(origin.clone()));
            en.mtime_ns = mtime_of(&f);
            let seg = self.seg(&c.period)?;
            seg.w.add(en, &format!("chat/{origin}"), len, &mut f)?;
            seg.line.chat += 1;
            seg.line.newest = seg.line.newest.clone().max(c.archived_at.clone());
            self.report.bytes += len;
        }
        Ok(())
    }

    /// Finish and verify every segment.
    fn finish(self, progress: &mut dyn FnMut(Progress)) -> Result<Vec<(SegmentLine, Written)>> {
        let mut t = self.tombstones;
        t.flush().map_err(io_err("cannot write", &self.tombstones_path))?;
        drop(t);
        let mut out = Vec::new();
        let total = self.segs.len() as u64;
        for (i, (_, seg)) in self.segs.into_iter().enumerate() {
            let Seg { w, mut line } = seg;
            let written = w.finish()?;
            line.bytes = written.bytes;
            line.sha256.clone_from(&written.sha256);
            out.push((line, written));
            progress(Progress { phase: Phase::Write, done: i as u64 + 1, total });
        }
        crash_point("archive.finished");
        for (i, (line, w)) in out.iter().enumerate() {
            super::archive_segment::verify(&w.path, &w.list_path, Some(&line.sha256))?;
            progress(Progress { phase: Phase::Verify, done: i as u64 + 1, total });
        }
        crash_point("archive.verified");
        Ok(out)
    }
}

/// A file's modification time in ns since the epoch.
pub(super) fn mtime_of(f: &File) -> Option<u64> {
    let m = f.metadata().ok()?.modified().ok()?;
    u64::try_from(m.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos()).ok()
}

/// An original's bytes and modification time (`None` when it is gone): one open, one
/// `fstat`, the reads.
fn read_original(path: &Path) -> Result<Option<(Vec<u8>, u64)>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = match File::options()
        .read(true)
        .custom_flags(super::atomic::NOFOLLOW_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    let meta = f.metadata().map_err(io_err("cannot stat", path))?;
    if !meta.is_file() {
        return Err(Error::refused(format!("{} is not a regular file", path.display()))
            .hint("`circe doctor --repair` moves it aside"));
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or(0);
    // Exactly its size, then one read that must find the end (no size probe, no seek).
    let len = usize::try_from(meta.len()).unwrap_or(0);
    let mut bytes = vec![0u8; len];
    let mut f = f;
    f.read_exact(&mut bytes).map_err(io_err("cannot read", path))?;
    let mut probe = [0u8; 1];
    if f.read(&mut probe).map_err(io_err("cannot read", path))? != 0 {
        return Err(Error::internal(format!("{} grew while it was archived", path.display()))
            .hint("run `circe archive` again"));
    }
    Ok(Some((bytes, mtime)))
}
