//! `Store`: an opened circe root, and every filesystem operation circe performs on it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::atomic::{self, TempFile};
use super::fault::{crash_point, io_step};
use super::lock::Lock;
use super::mailbox::Mailbox;
use crate::error::{Error, Result};

/// The name of the folder `circe init` makes, and of the config file in it.
pub const ROOT_DIR: &str = ".circe";
pub const CONFIG_FILE: &str = "circe.yaml";
const BOXES: [&str; 7] = ["NEW_MESSAGES", "AGENTS", "LOGS", "TASKS", "tmp", "locks", "queue"];
const EVENTS: &str = "LOGS/events.jsonl";

/// Whether writes are fsynced (`full`, the default) or left to the page cache (`relaxed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Full,
    Relaxed,
}

/// Lane reads up to this size use one preallocated buffer (see `lane_read`).
const CHUNK_MAX: usize = 1 << 20;

/// The one record kind whose content is rebuilt from the others (see `write_records`).
const DERIVED_RECORD: &str = "owner";

/// An opened circe root (the folder holding `circe.yaml`).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    sync: bool,
}

/// Find the root: `dir` itself if it holds circe.yaml, `dir/.circe` if that does, else the
/// same test on each parent (like git).
pub fn find_root(start: &Path) -> Option<PathBuf> {
    let mut cur = Some(start);
    while let Some(dir) = cur {
        if let Some(r) = root_at(dir) {
            return Some(r);
        }
        cur = dir.parent();
    }
    None
}

/// `dir` as a root, if it is one or holds one directly.
pub fn root_at(dir: &Path) -> Option<PathBuf> {
    if dir.join(CONFIG_FILE).is_file() {
        return Some(dir.to_path_buf());
    }
    let inner = dir.join(ROOT_DIR);
    inner.join(CONFIG_FILE).is_file().then_some(inner)
}

fn io_err(context: &str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    let path = path.to_path_buf();
    let context = context.to_string();
    move |e| Error::io(context, path, e)
}

impl Store {
    /// Make `dir/.circe` with the boxes and `config` as circe.yaml unless one exists.
    /// Returns the store and whether circe.yaml was written.
    pub fn init(dir: &Path, config: &str) -> Result<(Store, bool)> {
        let root = dir.join(ROOT_DIR);
        std::fs::create_dir_all(&root).map_err(io_err("cannot create", &root))?;
        for b in BOXES {
            let p = root.join(b);
            std::fs::create_dir_all(&p).map_err(io_err("cannot create", &p))?;
        }
        let store = Store { root, sync: true };
        let cfg = store.root.join(CONFIG_FILE);
        let written = if cfg.exists() {
            false
        } else {
            let mut t = TempFile::write(&store.tmp_dir(), config.as_bytes(), true)
                .map_err(io_err("cannot write", &store.tmp_dir()))?;
            match atomic::rename_noclobber(&t.path, &cfg) {
                Ok(()) => {
                    t.disarm();
                    true
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
                Err(e) => return Err(Error::io("cannot write", &cfg, e)),
            }
        };
        store.sync_dir(&store.root)?;
        Ok((store, written))
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
        let store = Store { root: root.to_path_buf(), sync: true };
        for b in BOXES {
            let p = root.join(b);
            if !p.is_dir() {
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

    fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    fn box_dir(&self, b: &Mailbox) -> PathBuf {
        self.root.join(b.rel_path())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.sync { atomic::sync_dir(dir).map_err(io_err("cannot sync", dir)) } else { Ok(()) }
    }

    // ---- configuration -------------------------------------------------------------

    pub fn read_config(&self) -> Result<String> {
        let p = self.root.join(CONFIG_FILE);
        let bytes = atomic::read_regular(&p).map_err(io_err("cannot read", &p))?;
        String::from_utf8(bytes)
            .map_err(|_| Error::refused(format!("{} is not UTF-8", p.display())))
    }

    // ---- agents --------------------------------------------------------------------

    /// Create `AGENTS/<name>/` with INBOX, WORKSPACE and agent.yaml in one rename.
    /// Returns false (and changes nothing) when the agent exists already.
    pub fn create_agent(&self, name: &str, agent_yaml: &str) -> Result<bool> {
        let dest = self.root.join("AGENTS").join(name);
        if dest.exists() {
            return Ok(false);
        }
        let stage = self.tmp_dir().join(format!(
            ".agent-{}-{name}-{}",
            std::process::id(),
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

    /// One agent's agent.yaml text; `None` when there is no such agent.
    pub fn read_agent(&self, name: &str) -> Result<Option<String>> {
        let p = self.root.join("AGENTS").join(name).join("agent.yaml");
        match atomic::read_regular(&p) {
            Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    /// Every agent folder name with its agent.yaml text, sorted by name.
    pub fn list_agents(&self) -> Result<Vec<(String, String)>> {
        let dir = self.root.join("AGENTS");
        let mut out = Vec::new();
        for name in list_names(&dir)? {
            let p = dir.join(&name).join("agent.yaml");
            if let Ok(bytes) = atomic::read_regular(&p) {
                out.push((name, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
        Ok(out)
    }

    // ---- messages in boxes -----------------------------------------------------------

    /// Deliver `content` into `mbox` under the first free name `name(n)`, n = 1, 2, ...
    /// Returns the name used. The rename is the commit point; nothing is ever replaced.
    pub fn put_message(
        &self,
        mbox: &Mailbox,
        name: &dyn Fn(u32) -> String,
        content: &[u8],
    ) -> Result<String> {
        let dir = self.box_dir(mbox);
        let mut t = TempFile::write(&self.tmp_dir(), content, self.sync)
            .map_err(io_err("cannot write", &self.tmp_dir()))?;
        crash_point("send.staged");
        for n in 1..10_000 {
            let candidate = name(n);
            match atomic::rename_noclobber(&t.path, &dir.join(&candidate)) {
                Ok(()) => {
                    t.disarm();
                    crash_point("send.delivered");
                    self.sync_dir(&dir)?;
                    return Ok(candidate);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot deliver into", &dir, e)),
            }
        }
        Err(Error::internal(format!("no free message name in {}", dir.display())))
    }

    /// Deliver copies of one message to several boxes, all or none across a crash (one box
    /// takes the `put_message` path): every
    /// copy is written and synced into `tmp/batch-<id>.part/`, the folder is renamed to
    /// `tmp/batch-<id>/` (the commit point), then each copy is renamed into its box and the
    /// folder removed. `finish_batch` completes a committed batch a crash interrupted.
    pub fn put_messages(
        &self,
        targets: &[(Mailbox, &dyn Fn(u32) -> String)],
        content: &[u8],
    ) -> Result<Vec<String>> {
        // One box: one no-clobber rename is already all or nothing.
        if let [(mbox, name)] = targets {
            return self.put_message(mbox, *name, content).map(|n| vec![n]);
        }
        let id = format!("{}-{}", std::process::id(), crate::clock::random_suffix());
        let part = self.tmp_dir().join(format!("batch-{id}.part"));
        let ready = self.tmp_dir().join(format!("batch-{id}"));
        let stage = || -> io::Result<Vec<String>> {
            std::fs::create_dir(&part)?;
            let mut files = Vec::with_capacity(targets.len());
            for (i, (mbox, name)) in targets.iter().enumerate() {
                let file = format!("{i:05}~{}~{}", mbox.rel_path().replace('/', "+"), name(1));
                atomic::write_new(&part.join(&file), content, self.sync)?;
                files.push(file);
            }
            if self.sync {
                atomic::sync_dir(&part)?;
            }
            atomic::rename_noclobber(&part, &ready)?;
            Ok(files)
        };
        let files = stage().map_err(|e| {
            let _ = std::fs::remove_dir_all(&part);
            Error::io("cannot stage the message in", self.tmp_dir(), e)
        })?;
        self.sync_dir(&self.tmp_dir())?;
        crash_point("send.fanout.committed");
        let mut names = Vec::with_capacity(files.len());
        for f in &files {
            names.push(self.deliver_staged(&ready, f)?);
            crash_point("send.fanout");
        }
        let mut dirs: Vec<PathBuf> = targets.iter().map(|(m, _)| self.box_dir(m)).collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            self.sync_dir(&d)?;
        }
        std::fs::remove_dir(&ready).map_err(io_err("cannot remove", &ready))?;
        Ok(names)
    }

    /// Rename one staged copy `<i>~<box>~<name>` into its box under the first free name.
    fn deliver_staged(&self, batch: &Path, file: &str) -> Result<String> {
        let mut parts = file.splitn(3, '~');
        let (Some(_), Some(boxpath), Some(base)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::internal(format!("{} holds a stray file {file}", batch.display())));
        };
        let boxpath = boxpath.replace('+', "/");
        let valid_box = matches!(boxpath.as_str(), "NEW_MESSAGES" | "LOGS")
            || boxpath.strip_prefix("AGENTS/").and_then(|r| r.split_once('/')).is_some_and(
                |(agent, b)| {
                    crate::names::check_agent(agent).is_ok() && matches!(b, "INBOX" | "WORKSPACE")
                },
            );
        let stem = base.strip_suffix(".md").filter(|_| valid_box && !base.contains('/'));
        let Some(stem) = stem else {
            return Err(Error::internal(format!("{} holds a stray file {file}", batch.display())));
        };
        let dir = self.root.join(&boxpath);
        for n in 1..10_000 {
            let candidate = if n == 1 { base.to_string() } else { format!("{stem}.{n}.md") };
            match atomic::rename_noclobber(&batch.join(file), &dir.join(&candidate)) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::io("cannot deliver into", &dir, e)),
            }
        }
        Err(Error::internal(format!("no free message name in {}", dir.display())))
    }

    /// Finish a committed fan-out batch (`tmp/batch-<id>/`): deliver every copy still in it,
    /// then remove it. Returns the names delivered.
    pub fn finish_batch(&self, batch: &str) -> Result<Vec<String>> {
        let dir = self.tmp_dir().join(batch);
        let mut out = Vec::new();
        let mut boxes = Vec::new();
        for f in list_all_names(&dir)? {
            out.push(self.deliver_staged(&dir, &f)?);
            if let Some(b) = f.split('~').nth(1) {
                boxes.push(self.root.join(b.replace('+', "/")));
            }
        }
        boxes.sort();
        boxes.dedup();
        for b in boxes {
            self.sync_dir(&b)?;
        }
        std::fs::remove_dir(&dir).map_err(io_err("cannot remove", &dir))?;
        Ok(out)
    }

    /// Move message `name` from one box to another with one no-clobber rename.
    /// `Ok(false)` when the source is gone (someone else moved it: FS_RULES 1).
    pub fn move_message(&self, from: &Mailbox, to: &Mailbox, name: &str) -> Result<bool> {
        let src = self.box_dir(from).join(name);
        let dst = self.box_dir(to).join(name);
        match atomic::rename_noclobber(&src, &dst) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.box_dir(to).is_dir() {
                    return Err(Error::not_found(format!("box {to} does not exist")));
                }
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::conflict(format!(
                    "{to}/{name} exists already; not replacing it"
                ))
                .hint("run `circe doctor` to see how the same message came to be in two boxes"));
            }
            Err(e) => return Err(Error::io("cannot move", &src, e)),
        }
        crash_point("move.renamed");
        self.sync_dir(&self.box_dir(to))?;
        self.sync_dir(&self.box_dir(from))?;
        Ok(true)
    }

    /// Does message `name` lie in `mbox`? (lstat: a planted symlink does not count)
    pub fn has_message(&self, mbox: &Mailbox, name: &str) -> bool {
        std::fs::symlink_metadata(self.box_dir(mbox).join(name)).is_ok_and(|m| m.is_file())
    }

    /// Read a message file; symlinks, FIFOs and devices are refused.
    pub fn read_message(&self, mbox: &Mailbox, name: &str) -> Result<Vec<u8>> {
        let p = self.box_dir(mbox).join(name);
        atomic::read_regular(&p).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::not_found(format!("no message {name} in {mbox}")),
            _ => Error::io("cannot read message", &p, e),
        })
    }

    /// Message file names (`*.md`, not hidden) in a box, sorted (FS_RULES 8).
    pub fn list_box(&self, mbox: &Mailbox) -> Result<Vec<String>> {
        let mut names = list_names(&self.box_dir(mbox))?;
        names.retain(|n| is_message_name(n));
        Ok(names)
    }

    /// Names in a box that are not message files (planted or foreign), for doctor.
    pub fn list_foreign(&self, mbox: &Mailbox) -> Result<Vec<String>> {
        let dir = self.box_dir(mbox);
        let mut names = list_names(&dir)?;
        names.retain(|n| {
            // LOGS/ keeps the event log and doctor's own quarantine folder.
            let keep_log = *mbox == Mailbox::Logs
                && (n == "events.jsonl"
                    || n == "quarantine"
                        && std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir()));
            let regular = std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_file());
            !(keep_log || is_message_name(n) && regular)
        });
        Ok(names)
    }

    // ---- task records ----------------------------------------------------------------

    fn record_path(&self, task: &str, kind: &str) -> PathBuf {
        self.root.join("TASKS").join(format!("{task}.{kind}"))
    }

    /// Read `TASKS/<task>.<kind>`; `None` when it does not exist.
    pub fn read_record(&self, task: &str, kind: &str) -> Result<Option<String>> {
        let p = self.record_path(task, kind);
        match atomic::read_regular(&p) {
            Ok(b) => String::from_utf8(b).map(Some).map_err(|_| {
                Error::internal(format!("{} is not UTF-8", p.display())).hint("run `circe doctor`")
            }),
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
    pub fn write_records(&self, task: &str, records: &[(&str, Option<&str>)]) -> Result<()> {
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

    /// Task ids that have a `.status` record, sorted.
    pub fn list_tasks(&self) -> Result<Vec<String>> {
        let mut ids: Vec<String> = list_names(&self.root.join("TASKS"))?
            .into_iter()
            .filter_map(|n| n.strip_suffix(".status").map(str::to_string))
            .collect();
        ids.sort();
        Ok(ids)
    }

    // ---- locks -------------------------------------------------------------------------

    /// The lock that serialises every change to one task's records and message.
    pub fn lock_task(&self, task: &str) -> Result<Lock> {
        Lock::acquire(
            &self.root.join("locks").join(format!("task-{task}.lock")),
            &format!("task {task}"),
        )
    }

    /// The task's lock if no other process holds it right now (`claim --next` skips a
    /// task another claimer is busy with instead of queueing behind it).
    pub fn try_lock_task(&self, task: &str) -> Result<Option<Lock>> {
        Lock::try_acquire(&self.root.join("locks").join(format!("task-{task}.lock")))
    }

    /// A named lock for root-wide work (`queue`, `agents`, `doctor`).
    pub fn lock_named(&self, name: &str) -> Result<Lock> {
        Lock::acquire(&self.root.join("locks").join(format!("{name}.lock")), name)
    }

    /// A named lock in shared mode (many holders, excluded only by `lock_named`).
    pub fn lock_named_shared(&self, name: &str) -> Result<Lock> {
        Lock::acquire_shared(&self.root.join("locks").join(format!("{name}.lock")), name)
    }

    // ---- event log ------------------------------------------------------------------------

    /// Append one JSON line (without the newline) to LOGS/events.jsonl.
    pub fn append_event(&self, json: &str) -> Result<()> {
        let p = self.root.join(EVENTS);
        let mut line = Vec::with_capacity(json.len() + 1);
        line.extend_from_slice(json.as_bytes());
        line.push(b'\n');
        atomic::append_line(&p, &line, self.sync).map_err(io_err("cannot append to", &p))
    }

    /// The whole event log ("" when none yet).
    pub fn read_events(&self) -> Result<String> {
        let p = self.root.join(EVENTS);
        match atomic::read_regular(&p) {
            Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    // ---- queue lanes (claim --next index) ---------------------------------------------------

    /// Append lines to lane `lane` (a file under queue/). Derived data: not synced.
    pub fn lane_append(&self, lane: &str, lines: &str) -> Result<()> {
        let p = self.root.join("queue").join(format!("{lane}.lane"));
        atomic::append_line(&p, lines.as_bytes(), false).map_err(io_err("cannot append to", &p))
    }

    /// Append to a derived file under queue/ (the board log). Not synced: rebuildable.
    pub fn queue_append(&self, name: &str, text: &str) -> Result<()> {
        let p = self.root.join("queue").join(name);
        atomic::append_line(&p, text.as_bytes(), false).map_err(io_err("cannot append to", &p))
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
        let mut f = match std::fs::File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(String::new()),
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
        let mut buf = [0u8; 32];
        let n = std::fs::File::open(p).and_then(|mut f| std::io::Read::read(&mut f, &mut buf));
        n.ok()
            .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Move a lane's head: one fixed-width `pwrite` over the old value, in place (derived
    /// and only written under the queue lock, so no temp file, rename or fsync). A head
    /// that is lost or stale only makes the next scan re-read entries it then skips.
    pub fn set_lane_head(&self, lane: &str, offset: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let p = self.root.join("queue").join(format!("{lane}.head"));
        io_step().map_err(io_err("cannot write", &p))?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .map_err(io_err("cannot open", &p))?;
        f.write_all_at(format!("{offset:020}\n").as_bytes(), 0).map_err(io_err("cannot write", &p))
    }

    /// A small derived value file under queue/ (the board); `None` when absent.
    pub fn queue_value(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join("queue").join(name)).ok()
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

    /// Remove every lane and head (before a rebuild).
    pub fn clear_queue(&self) -> Result<()> {
        let dir = self.root.join("queue");
        for n in list_names(&dir)? {
            let p = dir.join(n);
            atomic::remove(&p).map_err(io_err("cannot remove", &p))?;
        }
        Ok(())
    }

    // ---- staging leftovers ---------------------------------------------------------------------

    /// Files left in tmp/ by crashed commands (they never reached a box).
    /// Everything in tmp/ whose creating process is gone. Staging names are
    /// `<kind>-<pid>-…` (`.tmp-`, `.agent-`, `batch-`): a live command's staging is never
    /// touched. (A reused pid only spares a leftover until the next run: the safe side.)
    pub fn tmp_leftovers(&self) -> Result<Vec<String>> {
        let mut out = list_all_names(&self.tmp_dir())?;
        out.retain(|n| {
            let pid = n.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
            pid.is_none_or(|p| {
                p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()
            })
        });
        Ok(out)
    }

    pub fn remove_leftover(&self, name: &str) -> Result<()> {
        let p = self.tmp_dir().join(name);
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { atomic::remove(&p) };
        r.map_err(io_err("cannot remove", &p))
    }

    /// Move a foreign or planted file out of a box into `LOGS/quarantine/` (never follows it).
    pub fn quarantine(&self, mbox: &Mailbox, name: &str) -> Result<String> {
        self.quarantine_from(&self.box_dir(mbox).join(name), &mbox.label().replace(':', "-"), name)
    }

    /// Entries of TASKS/ that are not regular files named `<task id>.status|owner|checks`
    /// (planted links, FIFOs, folders, strays).
    pub fn task_strays(&self) -> Result<Vec<String>> {
        let dir = self.root.join("TASKS");
        let mut out = list_all_names(&dir)?;
        out.retain(|n| {
            let regular = std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_file());
            let named = n.rsplit_once('.').is_some_and(|(id, kind)| {
                matches!(kind, "status" | "owner" | "checks")
                    && crate::names::check_task_id(id).is_ok()
            });
            !(regular && named)
        });
        Ok(out)
    }

    /// Move a stray out of TASKS/ into `LOGS/quarantine/` (never follows it).
    pub fn quarantine_task_file(&self, name: &str) -> Result<String> {
        self.quarantine_from(&self.root.join("TASKS").join(name), "tasks", name)
    }

    fn quarantine_from(&self, src: &Path, label: &str, name: &str) -> Result<String> {
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

/// Sorted names in a folder, hidden ones included (empty when it does not exist).
fn list_all_names(dir: &Path) -> Result<Vec<String>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("cannot list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(io_err("cannot list", dir))?;
        if let Some(n) = entry.file_name().to_str() {
            names.push(n.to_string());
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// Sorted names in a folder without hidden ones (empty when the folder does not exist).
fn list_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = list_all_names(dir)?;
    names.retain(|n| !n.starts_with('.'));
    Ok(names)
}

/// Message files are `*.md` (lowercase, as circe writes them).
fn is_message_name(n: &str) -> bool {
    std::path::Path::new(n).extension().is_some_and(|e| e == "md")
}
