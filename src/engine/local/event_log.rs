//! The event log on disk: `LOGS/events.jsonl` (the current file) and its rotated segments
//! `LOGS/events-<first id>-<last id>.jsonl` (both ids 20 digits, so names sort by id).
//!
//! Lock protocol (PROTOCOLS.md section 10): an appender takes `locks/events.lock`
//! exclusively, reads the last id from the end of the current file (or, when that is empty,
//! from the newest segment's name), writes all its lines with one `write` on an `O_APPEND`
//! handle, and releases the lock before its `fdatasync`; ids are therefore gap-free and in
//! file order. Rotation takes the same lock exclusively and renames the current file to its
//! segment name (never copy-and-truncate). Readers take no lock: they find the file holding
//! the id they want by the segment names, and stop at the last complete line.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::atomic;
use super::root::{EVENTS, Store, io_err, list_where};
use crate::error::{Error, Result};
use crate::event::{self, Cursor, Event, Line};

const LOCK: &str = "events";
/// Bytes read from the end of the log to find the last id.
const TAIL: u64 = 8 * 1024;
/// Bytes read at a time when scanning forward.
const CHUNK: usize = 256 * 1024;

/// A rotated segment: its path and the ids it holds.
pub(super) struct Segment {
    pub path: PathBuf,
    pub first: u64,
    pub last: u64,
}

fn logs(store: &Store) -> PathBuf {
    store.root.join("LOGS")
}

pub(super) fn current(store: &Store) -> PathBuf {
    store.root.join(EVENTS)
}

/// Rotated segments, oldest first.
pub(super) fn segments(store: &Store) -> Result<Vec<Segment>> {
    let mut out: Vec<Segment> = list_where(&logs(store), &mut |n| n.starts_with("events-"))?
        .into_iter()
        .filter_map(|(n, _)| segment_named(store, &n))
        .collect();
    out.sort_by_key(|s| s.first);
    Ok(out)
}

/// The rotated segment a name in LOGS is, if it is one (`events-<first>-<last>.jsonl`).
pub(super) fn segment_named(store: &Store, name: &str) -> Option<Segment> {
    let ids = name.strip_prefix("events-")?.strip_suffix(".jsonl")?;
    let (a, b) = ids.split_once('-')?;
    let (first, last) = (a.parse().ok()?, b.parse().ok()?);
    Some(Segment { path: logs(store).join(name), first, last })
}

/// The name a file holding ids `first..=last` gets when rotated.
fn segment_name(first: u64, last: u64) -> String {
    format!("events-{first:020}-{last:020}.jsonl")
}

/// Ids of the complete lines at the end of `path`: (the highest id among the whole events
/// of the last `TAIL` bytes, whether the file ends in the middle of a line). Reads
/// backwards in `TAIL` steps until it finds a line with an id. The highest, not the last:
/// a line added by hand with a lower id must not make the next append give ids again.
fn tail_id(path: &Path) -> Result<(Option<u64>, bool)> {
    let (f, len) = match atomic::open_regular(path) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((None, false)),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    if len == 0 {
        return Ok((None, false));
    }
    let mut size = TAIL;
    loop {
        let start = len.saturating_sub(size);
        let mut buf = vec![0u8; usize::try_from(len - start).unwrap_or(0)];
        f.read_exact_at(&mut buf, start).map_err(io_err("cannot read", path))?;
        let torn = buf.last() != Some(&b'\n');
        // What follows the last newline is a torn tail, or a whole event that lost its
        // newline (an editor's save): the append ends it, so its id counts.
        let text = String::from_utf8_lossy(&buf);
        let mut lines = text.split('\n');
        if start > 0 {
            lines.next(); // cut at the read's start
        }
        // The last line that is a whole event.
        let whole = event::whole_line_id;
        let mut lines = lines.rev();
        if let Some(last) = lines.find_map(whole) {
            // Only a line whose id is higher is parsed whole.
            let mut max = last;
            for l in lines {
                if event::line_id(l).is_some_and(|id| id > max)
                    && let Some(id) = whole(l)
                {
                    max = id;
                }
            }
            return Ok((Some(max), torn));
        }
        if start == 0 {
            return Ok((None, torn));
        }
        size = size.saturating_mul(4);
    }
}

/// Lines of the current file whose id is lower than one before them (added by hand: circe
/// gives each event a higher id; a line torn by a failed write may share its id with the
/// line after it): (line number from 1, its id, the highest before it), at most `max`.
/// Reads each line's id only.
pub(super) fn out_of_order(
    store: &Store,
    max: usize,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<IdScan> {
    let path = current(store);
    let mut r = match Reader::open(&path, 0) {
        Ok(r) => r,
        Err(e) if e.kind == crate::error::Kind::NotFound => return Ok(IdScan::default()),
        Err(e) => return Err(e),
    };
    let (mut out, mut line, mut high) = (IdScan::default(), 0, None);
    // The line that gave the highest id so far: a whole line after it with the same id is
    // an id given twice (a torn line shares its id with the one after it, and is no event).
    let mut highest = String::new();
    while let Some(l) = r.next_line()? {
        line += 1;
        let Some(id) = event::line_id(&l) else {
            // An event line without an id after circe's own, of the last day: an older
            // circe's append, while it still runs (older ones are history, said no more).
            if high.is_some() && older_event(&l, since) {
                out.older.get_or_insert((line, 0)).1 += 1;
            }
            continue;
        };
        if let Some(v) = event::newer_format_of(&l)
            && out.newer.len() < max
        {
            out.newer.push((line, id, v));
        }
        match high {
            Some(h) if id < h => {
                if out.lower.len() < max {
                    out.lower.push((line, id, h));
                }
            }
            Some(h) if id == h && event::whole_line_id(&highest).is_some() => {
                if event::whole_line_id(&l).is_some() && out.lower.len() < max {
                    out.lower.push((line, id, h));
                }
            }
            _ => {
                high = Some(id);
                highest = l;
            }
        }
    }
    Ok(out)
}

/// A refusal of a line (a newer format) said with the file that holds it.
fn in_file(e: crate::error::Error, path: &std::path::Path) -> crate::error::Error {
    let at = path.display().to_string();
    e.map_message(|m| format!("{m}, in {at}"))
}

/// What `out_of_order` found in the current event log.
#[derive(Debug, Default)]
pub(super) struct IdScan {
    /// (line, id, the higher id before it), at most `max`.
    pub lower: Vec<(u64, u64, u64)>,
    /// Event lines without an id after one with an id: (the first's line, how many).
    pub older: Option<(u64, u64)>,
    /// Lines of a format newer than this circe reads: (line, id, format), at most `max`.
    pub newer: Vec<(u64, u64, u32)>,
}

/// An event line as a circe that gave no ids wrote it (`{"ts":…,"event":…}`), at `since` or
/// later.
fn older_event(line: &str, since: chrono::DateTime<chrono::Utc>) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { return false };
    let at = v.get("ts").and_then(|t| t.as_str()).and_then(crate::clock::parse);
    v.get("id").is_none()
        && v.get("event").is_some_and(serde_json::Value::is_string)
        && at.is_some_and(|t| t >= since)
}

/// The id of the first line of `path` when it is a whole event within the first `TAIL`
/// bytes (`None` otherwise, or when there is no file).
fn head_id(path: &Path) -> Result<Option<u64>> {
    let (f, len) = match atomic::open_regular(path) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    let mut buf = vec![0u8; usize::try_from(len.min(TAIL)).unwrap_or(0)];
    f.read_exact_at(&mut buf, 0).map_err(io_err("cannot read", path))?;
    let Some(end) = buf.iter().position(|&b| b == b'\n') else { return Ok(None) };
    Ok(std::str::from_utf8(&buf[..end]).ok().and_then(event::line_id))
}

/// The newest event's id (0 when there is none).
pub(super) fn last_id(store: &Store) -> Result<u64> {
    if let (Some(id), _) = tail_id(&current(store))? {
        return Ok(id);
    }
    before_current(store)
}

/// The last id before the current file: the newest of the segments in LOGS, those moved
/// into the archive (the archive may have taken newer segments than one LOGS keeps for a
/// task that stays) and those retention removed since, else 0. The archive commits a
/// segment to its index before it removes it from LOGS, and retention keeps the newest id
/// before it drops index lines, so one of the three always names it. And never below the
/// newest id a consumer's cursor has passed: a current file removed by hand took the ids
/// it gave with it, and a consumer that read them would pass over the ones given again.
fn before_current(store: &Store) -> Result<u64> {
    Ok(kept_before_current(store)?.max(cursors_passed(store)?))
}

/// `before_current` as the log's own files and the archive keep it, the cursors left out.
fn kept_before_current(store: &Store) -> Result<u64> {
    let here = segments(store)?.last().map_or(0, |s| s.last);
    let archived = store.segment_lines()?.iter().filter_map(|l| l.last_event).max().unwrap_or(0);
    Ok(here.max(archived).max(store.expired_last_event()?))
}

/// The newest event id any consumer's saved cursor has passed (0 when none has).
fn cursors_passed(store: &Store) -> Result<u64> {
    let mut floor = 0;
    for (kind, name) in store.list_cursors()?.into_iter().filter(|(k, _)| k == "events") {
        let Ok(Some(text)) = store.read_cursor(&kind, &name) else { continue };
        let after = serde_json::from_slice::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["after"].as_u64());
        floor = floor.max(after.unwrap_or(0));
    }
    Ok(floor)
}

/// Before doctor moves aside a current log that is no regular file (a link, a FIFO): the
/// newest id it may have given is kept as the floor of the next append (beside the newest
/// id retention removed, `ARCHIVE/last_event`), so no id is given twice: the id at the end
/// of the file a link leads to, and the newest any consumer's cursor has passed (kept too:
/// the cursor may be removed before the next append).
pub(super) fn keep_floor_of_current(store: &Store) -> Result<()> {
    let before = kept_before_current(store)?;
    let mut floor = before_current(store)?;
    let here = current(store);
    if let Ok(real) = std::fs::canonicalize(&here)
        && real != here
        && let Ok((Some(id), _)) = tail_id(&real)
    {
        floor = floor.max(id);
    }
    if floor > before {
        std::fs::create_dir_all(store.archive_dir())
            .map_err(io_err("cannot create", &store.archive_dir()))?;
        store.keep_expired_last_event(floor)?;
    }
    Ok(())
}

/// Give `events` the next ids and append them: one `write` under the log's lock.
pub(super) fn append(store: &Store, events: &mut [Event]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let path = current(store);
    // TEST BUILDS ONLY: `events-nolock` shows the gap-free checker failing without the lock.
    let lock = if crate::fault::test_break("events-nolock") {
        None
    } else {
        Some(store.lock_named(LOCK)?)
    };
    let (last, torn) = tail_id(&path)?;
    let mut next = match last {
        Some(id) => id,
        None => before_current(store)?,
    };
    let mut buf = String::with_capacity(events.len() * 256 + 1);
    if torn {
        // A line cut by a failed write (disk full): end it, so ours start on a line of their own.
        buf.push('\n');
    }
    for e in events.iter_mut() {
        next = next.checked_add(1).ok_or_else(|| {
            Error::internal(format!(
                "{}: its last id is {next}, and no id follows it",
                path.display()
            ))
            .hint(format!("a line was added by hand: remove the line with id {next} from the file"))
        })?;
        e.id = next;
        buf.push_str(&e.to_line());
        buf.push('\n');
    }
    let file = atomic::append_open(&path).map_err(io_err("cannot append to", &path))?;
    (&file).write_all(buf.as_bytes()).map_err(io_err("cannot append to", &path))?;
    drop(lock);
    if store.sync {
        crate::fault::io_step().map_err(io_err("cannot sync", &path))?;
        file.sync_data().map_err(io_err("cannot sync", &path))?;
    }
    Ok(())
}

/// Rename the current file to its segment name under the log's lock (a fresh file is made
/// by the next append). Returns the segment's file name; `None` when there was nothing to
/// rotate.
pub(super) fn rotate(store: &Store) -> Result<Option<String>> {
    let path = current(store);
    let _lock = store.lock_named(LOCK)?;
    let (Some(last), _) = tail_id(&path)? else { return Ok(None) };
    let first = first_id(&path)?.unwrap_or(last);
    let name = segment_name(first, last);
    let dest = logs(store).join(&name);
    atomic::rename_noclobber(&path, &dest).map_err(io_err("cannot rotate", &path))?;
    store.sync_dir(&logs(store))?;
    Ok(Some(name))
}

/// The id of the first line with one in `path`.
fn first_id(path: &Path) -> Result<Option<u64>> {
    let mut r = Reader::open(path, 0)?;
    while let Some(line) = r.next_line()? {
        if let Some(id) = event::line_id(&line) {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Up to `max` events after `from`, across segments and the current file.
pub(super) fn read(store: &Store, from: Cursor, max: usize) -> Result<Vec<Event>> {
    read_where(store, from, max, &|_| true)
}

/// `read`, parsing only the lines `keep` passes (a cheap look at the raw line before the
/// JSON is parsed): what it passes over is not counted in `max`.
pub(super) fn read_where(
    store: &Store,
    from: Cursor,
    max: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    // Nothing follows the highest id (a line added by hand can carry it).
    if from.after == u64::MAX {
        return Ok(out);
    }
    let want = from.next_id();
    let now = current(store);
    // A reader at the end of the log (a watcher woken with nothing new) pays one small read
    // at the end of the current file, not a search through it or a listing of LOGS.
    if let (Some(last), _) = tail_id(&now)?
        && last < want
    {
        return Ok(out);
    }
    // Segments are listed only when the current file starts after what is wanted.
    let in_current = head_id(&now)?.is_some_and(|first| first <= want);
    let mut files: Vec<(PathBuf, Option<u64>)> = if in_current {
        Vec::new()
    } else {
        segments(store)?
            .into_iter()
            .filter(|s| s.last >= want)
            .map(|s| (s.path, Some(s.first)))
            .collect()
    };
    files.push((now, None));
    for (path, first) in files {
        if out.len() >= max {
            break;
        }
        let start = if first.is_some_and(|f| f >= want) { 0 } else { offset_of(&path, want)? };
        let mut r = match Reader::open(&path, start) {
            Ok(r) => r,
            // Rotated between the listing and now: its segment holds the rest.
            Err(e) if e.kind == crate::error::Kind::NotFound && first.is_none() => {
                return read_after_rotation(store, from, max, out, keep);
            }
            // A segment moved into the archive meanwhile: its events are read there
            // (`Engine::archived_events`); no cursor that still needed it lets it go.
            Err(e) if e.kind == crate::error::Kind::NotFound => continue,
            Err(e) => return Err(e),
        };
        while out.len() < max {
            let Some(line) = r.next_line()? else { break };
            match event::line_id(&line) {
                Some(id) if id < want => continue,
                Some(_) => {}
                None => continue, // legacy or damaged: never delivered to a cursor
            }
            if !keep(&line) {
                continue;
            }
            match event::parse_line(&line) {
                Ok(Line::Event(e)) => out.push(*e),
                // A newer format is refused, not misread.
                Err(e) if e.kind == crate::error::Kind::Refused => return Err(in_file(e, &path)),
                // A line torn by a failed write and ended by the next append is damage, which
                // took no id (the appender counted only whole lines); legacy lines have none.
                Ok(Line::Legacy) | Err(_) => {}
            }
        }
    }
    Ok(out)
}

/// The current file is gone: either there is no log yet, or it was rotated while we listed
/// (then a segment now holds what comes after what we have: read again from there).
fn read_after_rotation(
    store: &Store,
    from: Cursor,
    max: usize,
    mut got: Vec<Event>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<Event>> {
    let after = got.last().map_or(from, |e| Cursor::after(e.id));
    let rotated = segments(store)?.last().is_some_and(|s| s.last >= after.next_id());
    if rotated {
        let more = read_where(store, after, max - got.len(), keep)?;
        got.extend(more);
    }
    Ok(got)
}

/// Up to `max` events with ids below `before` (`None`: the newest), newest first: read from
/// the end of the log backwards, a chunk at a time, so the last few events of a large log
/// cost a few small reads.
pub(super) fn read_back(store: &Store, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
    read_back_where(store, before, max, &|_| true)
}

/// `read_back`, parsing only the lines `keep` passes (not counted in `max`).
pub(super) fn read_back_where(
    store: &Store,
    before: Option<u64>,
    max: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    let segs = segments(store)?;
    // Each file with the first id it holds (the current file's follows the newest
    // segment's last): one that starts at or past `before` holds nothing wanted.
    let mut files = vec![(current(store), segs.last().map(|s| s.last + 1))];
    files.extend(segs.into_iter().rev().map(|s| (s.path, Some(s.first))));
    for (path, first) in files {
        if out.len() >= max {
            break;
        }
        if before.zip(first).is_some_and(|(b, first)| first >= b) {
            continue;
        }
        let (f, len) = match atomic::open_regular(&path) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("cannot read", &path, e)),
        };
        // Complete lines only: what follows the last newline is still being written. Lines
        // at or past `before` are not read at all (a filtered `log` reads back many times).
        let mut end = match before {
            Some(b) => end_before(&f, len, &path, b)?,
            None => len,
        };
        let mut carry: Vec<u8> = Vec::new();
        let mut first_chunk = true;
        while end > 0 && out.len() < max {
            let start = end.saturating_sub(CHUNK as u64);
            let mut buf = vec![0u8; usize::try_from(end - start).unwrap_or(0)];
            f.read_exact_at(&mut buf, start).map_err(io_err("cannot read", &path))?;
            buf.extend_from_slice(&carry);
            if first_chunk {
                let upto = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                buf.truncate(upto);
                first_chunk = false;
            }
            // The first line of the chunk may be cut: keep it for the next, earlier read.
            let cut = if start > 0 {
                buf.iter().position(|&b| b == b'\n').map_or(buf.len(), |i| i + 1)
            } else {
                0
            };
            carry = buf[..cut].to_vec();
            for line in buf[cut..].split(|&b| b == b'\n').rev() {
                let Ok(line) = std::str::from_utf8(line) else { continue };
                let Some(id) = event::line_id(line) else { continue };
                if before.is_some_and(|b| id >= b) || !keep(line) {
                    continue;
                }
                match event::parse_line(line) {
                    Ok(Line::Event(e)) => out.push(*e),
                    Err(e) if e.kind == crate::error::Kind::Refused => {
                        return Err(in_file(e, &path));
                    }
                    Ok(Line::Legacy) | Err(_) => {}
                }
                if out.len() >= max {
                    break;
                }
            }
            end = start;
        }
    }
    Ok(out)
}

/// A byte offset in `path` at or before the line holding id `want`: a binary search over
/// line starts (ids grow with the offset), then the caller scans forward.
fn offset_of(path: &Path, want: u64) -> Result<u64> {
    let (f, len) = match atomic::open_regular(path) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("cannot read", path, e)),
    };
    Ok(search(&f, len, path, want)?.0)
}

/// An offset in `f` (of `len` bytes) past every line whose id is below `want`, and close
/// to them: where a backward read for the ids below `want` starts (`len` at most).
fn end_before(f: &std::fs::File, len: u64, path: &Path, want: u64) -> Result<u64> {
    let (_, hi) = search(f, len, path, want)?;
    // The first line start after `hi` whose line holds `want` or a later id (lines without
    // one, from before ids, are passed); every line before it has a lower id.
    let mut at = hi;
    while let Some(start) = next_line_start(f, at, len, path)? {
        if id_at(f, start, path)?.is_some_and(|id| id >= want) {
            return Ok(start);
        }
        at = start;
    }
    Ok(len)
}

/// The offset just past the first newline at or after `at`, if there is one before `len`
/// (a line of any length is read past, 4 KiB at a time).
fn next_line_start(f: &std::fs::File, at: u64, len: u64, path: &Path) -> Result<Option<u64>> {
    let mut buf = vec![0u8; 4096];
    let mut at = at;
    while at < len {
        let n = f.read_at(&mut buf, at).map_err(io_err("cannot read", path))?;
        if n == 0 {
            break;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            let start = at + i as u64 + 1;
            return Ok((start < len).then_some(start));
        }
        at += n as u64;
    }
    Ok(None)
}

/// The id of the line starting at `start`, read from its first bytes (`{"id":N,`).
fn id_at(f: &std::fs::File, start: u64, path: &Path) -> Result<Option<u64>> {
    let mut buf = [0u8; 32];
    let n = f.read_at(&mut buf, start).map_err(io_err("cannot read", path))?;
    let head = &buf[..n];
    let head = &head[..head.iter().position(|b| !b.is_ascii()).unwrap_or(head.len())];
    Ok(std::str::from_utf8(head).ok().and_then(event::line_id))
}

/// The binary search over line starts: the line after `lo` (or the first, at 0) has an
/// id below `want`, and the first whole line after `hi` has `want` or a later one (or
/// none, or is from before ids), with `hi - lo` at most `CHUNK`. A probe reads past a long
/// line to the next one's first bytes.
fn search(f: &std::fs::File, len: u64, path: &Path, want: u64) -> Result<(u64, u64)> {
    let (mut lo, mut hi) = (0u64, len);
    while hi - lo > CHUNK as u64 {
        let mid = lo + (hi - lo) / 2;
        let id = match next_line_start(f, mid, len, path)? {
            Some(start) => id_at(f, start, path)?,
            None => None,
        };
        match id {
            Some(id) if id < want => lo = mid,
            _ => hi = mid,
        }
    }
    Ok((lo, hi))
}

/// Reads whole lines from an offset; the first line is skipped when the offset is not at a
/// line start, and a last line without its newline is left unread.
struct Reader {
    file: std::fs::File,
    path: PathBuf,
    /// Bytes read and not handed on yet: from `start` (lines are handed on by moving it, and
    /// the buffer is compacted once per read, not once per line).
    pending: Vec<u8>,
    start: usize,
    eof: bool,
}

impl Reader {
    fn open(path: &Path, offset: u64) -> Result<Reader> {
        let (mut file, _) = atomic::open_regular(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::not_found(format!("no {}", path.display())),
            _ => Error::io("cannot read", path, e),
        })?;
        let mut skip_partial = false;
        if offset > 0 {
            // Start one byte early: if that byte is a newline, the offset is a line start.
            file.seek(SeekFrom::Start(offset - 1)).map_err(io_err("cannot read", path))?;
            skip_partial = true;
        }
        let mut r =
            Reader { file, path: path.to_path_buf(), pending: Vec::new(), start: 0, eof: false };
        if skip_partial {
            r.fill()?;
            match r.pending.iter().position(|&b| b == b'\n') {
                Some(i) => r.start = i + 1,
                None => r.pending.clear(),
            }
        }
        Ok(r)
    }

    fn fill(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        // What was handed on goes, once per read.
        if self.start > 0 {
            self.pending.drain(..self.start);
            self.start = 0;
        }
        let old = self.pending.len();
        self.pending.resize(old + CHUNK, 0);
        let read = self.file.read(&mut self.pending[old..]);
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                self.pending.truncate(old);
                return Err(Error::io("cannot read", &self.path, e));
            }
        };
        self.pending.truncate(old + n);
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        Ok(true)
    }

    /// The next complete line (without its newline), or `None` at the end.
    fn next_line(&mut self) -> Result<Option<String>> {
        let mut searched = 0;
        loop {
            let rest = &self.pending[self.start..];
            if let Some(i) = rest[searched..].iter().position(|&b| b == b'\n') {
                let end = searched + i;
                let line = String::from_utf8_lossy(&rest[..end]).into_owned();
                self.start += end + 1;
                return Ok(Some(line));
            }
            // Only what a read adds is searched again (a long line is read past once).
            searched = rest.len();
            if !self.fill()? {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
#[path = "event_log_tests.rs"]
mod tests;
