//! `circe chat watch`: print every message of the channel as the reference's JSON line,
//! following the file as it grows (PROTOCOLS.md "The chat channel", Watching).
//!
//! The loop: read from where the scanner stands to the end of the file, print what is
//! complete, save the cursor once it is all read (and every 256 lines while it catches up),
//! then sleep on the `Waker` until the
//! folder changes. A message at the very end is printed once no `chat say` is half-way
//! through a write (the writers' lock is free and the size unchanged). A file that shrank
//! is read again from the start; a file replaced by rename is followed through the
//! archive records, or read again from the start.

use std::collections::{BTreeSet, VecDeque};
use std::io::Write;
use std::time::Duration;

use super::archive::{Step, records, resolve, resolve_gone, resolve_replaced};
use super::cursor::{CHECK_SPAN, Cursor};
use super::scanner::{Found, Position, Scanner};
use crate::clock;
use crate::engine::Engine;
use crate::engine::local::watch::{Wake, Waker};
use crate::engine::local::{ChatFile, ChatReader};
use crate::error::{Error, Result};
use crate::names::CursorName;
use crate::workspace::Workspace;

#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub cursor: Option<String>,
    pub from_start: bool,
    pub first_line_only: bool,
    pub once: bool,
    pub poll: Option<Duration>,
    /// Judge numbered lines by this agent's `lastSeen` (section 14): stale ones are skipped.
    pub agent: Option<crate::names::AgentName>,
    /// Whether whoever reads the output has gone (asked about once a second while nothing
    /// comes): the watch then ends, as on a failed write.
    pub reader_gone: Option<fn() -> bool>,
}

impl WatchOptions {
    /// Has the reader of the output gone?
    pub(super) fn gone(&self) -> bool {
        self.reader_gone.is_some_and(|f| f())
    }
}

/// How long a watcher with nothing to do waits before it asks whether its reader is gone.
pub(super) const IDLE_LOOK: Duration = Duration::from_secs(1);

/// Whether to go on.
enum Flow {
    Go,
    /// stdout was closed: stop quietly.
    Closed,
}

struct Source {
    reader: ChatReader,
    scanner: Scanner,
    /// File bytes from `scanner.next().offset` on, not yet taken (a partial last line).
    buf: Vec<u8>,
}

impl Source {
    fn read_end(&self) -> u64 {
        self.scanner.next().offset + self.buf.len() as u64
    }
}

struct Follower<'a> {
    engine: &'a dyn Engine,
    cursor: Option<CursorName>,
    chat: ChatFile,
    known: BTreeSet<String>,
    opts: &'a WatchOptions,
    out: &'a mut dyn Write,
    note: &'a mut dyn FnMut(&str),
    printed: u64,
    seq: Option<super::seq::ChatSeq>,
    /// Where the cursor goes once saved: past the last line printed, when it is not saved
    /// yet, with how many lines since the last save, and when that was.
    unsaved: Option<Position>,
    lines_unsaved: u32,
    last_save: std::time::Instant,
}

/// While it catches up, a watcher saves its cursor at least every `SAVE_EVERY` lines or
/// `SAVE_AFTER`, and whenever it has read all there is: a save (a file written and renamed)
/// costs far more than a line, and saving after every line made catching up on 10,000 lines
/// take 3.8 s instead of 0.03 s (section 15 decides the same for the event streams).
const SAVE_EVERY: u32 = 256;
const SAVE_AFTER: Duration = Duration::from_secs(1);

/// Watch the channel of `ws`, printing JSON lines to `out` and notes to `note`. Returns
/// how many messages were printed; ends with `--once` at the end of the file, or when `out`
/// is closed. `resume` (a database's channel): where to go on after a lost connection.
pub fn watch(
    ws: &Workspace,
    opts: &WatchOptions,
    resume: &mut Option<u64>,
    out: &mut dyn Write,
    note: &mut dyn FnMut(&str),
) -> Result<u64> {
    if let Some(log) = ws.engine.chat_log() {
        return super::follow_log::watch(ws, log, opts, resume, out, note);
    }
    let chat = super::channel(ws)?;
    let cursor = opts.cursor.as_deref().map(CursorName::new).transpose()?;
    let _cursor_lock = match &cursor {
        Some(name) => Some(ws.engine.hold_cursor("chat", name)?.ok_or_else(|| {
            Error::conflict(format!("cursor `{name}` is in use by another watcher"))
                .hint("each watcher needs its own --cursor name")
        })?),
        None => None,
    };
    chat.ensure_dir()?;
    let known = ws.agents().keys().map(ToString::to_string).collect();
    let engine = ws.engine.as_ref();
    let seq = match &opts.agent {
        Some(a) => Some(super::seq::ChatSeq::new(engine, a.clone(), cursor.is_some())?),
        None => None,
    };
    let mut f = Follower {
        engine,
        cursor,
        chat,
        known,
        opts,
        out,
        note,
        printed: 0,
        seq,
        unsaved: None,
        lines_unsaved: 0,
        last_save: std::time::Instant::now(),
    };
    // Watch before the first read, so that nothing written in between goes unnoticed.
    let waker = if opts.once {
        None
    } else if let Some(every) = opts.poll {
        Some(Waker::polling(every))
    } else {
        if let Some(fs) = f.chat.remote_fs() {
            (f.note)(&format!(
                "note: the chat channel is on {fs}: inotify does not see writes from other hosts; pass --poll"
            ));
        }
        let dir = f.chat.path().parent().unwrap_or(std::path::Path::new(".")).to_path_buf();
        Some(Waker::watch(&dir, f.chat.path().file_name().map(std::ffi::OsStr::to_os_string))?)
    };
    let mut steps: VecDeque<Step> = f.start()?.into();
    while let Some(step) = steps.pop_front() {
        let flow = match step {
            Step::Archive { name, id, from } => match f.chat.open_archive(&name)? {
                Some(r) if r.id() == id => f.drain(r, from)?,
                _ => {
                    (f.note)(&format!("note: archive {name} is gone; its rest is skipped"));
                    Flow::Go
                }
            },
            Step::Restart { why } => {
                (f.note)(&format!("note: {why}: reading it again from the start"));
                steps.push_back(Step::Live { from: Position::START });
                Flow::Go
            }
            Step::Live { from } => match f.live(from, waker.as_ref())? {
                (Flow::Go, more) => {
                    steps.extend(more);
                    Flow::Go
                }
                (closed, _) => closed,
            },
        };
        if let Flow::Closed = flow {
            break;
        }
    }
    Ok(f.printed)
}

/// The file of a cursor saved before the channel had one (no file has device 0, inode 0).
const NO_FILE: crate::engine::local::FileId = crate::engine::local::FileId { dev: 0, ino: 0 };

impl Follower<'_> {
    /// Where to begin: the saved cursor, else the start (`--from-start`) or the end.
    fn start(&mut self) -> Result<Vec<Step>> {
        let live = self.chat.open()?;
        let saved = match &self.cursor {
            Some(name) => self.engine.read_cursor("chat", name)?.map(|b| (name.to_string(), b)),
            None => None,
        };
        if let Some((name, bytes)) = saved {
            match Cursor::parse(&name, &bytes)? {
                Ok(c) => return self.at_cursor(&c, live.as_ref()),
                Err(why) => (self.note)(&format!(
                    "note: cursor `{name}` is unreadable ({why}): reading the channel from the start"
                )),
            }
            return Ok(vec![Step::Live { from: Position::START }]);
        }
        if self.opts.from_start {
            return Ok(vec![Step::Live { from: Position::START }]);
        }
        // The end: after the last whole line (a line being written is read when complete).
        let Some(r) = live else {
            // No channel yet: a new cursor keeps "from its first line" at once, so a
            // watcher stopped before the first line resumes there.
            if let Some(name) = &self.cursor {
                let c = Cursor::new(NO_FILE, Position::START, b"");
                self.engine.write_cursor("chat", name, c.to_line().as_bytes())?;
            }
            return Ok(vec![Step::Live { from: Position::START }]);
        };
        // Read through in chunks (the channel may be large): its newlines, and the last.
        let (mut at, mut end, mut lines) = (0u64, 0u64, 0u64);
        loop {
            let chunk = r.read_range(at, at + 64 * 1024)?;
            if chunk.is_empty() {
                break;
            }
            for i in chunk.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i) {
                lines += 1;
                end = at + i as u64 + 1;
            }
            at += chunk.len() as u64;
        }
        Ok(vec![Step::Live { from: Position { offset: end, line: lines + 1 } }])
    }

    fn at_cursor(&mut self, c: &Cursor, live: Option<&ChatReader>) -> Result<Vec<Step>> {
        let live_id = live.map(ChatReader::id);
        if c.id() == NO_FILE {
            // Saved before the channel had a file: from its very first line, through every
            // archive since. The first archive is the earliest made (not the one whose old
            // file no archive made: a later channel file may take that file's inode number).
            let recs = records(&self.chat.archive_records()?);
            let first = recs.iter().min_by(|a, b| {
                (a.archived_at.as_str(), a.archive.as_str())
                    .cmp(&(b.archived_at.as_str(), b.archive.as_str()))
            });
            // The first archive read whole, then on from the file it left (not by the first
            // file's inode: that file is gone, and a later archive may reuse its number).
            return Ok(match first {
                Some(r) => {
                    let mut steps = vec![Step::Archive {
                        name: r.archive.clone(),
                        id: r.archive_id,
                        from: Position::START,
                    }];
                    steps.extend(resolve(&recs, live_id, r.new, Position::START));
                    steps
                }
                None => vec![Step::Live { from: Position::START }],
            });
        }
        if let Some(r) = live.filter(|r| r.id() == c.id()) {
            if holds(r, c)? {
                return Ok(vec![Step::Live { from: c.position() }]);
            }
            // Not the cursor's bytes: its file was replaced by a `--before` archive and the
            // channel took the number, or the file was rewritten in place.
            let recs = records(&self.chat.archive_records()?);
            return Ok(resolve_replaced(&recs, live_id, c.id(), c.position()).unwrap_or_else(
                || vec![Step::Restart { why: "the chat file changed under the cursor".into() }],
            ));
        }
        // An archive file that has the cursor's number but not its bytes: the same.
        let recs = records(&self.chat.archive_records()?);
        if let Some(steps) = resolve_replaced(&recs, live_id, c.id(), c.position())
            && let Some(a) = recs.iter().rev().find(|r| r.archive_id == c.id())
            && let Some(f) = self.chat.open_archive(&a.archive)?
            && f.id() == c.id()
            && !holds(&f, c)?
        {
            return Ok(steps);
        }
        Ok(resolve_gone(&recs, live_id, c.id(), c.position()))
    }

    /// Read an archived file from `from` to its end.
    fn drain(&mut self, reader: ChatReader, from: Position) -> Result<Flow> {
        let mut src = self.source(reader, from)?;
        if let Flow::Closed = self.pump(&mut src)? {
            return Ok(Flow::Closed);
        }
        self.finish(&mut src)
    }

    fn source(&mut self, reader: ChatReader, from: Position) -> Result<Source> {
        let src = Source {
            reader,
            scanner: Scanner::new(from, self.opts.first_line_only),
            buf: Vec::new(),
        };
        self.save(&src, from)?;
        Ok(src)
    }

    /// Follow the live channel from `from`. Returns the steps that follow when the file
    /// was replaced.
    fn live(&mut self, from: Position, waker: Option<&Waker>) -> Result<(Flow, Vec<Step>)> {
        let reader = loop {
            match self.chat.open()? {
                Some(r) => break r,
                None => match waker {
                    None => return Ok((Flow::Go, Vec::new())),
                    Some(w) => {
                        w.wait(Some(IDLE_LOOK))?;
                        if self.opts.gone() {
                            return Ok((Flow::Closed, Vec::new()));
                        }
                    }
                },
            }
        };
        let mut src = self.source(reader, from)?;
        let mut pause = Duration::from_micros(200);
        loop {
            if let Flow::Closed = self.pump(&mut src)? {
                return Ok((Flow::Closed, Vec::new()));
            }
            if src.reader.size()? < src.read_end() {
                (self.note)("note: the chat file was truncated: reading it again from the start");
                src = self.source(src.reader, Position::START)?;
                continue;
            }
            if self.chat.id_now()? != Some(src.reader.id()) {
                return self.replaced(src);
            }
            // A message at the end is complete once no writer is half-way through.
            let mut busy = false;
            if src.scanner.has_pending() && src.buf.is_empty() {
                match self.chat.try_lock_shared()? {
                    Some(_lock) if src.reader.size()? == src.read_end() => {
                        if let Flow::Closed = self.finish(&mut src)? {
                            return Ok((Flow::Closed, Vec::new()));
                        }
                    }
                    Some(_) => continue,
                    None => busy = true,
                }
            }
            let Some(w) = waker else {
                if !busy {
                    return Ok((Flow::Go, Vec::new()));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
                continue;
            };
            if busy {
                w.wait(Some(pause))?;
                pause = (pause * 2).min(Duration::from_millis(10));
            } else {
                pause = Duration::from_micros(200);
                let _: Wake = w.wait(Some(IDLE_LOOK))?;
                if self.opts.gone() {
                    return Ok((Flow::Closed, Vec::new()));
                }
            }
        }
    }

    /// The live file was renamed away or replaced: finish the old one, then find where its
    /// content went.
    fn replaced(&mut self, mut src: Source) -> Result<(Flow, Vec<Step>)> {
        if let Flow::Closed = self.pump(&mut src)? {
            return Ok((Flow::Closed, Vec::new()));
        }
        if let Flow::Closed = self.finish(&mut src)? {
            return Ok((Flow::Closed, Vec::new()));
        }
        // Under the shared lock no archive is half-way: its record is there if it moved.
        let _lock = loop {
            if let Some(l) = self.chat.try_lock_shared()? {
                break l;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        // The path is looked at again under the lock: a whole archive renames the channel
        // away and then its fresh file into place, and a watcher that woke between the two
        // renames saw no file where an archive was under way.
        let live = self.chat.id_now()?;
        let old = src.reader.id();
        let recs = records(&self.chat.archive_records()?);
        let mut steps = resolve(&recs, live, old, src.scanner.next());
        // What the old file held was read to its end just now.
        steps.retain(|s| !matches!(s, Step::Archive { id, .. } if *id == old));
        if live.is_none() && matches!(steps.last(), Some(Step::Restart { .. })) {
            // No channel now. Moved by an archive cut off before its fresh file took the
            // name: the next `say` makes the channel, read from its start. Else removed.
            if !recs.iter().any(|r| r.old == old || r.archive_id == old) {
                (self.note)("note: the chat file was removed: waiting for it");
            }
            steps = vec![Step::Live { from: Position::START }];
        }
        Ok((Flow::Go, steps))
    }

    /// Read to the end of the file and print every complete message.
    fn pump(&mut self, src: &mut Source) -> Result<Flow> {
        let end = src.read_end();
        src.reader.read_to_end_from(end, &mut src.buf)?;
        let known = &self.known;
        let (taken, found) = src.scanner.feed(&src.buf, &|n: &str| known.contains(n));
        src.buf.drain(..taken);
        for f in found {
            if let Flow::Closed = self.print(src, &f)? {
                self.save_printed(src)?;
                return Ok(Flow::Closed);
            }
        }
        self.save_printed(src)?;
        Ok(Flow::Go)
    }

    fn finish(&mut self, src: &mut Source) -> Result<Flow> {
        let flow = match src.scanner.finish() {
            Some(f) => self.print(src, &f)?,
            None => Flow::Go,
        };
        self.save_printed(src)?;
        Ok(flow)
    }

    /// Print one message; the cursor moves past it with the next save (`SAVE_EVERY`).
    fn print(&mut self, src: &Source, f: &Found) -> Result<Flow> {
        match emit(self.engine, &mut self.seq, &mut *self.out, &mut *self.note, f)? {
            Emitted::Closed => return Ok(Flow::Closed),
            Emitted::Printed => self.printed += 1,
            Emitted::Skipped => {}
        }
        self.unsaved = Some(f.resume);
        self.lines_unsaved += 1;
        // Judged for an agent, a printed line moved its lastSeen at once: saved as at once,
        // so that a restart does not take the lines it repeats for stale ones.
        if self.seq.is_some()
            || self.lines_unsaved >= SAVE_EVERY
            || self.last_save.elapsed() >= SAVE_AFTER
        {
            self.save_printed(src)?;
        }
        Ok(Flow::Go)
    }

    /// Save the cursor past the last line printed, if it is not saved yet.
    fn save_printed(&mut self, src: &Source) -> Result<()> {
        match self.unsaved.take() {
            Some(at) => self.save(src, at),
            None => Ok(()),
        }
    }

    fn save(&mut self, src: &Source, at: Position) -> Result<()> {
        self.unsaved = None;
        self.lines_unsaved = 0;
        self.last_save = std::time::Instant::now();
        let Some(name) = &self.cursor else { return Ok(()) };
        let before = src.reader.read_range(at.offset.saturating_sub(CHECK_SPAN), at.offset)?;
        let c = Cursor::new(src.reader.id(), at, &before);
        self.engine.write_cursor("chat", name, c.to_line().as_bytes())
    }
}

/// Whether `r` has the bytes the cursor `c` saw before its offset: it is the file the cursor
/// was saved in, not one rewritten in place nor a later file given the same number.
fn holds(r: &ChatReader, c: &Cursor) -> Result<bool> {
    let from = c.offset.saturating_sub(CHECK_SPAN);
    Ok(c.offset <= r.size()? && super::cursor::check_of(&r.read_range(from, c.offset)?) == c.check)
}

/// What `emit` did with a message.
pub(super) enum Emitted {
    Printed,
    /// Stale: numbered at or below what its receiver last saw (a note says so).
    Skipped,
    /// Standard output is closed.
    Closed,
}

/// Print one message as a JSON line, or skip it as stale. The file's watcher and a
/// database channel's share it.
pub(super) fn emit(
    engine: &dyn Engine,
    seq: &mut Option<super::seq::ChatSeq>,
    out: &mut dyn Write,
    note: &mut dyn FnMut(&str),
    f: &Found,
) -> Result<Emitted> {
    if let Some(s) = seq
        && let Some(last) = s.stale(engine, &f.message)?
    {
        note(&format!(
            "note: line {} skipped: stale (lastSeen of {} is #{last})",
            f.message.line_number, f.message.sender
        ));
        s.skipped(engine, &f.message, last)?;
        return Ok(Emitted::Skipped);
    }
    let mut line = f.message.json_line(&clock::stamp_ms(clock::now()));
    line.push('\n');
    match out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(Emitted::Closed),
        Err(e) => return Err(Error::io("cannot write to", "standard output", e)),
    }
    if let Some(s) = seq {
        s.printed(engine, &f.message)?;
    }
    Ok(Emitted::Printed)
}
