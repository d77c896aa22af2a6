//! The `ARCHIVE/` folder (PROTOCOLS.md section 17, "Layout"): the index of committed
//! segments, tombstones, the run's journal and lock, and reading back what was archived
//! (a task's bundle, events by id, search).
//!
//! ```text
//! ARCHIVE/index.jsonl                       one line per committed segment (the commit point)
//! ARCHIVE/journal.json                      the running (or interrupted) run's state
//! ARCHIVE/tombstones/<task>                 an archived task: its id is never used again
//! ARCHIVE/<period>/<period>.<run>.tar.zst   a segment (tar + zstd)
//! ARCHIVE/<period>/<period>.<run>.index.jsonl.zst   its member list, with checksums
//! ARCHIVE/<period>/summaries/<task>.md      a task's story for people
//! ```

use std::io::{self, Write};
use std::path::PathBuf;

use super::archive_segment::{ListReader, read_members};
use super::atomic::{self, TempFile};
use super::lock::Lock;
use super::root::{Store, io_err, list_names};
use crate::archive::plan::Journal;
use crate::archive::query::{Query, words_in};
use crate::archive::{
    Bundle, EntryKind, Hit, Manifest, SegmentLine, Tombstone, check_format, is_period, segment_stem,
};
use crate::error::{Error, Result};
use crate::event::{Cursor, Event, Line};
use crate::names::TaskId;

const LOCK: &str = "archive";

impl Store {
    pub(super) fn archive_dir(&self) -> PathBuf {
        self.root.join("ARCHIVE")
    }

    pub(super) fn archive_index(&self) -> PathBuf {
        self.archive_dir().join("index.jsonl")
    }

    pub(super) fn archive_journal(&self) -> PathBuf {
        self.archive_dir().join("journal.json")
    }

    pub(super) fn tombstone_path(&self, task: &str) -> PathBuf {
        self.archive_dir().join("tombstones").join(task)
    }

    /// `ARCHIVE/<period>/<file>` for a segment named `<period>/<file>` or by its parts.
    pub(super) fn segment_path(&self, period: &str, file: &str) -> PathBuf {
        self.archive_dir().join(period).join(file)
    }

    pub(super) fn list_path(&self, period: &str, segment: &str) -> PathBuf {
        self.segment_path(period, &format!("{}.index.jsonl.zst", segment_stem(segment)))
    }

    /// The archive's lock, taken without waiting (`None`: another run holds it), or waited
    /// for as long as it takes (`wait`).
    pub(super) fn lock_archive(&self, wait: bool) -> Result<Option<Lock>> {
        let path = self.root.join("locks").join(format!("{LOCK}.lock"));
        let mut said = false;
        loop {
            match Lock::try_acquire(&path)? {
                Some(l) => {
                    // Who holds it, for a run that finds it held (from its first moment:
                    // the journal is written only once the run stages). Best effort: a lock
                    // file this user may only read keeps what it holds.
                    let me = format!(
                        "pid {} on {} since {}",
                        std::process::id(),
                        super::host_name(),
                        crate::clock::format(crate::clock::now())
                    );
                    let f = l.file();
                    let _ = f.set_len(0).and_then(|()| {
                        std::os::unix::fs::FileExt::write_all_at(f, me.as_bytes(), 0)
                    });
                    return Ok(Some(l));
                }
                None if wait => {
                    if !said {
                        said = true;
                        crate::error::warn(&format!(
                            "waiting for the archive run in progress ({}) to end; a run that hangs is waited for without end: end that process",
                            self.archive_holder()
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                None => return Ok(None),
            }
        }
    }

    /// Who holds the archive's lock, as its holder wrote it into the lock file (`pid P on
    /// HOST since T`), else as the run's journal names it, else "another process".
    pub(super) fn archive_holder(&self) -> String {
        let path = self.root.join("locks").join(format!("{LOCK}.lock"));
        let written = atomic::read_regular(&path)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|s| s.starts_with("pid ") && !s.contains('\n'));
        if let Some(w) = written {
            return w;
        }
        self.read_journal()
            .ok()
            .flatten()
            .and_then(|b| Journal::parse(&b).ok())
            .map_or_else(|| "another process".to_string(), |j| j.holder())
    }

    /// The journal's bytes, if there is one.
    pub(super) fn read_journal(&self) -> Result<Option<Vec<u8>>> {
        let p = self.archive_journal();
        match atomic::read_regular(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// Replace the journal (temp file, fsync, rename, fsync the folder).
    pub(super) fn write_journal(&self, j: &Journal) -> Result<()> {
        let dir = self.archive_dir();
        std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        self.archive_replace(&self.archive_journal(), j.render().as_bytes(), true)
    }

    pub(super) fn remove_journal(&self) -> Result<()> {
        let p = self.archive_journal();
        match atomic::remove(&p) {
            Ok(()) => self.sync_dir(&self.archive_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("cannot remove", &p, e)),
        }
    }

    /// Write `path` whole by temp file and rename (fsynced when `sync` and the root is
    /// durable).
    pub(super) fn archive_replace(
        &self,
        path: &std::path::Path,
        bytes: &[u8],
        sync: bool,
    ) -> Result<()> {
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        let mut t = TempFile::write(&dir, bytes, sync && self.sync)
            .map_err(io_err("cannot write", path))?;
        atomic::rename_replace(&t.path, path).map_err(io_err("cannot write", path))?;
        t.disarm();
        if sync { self.sync_dir(&dir) } else { Ok(()) }
    }

    /// Every committed segment, in index order. Lines that do not read (a torn last line)
    /// are left out; a newer format is refused.
    pub(super) fn segment_lines(&self) -> Result<Vec<SegmentLine>> {
        let p = self.archive_index();
        let text = match atomic::read_regular(&p) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("cannot read", &p, e)),
        };
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if let Ok(s) = serde_json::from_str::<SegmentLine>(line) {
                check_format(s.v, "ARCHIVE/index.jsonl")?;
                out.push(s);
            }
        }
        Ok(out)
    }

    /// Append committed segments to the index: one write, then fsync (the commit point).
    /// A torn last line (a crash mid-write) is ended first, so it stays one bad line.
    pub(super) fn append_index(&self, lines: &[SegmentLine]) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let p = self.archive_index();
        let torn =
            atomic::read_regular(&p).is_ok_and(|b| !b.is_empty() && b.last() != Some(&b'\n'));
        let mut buf = if torn { "\n".to_string() } else { String::new() };
        for l in lines {
            buf.push_str(&serde_json::to_string(l).unwrap_or_default());
            buf.push('\n');
        }
        let mut f = atomic::append_open(&p).map_err(io_err("cannot append to", &p))?;
        f.write_all(buf.as_bytes()).map_err(io_err("cannot append to", &p))?;
        if self.sync {
            crate::fault::io_step()
                .and_then(|()| f.sync_data())
                .map_err(io_err("cannot sync", &p))?;
        }
        self.sync_dir(&self.archive_dir())
    }

    /// `ARCHIVE/last_event`: the newest event id of the segments retention removed (their
    /// index lines go with them; ids must never be given again).
    fn expired_last_event_path(&self) -> PathBuf {
        self.archive_dir().join("last_event")
    }

    /// The newest event id retention removed (0 when none).
    pub(super) fn expired_last_event(&self) -> Result<u64> {
        let p = self.expired_last_event_path();
        match atomic::read_regular(&p) {
            Ok(b) => String::from_utf8_lossy(&b).trim().parse().map_err(|_| {
                Error::internal(format!("{} does not hold an event id", p.display()))
                    .hint("it holds one number, the newest event id retention removed: write it back; if unsure, a number above every id a consumer may have seen is safe (ids then skip some, never repeat)")
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// Remember `id` as removed by retention (before the index lines that name it go).
    pub(super) fn keep_expired_last_event(&self, id: u64) -> Result<()> {
        if id <= self.expired_last_event()? {
            return Ok(());
        }
        self.archive_replace(&self.expired_last_event_path(), format!("{id}\n").as_bytes(), true)
    }

    /// Rewrite the index with only `keep` (retention, and rolling back an uncommitted run).
    pub(super) fn rewrite_index(&self, keep: &[SegmentLine]) -> Result<()> {
        let text: String =
            keep.iter().map(|l| serde_json::to_string(l).unwrap_or_default() + "\n").collect();
        self.archive_replace(&self.archive_index(), text.as_bytes(), true)
    }

    /// Period folders, sorted.
    pub(super) fn periods(&self) -> Result<Vec<String>> {
        Ok(list_names(&self.archive_dir())?.into_iter().filter(|p| is_period(p)).collect())
    }

    /// The tombstone of an archived task.
    pub(super) fn tombstone(&self, task: &TaskId) -> Result<Option<Tombstone>> {
        let p = self.tombstone_path(task.as_str());
        let bytes = match atomic::read_regular(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("cannot read", &p, e)),
        };
        Tombstone::parse(&bytes, &p.display().to_string(), task.as_str()).map(Some)
    }

    /// An archived task's bundle: its files byte for byte, its events, its summary.
    pub(super) fn bundle(&self, task: &TaskId) -> Result<Option<Bundle>> {
        let Some(t) = self.tombstone(task)? else { return Ok(None) };
        let path = self.segment_path(&t.period, &t.segment);
        let prefix = format!("tasks/{task}/");
        let (mut files, mut events, mut summary, mut manifest) =
            (Vec::new(), Vec::new(), String::new(), None);
        if !path.exists() {
            // Retention removed it (or a person did): the tombstone and the summary stay.
            let kept = self.root.join(t.summary_path());
            let hint = if kept.is_file() {
                format!("its story is kept in {}", t.summary_path())
            } else {
                "the segment is gone; only its tombstone says the task was archived".to_string()
            };
            return Err(Error::not_found(format!(
                "task {task} was archived ({}, {}) into ARCHIVE/{}/{}, which is not here: retention removed it (`archive.keep`), or this root came back from a database (`migrate --to-local` brings the tombstones only; the archive stayed in the folder the team first moved from, its MIGRATED.txt says how to read it)",
                t.status, t.archived_at, t.period, t.segment
            ))
            .hint(hint));
        }
        read_members(&path, &|rel| rel.starts_with(&prefix), &mut |rel, bytes| {
            let rest = &rel[prefix.len()..];
            match rest {
                "manifest.json" => manifest = serde_json::from_slice::<Manifest>(&bytes).ok(),
                "summary.md" => summary = String::from_utf8_lossy(&bytes).into_owned(),
                "events.jsonl" => events.extend(parse_events(&bytes)?),
                origin => files.push((origin.to_string(), bytes)),
            }
            Ok(true)
        })?;
        Ok(Some(Bundle { tombstone: t, manifest, files, events, summary }))
    }

    /// The bytes of the member a search found.
    pub(super) fn member(&self, hit: &crate::archive::Hit) -> Result<Option<Vec<u8>>> {
        let stem = segment_stem(&hit.segment).to_string();
        let mut found = None;
        read_members(
            &self.segment_path(&hit.period, &hit.segment),
            &|rel| format!("{stem}/{rel}") == hit.entry.member,
            &mut |_, bytes| {
                found = Some(bytes);
                Ok(false)
            },
        )?;
        Ok(found)
    }

    /// Events that left the hot log: up to `max` after `from`, from the archived log segments.
    pub(super) fn archived_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        let want = from.next_id();
        let mut lines: Vec<SegmentLine> = self
            .segment_lines()?
            .into_iter()
            .filter(|l| l.last_event.is_some_and(|last| last >= want))
            .collect();
        lines.sort_by_key(|l| l.first_event);
        let mut out: Vec<Event> = Vec::new();
        for l in lines {
            if out.len() >= max {
                break;
            }
            read_members(
                &self.segment_path(&l.period, &l.segment),
                &|rel| rel.starts_with("log/"),
                &mut |_, bytes| {
                    out.extend(parse_events(&bytes)?.into_iter().filter(|e| e.id >= want));
                    Ok(true)
                },
            )?;
        }
        out.sort_by_key(|e| e.id);
        out.dedup_by_key(|e| e.id);
        out.truncate(max);
        Ok(out)
    }

    /// Everything the archive holds that `q` matches, handed to `each` (which says whether
    /// to go on). A segment that cannot be read is passed over (the others are still
    /// searched) and returned with why; an error from `each` ends the search.
    pub(super) fn search(
        &self,
        q: &Query,
        each: &mut dyn FnMut(Hit) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.over_segments(&|l| q.period_may_match(&l.period), &mut |l, theirs| {
            self.search_segment(l, q, &mut |h: Hit| {
                let r = each(h);
                *theirs = r.is_err();
                r
            })
        })
    }

    /// Every archived message with its bytes, one segment read once each (`Engine::
    /// archived_messages`), as `search` hands on what it finds.
    pub(super) fn messages(
        &self,
        each: &mut dyn FnMut(&crate::archive::Entry, Vec<u8>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.over_segments(&|_| true, &mut |l, theirs| {
            let mut wanted = std::collections::HashMap::new();
            for entry in ListReader::open(&self.list_path(&l.period, &l.segment))? {
                let entry = entry?;
                if entry.kind == EntryKind::Message {
                    wanted.insert(entry.member.clone(), entry);
                }
            }
            self.read_wanted(l, &wanted, &mut |entry, bytes| {
                let r = each(entry, bytes);
                *theirs = r.is_err();
                r
            })
        })
    }

    /// `per` on each segment `pick` takes, in order, until one says stop. A segment `per`
    /// fails on is passed over and returned with why, unless the error is the consumer's
    /// own (`per` sets its flag), which ends the walk.
    fn over_segments(
        &self,
        pick: &dyn Fn(&crate::archive::SegmentLine) -> bool,
        per: &mut dyn FnMut(&crate::archive::SegmentLine, &mut bool) -> Result<bool>,
    ) -> Result<Vec<String>> {
        let mut passed = Vec::new();
        for l in self.segment_lines()?.into_iter().filter(|l| pick(l)) {
            let mut theirs = false;
            match per(&l, &mut theirs) {
                Ok(true) => {}
                Ok(false) => return Ok(passed),
                Err(e) if theirs => return Err(e),
                Err(e) => passed.push(format!("ARCHIVE/{}/{}: {}", l.period, l.segment, e.chain())),
            }
        }
        Ok(passed)
    }

    /// The members of segment `l` named in `wanted` (by member path), each with its bytes,
    /// in the order they lie, until `each` says stop: whether to go on.
    fn read_wanted(
        &self,
        l: &crate::archive::SegmentLine,
        wanted: &std::collections::HashMap<String, crate::archive::Entry>,
        each: &mut dyn FnMut(&crate::archive::Entry, Vec<u8>) -> Result<bool>,
    ) -> Result<bool> {
        if wanted.is_empty() {
            return Ok(true);
        }
        let stem = segment_stem(&l.segment).to_string();
        let mut go = true;
        read_members(
            &self.segment_path(&l.period, &l.segment),
            &|rel| wanted.contains_key(&format!("{stem}/{rel}")),
            &mut |rel, bytes| {
                go = each(&wanted[&format!("{stem}/{rel}")], bytes)?;
                Ok(go)
            },
        )?;
        Ok(go)
    }

    /// `search` in one segment: whether to go on.
    fn search_segment(
        &self,
        l: &crate::archive::SegmentLine,
        q: &Query,
        each: &mut dyn FnMut(Hit) -> Result<bool>,
    ) -> Result<bool> {
        let mut hits = Vec::new();
        for entry in ListReader::open(&self.list_path(&l.period, &l.segment))? {
            let entry = entry?;
            if matches!(entry.kind, EntryKind::Message | EntryKind::Summary | EntryKind::Chat)
                && q.matches(&entry)
            {
                hits.push(entry);
            }
        }
        if q.in_text && q.text.is_some() {
            let words = q.text.clone().unwrap_or_default();
            let wanted: std::collections::HashMap<String, crate::archive::Entry> =
                hits.into_iter().map(|e| (e.member.clone(), e)).collect();
            return self.read_wanted(l, &wanted, &mut |entry, bytes| {
                let text = String::from_utf8_lossy(&bytes);
                match text.lines().find(|line| words_in(&words, line)) {
                    Some(line) => each(Hit {
                        period: l.period.clone(),
                        segment: l.segment.clone(),
                        entry: entry.clone(),
                        line: Some(line.to_string()),
                    }),
                    None => Ok(true),
                }
            });
        }
        for entry in hits {
            if !each(Hit {
                period: l.period.clone(),
                segment: l.segment.clone(),
                entry,
                line: None,
            })? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Event lines in a buffer (legacy and damaged lines are skipped; a newer format refused).
pub(super) fn parse_events(bytes: &[u8]) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(bytes).lines() {
        match crate::event::parse_line(line) {
            Ok(Line::Event(e)) => out.push(*e),
            Err(e) if e.kind == crate::error::Kind::Refused => return Err(e),
            _ => {}
        }
    }
    Ok(out)
}

/// Write the files of a restored bundle under `dir` (`circe archive restore --to DIR`), byte
/// for byte. Everything is checked before anything is written: every path (relative, plain
/// names only), every file against its manifest's size and SHA-256, and that no file is
/// there already (none is ever replaced). Returns the paths written.
pub fn write_restored(
    dir: &std::path::Path,
    files: &[(String, Vec<u8>)],
    manifest: Option<&crate::archive::Manifest>,
) -> Result<Vec<String>> {
    let damaged = |what: String| {
        Err(Error::refused(what)
            .hint("nothing was written; `circe archive verify` checks every segment"))
    };
    let Some(manifest) = manifest else {
        return damaged("the task's manifest is missing or does not read".to_string());
    };
    if files.is_empty() {
        return damaged("the task's bundle holds no file".to_string());
    }
    if let Some(gone) = manifest.files.iter().find(|f| !files.iter().any(|(o, _)| *o == f.origin)) {
        return damaged(format!(
            "`{}` is listed by the task's manifest but not archived",
            gone.origin
        ));
    }
    for (origin, bytes) in files {
        let ok = !origin.is_empty()
            && !origin.starts_with('/')
            && origin.split('/').all(|p| !p.is_empty() && p != "." && p != "..");
        if !ok {
            return Err(Error::refused(format!("archived file `{origin}` has an unsafe path"))
                .hint("nothing was written; the archive may have been tampered with"));
        }
        let Some(f) = manifest.files.iter().find(|f| f.origin == *origin) else {
            return damaged(format!("archived file `{origin}` is not in the task's manifest"));
        };
        if f.bytes != bytes.len() as u64 || f.sha256 != super::archive_segment::sha256(bytes) {
            return damaged(format!(
                "archived file `{origin}` does not match its manifest (size or SHA-256)"
            ));
        }
        let p = dir.join(origin);
        if let Some(parent) = p.parent() {
            super::files::folder_can_be(parent).map_err(|e| {
                e.hint("nothing was written; restore into a folder (made when missing)")
            })?;
        }
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(Error::conflict(format!(
                "{} exists already; not replacing it",
                p.display()
            ))
            .hint("nothing was written; restore into an empty folder"));
        }
    }
    let mut out = Vec::new();
    for (origin, bytes) in files {
        let p = dir.join(origin);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
        }
        atomic::write_new(&p, bytes, false).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                Error::conflict(format!("{} exists already; not replacing it", p.display()))
                    .hint("restore into an empty folder")
            } else {
                Error::io("cannot write", &p, e)
            }
        })?;
        out.push(p.display().to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::Root;

    /// A run that finds the lock held before the holder wrote its journal (while it
    /// selects and scans) still names it: `pid P on HOST since T`, not "another process".
    #[test]
    fn a_run_held_off_while_the_holder_scans_names_it() {
        let (_d, r) = Root::new(&["coordinator", "engineer"]);
        let _held = r.eng.store.lock_archive(false).unwrap().unwrap();
        assert!(r.eng.store.read_journal().unwrap().is_none());
        let now = crate::clock::now();
        let req = crate::archive::Request {
            now,
            cutoff: now,
            keep_until: None,
            dry_run: false,
            chat_needed: Vec::new(),
            wait: false,
        };
        let e = super::super::archive::run(&r.eng, &req, &mut |_| {}).unwrap_err();
        let me = format!("pid {} on ", std::process::id());
        assert!(e.message.contains(&me), "{}", e.message);
    }
}
