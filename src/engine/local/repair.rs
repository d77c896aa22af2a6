//! What `circe doctor` cleans up: staging leftovers in `tmp/`, and planted or foreign files
//! moved into `LOGS/quarantine/`.

use std::io;
use std::path::Path;

use super::atomic;
use super::root::{EVENTS, Store, io_err, list_all_names, list_typed};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};

/// The process that staged `name` in tmp/ (`<kind>-<pid>-…`).
fn staged_by(name: &str) -> Option<u32> {
    name.split('-').nth(1).and_then(|p| p.parse().ok())
}

/// Does process `pid` run (on this host, in this PID namespace)? A zombie (ended, not yet
/// reaped by its parent) does not.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|state| state != 'Z' && state != 'X'),
        Err(_) => Path::new(&format!("/proc/{pid}")).exists(),
    }
}

impl Store {
    /// Files left in tmp/ by crashed commands (they never reached a box).
    /// Everything in tmp/ whose creating process is gone. Staging names are
    /// `<kind>-<pid>-…` (`.tmp-`, `.agent-`, `batch-`): a live command's staging is never
    /// touched. (A reused pid only spares a leftover until the next run: the safe side.)
    pub fn tmp_leftovers(&self) -> Result<Vec<String>> {
        let mut out = list_all_names(&self.tmp_dir())?;
        let tmp = self.tmp_dir();
        out.retain(|n| {
            staged_by(n).is_none_or(|p| p != std::process::id() && !alive(p))
            // Still there once its process is seen gone: a command that ended between the
            // listing and that look took its file along.
            && std::fs::symlink_metadata(tmp.join(n)).is_ok()
        });
        Ok(out)
    }

    /// What processes (other than this one) still at work on the root hold in tmp/ (a
    /// send's staging, the journal of its events): (file, pid).
    pub fn tmp_writers(&self) -> Result<Vec<(String, u32)>> {
        Ok(list_all_names(&self.tmp_dir())?
            .into_iter()
            .filter_map(|n| staged_by(&n).map(|p| (n, p)))
            .filter(|&(_, p)| p != std::process::id() && alive(p))
            .collect())
    }

    /// Remove a leftover of tmp/; `false` when it is gone already.
    pub fn remove_leftover(&self, name: &str) -> Result<bool> {
        let p = self.tmp_dir().join(name);
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { atomic::remove(&p) };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("cannot remove", &p, e)),
        }
    }

    /// Move a foreign or planted file out of a box into `LOGS/quarantine/` (never follows it).
    pub fn quarantine(&self, mbox: &Mailbox, name: &str) -> Result<String> {
        self.quarantine_from(&self.box_dir(mbox).join(name), &mbox.label().replace(':', "-"), name)
    }

    /// Entries of a box (not LOGS: circe alone files there) whose names are not UTF-8.
    pub fn undecodable_in(&self, mbox: &Mailbox) -> Result<Vec<std::ffi::OsString>> {
        // Nothing is read through a box behind a link (doctor reports the box).
        if *mbox == Mailbox::Logs || self.behind_link(mbox) {
            return Ok(Vec::new());
        }
        super::root::list_undecodable(&self.box_dir(mbox))
    }

    /// Move an entry whose name is not UTF-8 out of a box into `LOGS/quarantine/` (under
    /// its name made readable, `\u{fffd}` for each byte that is not).
    pub fn quarantine_undecodable(&self, mbox: &Mailbox, name: &std::ffi::OsStr) -> Result<String> {
        let shown = name.to_string_lossy().replace('/', "_");
        self.quarantine_from(
            &self.box_dir(mbox).join(name),
            &mbox.label().replace(':', "-"),
            &shown,
        )
    }

    /// Entries of TASKS/ that are not regular files named `<task id>.status|owner|checks`
    /// (planted links, FIFOs, folders, strays).
    pub fn task_strays(&self) -> Result<Vec<String>> {
        // Whether each is a regular file comes from its directory entry (a link, FIFO or
        // folder says so there), not from a `stat` per name.
        let out = self
            .tasks_listing()?
            .into_iter()
            .filter(|(n, regular)| {
                let named = n.rsplit_once('.').is_some_and(|(id, kind)| {
                    matches!(kind, "status" | "owner" | "checks")
                        && crate::names::check_task_id(id).is_ok()
                });
                !(*regular && named)
            })
            .map(|(n, _)| n)
            .collect();
        Ok(out)
    }

    /// circe's own files that are not regular files (planted links, FIFOs, folders): entries
    /// of `locks/` and of the cursor folders, and `LOGS/events.jsonl`. Paths relative to
    /// the root. (queue/ needs no check: its writers replace such files themselves.)
    pub fn planted_own_files(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for dir in ["locks", "cursors/events", "cursors/chat"] {
            out.extend(
                list_typed(&self.root.join(dir))?
                    .into_iter()
                    .filter(|(_, regular)| !regular)
                    .map(|(n, _)| format!("{dir}/{n}")),
            );
        }
        let events = self.root.join(EVENTS);
        if std::fs::symlink_metadata(&events).is_ok_and(|m| !m.is_file()) {
            out.push(EVENTS.to_string());
        }
        Ok(out)
    }

    /// Move one of `planted_own_files` into `LOGS/quarantine/` (never follows it). Safe for
    /// a lock: no process can hold a lock through a link or non-file (they are never opened).
    pub fn quarantine_own_file(&self, rel: &str) -> Result<String> {
        self.quarantine_from(&self.root.join(rel), "own", &rel.replace('/', "~"))
    }

    /// Move a stray out of TASKS/ into `LOGS/quarantine/` (never follows it).
    pub fn quarantine_task_file(&self, name: &str) -> Result<String> {
        self.quarantine_from(&self.root.join("TASKS").join(name), "tasks", name)
    }

    pub(super) fn quarantine_from(&self, src: &Path, label: &str, name: &str) -> Result<String> {
        let qdir = self.root.join("LOGS").join("quarantine");
        std::fs::create_dir_all(&qdir).map_err(io_err("cannot create", &qdir))?;
        for n in 1..1000 {
            let dst_name =
                if n == 1 { format!("{label}~{name}") } else { format!("{label}~{name}.{n}") };
            match atomic::rename_noclobber(src, &qdir.join(&dst_name)) {
                Ok(()) => return Ok(format!("LOGS/quarantine/{dst_name}")),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot quarantine", src, e)),
            }
        }
        Err(Error::internal("quarantine is full"))
    }
}
