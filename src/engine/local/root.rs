//! `Store`: an opened circe root (open, init, config, agents, locks) and the helpers its
//! other files share. The rest of `impl Store` is split by what it touches:
//! `messages.rs` (boxes), `records.rs` (TASKS/), `queue_files.rs` (queue/), `repair.rs`
//! (tmp/ leftovers, quarantine).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::atomic::{self, TempFile};
use super::lock::Lock;
use crate::boxes::Mailbox;
use crate::config::Durability;
use crate::error::{Error, Result};
use crate::names::{AgentName, TaskId};

/// The name of the folder `circe init` makes, and of the config file in it.
pub const ROOT_DIR: &str = ".circe";
pub const CONFIG_FILE: &str = "circe.yaml";
const BOXES: [&str; 7] = ["NEW_MESSAGES", "AGENTS", "LOGS", "TASKS", "tmp", "locks", "queue"];
/// circe's own folders among `BOXES`: staging, lock files, derived indexes. They hold
/// nothing a root must keep (a lock file is made when taken, an index rebuilt when missing).
const OWN: [&str; 3] = ["tmp", "locks", "queue"];
pub(super) const EVENTS: &str = "LOGS/events.jsonl";
/// The root's own `.gitignore`: git leaves the whole root out (README "In a git repository").
pub const GITIGNORE: &str = ".gitignore";
pub(super) const GITIGNORE_TEXT: &str = "\
# A circe root: the team's live tasks, messages and locks, not source. Git leaves all of
# it out, so no commit, checkout or worktree makes a second copy that agents would use.
*
";

/// An opened circe root (the folder holding `circe.yaml`).
#[derive(Debug, Clone)]
pub struct Store {
    pub(super) root: PathBuf,
    pub(super) sync: bool,
    /// The numbered sends held on each thread (`seq_send.rs`): the next delivery is theirs.
    pub(super) numbered: super::seq_send::Numbered,
}

/// Find the root: `dir` itself if it holds circe.yaml, `dir/.circe` if that does, else the
/// same test on each parent (like git).
///
/// A linked git worktree holds no root of its own (git keeps none): from inside one, the
/// search goes on in the main worktree of its repository, so agents in worktrees share it.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    let mut cur = Some(start);
    while let Some(dir) = cur {
        if let Some(r) = root_at(dir) {
            return Some(r);
        }
        if let Some(r) = main_worktree(dir).and_then(|m| root_at(&m)) {
            return Some(r);
        }
        cur = dir.parent();
    }
    None
}

/// The git folder `dir/.git` names when it is a file (`gitdir: G`, as a linked worktree's
/// or a submodule's is), relative to `dir` unless absolute.
fn gitdir_named(dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dir.join(".git")).ok()?;
    Some(dir.join(text.strip_prefix("gitdir:")?.trim()))
}

/// The main worktree of the repository when `dir` is the top of a linked git worktree:
/// `dir/.git` is a file `gitdir: G`, and `G/commondir` names the repository's `.git`
/// folder, which the main worktree holds. None for anything else (a submodule's `.git`
/// names no commondir; a bare repository has no main worktree).
pub fn main_worktree(dir: &Path) -> Option<PathBuf> {
    let gitdir = gitdir_named(dir)?;
    let common = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
    let common = std::fs::canonicalize(gitdir.join(common.trim())).ok()?;
    (common.file_name()? == ".git").then(|| common.parent().map(Path::to_path_buf))?
}

/// Outside any root, inside a linked git worktree whose repository is not where its `.git`
/// file says (the main checkout moved or was removed): said, with git's own mend, rather
/// than offering a new root.
pub fn lost_worktree(start: &Path) -> Option<Error> {
    start.ancestors().find_map(|dir| {
        let gitdir = gitdir_named(dir)?;
        (!gitdir.exists()).then(|| {
            Error::usage(format!(
                "not inside a circe root: {} is a git worktree whose repository is not at {} (moved or removed?), so the main worktree's root cannot be found",
                dir.display(),
                gitdir.display()
            ))
            .hint("run `git worktree repair` in the main checkout (circe then finds its root), or pass --root DIR; do not run `circe init` here: that makes a second root")
        })
    })
}

/// Whether git tracks the root `root` (its circe.yaml is in the index of the worktree that
/// holds it): a `git stash`, `checkout` or `merge` would then rewrite the team's live
/// records. Read from the index's bytes (a path is stored whole there, but in index format
/// 4, which compresses paths and is not looked into). Returns the worktree's folder.
pub fn tracked_by_git(root: &Path) -> Option<PathBuf> {
    let top = root.ancestors().skip(1).find(|d| d.join(".git").exists())?;
    let dotgit = top.join(".git");
    let gitdir = if dotgit.is_dir() { dotgit } else { gitdir_named(top)? };
    let index = std::fs::read(gitdir.join("index")).ok()?;
    let rel = root.strip_prefix(top).ok()?.join(CONFIG_FILE);
    let needle = format!("{}\0", rel.to_str()?);
    index.windows(needle.len()).any(|w| w == needle.as_bytes()).then(|| top.to_path_buf())
}

/// A root in a linked git worktree whose main worktree holds another: the copy a commit
/// made, or one made there by hand. Returns the main worktree's root.
pub fn shadowed_root(root: &Path) -> Option<PathBuf> {
    let top = if root.file_name()? == ROOT_DIR { root.parent()? } else { root };
    let main = root_at(&main_worktree(top)?)?;
    (main != root).then_some(main)
}

/// `dir` as a root, if it is one or holds one directly.
pub fn root_at(dir: &Path) -> Option<PathBuf> {
    let inner = dir.join(ROOT_DIR);
    // A folder that holds a root in `.circe` is no root's own folder (no root holds
    // another), so a circe.yaml beside `.circe` is a file someone is editing (`circe config >
    // circe.yaml`, to `--set` it), not a second root.
    if inner.join(CONFIG_FILE).is_file() {
        return Some(inner);
    }
    dir.join(CONFIG_FILE).is_file().then(|| dir.to_path_buf())
}

/// Refused: a root git copied into a linked worktree (git keeps no empty folder, so the
/// copy lacks boxes) whose main worktree holds the team's root.
pub fn git_copy(copy: &Path) -> Result<()> {
    let lacks_a_box = || BOXES.iter().any(|b| !copy.join(b).is_dir());
    let Some(main) = shadowed_root(copy).filter(|_| lacks_a_box()) else {
        return Ok(());
    };
    Err(Error::usage(format!(
        "{} is a copy git made of a circe root (it lacks the root's empty folders); this git worktree's team root is {}",
        copy.display(),
        main.display()
    ))
    .hint(format!(
        "take the root out of git where it lives: in the main worktree, `git rm -r --cached .circe` and commit there (committed here and merged, the removal would delete the live root's files); then `rm -r {0}` here: commands here then use {1}. Do not run `circe init` here: that makes a second root",
        copy.display(),
        main.display()
    )))
}

pub(super) fn io_err(context: &str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    let context = context.to_string();
    move |e| Error::io(context, path, e)
}

impl Store {
    /// The root in the folder `root` (already checked), fsynced when `sync`.
    pub(super) fn at(root: &Path, sync: bool) -> Store {
        Store { root: root.to_path_buf(), sync, numbered: super::seq_send::Numbered::default() }
    }

    /// Make `dir/.circe` with the boxes and `config` as circe.yaml unless one exists.
    /// Returns the store and whether circe.yaml was written.
    pub fn init(dir: &Path, config: &str) -> Result<(Store, bool)> {
        let root = dir.join(ROOT_DIR);
        // Nothing is made through a link or over a file: the root would land elsewhere (the
        // folders made later, when first needed, too).
        let later =
            ["seq", "seen", "ASKS", "cursors", "dead", "ARCHIVE", "LOGS/quarantine", "LOGS/chat"];
        let own = BOXES.iter().chain(later.iter()).map(|b| root.join(b));
        for p in std::iter::once(root.clone()).chain(own) {
            if let Ok(m) = std::fs::symlink_metadata(&p)
                && !m.is_dir()
            {
                let what = if m.file_type().is_symlink() { "a link" } else { "a file" };
                return Err(Error::usage(format!(
                    "{} is {what}, not a folder: circe makes no root through it",
                    p.display()
                ))
                .hint("move it away (a root's folders are folders of their own), then run `circe init` again"));
            }
        }
        // A root's queue/ made again (removed by hand): its `--next` lanes are rebuilt from
        // the records, or `claim --next` would pass over every task waiting now.
        let requeue = root.join(CONFIG_FILE).is_file() && !root.join("queue").exists();
        std::fs::create_dir_all(&root).map_err(io_err("cannot create", &root))?;
        for b in BOXES {
            let p = root.join(b);
            std::fs::create_dir_all(&p).map_err(io_err("cannot create", &p))?;
        }
        let store = Store::at(&root, true);
        // The root-wide locks a report takes, made now: a reader who may not write (it
        // cannot make them) reads a root nobody has written to since `init`.
        drop(store.lock_named("queue")?);
        drop(store.lock_named_shared(super::board::LOCK)?);
        if requeue {
            super::lanes::rebuild(&store)?;
        }
        let written = store.write_if_absent(CONFIG_FILE, config)?;
        // Git keeps none of a root: a commit or a worktree copied from one would be a second
        // root, agents on the copy claiming the team's tasks again. One written by hand stays.
        store.write_if_absent(GITIGNORE, GITIGNORE_TEXT)?;
        store.sync_dir(&store.root)?;
        Ok((store, written))
    }

    /// `name` in the root folder with `text`, unless there is one (whole or not at all).
    /// Returns whether it was written.
    fn write_if_absent(&self, name: &str, text: &str) -> Result<bool> {
        let path = self.root.join(name);
        if path.exists() {
            return Ok(false);
        }
        let mut t = TempFile::write(&self.tmp_dir(), text.as_bytes(), true)
            .map_err(io_err("cannot write", &self.tmp_dir()))?;
        match atomic::rename_noclobber(&t.path, &path) {
            Ok(()) => {
                t.disarm();
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("cannot write", &path, e)),
        }
    }

    /// Open the root at `root` (a folder holding circe.yaml).
    pub fn open(root: &Path) -> Result<Store> {
        if !root.join(CONFIG_FILE).is_file() {
            return Err(Error::usage(format!(
                "{} is not a circe root (no {CONFIG_FILE})",
                root.display()
            ))
            .hint("run `circe init` to make one, or pass --root"));
        }
        if root.join(super::mirror::MARKER).exists() {
            return Err(Error::usage(format!(
                "{} is a read-only mirror, not a root",
                root.display()
            ))
            .hint(format!("its file {} names the root it mirrors", super::mirror::MARKER)));
        }
        let store = Store::at(root, true);
        for b in BOXES {
            let p = root.join(b);
            if !p.is_dir() {
                git_copy(root)?;
                return Err(Error::internal(format!("the circe root is missing {}", p.display()))
                    .hint("run `circe init` again: it adds missing boxes and keeps your config"));
            }
        }
        // FS_RULES 3: staging must be on the same filesystem as the boxes.
        let dev =
            |p: &Path| std::fs::metadata(p).map(|m| m.dev()).map_err(io_err("cannot stat", p));
        if dev(&root.join("tmp"))? != dev(&root.join("NEW_MESSAGES"))? {
            return Err(Error::internal("tmp/ and NEW_MESSAGES/ are on different filesystems")
                .hint("renames across filesystems are not atomic; keep the whole root on one filesystem"));
        }
        Ok(store)
    }

    #[must_use]
    pub fn with_durability(mut self, d: Durability) -> Store {
        self.sync = d == Durability::Full;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    pub(super) fn box_dir(&self, b: &Mailbox) -> PathBuf {
        self.root.join(b.rel_path())
    }

    pub(super) fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.sync { atomic::sync_dir(dir).map_err(io_err("cannot sync", dir)) } else { Ok(()) }
    }

    // ---- configuration -------------------------------------------------------------

    pub fn read_config(&self) -> Result<String> {
        read_config_at(&self.root)
    }

    /// Replace circe.yaml (temp file, fsync, rename, fsync the folder).
    pub fn write_config(&self, text: &str) -> Result<()> {
        let dst = self.root.join(CONFIG_FILE);
        let mut t = TempFile::write(&self.tmp_dir(), text.as_bytes(), self.sync)
            .map_err(io_err("cannot write", &dst))?;
        atomic::rename_replace(&t.path, &dst).map_err(io_err("cannot write", &dst))?;
        t.disarm();
        self.sync_dir(&self.root)
    }

    // ---- agents --------------------------------------------------------------------

    /// Create `AGENTS/<name>/` with INBOX, WORKSPACE and agent.yaml in one rename.
    /// Returns false (and changes nothing) when the agent exists already.
    pub fn create_agent(&self, name: &AgentName, role: &str) -> Result<bool> {
        let agent_yaml =
            crate::yaml::to_string(&AgentFile { role: role.to_string(), retired_at: None })
                .map_err(|e| Error::internal(format!("cannot write agent.yaml: {e}")))?;
        let name = name.as_str();
        let dest = self.root.join("AGENTS").join(name);
        if std::fs::symlink_metadata(&dest).is_ok() {
            if is_real_dir(&dest) && self.read_agent(&AgentName::new(name)?)?.is_some() {
                return Ok(false);
            }
            // A link or a file: not this agent (a folder whose agent.yaml is missing or
            // damaged is refused above, with its mend).
            return Err(Error::refused(format!(
                "AGENTS/{name} is there, but is no agent's folder (a link or a file)"
            ))
            .hint(
                "move it away (or put the agent's folder itself there), then add the agent again",
            ));
        }
        let stage = self.tmp_dir().join(format!(
            ".agent-{}-{name}-{}",
            super::repair::stager(),
            crate::clock::random_suffix()
        ));
        let build = || -> io::Result<()> {
            std::fs::create_dir(&stage)?;
            std::fs::create_dir(stage.join("INBOX"))?;
            std::fs::create_dir(stage.join("WORKSPACE"))?;
            let mut t = TempFile::write(&stage, agent_yaml.as_bytes(), self.sync)?;
            std::fs::rename(&t.path, stage.join("agent.yaml"))?;
            t.disarm();
            atomic::rename_noclobber(&stage, &dest)
        };
        match build() {
            Ok(()) => {
                self.sync_dir(&self.root.join("AGENTS"))?;
                Ok(true)
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&stage);
                if e.kind() == io::ErrorKind::AlreadyExists || e.raw_os_error() == Some(39) {
                    Ok(false)
                } else {
                    Err(Error::io("cannot create agent", &dest, e))
                }
            }
        }
    }

    /// Is `name` retired, by its agent.yaml read now? `false` for one that is not there, and
    /// for one whose agent.yaml does not parse (what `read_agent` says is an error: the
    /// command stopped there already, at its start).
    pub fn agent_retired(&self, name: &AgentName) -> Result<bool> {
        let p = self.root.join("AGENTS").join(name.as_str()).join("agent.yaml");
        match atomic::read_regular(&p) {
            Ok(b) => Ok(parse_agent_file(&b).is_some_and(|f| f.retired_at.is_some())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// One agent's role; `None` when there is no such agent. An agent.yaml that does not
    /// parse is an error naming it: the agent is there, and may hold tasks.
    pub fn read_agent(&self, name: &AgentName) -> Result<Option<String>> {
        let p = self.root.join("AGENTS").join(name.as_str()).join("agent.yaml");
        match atomic::read_regular(&p) {
            Ok(b) => parse_agent(&b).map(Some).ok_or_else(|| {
                Error::internal(format!(
                    "AGENTS/{name}/agent.yaml does not parse ({})",
                    why_agent_unread(&b)
                ))
                .hint(MEND_AGENT)
            }),
            // The agent's folder without it: damage (an agent's folder is made whole, then
            // renamed into place), not a stranger.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    && is_real_dir(&self.root.join("AGENTS").join(name.as_str())) =>
            {
                Err(Error::internal(format!(
                    "AGENTS/{name}/agent.yaml is missing: the folder AGENTS/{name} is there (it holds the agent's boxes), but not the file that names its role"
                ))
                .hint(MEND_AGENT))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// The agents' folders (legal names, real folders) whose agent.yaml is missing or does
    /// not parse: left out of every list of agents, so doctor names them.
    pub(super) fn damaged_agents(&self) -> Result<Vec<AgentName>> {
        let dir = self.root.join("AGENTS");
        let mut out = Vec::new();
        for name in list_names(&dir)? {
            let Ok(agent) = AgentName::new(name) else { continue };
            if !is_real_dir(&dir.join(agent.as_str())) {
                continue;
            }
            let p = dir.join(agent.as_str()).join("agent.yaml");
            if atomic::read_regular(&p).ok().and_then(|b| parse_agent(&b)).is_none() {
                out.push(agent);
            }
        }
        Ok(out)
    }

    /// Every agent with its role, sorted by name. Folders that are not legal agent names or
    /// have no readable agent.yaml are left out (doctor reports them).
    pub fn list_agents(&self) -> Result<Vec<(AgentName, String)>> {
        let dir = self.root.join("AGENTS");
        let mut out = Vec::new();
        for name in list_names(&dir)? {
            let Ok(agent) = AgentName::new(name) else { continue };
            let p = dir.join(agent.as_str()).join("agent.yaml");
            if let Some(role) = atomic::read_regular(&p).ok().and_then(|b| parse_agent(&b)) {
                out.push((agent, role));
            }
        }
        Ok(out)
    }

    // ---- locks -------------------------------------------------------------------------

    /// The lock that serialises every change to one task's records and message: that of the
    /// file at its path. A task's lock file is removed by its holder when the task has no
    /// records (`remove_gone_task_lock`), so a lock taken through a file removed meanwhile
    /// guards nothing: it is let go, and the file at the path (made again) is locked instead.
    pub fn lock_task(&self, task: &TaskId) -> Result<Lock> {
        let p = self.task_lock_path(task);
        loop {
            let lock = Lock::acquire(&p, &format!("task {task}"))?;
            if holds_file_at(&lock, &p)? {
                return Ok(lock);
            }
        }
    }

    fn task_lock_path(&self, task: &TaskId) -> PathBuf {
        self.root.join("locks").join(format!("task-{task}.lock"))
    }

    /// Remove a task's lock file, called while holding it (`lock`), once the task has no
    /// records: archived (after its records, with its tombstone committed before:
    /// PROTOCOLS.md section 17, "Removal"), or never made (an opening that failed before its
    /// commit point); so `locks/` holds what the hot folders hold, not every task ever. Whoever
    /// waited on the file removed finds it gone once it has the lock, and locks the file at
    /// the path (`lock_task`). Only the file held is removed: when another stands at the path
    /// (the one held was removed already and the name made again), its holder removes that
    /// one. Nobody else can remove the file held meanwhile (that takes its lock), nor make
    /// another at the path while it stands, so the name removed is the file held.
    pub fn remove_task_lock(&self, task: &TaskId, lock: &Lock) -> Result<()> {
        let p = self.task_lock_path(task);
        if !holds_file_at(lock, &p)? {
            return Ok(());
        }
        match atomic::remove(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("cannot remove", &p, e)),
        }
    }

    /// Let go of a task's lock; first remove its lock file when the task has no records and
    /// the file holds no journal: locked after an archive removed the task's lock file, it
    /// was made again, and would stay. Safe as the archive's own removal (`remove_task_lock`).
    pub fn unlock_task(&self, task: &TaskId, lock: Lock) {
        // The removal is a cleanup: a root on a read-only mount, or a reader who may not
        // write `locks/`, leaves the empty file, as a transaction's letting go does.
        let _ = self.remove_gone_task_lock(task, &lock);
        drop(lock);
    }

    /// `unlock_task` but for the letting go: the lock file removed, still held, when the
    /// task has no records (gone by an archive, or never made) and the file is empty (a task
    /// transaction that found no task, or made none, lets go of its lock so, `tx.rs`).
    pub(super) fn remove_gone_task_lock(&self, task: &TaskId, lock: &Lock) -> Result<()> {
        let gone = ["status", "owner", "checks"].iter().all(|k| self.record_gone(task, k))
            && lock.file().metadata().is_ok_and(|m| m.len() == 0);
        if gone {
            self.remove_task_lock(task, lock)?;
        }
        Ok(())
    }

    /// The task's lock if no other process holds it right now (`claim --next` skips a
    /// task another claimer is busy with instead of queueing behind it). That of the file
    /// at its path, as `lock_task`'s.
    pub fn try_lock_task(&self, task: &TaskId) -> Result<Option<Lock>> {
        let p = self.task_lock_path(task);
        loop {
            match Lock::try_acquire(&p)? {
                Some(lock) if !holds_file_at(&lock, &p)? => {}
                got => return Ok(got),
            }
        }
    }

    /// A task's lock if it is free right now, without making its lock file. That of the
    /// file at its path, as `lock_task`'s (`Missing` when it was removed meanwhile).
    pub(super) fn try_lock_task_existing(&self, task: &TaskId) -> Result<super::lock::Tried> {
        let p = self.task_lock_path(task);
        loop {
            match Lock::try_existing(&p)? {
                super::lock::Tried::Got(lock) if !holds_file_at(&lock, &p)? => {}
                tried => return Ok(tried),
            }
        }
    }

    /// A named lock for root-wide work (`queue`, `agents`, `doctor`).
    pub fn lock_named(&self, name: &str) -> Result<Lock> {
        Lock::acquire(&self.root.join("locks").join(format!("{name}.lock")), name)
    }

    /// A named lock in shared mode (many holders, excluded only by `lock_named`).
    pub fn lock_named_shared(&self, name: &str) -> Result<Lock> {
        Lock::acquire_shared(&self.root.join("locks").join(format!("{name}.lock")), name)
    }
}

/// Is `lock` that of the file at `p` now? Not when its holder removed the file meanwhile
/// (`Store::remove_task_lock`), or a person did.
fn holds_file_at(lock: &Lock, p: &Path) -> Result<bool> {
    let held = lock.file().metadata().map_err(io_err("cannot stat", p))?;
    match std::fs::symlink_metadata(p) {
        Ok(m) => Ok((m.dev(), m.ino()) == (held.dev(), held.ino())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("cannot stat", p, e)),
    }
}

/// What `circe init DIR` finds before it makes anything: refused when DIR or its `.circe`
/// is no folder; the text of `.circe/circe.yaml` when there is one (checked before any box
/// is made, so a root whose configuration does not parse is left as it was).
pub fn init_finds(dir: &Path) -> Result<Option<String>> {
    let root = dir.join(ROOT_DIR);
    for p in std::iter::once(root.clone()).chain(BOXES.iter().map(|b| root.join(b))) {
        super::files::folder_can_be(&p).map_err(|e| {
            e.hint("`circe init DIR` makes DIR/.circe and its folders: move the file away")
        })?;
    }
    let cfg = dir.join(ROOT_DIR).join(CONFIG_FILE);
    match atomic::read_regular(&cfg) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("cannot read", &cfg, e)),
    }
}

/// The configuration of the root folder `root`, read and checked, its registry too: what
/// the root needs to open. An error in the file names the file and the way out (mend it, or,
/// in a root with all its boxes, replace it whole with `circe config --set`, which reads no
/// broken file); one from elsewhere (`CIRCE_DURABILITY`) is left as it is.
pub(super) fn config_at(root: &Path) -> Result<(crate::config::Config, crate::registry::Registry)> {
    let text = read_config_at(root)?;
    let checked = crate::config::Config::parse(&text).and_then(|c| {
        let registry = crate::registry::Registry::from_config(&c.registry)?;
        Ok((c, registry))
    });
    checked.map_err(|mut e| {
        let Some(rest) = e.message.strip_prefix("circe.yaml") else { return e };
        e.message = format!("{}{rest}", root.join(CONFIG_FILE).display());
        let first = e.hint.take().map_or_else(String::new, |h| format!("{h}; "));
        let missing = missing_boxes(root);
        // A folder that points at a database holds none of a root's folders, only its
        // circe.yaml; one that holds some is a root, damaged when it lacks the others.
        let way = if missing.len() == BOXES.len() {
            "mend the file (it points this folder at a database: section 18 of `circe help protocols`)".to_string()
        } else if missing.is_empty() {
            "mend the file, or replace it: `circe config --set FILE` (`circe init` in an empty folder writes the default one)".to_string()
        } else if let Some(own) = own_missing(root) {
            format!(
                "mend the file, or replace it: `circe config --set FILE` (it makes again {}, circe's own folders the root lacks)",
                own.iter().map(|b| format!("{b}/")).collect::<Vec<_>>().join(", ")
            )
        } else {
            // `config --set` writes only into a whole root, and `init` only beside a
            // circe.yaml that reads: the file is mended first.
            format!(
                "the root is damaged too, it lacks {}: mend the file, then `circe init` adds what the root lacks (and keeps the config)",
                missing.iter().map(|b| format!("{b}/")).collect::<Vec<_>>().join(", ")
            )
        };
        e.hint(format!("{first}{way}"))
    })
}

/// The root's own folders missing from `root` (`circe init` adds them again).
pub(super) fn missing_boxes(root: &Path) -> Vec<&'static str> {
    BOXES.into_iter().filter(|b| !root.join(b).is_dir()).collect()
}

/// circe's own folders (`OWN`) missing from `root` when it lacks nothing else and nothing
/// stands where they belong (a link or a file there is no folder to make): `None` when it
/// lacks none, or more.
pub(super) fn own_missing(root: &Path) -> Option<Vec<&'static str>> {
    let missing = missing_boxes(root);
    let absent = |b: &str| {
        std::fs::symlink_metadata(root.join(b)).is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    };
    let only_own = missing.iter().all(|b| OWN.contains(b) && absent(b));
    (only_own && !missing.is_empty()).then_some(missing)
}

/// The text of the root folder's circe.yaml.
pub(super) fn read_config_at(root: &Path) -> Result<String> {
    let p = root.join(CONFIG_FILE);
    let bytes = atomic::read_regular(&p).map_err(io_err("cannot read", &p))?;
    String::from_utf8(bytes).map_err(|e| Error::not_utf8(p.display(), e.as_bytes()))
}

/// `dir/.circe/circe.yaml` naming another engine, written unless one exists.
pub(super) fn write_pointer(dir: &Path, text: &str) -> Result<(PathBuf, bool)> {
    let root = dir.join(ROOT_DIR);
    std::fs::create_dir_all(&root).map_err(io_err("cannot create", &root))?;
    let cfg = root.join(CONFIG_FILE);
    match atomic::write_new(&cfg, text.as_bytes(), true) {
        Ok(()) => {
            atomic::sync_dir(&root).map_err(io_err("cannot sync", &root))?;
            Ok((root, true))
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok((root, false)),
        Err(e) => Err(Error::io("cannot write", &cfg, e)),
    }
}

/// Replace the circe.yaml of the folder `dir/.circe` that names a database root with `text`
/// (a temp file beside it renamed over it, the folder fsynced), when it still names the
/// root whose `Target::identity` is `names`: `false`, and nothing written, when it changed
/// meanwhile.
pub(super) fn rewrite_pointer(dir: &Path, names: &str, text: &str) -> Result<bool> {
    let root = dir.join(ROOT_DIR);
    let cfg = root.join(CONFIG_FILE);
    let still = crate::config::Config::parse(&read_config_at(&root)?)
        .ok()
        .and_then(|c| c.engine)
        .and_then(|e| crate::engine::postgres::Target::from_config(&e).ok())
        .is_some_and(|t| t.identity() == names);
    if !still {
        return Ok(false);
    }
    let mut t =
        TempFile::write(&root, text.as_bytes(), true).map_err(io_err("cannot write", &cfg))?;
    atomic::rename_replace(&t.path, &cfg).map_err(io_err("cannot write", &cfg))?;
    t.disarm();
    atomic::sync_dir(&root).map_err(io_err("cannot sync", &root))?;
    Ok(true)
}

/// `AGENTS/<name>/agent.yaml`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct AgentFile {
    pub role: String,
    /// When the agent was retired (`circe agent retire`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<String>,
}

pub(super) fn parse_agent_file(bytes: &[u8]) -> Option<AgentFile> {
    let text = std::str::from_utf8(bytes).ok()?;
    let file = crate::yaml::from_str::<AgentFile>(text).ok()?;
    // A role is a name, and a retirement a time: anything else is a damaged file (not an
    // agent retired by a stray word).
    let valid = crate::names::check_role(&file.role).is_ok()
        && file.retired_at.as_deref().is_none_or(|t| crate::clock::parse(t).is_some());
    valid.then_some(file)
}

/// Why `parse_agent_file` refused `bytes`, for people: the YAML error (with its line and
/// column), or the value that is no role or no time.
fn why_agent_unread(bytes: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(bytes) else { return "it is not UTF-8".into() };
    match crate::yaml::from_str::<AgentFile>(text) {
        Err(e) => e.to_string(),
        Ok(f) if crate::names::check_role(&f.role).is_err() => {
            format!("`role: {}` is no role name", crate::error::one_line(&f.role))
        }
        Ok(f) => {
            format!(
                "`retired_at: {}` is no time",
                crate::error::one_line(&f.retired_at.unwrap_or_default())
            )
        }
    }
}

/// The text of `AGENTS/<name>/agent.yaml` for `role` (retired at `retired_at`, if it was).
pub(super) fn agent_yaml(role: &str, retired_at: Option<&str>) -> String {
    let file = AgentFile { role: role.to_string(), retired_at: retired_at.map(str::to_string) };
    crate::yaml::to_string(&file).unwrap_or_default()
}

fn parse_agent(bytes: &[u8]) -> Option<String> {
    parse_agent_file(bytes).map(|a| a.role)
}

/// Sorted names in a folder, hidden ones included (empty when it does not exist).
pub(super) fn list_all_names(dir: &Path) -> Result<Vec<String>> {
    Ok(list_typed(dir)?.into_iter().map(|(n, _)| n).collect())
}

/// Sorted names in a folder, hidden ones included, each with whether it is a regular file
/// (from the directory entry's type: no `stat` per name where the filesystem records it).
pub(super) fn list_typed(dir: &Path) -> Result<Vec<(String, bool)>> {
    list_where(dir, &mut |_| true)
}

/// A folder's entries; `None` when it is not there or is no folder (a box in that state
/// holds nothing: doctor reports it).
fn read_dir_if_any(dir: &Path) -> Result<Option<std::fs::ReadDir>> {
    match std::fs::read_dir(dir) {
        Ok(rd) => Ok(Some(rd)),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory =>
        {
            Ok(None)
        }
        Err(e) => Err(Error::io("cannot list", dir, e)),
    }
}

/// Sorted names in a folder that `keep` accepts, each with whether it is a regular file.
/// The folder is read as a stream: only the names kept are held (LOGS may hold a million
/// messages when a few log segments are wanted).
pub(super) fn list_where(
    dir: &Path,
    keep: &mut dyn FnMut(&str) -> bool,
) -> Result<Vec<(String, bool)>> {
    let Some(rd) = read_dir_if_any(dir)? else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(io_err("cannot list", dir))?;
        if let Some(n) = entry.file_name().to_str()
            && keep(n)
        {
            let regular = entry.file_type().is_ok_and(|t| t.is_file());
            names.push((n.to_string(), regular));
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// The names in a folder that are not UTF-8 (every listing above passes over them), for
/// doctor: a file no command can name.
pub(super) fn list_undecodable(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let Some(rd) = read_dir_if_any(dir)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for entry in rd {
        let name = entry.map_err(io_err("cannot list", dir))?.file_name();
        if name.to_str().is_none() {
            out.push(name);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Sorted names in a folder without hidden ones (empty when the folder does not exist).
pub(super) fn list_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = list_all_names(dir)?;
    names.retain(|n| !n.starts_with('.'));
    Ok(names)
}

/// A folder itself, not a link to one (a box that is a link would take messages out of the
/// root).
pub(super) fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Message files are `*.md` (lowercase, as circe writes them).
pub(super) fn is_message_name(n: &str) -> bool {
    std::path::Path::new(n).extension().is_some_and(|e| e == "md")
}

/// How an agent's missing or damaged agent.yaml is mended (its folder stays: it holds the
/// agent's messages).
const MEND_AGENT: &str = "`circe doctor` says the role the log names for it (`circe doctor --repair` writes it); by hand it is `role: ROLE` (an agent `circe init` made is named after its role), and `retired_at: TIME` once retired";
