//! What `circe doctor` cleans up: staging leftovers in `tmp/`, and planted or foreign files
//! moved into `LOGS/quarantine/`.

use std::io;
use std::path::Path;

use super::atomic;
use super::root::{EVENTS, Store, io_err, list_all_names, list_typed};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};

/// How long a file staged by a process of another PID namespace is taken for a live
/// command's: its pid means nothing here, so only its age can tell it was left behind.
pub const FOREIGN_STAGING_AGE: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Who stages a file in tmp/: `<pid>-ns<inode>`, this process's id and its PID namespace
/// (agents in containers may share one root, and a pid means something only in its own
/// namespace); `<pid>` alone where /proc does not say. Staging names are
/// `<kind>-<stager>-…`, so a circe that knows no namespace still reads the pid.
pub fn stager() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| match own_namespace() {
        Some(ns) => format!("{}-ns{ns}", std::process::id()),
        None => std::process::id().to_string(),
    })
}

/// This process's PID namespace (the inode of `/proc/self/ns/pid`).
fn own_namespace() -> Option<u64> {
    static NS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
        link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
    })
}

/// The process that staged a file in tmp/, read from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stager {
    pid: u32,
    /// Its PID namespace, when the name says (a circe that knew none wrote no field).
    ns: Option<u64>,
}

/// The process that staged `name` in tmp/ (`<kind>-<pid>[-ns<inode>]-…`). A namespace
/// field has 9 or more digits, so no 8-character random suffix reads as one.
fn staged_by(name: &str) -> Option<Stager> {
    let mut fields = name.split('-').skip(1);
    let pid = fields.next()?.parse().ok()?;
    let ns = fields
        .next()
        .and_then(|f| f.strip_prefix("ns"))
        .filter(|d| d.len() >= 9 && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok());
    Some(Stager { pid, ns })
}

impl Stager {
    /// This very process.
    fn is_me(self) -> bool {
        self.pid == std::process::id() && self.ns.is_none_or(|ns| Some(ns) == own_namespace())
    }

    /// Has the process that staged `path` ended? In this PID namespace (or where either
    /// side knows none), /proc says. In another (an agent in a container), nobody here can
    /// tell: the file counts as a live command's until it is `FOREIGN_STAGING_AGE` old.
    fn ended(self, path: &Path) -> bool {
        if self.is_me() {
            return false;
        }
        if self.foreign() {
            return std::fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= FOREIGN_STAGING_AGE);
        }
        !alive(self.pid)
    }

    /// Staged in a PID namespace that may not be this one: the name says one, and this
    /// process's is another, or cannot be read (then the pid proves nothing either).
    fn foreign(self) -> bool {
        self.ns.is_some_and(|theirs| own_namespace() != Some(theirs))
    }
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
    /// `<kind>-<stager>-…` (`.tmp-`, `.agent-`, `batch-`, `events-`, `seq-`): a live
    /// command's staging is never touched. (A reused pid only spares a leftover until the
    /// next run: the safe side. A process of another PID namespace: see `Stager::ended`.)
    pub fn tmp_leftovers(&self) -> Result<Vec<String>> {
        self.tmp_leftovers_of("")
    }

    /// `tmp_leftovers` whose names begin with `prefix`: only those are looked up.
    pub fn tmp_leftovers_of(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out = list_all_names(&self.tmp_dir())?;
        let tmp = self.tmp_dir();
        out.retain(|n| {
            let path = tmp.join(n);
            n.starts_with(prefix)
            && staged_by(n).is_none_or(|s| s.ended(&path))
            // Still there once its process is seen gone: a command that ended between the
            // listing and that look took its file along.
            && std::fs::symlink_metadata(&path).is_ok()
        });
        Ok(out)
    }

    /// What processes (other than this one) still at work on the root hold in tmp/ (a
    /// send's staging, the journal of its events): (file, who: `pid N`, or a pid of another
    /// PID namespace, which nobody here can look up).
    pub fn tmp_writers(&self) -> Result<Vec<(String, String)>> {
        let tmp = self.tmp_dir();
        Ok(list_all_names(&tmp)?
            .into_iter()
            .filter_map(|n| staged_by(&n).map(|s| (n, s)))
            .filter(|(n, s)| !s.is_me() && !s.ended(&tmp.join(n)))
            .map(|(n, s)| {
                let who = if s.foreign() {
                    format!(
                        "pid {} of another PID namespace, a container: it may be at work",
                        s.pid
                    )
                } else {
                    format!("pid {}", s.pid)
                };
                (n, who)
            })
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
                // Hidden names (an editor's `.T-1.status.swp`) are passed over, as in boxes.
                !(n.starts_with('.') || *regular && named)
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

#[cfg(test)]
mod tests {
    use super::{Stager, staged_by, stager};

    #[test]
    fn a_staging_name_says_its_pid_and_namespace() {
        let ns = Some(4_026_531_836);
        assert_eq!(staged_by("events-42-ns4026531836-jdp73062.json"), Some(Stager { pid: 42, ns }));
        assert_eq!(staged_by("batch-42-ns4026531836-jdp73062.part"), Some(Stager { pid: 42, ns }));
        // A name of a circe that knew no namespace; a random suffix never reads as one.
        assert_eq!(staged_by(".tmp-42-ns123456"), Some(Stager { pid: 42, ns: None }));
        assert_eq!(staged_by(".agent-42-ns4026531836x-qa-abc"), Some(Stager { pid: 42, ns: None }));
        assert_eq!(staged_by("notes.txt"), None);
        // This process's own tag reads back as itself; the same pid in another namespace is
        // another process, and its files are foreign.
        let mine = staged_by(&format!("events-{}-abcdefgh.json", stager())).unwrap();
        assert!(mine.is_me() && !mine.foreign());
        let ns = mine.ns.expect("/proc/self/ns/pid is readable here");
        let twin = Stager { pid: mine.pid, ns: Some(ns + 1) };
        assert!(!twin.is_me() && twin.foreign());
    }
}
