//! `circe chat watch` on a channel the engine keeps (`Engine::chat_log`): entries are read
//! by id, each scanned as the lines it adds to the channel, so the JSON lines are those a
//! watcher of the file prints. An archive only marks entries: a reader going on by id reads
//! the rest of an archive, then the channel. Following waits on the engine (LISTEN/NOTIFY on
//! PostgreSQL), or re-reads every `--poll` interval.
//!
//! A cursor's value is one JSON line, `{"version":1,"entry":N,"offset":O,"line":L,
//! "saved_at":T}`: the last entry read, the place after it in its file, and when.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::follow::{Emitted, WatchOptions, emit};
use super::scanner::{Found, Position, Scanner, newlines};
use crate::engine::{ChatEntry, ChatLog, Engine};
use crate::error::{Error, Result};
use crate::names::CursorName;
use crate::workspace::Workspace;

const VERSION: u32 = 1;

/// Where a watcher stands: after entry `entry`, at `offset`/`line` of its file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Place {
    version: u32,
    entry: u64,
    offset: u64,
    line: u64,
    /// When it was saved, for `circe cursors` (absent in one an older circe saved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    saved_at: Option<String>,
}

impl Place {
    fn after(e: &ChatEntry) -> Place {
        let end = e.offset + e.text.len() as u64;
        Place {
            version: VERSION,
            entry: e.id,
            offset: end,
            line: e.line + newlines(e.text.as_bytes()),
            saved_at: Some(saved_now()),
        }
    }

    /// A saved place. A newer format is refused; anything unreadable is the reason.
    fn parse(name: &str, bytes: &[u8]) -> Result<std::result::Result<Place, String>> {
        let v: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let version = v.get("version").and_then(serde_json::Value::as_u64).unwrap_or(0);
        if version > u64::from(VERSION) {
            return Err(Error::refused(format!(
                "cursor `{name}` has format version {version}; this circe reads {VERSION}"
            ))
            .hint("use a newer circe, or another --cursor name"));
        }
        Ok(serde_json::from_value(v).map_err(|e| e.to_string()))
    }
}

/// The time a cursor is saved at.
fn saved_now() -> String {
    crate::clock::stamp_ms(crate::clock::now())
}

struct Follower<'a> {
    engine: &'a dyn Engine,
    log: &'a dyn ChatLog,
    cursor: Option<CursorName>,
    known: BTreeSet<String>,
    opts: &'a WatchOptions,
    out: &'a mut dyn Write,
    note: &'a mut dyn FnMut(&str),
    printed: u64,
    seq: Option<super::seq::ChatSeq>,
}

/// Watch the channel `log` of `ws`, as `follow::watch` does a file.
/// `resume`: the id of the last entry handed on, kept across a lost connection (the caller
/// opens the root again and calls this again: it goes on after that entry).
pub fn watch(
    ws: &Workspace,
    log: &dyn ChatLog,
    opts: &WatchOptions,
    resume: &mut Option<u64>,
    out: &mut dyn Write,
    note: &mut dyn FnMut(&str),
) -> Result<u64> {
    let cursor = opts.cursor.as_deref().map(CursorName::new).transpose()?;
    let _cursor_lock = match &cursor {
        Some(name) => Some(ws.engine.hold_cursor("chat", name)?.ok_or_else(|| {
            Error::conflict(format!("cursor `{name}` is in use by another watcher"))
                .hint("each watcher needs its own --cursor name")
        })?),
        None => None,
    };
    let known = ws.agents().keys().map(ToString::to_string).collect();
    let engine = ws.engine.as_ref();
    let seq = match &opts.agent {
        Some(a) => Some(super::seq::ChatSeq::new(engine, a.clone(), cursor.is_some())?),
        None => None,
    };
    let mut f = Follower { engine, log, cursor, known, opts, out, note, printed: 0, seq };
    let mut at = match *resume {
        Some(at) => at,
        None => f.start()?,
    };
    loop {
        let batch = f.log.chat_read(at, 1000)?;
        for e in &batch {
            if !f.entry(e)? {
                return Ok(f.printed);
            }
            at = e.id;
            *resume = Some(at);
        }
        if batch.len() == 1000 {
            continue;
        }
        if f.opts.once {
            return Ok(f.printed);
        }
        match f.opts.poll {
            Some(every) => {
                let until = Instant::now() + every;
                while let Some(left) = until.checked_duration_since(Instant::now()) {
                    std::thread::sleep(left.min(super::follow::IDLE_LOOK));
                    if f.opts.gone() {
                        return Ok(f.printed);
                    }
                }
            }
            None => {
                f.log.chat_wait(at, super::follow::IDLE_LOOK)?;
            }
        }
        if f.opts.gone() {
            return Ok(f.printed);
        }
    }
}

impl Follower<'_> {
    /// The id to read after: the saved cursor's, else the channel's start (`--from-start`:
    /// its first line, archives left out) or the newest.
    fn start(&mut self) -> Result<u64> {
        if let Some(name) = &self.cursor
            && let Some(bytes) = self.engine.read_cursor("chat", name)?
        {
            match Place::parse(name.as_str(), &bytes)? {
                Ok(p) => return Ok(p.entry),
                Err(why) => {
                    (self.note)(&format!(
                        "note: cursor `{name}` is unreadable ({why}): reading the channel from the start"
                    ));
                    return self.log.chat_start();
                }
            }
        }
        let at =
            if self.opts.from_start { self.log.chat_start()? } else { self.log.chat_last()? };
        // A new cursor keeps its starting place at once: a watcher stopped before its first
        // line resumes there, rather than after whatever was said meanwhile.
        if let Some(name) = &self.cursor {
            let place = match self.log.chat_read(at.saturating_sub(1), 1)?.first() {
                Some(e) if at > 0 && e.id == at => Place::after(e),
                _ => Place {
                    version: VERSION,
                    entry: at,
                    offset: 0,
                    line: 1,
                    saved_at: Some(saved_now()),
                },
            };
            let line = serde_json::to_string(&place).unwrap_or_default() + "\n";
            self.engine.write_cursor("chat", name, line.as_bytes())?;
        }
        Ok(at)
    }

    /// Print the messages of one entry, then save the place after it. False: stdout closed.
    fn entry(&mut self, e: &ChatEntry) -> Result<bool> {
        let mut sc =
            Scanner::new(Position { offset: e.offset, line: e.line }, self.opts.first_line_only);
        let known = &self.known;
        let (_, mut found) = sc.feed(e.text.as_bytes(), &|n: &str| known.contains(n));
        found.extend(sc.finish());
        for f in &found {
            if !self.print(f)? {
                return Ok(false);
            }
        }
        if let Some(name) = &self.cursor {
            let line = serde_json::to_string(&Place::after(e)).unwrap_or_default() + "\n";
            self.engine.write_cursor("chat", name, line.as_bytes())?;
        }
        Ok(true)
    }

    /// Print one message (or skip it as stale). False: stdout closed.
    fn print(&mut self, f: &Found) -> Result<bool> {
        match emit(self.engine, &mut self.seq, &mut *self.out, &mut *self.note, f)? {
            Emitted::Closed => return Ok(false),
            Emitted::Printed => self.printed += 1,
            Emitted::Skipped => {}
        }
        Ok(true)
    }
}
