//! A numbered chat line (PROTOCOLS.md section 14, "In the chat channel"): the line is the
//! delivery, so its number commits with its append.
//!
//! Under the sender's hold and the channel's lock, a marker (`seq/<agent>/<entry>/chat`:
//! the channel's path, its identity, the offset the line goes to, and the line itself) is
//! staged as the number's entry, the line is appended with one write, and the marker is
//! removed. A crash leaves the marker: settling looks for the line where the marker says
//! (following the channel through archives), else anywhere in the channel (an editor
//! replaced the file); found, the number stays used, else it is free again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::atomic;
use super::chat_file::{Appended, ChatFile, ChatReader, FileId, count_newlines};
use super::lock::Lock;
use super::root::{Store, io_err};
use super::seq_store::{CHAT_MARKER, Entry};
use crate::chat::archive::{Step, records, resolve};
use crate::chat::scanner::Position;
use crate::engine::SeqHold;
use crate::error::{Error, Result};
use crate::fault::{crash_point, io_step};

/// The marker's first line (the line's bytes follow it).
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    v: u32,
    path: PathBuf,
    id: FileId,
    offset: u64,
}

impl ChatFile {
    /// Append one whole message numbered by `hold` (its number is in the text already):
    /// marker, write, marker removed, all under the channel's lock.
    pub fn append_numbered(
        &self,
        hold: &dyn SeqHold,
        message: &[u8],
        count_lines: bool,
    ) -> Result<Appended> {
        let lock = Lock::acquire(&self.lock, "the chat channel")?;
        let f = self.open_append()?;
        let meta = f.metadata().map_err(io_err("cannot stat", &self.path))?;
        let len = meta.len();
        let prefixed = len > 0 && self.last_byte(&f, len)? != b'\n';
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let head = Marker { v: 1, path, id: FileId::of(&meta), offset: len };
        let mut marker = serde_json::to_vec(&head).unwrap_or_default();
        marker.push(b'\n');
        marker.extend_from_slice(message);
        let store = Store::at(&self.root, self.sync);
        let entry = Entry::of(hold.next());
        let dir = store.seq_stage(hold.sender(), entry, &[(CHAT_MARKER.to_string(), &marker)])?;
        crash_point("seq.chat.staged");
        let mut buf = Vec::with_capacity(message.len() + 1);
        if prefixed {
            buf.push(b'\n');
        }
        buf.extend_from_slice(message);
        // A write that fails part-way is cut off again: the line was never written, and the
        // marker's settling frees the number.
        atomic::append_whole(&f, len, &buf, true)
            .map_err(io_err("cannot append to", &self.path))?;
        crash_point("seq.chat.written");
        atomic::remove(&dir.join(CHAT_MARKER)).map_err(io_err("cannot remove", &dir))?;
        drop(lock);
        if self.sync {
            io_step().and_then(|()| f.sync_data()).map_err(io_err("cannot sync", &self.path))?;
        }
        store.seq_prune(hold.sender(), entry);
        let offset = len + u64::from(prefixed);
        let lines_before =
            if count_lines { Some(count_newlines(&f, offset, &self.path)?) } else { None };
        Ok(Appended { offset, prefixed, lines_before })
    }
}

/// Does `r` hold `line` at `offset` (or just after the newline a hand edit made circe add)?
fn holds_at(r: &ChatReader, offset: u64, line: &[u8]) -> Result<bool> {
    let got = r.read_range(offset, offset + line.len() as u64 + 1)?;
    Ok(got.starts_with(line) || (got.first() == Some(&b'\n') && got[1..].starts_with(line)))
}

/// Does `r` hold `line` anywhere, as whole lines?
fn holds_anywhere(r: &ChatReader, line: &[u8]) -> Result<bool> {
    let mut data = vec![b'\n'];
    r.read_to_end_from(0, &mut data)?;
    let mut needle = vec![b'\n'];
    needle.extend_from_slice(line);
    Ok(data.windows(needle.len()).any(|w| w == needle.as_slice()))
}

impl Store {
    /// Was the chat line of the marker at `marker` written? Holds the channel's lock while
    /// it looks (no `say` is half-way through a write).
    pub(super) fn chat_line_appended(&self, marker: &Path) -> Result<bool> {
        let bytes = atomic::read_regular(marker).map_err(io_err("cannot read", marker))?;
        let split = bytes.iter().position(|&b| b == b'\n').unwrap_or(bytes.len());
        let head: Marker = serde_json::from_slice(&bytes[..split])
            .map_err(|e| Error::internal(format!("{} does not parse: {e}", marker.display())))?;
        let text = &bytes[(split + 1).min(bytes.len())..];
        let chat = ChatFile::new(&self.root, head.path, self.sync);
        let _lock = chat.lock()?;
        let live = chat.open()?;
        if let Some(r) = live.as_ref().filter(|r| r.id() == head.id)
            && holds_at(r, head.offset, text)?
        {
            return Ok(true);
        }
        let recs = records(&chat.archive_records()?);
        let pos = Position { offset: head.offset, line: 1 };
        let found = match resolve(&recs, live.as_ref().map(ChatReader::id), head.id, pos).first() {
            Some(Step::Archive { name, id, from }) => match chat.open_archive(name)? {
                Some(r) if r.id() == *id => holds_at(&r, from.offset, text)?,
                _ => false,
            },
            Some(Step::Live { from })
                if head.id != live.as_ref().map_or(head.id, ChatReader::id) =>
            {
                live.as_ref().map(|r| holds_at(r, from.offset, text)).transpose()?.unwrap_or(false)
            }
            _ => false,
        };
        if found {
            return Ok(true);
        }
        // Rewritten by hand (an editor saves a new file): anywhere in the channel.
        live.as_ref().map(|r| holds_anywhere(r, text)).transpose().map(|f| f.unwrap_or(false))
    }
}
