//! The segments a run writes: each task's bundle (records, messages, events, summary,
//! manifest), the loose messages, log segments and chat files, into one segment per period
//! in the staging folder, then finished and verified (`archive::stage`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::LocalEngine;
use super::archive_buckets::staged_file;
use super::archive_scan::{ChatItem, LogSeg, Selected};
use super::archive_segment::{SegmentWriter, Written};
use super::root::io_err;
use crate::archive::summary::{self, ThreadItem};
use crate::archive::{
    CIRCE_VERSION, Entry, EntryKind, FORMAT, Manifest, ManifestFile, Phase, Progress, Report,
    Request, SegmentLine, Tombstone,
};
use crate::error::{Error, Result};
use crate::event::Event;
use crate::fault::{crash_point, io_step};
use crate::message::{self, Mode};
use crate::names::TaskId;

/// Per segment being written: its writer and what it holds.
struct Seg {
    w: SegmentWriter,
    line: SegmentLine,
}

pub(super) struct Build<'a> {
    eng: &'a LocalEngine,
    staging: PathBuf,
    run: String,
    now: String,
    mtime: u64,
    segs: BTreeMap<String, Seg>,
    tombstones: BufWriter<File>,
    tombstones_path: PathBuf,
    /// What the bundles written so far hold.
    pub(super) report: Report,
}

pub(super) fn entry(kind: EntryKind, task: Option<&TaskId>, origin: Option<String>) -> Entry {
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

/// A message's entry takes its id, time, sender, recipient, intent and summary line.
fn describe(en: &mut Entry, m: &message::Message) {
    en.msg_id.clone_from(&m.msg_id);
    en.created_at = m.created_at.map(crate::clock::format);
    en.from.clone_from(&m.from);
    en.to.clone_from(&m.to);
    en.intent.clone_from(&m.intent);
    en.summary = Some(summary::summary_line(m.headline.as_deref(), &m.body));
}

impl<'a> Build<'a> {
    pub(super) fn new(
        eng: &'a LocalEngine,
        staging: &Path,
        run: &str,
        req: &Request,
    ) -> Result<Build<'a>> {
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
    pub(super) fn task(
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
            moved += text.len() as u64;
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
                describe(&mut en, m);
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
        thread.sort_by(|a, b| summary::by_time(&a.created_at, &b.created_at));
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
        seg.line.newest = summary::later(&seg.line.newest, &rec.updated_at);
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
        let line = t.to_text() + "\n";
        io_step()
            .and_then(|()| self.tombstones.write_all(line.as_bytes()))
            .map_err(io_err("cannot write", &self.tombstones_path))?;
        self.report.tasks += 1;
        Ok(())
    }

    /// A message of no task that stays, old enough.
    pub(super) fn loose(&mut self, period: &str, name: &str) -> Result<()> {
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
            describe(&mut en, m);
        }
        let newest = en.created_at.clone().unwrap_or_default();
        let seg = self.seg(period)?;
        seg.w.add_bytes(en, &format!("loose/{origin}"), &bytes)?;
        seg.line.messages += 1;
        seg.line.newest = summary::later(&seg.line.newest, &newest);
        self.report.bytes += bytes.len() as u64;
        Ok(())
    }

    /// A rotated segment of the event log, whole.
    pub(super) fn log(&mut self, l: &LogSeg) -> Result<()> {
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
        seg.line.newest = summary::later(&seg.line.newest, &l.newest);
        self.report.bytes += len;
        Ok(())
    }

    /// An archived chat file and its record.
    pub(super) fn chat(&mut self, c: &ChatItem) -> Result<()> {
        for ext in ChatItem::EXTS {
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
            seg.line.newest = summary::later(&seg.line.newest, &c.archived_at);
            self.report.bytes += len;
        }
        Ok(())
    }

    /// Finish and verify every segment.
    pub(super) fn finish(
        self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<(SegmentLine, Written)>> {
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
