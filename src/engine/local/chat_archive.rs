//! Moving the finished part of the chat channel aside into `LOGS/chat/`, by rename, under
//! the writers' exclusive lock (FS_RULES 18), with a record that lets cursors follow.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::atomic::{self, TempFile};
use super::chat_file::{ChatFile, ChatReader, FileId, open_reader};
use super::lock::Lock;
use super::root::{io_err, list_names};
use crate::error::{Error, Result};

/// The files an archive touched.
#[derive(Debug, Clone)]
pub struct ArchiveIds {
    /// The channel file before.
    pub old: FileId,
    /// The archive file (the old file itself when the whole channel moved).
    pub archive: FileId,
    /// The channel file after.
    pub new: FileId,
    pub archive_path: PathBuf,
}

fn id_of(path: &Path) -> Result<FileId> {
    let m = std::fs::symlink_metadata(path).map_err(io_err("cannot stat", path))?;
    Ok(FileId { dev: m.dev(), ino: m.ino() })
}

impl ChatFile {
    /// The whole channel and its identity, read while holding `lock` (exclusive): no
    /// `chat say` is between its lock and its write. `None` when there is no channel.
    pub fn read_locked(&self, _lock: &Lock) -> Result<Option<(FileId, Vec<u8>)>> {
        let Some(r) = self.open()? else { return Ok(None) };
        let mut data = Vec::new();
        r.read_to_end_from(0, &mut data)?;
        Ok(Some((r.id(), data)))
    }

    /// A name `stem`, `stem-2`, ... that is free in `LOGS/chat/` as `.md` and `.json`.
    pub fn free_archive_name(&self, _lock: &Lock, stem: &str) -> String {
        let taken = |n: &str| {
            self.logs.join(format!("{n}.md")).exists()
                || self.logs.join(format!("{n}.json")).exists()
        };
        let mut name = stem.to_string();
        let mut k = 2;
        while taken(&name) {
            name = format!("{stem}-{k}");
            k += 1;
        }
        name
    }

    /// Archive under `lock` (exclusive) as `LOGS/chat/<name>.md`. `keep_from: None` moves
    /// the whole file (one rename; a fresh empty channel takes its place); `Some(offset)`
    /// archives `data[..offset]` and leaves `data[offset..]` as the new channel (two new
    /// files, renamed into place). `record` gets the identities and returns the text of
    /// `LOGS/chat/<name>.json`, written before the renames so that a reader who sees the
    /// new channel always finds it.
    pub fn archive(
        &self,
        _lock: &Lock,
        name: &str,
        old: FileId,
        keep_from: Option<usize>,
        data: &[u8],
        record: &dyn Fn(&ArchiveIds) -> String,
    ) -> Result<ArchiveIds> {
        std::fs::create_dir_all(&self.logs).map_err(io_err("cannot create", &self.logs))?;
        let archive_path = self.logs.join(format!("{name}.md"));
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let stage = |content: &[u8], in_dir: &Path| {
            TempFile::write(in_dir, content, self.sync).map_err(io_err("cannot write in", in_dir))
        };
        let (mut staged_archive, rest) = match keep_from {
            None => (None, &[][..]),
            Some(k) => (Some(stage(&data[..k], &self.logs)?), &data[k..]),
        };
        let mut staged_new = stage(rest, &dir)?;
        let ids = ArchiveIds {
            old,
            archive: staged_archive.as_ref().map_or(Ok(old), |t| id_of(&t.path))?,
            new: id_of(&staged_new.path)?,
            archive_path: archive_path.clone(),
        };
        let mut staged_record = stage(record(&ids).as_bytes(), &self.logs)?;
        let record_path = self.logs.join(format!("{name}.json"));
        atomic::rename_noclobber(&staged_record.path, &record_path)
            .map_err(io_err("cannot write", &record_path))?;
        staged_record.disarm();
        match &mut staged_archive {
            None => atomic::rename_noclobber(&self.path, &archive_path).map_err(|e| {
                let cross = e.raw_os_error() == Some(18);
                let err = Error::io("cannot move the chat channel to", &archive_path, e);
                if cross {
                    err.hint("the chat file and .circe/LOGS are on different filesystems; archive by rename needs one")
                } else {
                    err
                }
            })?,
            Some(t) => {
                atomic::rename_noclobber(&t.path, &archive_path)
                    .map_err(io_err("cannot write", &archive_path))?;
                t.disarm();
            }
        }
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=chat-archive-slow): a scene, not a fault: a
        // pause between the two renames, so a watcher wakes while no file is at the path.
        if crate::fault::test_break("chat-archive-slow") {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        crate::fault::crash_point("chat.archived");
        let placed = if keep_from.is_none() {
            atomic::rename_noclobber(&staged_new.path, &self.path)
        } else {
            atomic::rename_replace(&staged_new.path, &self.path)
        };
        match placed {
            Ok(()) => staged_new.disarm(),
            // A hand-made file took the name meanwhile: it is the channel now.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("cannot write", &self.path, e)),
        }
        if self.sync {
            for d in [&self.logs, &dir] {
                atomic::sync_dir(d).map_err(io_err("cannot sync", d))?;
            }
        }
        Ok(ids)
    }

    /// The texts of every archive record (`LOGS/chat/*.json`), by name.
    pub fn archive_records(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for n in list_names(&self.logs)? {
            let Some(stem) = n.strip_suffix(".json") else { continue };
            let p = self.logs.join(&n);
            if let Ok(b) = atomic::read_regular(&p) {
                out.push((stem.to_string(), String::from_utf8_lossy(&b).into_owned()));
            }
        }
        Ok(out)
    }

    /// Open `LOGS/chat/<name>.md`; `None` when it is gone.
    pub fn open_archive(&self, name: &str) -> Result<Option<ChatReader>> {
        open_reader(&self.logs.join(format!("{name}.md")))
    }
}
