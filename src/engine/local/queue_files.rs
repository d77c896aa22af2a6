//! The derived files under `queue/`: `claim --next` lanes and their heads, the board log.
//! None is fsynced: each can be rebuilt from the records.

use std::io;

use super::atomic::{self, TempFile};
use super::root::{Store, io_err, list_names};
use crate::error::{Error, Result};

/// Lane reads up to this size use one preallocated buffer (see `lane_read`).
const CHUNK_MAX: usize = 1 << 20;

impl Store {
    /// Append lines to lane `lane` (a file under queue/). Derived data: not synced.
    pub fn lane_append(&self, lane: &str, lines: &str) -> Result<()> {
        let p = self.root.join("queue").join(format!("{lane}.lane"));
        atomic::append_derived(&p, lines.as_bytes()).map_err(io_err("cannot append to", &p))
    }

    /// Append to a derived file under queue/ (the board log). Not synced: rebuildable.
    pub fn queue_append(&self, name: &str, text: &str) -> Result<()> {
        let p = self.root.join("queue").join(name);
        atomic::append_derived(&p, text.as_bytes()).map_err(io_err("cannot append to", &p))
    }

    /// Lane names, sorted.
    pub fn lanes(&self) -> Result<Vec<String>> {
        Ok(list_names(&self.root.join("queue"))?
            .into_iter()
            .filter_map(|n| n.strip_suffix(".lane").map(str::to_string))
            .collect())
    }

    /// Read a lane from byte `offset`, at most `max` bytes: its text ("" past the end).
    /// A `max` up to 1 MiB is read with one buffer of that size; larger means "the rest".
    pub fn lane_read(&self, lane: &str, offset: u64, max: usize) -> Result<String> {
        use std::io::{Read, Seek, SeekFrom};
        let p = self.root.join("queue").join(format!("{lane}.lane"));
        // A lane that is not a regular file (a planted link or FIFO) reads as empty; the
        // next append replaces it.
        let mut f = match atomic::open_regular(&p) {
            Ok((f, _)) => f,
            Err(_) if !atomic::is_regular(&p) => return Ok(String::new()),
            Err(e) => return Err(Error::io("cannot open", &p, e)),
        };
        let mut buf = Vec::new();
        if max <= CHUNK_MAX {
            // One pread into a buffer of the asked size (no seek, no growing reads).
            use std::os::unix::fs::FileExt;
            buf.resize(max, 0);
            let mut n = 0;
            while n < max {
                match f.read_at(&mut buf[n..], offset + n as u64) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io("cannot read", &p, e)),
                }
            }
            buf.truncate(n);
        } else {
            f.seek(SeekFrom::Start(offset)).map_err(io_err("cannot seek", &p))?;
            f.take(max as u64).read_to_end(&mut buf).map_err(io_err("cannot read", &p))?;
        }
        // Lines are ASCII in practice; a cut inside a multi-byte character only drops the
        // (incomplete) last line, which the caller reads again with the next chunk.
        match String::from_utf8(buf) {
            Ok(s) => Ok(s),
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut b = e.into_bytes();
                b.truncate(valid);
                Ok(String::from_utf8(b).unwrap_or_default())
            }
        }
    }

    /// A lane's length in bytes (0 when absent).
    pub fn lane_len(&self, lane: &str) -> Result<u64> {
        let p = self.root.join("queue").join(format!("{lane}.lane"));
        match std::fs::metadata(&p) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(Error::io("cannot stat", &p, e)),
        }
    }

    /// A lane's head: the byte offset of its first entry that may still be live (0 when
    /// the head file is absent or unreadable: a rescan from the start is always safe).
    pub fn lane_head(&self, lane: &str) -> u64 {
        let p = self.root.join("queue").join(format!("{lane}.head"));
        atomic::read_regular(&p)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Move a lane's head: one fixed-width `pwrite` over the old value, in place (derived
    /// and only written under the queue lock, so no temp file, rename or fsync). A head
    /// that is lost or stale only makes the next scan re-read entries it then skips.
    pub fn set_lane_head(&self, lane: &str, offset: u64) -> Result<()> {
        let p = self.root.join("queue").join(format!("{lane}.head"));
        atomic::overwrite_in_place(&p, format!("{offset:020}\n").as_bytes())
            .map_err(io_err("cannot write", &p))
    }

    /// A small derived value file under queue/; `None` when absent (tests read the board).
    #[cfg(test)]
    pub fn queue_value(&self, name: &str) -> Option<String> {
        let bytes = atomic::read_regular(&self.root.join("queue").join(name)).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Replace a derived file under queue/ atomically (no fsync: rebuildable).
    pub fn set_queue_value(&self, name: &str, value: &str) -> Result<()> {
        let dst = self.root.join("queue").join(name);
        let mut t = TempFile::write(&self.tmp_dir(), value.as_bytes(), false)
            .map_err(io_err("cannot write", &dst))?;
        atomic::rename_replace(&t.path, &dst).map_err(io_err("cannot write", &dst))?;
        t.disarm();
        Ok(())
    }

    /// Open a derived file under queue/ for reading: the file and its length; `None` when it
    /// is absent or not a regular file (a planted link reads as absent: it is replaced).
    pub fn queue_open(&self, name: &str) -> Result<Option<(std::fs::File, u64)>> {
        let p = self.root.join("queue").join(name);
        match atomic::open_regular(&p) {
            Ok(f) => Ok(Some(f)),
            Err(_) if !atomic::is_regular(&p) => Ok(None),
            Err(e) => Err(Error::io("cannot open", &p, e)),
        }
    }

    /// Replace a derived file under queue/ with what `write` streams into it (temp file +
    /// rename, no fsync: rebuildable). `write` gets the file, to write and patch in place.
    pub fn queue_replace(
        &self,
        name: &str,
        write: &mut dyn FnMut(&mut std::fs::File) -> Result<()>,
    ) -> Result<()> {
        let dst = self.root.join("queue").join(name);
        let (mut t, mut f) =
            TempFile::create(&self.tmp_dir()).map_err(io_err("cannot write", &dst))?;
        write(&mut f)?;
        drop(f);
        atomic::rename_replace(&t.path, &dst).map_err(io_err("cannot write", &dst))?;
        t.disarm();
        Ok(())
    }

    /// Remove every lane and head (before a rebuild).
    pub fn clear_queue(&self) -> Result<()> {
        let dir = self.root.join("queue");
        for n in list_names(&dir)? {
            if n == super::requests::FILE {
                continue; // not derived: the grants of claims with a request id
            }
            let p = dir.join(n);
            atomic::remove(&p).map_err(io_err("cannot remove", &p))?;
        }
        Ok(())
    }
}
