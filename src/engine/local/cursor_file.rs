//! Saved reading positions of long-running readers: `cursors/<kind>/<name>`, replaced
//! atomically (write a temp file beside it, rename over). Not fsynced: after a power cut a
//! cursor may be older, and the reader repeats what it had already printed (at least once).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::atomic::{self, NOFOLLOW_NONBLOCK};
use super::lock::Lock;
use super::root::{Store, io_err, list_names};
use crate::error::{Error, Result};
use crate::fault::io_step;
use crate::names::CursorName;

impl Store {
    fn cursor_dir(&self, kind: &str) -> PathBuf {
        self.root.join("cursors").join(kind)
    }

    /// The cursor's own lock, if no other reader holds it (one reader per cursor). Makes
    /// `cursors/<kind>/` when missing. `name` must have passed the caller's name check.
    pub fn try_lock_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Lock>> {
        let dir = self.cursor_dir(kind);
        std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        Lock::try_acquire(&self.root.join("locks").join(format!("cursor-{kind}-{name}.lock")))
    }

    /// The cursor's text; `None` when it was never saved.
    pub fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        let p = self.cursor_dir(kind).join(name.as_str());
        match atomic::read_regular(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// Replace the cursor with `text` (hold `try_lock_cursor`'s lock).
    pub fn write_cursor(&self, kind: &str, name: &CursorName, text: &[u8]) -> Result<()> {
        let dir = self.cursor_dir(kind);
        let tmp = dir.join(format!(".{name}.tmp"));
        let dest = dir.join(name.as_str());
        let write = || -> io::Result<()> {
            io_step()?;
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(atomic::FILE_MODE)
                .custom_flags(NOFOLLOW_NONBLOCK)
                .open(&tmp)?;
            f.write_all(text)?;
            atomic::rename_replace(&tmp, &dest)
        };
        // The folder is made on the first save only (a consumer saves after every event).
        match write() {
            Err(e) if e.kind() == io::ErrorKind::NotFound && !dir.is_dir() => {
                std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
                write().map_err(io_err("cannot save cursor", &dest))
            }
            r => r.map_err(io_err("cannot save cursor", &dest)),
        }
    }

    /// Remove the consumer's dead letters (an events cursor's), then its cursor (hold its
    /// lock). Returns whether either was there (dead letters a consumer left without ever
    /// saving its cursor go too).
    pub fn remove_cursor(&self, kind: &str, name: &CursorName) -> Result<bool> {
        let gone = |p: &std::path::Path| match std::fs::remove_file(p) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("cannot remove", p, e)),
        };
        let dead = kind == crate::engine::EVENTS_CURSORS
            && gone(&self.root.join("dead").join(format!("{name}.jsonl")))?;
        let had = gone(&self.cursor_dir(kind).join(name.as_str()))?;
        Ok(had || dead)
    }

    /// Append one dead letter (an event line) to `dead/<consumer>.jsonl`: one write on an
    /// O_APPEND handle, fsynced (a consumer moves its cursor past the event right after).
    pub fn append_dead_letter(&self, consumer: &CursorName, line: &str) -> Result<()> {
        let dir = self.root.join("dead");
        std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
        let p = dir.join(format!("{consumer}.jsonl"));
        atomic::append_line(&p, format!("{line}\n").as_bytes(), self.sync)
            .map_err(io_err("cannot append to", &p))
    }

    /// The consumers with a dead-letter file, sorted.
    pub fn dead_letter_consumers(&self) -> Result<Vec<CursorName>> {
        let mut out: Vec<CursorName> = list_names(&self.root.join("dead"))?
            .into_iter()
            .filter_map(|n| n.strip_suffix(".jsonl").and_then(|n| CursorName::new(n).ok()))
            .collect();
        out.sort();
        Ok(out)
    }

    /// A consumer's dead letters, as written ("" when none).
    pub fn read_dead_letters(&self, consumer: &CursorName) -> Result<String> {
        let p = self.root.join("dead").join(format!("{consumer}.jsonl"));
        match atomic::read_regular(&p) {
            Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// Every saved cursor, (kind, name), sorted.
    pub fn list_cursors(&self) -> Result<Vec<(String, CursorName)>> {
        let mut out = Vec::new();
        for kind in list_names(&self.root.join("cursors"))? {
            for name in list_names(&self.cursor_dir(&kind))? {
                if let Ok(n) = CursorName::new(name) {
                    out.push((kind.clone(), n));
                }
            }
        }
        Ok(out)
    }
}
