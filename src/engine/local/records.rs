//! Task records in `TASKS/`: `<id>.status`, `<id>.owner`, `<id>.checks`.

use std::io;
use std::path::PathBuf;

use super::atomic::{self, TempFile};
use super::root::{Store, io_err};
use crate::error::{Error, Result};
use crate::fault::crash_point;
use crate::names::TaskId;

/// The one record kind whose content is rebuilt from the others (see `write_records`).
const DERIVED_RECORD: &str = "owner";

impl Store {
    fn record_path(&self, task: &TaskId, kind: &str) -> PathBuf {
        self.root.join("TASKS").join(format!("{task}.{kind}"))
    }

    /// Is `TASKS/<task>.<kind>` not there at all (no file, folder or link of its name)?
    pub fn record_gone(&self, task: &TaskId, kind: &str) -> bool {
        std::fs::symlink_metadata(self.record_path(task, kind))
            .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    }

    /// Does `TASKS/<task>.<kind>` exist (as a regular file)?
    pub fn has_record(&self, task: &TaskId, kind: &str) -> bool {
        atomic::is_regular(&self.record_path(task, kind))
    }

    /// Read `TASKS/<task>.<kind>`; `None` when it does not exist.
    pub fn read_record(&self, task: &TaskId, kind: &str) -> Result<Option<String>> {
        self.read_record_text(task, kind)?.transpose()
    }

    /// A record's text, with apart the errors of reading it (outer) and of its bytes not
    /// being UTF-8 (inner: the file was read, and is damaged).
    pub fn read_record_text(&self, task: &TaskId, kind: &str) -> Result<Option<Result<String>>> {
        let p = self.record_path(task, kind);
        match atomic::read_regular(&p) {
            // `.owner` holds nothing `.status` lacks: bytes that are not UTF-8 are damage the
            // next command rebuilds (what they read as disagrees with `.status`).
            Ok(b) if kind == DERIVED_RECORD => {
                Ok(Some(Ok(String::from_utf8_lossy(&b).into_owned())))
            }
            Ok(b) => Ok(Some(String::from_utf8(b).map_err(|e| {
                let bad = Error::not_utf8(p.display(), e.as_bytes());
                Error::internal(bad.message).hint(format!(
                    "put TASKS/{task}.{kind} back from a backup, or mend it by hand as UTF-8: `circe log --task {task}` lists what happened to the task"
                ))
            }))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read record", &p, e)),
        }
    }

    /// Rewrite several records of one task: each is written and synced to tmp first, then
    /// renamed into place (`None` removes it), then TASKS/ is synced once.
    ///
    /// `.owner` is derived from `.status` (which names the owner, epoch and lease) and is
    /// rebuilt by the next command on that task, or by `circe doctor`, whenever it is
    /// missing, unreadable or disagrees: so its content is not fsynced (one fsync less
    /// per claim and release); its rename is still made durable by the folder fsync.
    pub fn write_records(&self, task: &TaskId, records: &[(&str, Option<&str>)]) -> Result<()> {
        let tmp = self.tmp_dir();
        let mut staged = Vec::new();
        for (kind, content) in records {
            if let Some(c) = content {
                let sync = self.sync && *kind != DERIVED_RECORD;
                staged.push((
                    *kind,
                    Some(
                        TempFile::write(&tmp, c.as_bytes(), sync)
                            .map_err(io_err("cannot write", &tmp))?,
                    ),
                ));
            } else {
                staged.push((*kind, None));
            }
        }
        for (kind, t) in &mut staged {
            let dst = self.record_path(task, kind);
            match t {
                Some(t) => {
                    atomic::rename_replace(&t.path, &dst)
                        .map_err(io_err("cannot write record", &dst))?;
                    t.disarm();
                }
                None => match atomic::remove(&dst) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("cannot remove record", &dst, e)),
                },
            }
            crash_point(&format!("record.{kind}"));
        }
        self.sync_dir(&self.root.join("TASKS"))
    }

    /// Remove every record of a task (`.owner`, `.checks`, then `.status`, so a task is never
    /// seen without its status while any record is left); the caller syncs `TASKS/`.
    pub fn remove_records_unsynced(&self, task: &TaskId) -> Result<()> {
        for kind in ["owner", "checks", "status"] {
            let p = self.record_path(task, kind);
            match atomic::remove(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("cannot remove record", &p, e)),
            }
            crash_point(&format!("archive.record.{kind}"));
        }
        Ok(())
    }

    /// Every entry of TASKS/ with whether it is a regular file. TASKS only grows on disk
    /// (ext4 never shrinks a folder): once an archive has emptied it of a million records,
    /// its listing is remembered while it stays as it is (`dir_stamp::cached_listing`).
    pub(super) fn tasks_listing(&self) -> Result<Vec<(String, bool)>> {
        super::dir_stamp::cached_listing(self, &self.root.join("TASKS"), "tasks")
    }

    /// Task ids that have a `.status` record, sorted (names that are no legal task id are
    /// left to doctor).
    pub fn list_tasks(&self) -> Result<Vec<TaskId>> {
        let mut ids: Vec<TaskId> = self
            .tasks_listing()?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(".status").and_then(|t| TaskId::new(t).ok()))
            .collect();
        ids.sort();
        Ok(ids)
    }

    /// Task ids that have a `.<kind>` record and no `.status`, sorted. A `.owner` so is a
    /// held task's record removed by hand (no command leaves that: an archive removes
    /// `.owner` first and `.status` last, a send never writes `.owner`); a lone `.checks` is
    /// that too while a message in a live box names the task, else what an older circe's
    /// cut-off send left.
    pub fn without_status(&self, kind: &str) -> Result<Vec<TaskId>> {
        let suffix = format!(".{kind}");
        let mut ids: Vec<TaskId> = self
            .tasks_listing()?
            .into_iter()
            .filter_map(|(n, _)| n.strip_suffix(&suffix).and_then(|t| TaskId::new(t).ok()))
            .filter(|id| !self.has_record(id, "status"))
            .collect();
        ids.sort();
        Ok(ids)
    }
}
