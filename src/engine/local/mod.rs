//! The local engine: a root kept in a `.circe/` folder. The only code that touches the
//! filesystem (clippy.toml bans `std::fs` everywhere else).
//!
//! Every change is atomic (temp file, fsync, no-clobber rename, fsync the folder), following
//! shared/FS_RULES.md. Layout (PROTOCOLS.md section 1):
//!
//! ```text
//! .circe/circe.yaml                 configuration
//! .circe/NEW_MESSAGES/              task messages waiting to be claimed
//! .circe/AGENTS/<a>/agent.yaml      the agent's role
//! .circe/AGENTS/<a>/INBOX/          messages for the agent
//! .circe/AGENTS/<a>/WORKSPACE/      messages the agent is working on
//! .circe/LOGS/                      handled messages, events.jsonl and its rotated segments
//! .circe/TASKS/<id>.status|.owner|.checks
//! .circe/queue/                     claim --next lanes and the board (derived, rebuildable)
//! .circe/locks/                     lock files (never renamed; a task's removed by its holder)
//! .circe/tmp/                       staging (same filesystem, never watched)
//! ```
//!
//! Inside: `Store` (root.rs and the files named after what they touch) does the file work;
//! `tx` is the task transaction (the task's flock, reconciliation, commits); `lanes` and
//! `board` are the derived indexes; `event_log` the log with its ids and segments.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the local engine is the one layer that touches the filesystem"
)]

mod archive;
mod archive_buckets;
mod archive_build;
mod archive_commit;
mod archive_doctor;
mod archive_scan;
mod archive_segment;
mod archive_store;
mod archive_unlink;
mod atomic;
mod board;
mod chat_archive;
mod chat_copy;
mod chat_file;
mod cursor_file;
mod digests;
mod dir_stamp;
mod doctor;
mod event_log;
mod files;
mod folders;
mod journal;
mod lanes;
mod lock;
mod messages;
mod mirror;
mod outbox;
mod queue_files;
mod reconcile;
mod records;
mod repair;
mod requests;
pub mod retire;
mod root;
mod seen_file;
mod seq_chat;
mod seq_send;
mod seq_store;
mod task_journal;
#[cfg(test)]
mod testing;
mod tx;
mod tx_records;
pub mod watch;

use std::collections::HashSet;

pub use archive_store::write_restored;
pub use chat_archive::ArchiveIds;
pub use chat_copy::{chat_copy, place_channel};
pub use chat_file::{Appended, ChatFile, ChatReader, FileId, remote_fs_at};
pub use files::{
    ScratchDir, boot_id, copy_tree, folder_can_be, host_name, is_folder, read_input_file,
    read_input_file_capped, read_small_file, read_stdin_capped, resolved, special_file,
};
pub use folders::{Written, read_message_dir, replace_own_file, write_new_file};
pub use lock::Lock;
pub use mirror::{MARKER as MIRROR_MARKER, MirrorOf, Synced, sync as write_tree};
pub use root::{find_root, git_copy, init_finds, lost_worktree, main_worktree, root_at};

use self::root::Store;
use super::{
    Capped, CursorHold, Engine, EventFeed, Parcel, RootSpec, SeqHold, Settings, TaskTx, Violation,
};
use crate::boxes::Mailbox;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};
use crate::names::{AgentName, CursorName, MsgId, TaskId};
use crate::seq::{Counter, Receiver};
use crate::task::{Eligibility, Row, TaskState};
use crate::tx::AskRecord;

/// A root in a folder.
pub struct LocalEngine {
    store: Store,
    settings: Settings,
    /// The root's registry, for a hand move the engine rolls forward: a message moved into
    /// an agent's box is that agent's claim only when it may take the task.
    registry: crate::registry::Registry,
    /// The tasks the last board scan passed over: their `.status` does not parse, or was
    /// removed by hand.
    passed_over: std::sync::Mutex<Vec<crate::engine::PassedOver>>,
}

/// What a root folder holds: a local root, or a circe.yaml naming another engine.
pub enum Opened {
    Local(Box<dyn Engine>, Config),
    Pointer(crate::engine::postgres::Target),
}

/// A root that a `circe migrate` cut off left renamed aside (`<root>.moving`) where one of
/// `candidates` should be: said, with the way back, rather than offering a new root.
fn moving_root(candidates: &[std::path::PathBuf]) -> Option<Error> {
    let staged = candidates.iter().find_map(|c| {
        let mut s = c.as_os_str().to_owned();
        s.push(".moving");
        let s = std::path::PathBuf::from(s);
        s.join(root::CONFIG_FILE).is_file().then_some((c.clone(), s))
    })?;
    let (root, moving) = staged;
    if retire::under_way(&moving) {
        return Some(
            Error::conflict(format!(
                "the root {} is being moved into a database by `circe migrate` right now",
                root.display()
            ))
            .transient()
            .hint("wait for the move to end, then run the command again: it finds the root where the move left it"),
        );
    }
    Some(
        Error::usage(format!(
            "the root {} was being moved into a database by `circe migrate`, which was cut off: it lies in {}",
            root.display(),
            moving.display()
        ))
        .hint(format!(
            "if the database holds it now (`circe --root URL tasks` shows its tasks), the team works there (CIRCE_ROOT=URL) and {} is an old copy to keep aside, not to use; otherwise rename it back: `mv {} {}`. Do not run `circe init`: that makes an empty second root",
            moving.display(),
            moving.display(),
            root.display()
        )),
    )
}

/// The root folder `spec` names (a folder holding circe.yaml).
pub fn locate(spec: &RootSpec) -> Result<std::path::PathBuf> {
    Ok(match spec {
        RootSpec::Path(p) => root_at(p).ok_or_else(|| {
            moving_root(&[p.clone(), p.join(root::ROOT_DIR)]).unwrap_or_else(|| {
                let e = Error::usage(format!(
                    "{} is not a circe root (no circe.yaml in it or in its .circe/)",
                    p.display()
                ));
                // A URL of another scheme (`pg://`) is read as a folder's name: said so.
                match p.to_str().and_then(|s| s.split_once("://")) {
                    Some((scheme, _)) => e.hint(format!(
                        "`{scheme}://` is no URL circe reads: a database root's URL starts with postgres:// or postgresql://"
                    )),
                    None => e.hint("check --root / CIRCE_ROOT; `circe init DIR` makes a new root"),
                }
            })
        })?,
        RootSpec::Search => {
            let cwd = std::env::current_dir().map_err(|e| Error::io("cannot read", ".", e))?;
            find_root(&cwd).ok_or_else(|| {
                let here: Vec<_> = cwd.ancestors().map(|d| d.join(root::ROOT_DIR)).collect();
                moving_root(&here).or_else(|| root::lost_worktree(&cwd)).unwrap_or_else(|| {
                    Error::usage("not inside a circe root (no .circe/circe.yaml here or above)").hint(
                        "pass --root DIR or set CIRCE_ROOT to the team's root; `circe init` makes a new one",
                    )
                })
            })?
        }
        RootSpec::Url(u) => {
            return Err(Error::usage(format!("{u} is a database, not a folder")));
        }
    })
}

/// Open the root `spec` names, with its configuration.
pub fn open(spec: &RootSpec, durability: Option<crate::config::Durability>) -> Result<Opened> {
    let root = locate(spec)?;
    let (config, registry) = root::config_at(&root)?;
    if let Some(e) = &config.engine {
        return Ok(Opened::Pointer(crate::engine::postgres::Target::from_config(e)?));
    }
    let store = Store::open(&root)?;
    let store = store.with_durability(durability.map_or_else(|| config.durability(), Ok)?);
    let settings = Settings {
        lease: config.lease(),
        max_attempts: config.max_attempts,
        limits: config.limits,
    };
    Ok(Opened::Local(
        Box::new(LocalEngine {
            store,
            settings,
            registry,
            passed_over: std::sync::Mutex::default(),
        }),
        config,
    ))
}

/// The local engine of the root folder `root` (a folder holding circe.yaml and the boxes).
pub fn open_at(root: &std::path::Path) -> Result<(LocalEngine, Config)> {
    let (config, registry) = root::config_at(root)?;
    let store = Store::open(root)?.with_durability(config.durability()?);
    let settings = Settings {
        lease: config.lease(),
        max_attempts: config.max_attempts,
        limits: config.limits,
    };
    let eng = LocalEngine { store, settings, registry, passed_over: std::sync::Mutex::default() };
    Ok((eng, config))
}

/// circe's own folders (`tmp/`, `locks/`, `queue/`) absent from the folder root `spec`
/// names when it lacks nothing else: the root and which. `None` when it lacks none of them,
/// or is no such root (a database, a folder pointing at one, a mirror, a copy git made, a
/// root that lacks a box too, or has a file or a link where one of them belongs): the error
/// opening it gives then stands.
pub fn own_folders_missing(spec: &RootSpec) -> Option<(std::path::PathBuf, Vec<&'static str>)> {
    if matches!(spec, RootSpec::Url(_)) {
        return None;
    }
    let root = locate(spec).ok()?;
    let missing = root::own_missing(&root)?;
    if root.join(mirror::MARKER).exists() || root::git_copy(&root).is_err() {
        return None;
    }
    Some((root, missing))
}

/// Make again circe's own folders `which` (`own_folders_missing`) in the root folder
/// `root`, as `init` makes them, with the root-wide locks a report takes; a `queue/` made
/// again gets its `--next` lanes rebuilt from the records (the board log is rebuilt when
/// first read).
pub fn make_own_folders(root: &std::path::Path, which: &[&str]) -> Result<()> {
    for b in which {
        let p = root.join(b);
        match std::fs::create_dir(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(Error::io("cannot create", &p, e));
            }
            _ => {}
        }
    }
    let store = Store::open(root)?;
    drop(store.lock_named("queue")?);
    drop(store.lock_named_shared(board::LOCK)?);
    if which.contains(&"queue") {
        lanes::rebuild(&store)?;
    }
    store.sync_dir(root)
}

/// `circe config --set` on a folder root whose circe.yaml keeps it from opening (it does not
/// parse, or its registry is refused: `root::config_at`): write `text`, checked already, in
/// its place. `None` when the root's circe.yaml passes, or the folder lacks boxes (a pointer
/// at a database has none; a damaged root some): nothing is written, and the caller's
/// error stands (its hint tells the two apart: `root::config_at`).
pub fn replace_broken_config(spec: &RootSpec, text: &str) -> Result<Option<std::path::PathBuf>> {
    let root = locate(spec)?;
    // A root that opens, or a folder without all its boxes: a pointer at a database, mended
    // by hand, or a damaged root, whose file is mended before `init` adds what it lacks.
    if root::config_at(&root).is_ok() || !root::missing_boxes(&root).is_empty() {
        return Ok(None);
    }
    if let Some(chat) = Config::parse(text)?.chat.path.as_deref() {
        crate::chat::path_fits(&root, chat)?;
    }
    Store::open(&root)?.write_config(text)?;
    Ok(Some(root))
}

/// The text of the circe.yaml of the root `spec` names, as it is (unparsed: `circe config`
/// prints a broken one for mending), and whether `replace_broken_config` may replace it
/// (`false`: a folder without a root's boxes, such as one pointing at a database, whose
/// file is mended by hand); `None` when no root is found there or the file cannot be read
/// (the opening's own error says why).
pub fn stored_config(spec: &RootSpec) -> Option<(String, bool)> {
    let root = locate(spec).ok()?;
    let text = std::fs::read_to_string(root.join(root::CONFIG_FILE)).ok()?;
    Some((text, root::missing_boxes(&root).is_empty()))
}

/// Write `dir/.circe/circe.yaml` naming another engine (no boxes: the root is elsewhere),
/// unless a circe.yaml is there already. Returns the file's folder and whether it was written.
pub fn init_pointer(dir: &std::path::Path, text: &str) -> Result<(std::path::PathBuf, bool)> {
    root::write_pointer(dir, text)
}

/// Point the folder `dir/.circe`, whose circe.yaml names the database root `names` (its
/// `Target::identity`), at the same root by another URL: its circe.yaml replaced with
/// `text` (atomically); `false` when it names another meanwhile (nothing is written).
pub fn repoint(dir: &std::path::Path, names: &str, text: &str) -> Result<bool> {
    root::rewrite_pointer(dir, names, text)
}

/// Make `dir/.circe` with the boxes and `config` as circe.yaml unless one exists. Returns
/// the root's path and whether circe.yaml was written.
pub fn init(dir: &std::path::Path, config: &str) -> Result<(std::path::PathBuf, bool)> {
    let (store, written) = Store::init(dir, config)?;
    Ok((store.root().to_path_buf(), written))
}

/// The folders missing from the root at `dir/.circe` when it is one (its circe.yaml is
/// there): what `init` makes again (a new root's folders are made, not made again).
pub fn root_boxes_missing(dir: &std::path::Path) -> Vec<&'static str> {
    let root = dir.join(root::ROOT_DIR);
    if !root.join(root::CONFIG_FILE).is_file() {
        return Vec::new();
    }
    root::missing_boxes(&root)
}

/// Make again the agents' boxes missing from the root at `root` (`circe init` on a root
/// that exists); returns them. An agent folder that is a link or a file is refused before
/// anything is made: nothing is made through it.
pub fn remake_agent_boxes(root: &std::path::Path) -> Result<Vec<String>> {
    let store = Store::open(root)?;
    if let Some(f) = store.missing_agent_boxes(false)?.into_iter().find(|f| f.agent_folder) {
        return Err(Error::refused(format!(
            "{} in the circe root {} is {}, not a folder: circe makes no box through it",
            f.path,
            root.display(),
            f.stands.as_deref().unwrap_or("missing")
        ))
        .hint("put the agent's folder itself there (move the folder the link names in its place), then run `circe init` again"));
    }
    let made = store.missing_agent_boxes(true)?;
    Ok(made
        .into_iter()
        .map(|f| match f.stands {
            Some(s) => format!("{} ({s} that stood there moved to LOGS/quarantine/)", f.path),
            None => f.path,
        })
        .collect())
}

/// Woken by inotify on `LOGS/` (or a timer): any change there is a reason to read again.
struct LocalFeed {
    waker: watch::Waker,
}

impl EventFeed for LocalFeed {
    fn wait(&mut self, timeout: Option<std::time::Duration>) -> Result<bool> {
        Ok(self.waker.wait(timeout)? == watch::Wake::Woke)
    }
}

impl LocalEngine {
    /// May `agent` hold `rec`'s task, by the registry and the task's address? A message
    /// moved by hand into its box is its claim only then (the registry fails closed: an
    /// agent with no role may not).
    pub(super) fn may_hold(&self, agent: &AgentName, rec: &crate::task::StatusRecord) -> bool {
        let Ok(Some(role)) = self.store.read_agent(agent) else { return false };
        let now = crate::clock::now();
        crate::task::Eligibility::of(&self.registry, agent, &role, now).admits(&rec.to, &rec.intent)
    }

    fn lock_task(&self, task: &TaskId) -> Result<lock::Lock> {
        self.store.lock_task(task)
    }

    /// The best held task `who` may take over whose lock is free right now (one whose lock
    /// is held is being changed: its owner's heartbeat, say).
    fn lapsed(
        &self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<(TaskId, lock::Lock)>> {
        for task in self.lapsed_leases(who, skip)? {
            if let Some(lock) = self.store.try_lock_task(&task)? {
                return Ok(Some((task, lock)));
            }
        }
        self.own_cut_off(who, skip)
    }

    /// A task whose message lies in `who`'s INBOX and whose lock file keeps the journal of
    /// a change cut off (its claim, killed after its records and before its events): its
    /// transaction finishes that change first, and the claim then answers that the agent
    /// holds it already, so the claimer learns what its cut-off claim took.
    fn own_cut_off(
        &self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<(TaskId, lock::Lock)>> {
        let inbox = Mailbox::Inbox(who.agent.clone());
        let Ok(names) = self.store.list_box(&inbox) else { return Ok(None) };
        let mut seen = HashSet::new();
        for name in names {
            let Some(task) = crate::message::parse_file_name(&name)
                .and_then(|f| f.task_id)
                .and_then(|t| TaskId::new(t).ok())
            else {
                continue;
            };
            if skip.contains(&task) || !seen.insert(task.clone()) {
                continue;
            }
            if let lock::Tried::Got(lock) = self.store.try_lock_task_existing(&task)?
                && Store::journal_left(&lock)
            {
                return Ok(Some((task, lock)));
            }
        }
        Ok(None)
    }
}

impl Engine for LocalEngine {
    fn location(&self) -> String {
        self.store.root().display().to_string()
    }

    fn identity(&self) -> String {
        std::fs::canonicalize(self.store.root())
            .map_or_else(|_| self.location(), |p| p.display().to_string())
    }

    fn agents(&self) -> Result<Vec<(AgentName, String)>> {
        self.store.list_agents()
    }

    fn agent_role(&self, name: &AgentName) -> Result<Option<String>> {
        self.store.read_agent(name)
    }

    fn retired_now(&self, agent: &AgentName) -> Result<Option<bool>> {
        self.store.agent_retired(agent).map(Some)
    }

    fn add_agent(&self, name: &AgentName, role: &str) -> Result<bool> {
        self.store.create_agent(name, role)
    }

    fn begin<'a>(&'a self, task: &TaskId, create: bool) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        // Look before locking: a task that does not exist gets no lock file.
        if !self.store.has_record(task, "status") {
            // Its other records without it, removed by hand: opening the id again would
            // take the place of a live task.
            let left = reconcile::left_without_status(self, task);
            if let Some(kind) = left.filter(|_| self.store.record_gone(task, "status")) {
                return Err(Error::internal(format!(
                    "TASKS/{task}.status is missing while TASKS/{task}.{kind} is there: the task's record was removed by hand"
                ))
                .hint(format!(
                    "put TASKS/{task}.status back from a backup (`circe log --task {task}` lists its last status, owner and epoch); `circe doctor` says where its message is"
                )));
            }
            if !create {
                return Ok(None);
            }
        }
        // TEST BUILDS ONLY (CIRCE_TEST_BREAK=begin-slow): a scene, not a fault: a pause
        // between the look and the lock, for an archive run to come between.
        if crate::fault::test_break("begin-slow") {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        let lock = self.lock_task(task)?;
        let tx = tx::LocalTx::begin(self, task.clone(), lock)?;
        // Found gone (archived since the look): dropped, it removes the lock file it made.
        if tx.state().is_none() && !create {
            return Ok(None);
        }
        Ok(Some(Box::new(tx)))
    }

    fn begin_next<'a>(
        &'a self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        // A task whose transaction cannot open (finishing what a cut-off command left on
        // it fails: its outbox's box behind a link, say) is passed over for the next best,
        // so one task's broken box does not stop every claim; its error is the answer only
        // when no other task can be taken (or after a few such tasks: a failing disk).
        let mut passed: Option<(HashSet<TaskId>, Error)> = None;
        loop {
            let skipping = passed.as_ref().map_or(skip, |(s, _)| s);
            let (task, lock) = match lanes::best(self, who, skipping)? {
                Some(c) => {
                    let lock = match c.lock {
                        Some(l) => l,
                        None => self.lock_task(&c.task)?,
                    };
                    (c.task, lock)
                }
                // No task waits: one whose lease ran out, whose lock is free.
                None => match self.lapsed(who, skipping)? {
                    Some(found) => found,
                    None => return passed.map_or(Ok(None), |(_, e)| Err(e)),
                },
            };
            match tx::LocalTx::begin(self, task.clone(), lock) {
                Ok(t) => return Ok(Some(Box::new(t))),
                Err(e) => {
                    let (mut s, first) = passed.take().unwrap_or_else(|| (skip.clone(), e));
                    s.insert(task);
                    if s.len() > skip.len() + 3 {
                        return Err(first);
                    }
                    passed = Some((s, first));
                }
            }
        }
    }

    fn task_ids(&self) -> Result<Vec<TaskId>> {
        self.store.list_tasks()
    }

    fn board(&self, each: &mut dyn FnMut(Row<'_>) -> Result<()>) -> Result<()> {
        let mut passed = Vec::new();
        let r = board::rows(self, &mut passed, each);
        *self.passed_over.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = passed;
        r
    }

    fn passed_over(&self) -> Vec<crate::engine::PassedOver> {
        self.passed_over.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn peek(&self, task: &TaskId) -> Result<Option<TaskState>> {
        reconcile::load(self, task)
    }

    fn deliver(&self, content: &[u8], name: &str, to: &[Mailbox]) -> Result<Vec<String>> {
        let numbered = |n: u32| crate::message::numbered(name, n);
        let targets: Vec<(Mailbox, &dyn Fn(u32) -> String)> =
            to.iter().map(|b| (b.clone(), &numbered as &dyn Fn(u32) -> String)).collect();
        self.store.put_messages(&targets, content)
    }

    fn deliver_batch(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>> {
        let names: Vec<Box<dyn Fn(u32) -> String + '_>> = parcels
            .iter()
            .map(|p| {
                Box::new(move |n: u32| crate::message::numbered(&p.name, n))
                    as Box<dyn Fn(u32) -> String>
            })
            .collect();
        let mut each: Vec<messages::Copy<'_>> = Vec::new();
        for (p, name) in parcels.iter().zip(&names) {
            for b in &p.to {
                each.push((b.clone(), name.as_ref(), &p.content));
            }
        }
        let mut flat = self.store.put_each(&each)?.into_iter();
        Ok(parcels.iter().map(|p| flat.by_ref().take(p.to.len()).collect()).collect())
    }

    fn finish_deliveries(&self, _held: Option<&str>) -> Result<usize> {
        if crate::fault::test_break("no-finish") {
            return Ok(0);
        }
        let mut n = 0;
        for name in self.store.tmp_leftovers()? {
            // Best effort: another command (or doctor) may be landing the same batch.
            if name.starts_with("batch-")
                && !name.contains(".part")
                && self.store.finish_batch(&name).is_ok()
            {
                n += 1;
            }
        }
        // Numbered sends a crash left half-way: finished, or undone when nothing arrived.
        if !crate::fault::test_break("seq-roll-forward") {
            let unlogged = self.store.seq_doctor(true, &mut |_, _, fix| {
                if fix == crate::engine::Fix::Done {
                    n += 1;
                }
            })?;
            // Settled, not logged: said, as before the settles logged their own events.
            if let Some(e) = unlogged.into_iter().next() {
                return Err(e);
            }
        }
        // The events of deliveries whose commands were cut off before they logged them (one
        // whose copies are still staged waits for them).
        let settled = self.store.settle_journals(None)?;
        n += settled.iter().filter(|(_, s)| matches!(s, journal::Settled::Logged(_))).count();
        Ok(n)
    }

    fn log_cut_off_events(&self) -> Result<usize> {
        if crate::fault::test_break("no-finish") {
            return Ok(0);
        }
        let settled = self.store.settle_journals(None)?;
        Ok(settled.iter().filter(|(_, s)| matches!(s, journal::Settled::Logged(_))).count())
    }

    fn journal_events(&self, msg_id: &str, events: &[Event]) -> Result<Option<String>> {
        self.store.journal_events(msg_id, events).map(Some)
    }

    fn journal_move(
        &self,
        msg_id: &str,
        from: &Mailbox,
        file: &str,
        event: &Event,
    ) -> Result<Option<String>> {
        self.store.journal_move(msg_id, from, file, event).map(Some)
    }

    fn close_journal(&self, journal: &str, logged: bool) -> Result<bool> {
        if logged {
            // Delivered and logged: a journal that cannot be removed is left for doctor (which
            // finds its events logged), not said as a failed send.
            let _ = self.store.drop_journal(journal);
            return Ok(true);
        }
        let settled = self.store.settle_journal(journal)?;
        Ok(settled != journal::Settled::NotDelivered)
    }

    fn move_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<bool> {
        self.store.move_message(from, to, file)
    }

    fn file_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<Option<String>> {
        self.store.file_message(from, to, file)
    }

    fn ask(&self, id: &MsgId) -> Result<Option<AskRecord>> {
        self.store.read_ask(id)
    }

    fn asks(&self) -> Result<Vec<AskRecord>> {
        self.store.list_asks()
    }

    fn put_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        self.store.put_ask(rec, seen)
    }

    fn hold_ask(&self, id: &MsgId, wait: bool) -> Result<Option<super::Held<'_>>> {
        Ok(self.store.lock_answer(id, wait)?.map(|l| Box::new(l) as super::Held<'_>))
    }

    fn hold_msg_id(&self, id: &str) -> Result<super::Held<'_>> {
        Ok(Box::new(self.store.lock_msg_id(id)?))
    }

    fn hold_import(&self) -> Result<Option<super::Held<'_>>> {
        Ok(self.store.lock_import()?.map(|l| Box::new(l) as super::Held<'_>))
    }

    fn hold_filing(&self) -> Result<super::Held<'_>> {
        Ok(Box::new(self.store.lock_filing()?))
    }

    fn set_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        self.store.write_prompt(agent, message)
    }

    fn prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>> {
        self.store.read_prompt(agent)
    }

    fn retire_agent(&self, agent: &AgentName, at: &str) -> Result<bool> {
        self.store.retire_agent(agent, at)
    }

    fn retirements(&self) -> Result<Vec<(AgentName, String)>> {
        self.store.retired_agents()
    }

    fn list_box(&self, mailbox: &Mailbox) -> Result<Vec<String>> {
        self.store.list_box(mailbox)
    }

    fn check_box(&self, mailbox: &Mailbox, doing: &str) -> Result<()> {
        self.store.check_box(mailbox, doing)
    }

    fn read_message(&self, mailbox: &Mailbox, file: &str) -> Result<Vec<u8>> {
        self.store.read_message(mailbox, file)
    }

    fn read_message_capped(&self, mailbox: &Mailbox, file: &str, cap: usize) -> Result<Capped> {
        self.store.read_message_capped(mailbox, file, cap)
    }

    fn box_digests(
        &self,
        mailbox: &Mailbox,
        cap: usize,
        kind: &str,
        digest: &mut dyn FnMut(&str, Result<Capped>) -> Option<crate::engine::Digest>,
    ) -> Result<Vec<(String, Option<crate::engine::Digest>)>> {
        digests::box_digests(&self.store, mailbox, cap, kind, digest)
    }

    fn remembers_digests(&self) -> bool {
        true
    }

    fn append_events(&self, mut events: Vec<Event>) -> Result<Vec<Event>> {
        // A command logs what it did after doing it: a failure here leaves its change made.
        event_log::append(&self.store, &mut events).map_err(crate::error::Error::committed)?;
        Ok(events)
    }

    fn read_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        event_log::read(&self.store, from, max)
    }

    fn task_events(&self, task: &TaskId, from: Cursor) -> Result<Vec<Event>> {
        // A line of the task names its id in quotes (ids need no escaping); only such lines
        // are parsed, which saves most of the read of a long log.
        let quoted = crate::engine::names_task(task);
        let names = |l: &str| l.contains(&quoted);
        let found = event_log::read_where(&self.store, from, usize::MAX, &names)?;
        Ok(found.into_iter().filter(|e| e.task.as_ref() == Some(task)).collect())
    }

    fn last_event_id(&self) -> Result<u64> {
        event_log::last_id(&self.store)
    }

    fn read_events_back(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
        event_log::read_back(&self.store, before, max)
    }

    fn read_events_back_naming(
        &self,
        before: Option<u64>,
        max: usize,
        naming: &[String],
    ) -> Result<Vec<Event>> {
        if naming.is_empty() {
            return event_log::read_back(&self.store, before, max);
        }
        let keep = |l: &str| naming.iter().any(|n| l.contains(n.as_str()));
        event_log::read_back_where(&self.store, before, max, &keep)
    }

    fn subscribe(&self, poll: Option<std::time::Duration>) -> Result<Box<dyn EventFeed + '_>> {
        let waker = match poll {
            Some(every) => watch::Waker::polling(every),
            // The log's folder: appends to events.jsonl and its rotation both show there.
            None => watch::Waker::watch(&self.store.root().join("LOGS"), None)?,
        };
        Ok(Box::new(LocalFeed { waker }))
    }

    fn rotate_events(&self) -> Result<Option<String>> {
        event_log::rotate(&self.store)
    }

    fn local_folder(&self) -> Option<std::path::PathBuf> {
        Some(self.store.root().to_path_buf())
    }

    fn chat_log(&self) -> Option<&dyn crate::engine::ChatLog> {
        // The channel is a file beside the root (`chat::channel`): people append by hand.
        None
    }

    fn hold_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>> {
        Ok(self.store.try_lock_cursor(kind, name)?.map(|l| Box::new(l) as CursorHold))
    }

    fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        self.store.read_cursor(kind, name)
    }

    fn write_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()> {
        self.store.write_cursor(kind, name, value)
    }

    fn cursors(&self) -> Result<Vec<(String, CursorName)>> {
        self.store.list_cursors()
    }

    fn remove_cursor(&self, kind: &str, name: &CursorName) -> Result<bool> {
        self.store.remove_cursor(kind, name)
    }

    fn dead_letter(&self, consumer: &CursorName, event: &Event) -> Result<()> {
        self.store.append_dead_letter(consumer, &event.to_line())
    }

    fn dead_letters(&self, consumer: &CursorName) -> Result<Vec<Event>> {
        let text = self.store.read_dead_letters(consumer)?;
        Ok(text
            .lines()
            .filter_map(|l| match crate::event::parse_line(l) {
                Ok(crate::event::Line::Event(e)) => Some(*e),
                _ => None,
            })
            .collect())
    }

    fn dead_letter_consumers(&self) -> Result<Vec<CursorName>> {
        self.store.dead_letter_consumers()
    }

    fn message_path(&self, mailbox: &Mailbox, file: &str) -> Option<std::path::PathBuf> {
        Some(self.store.message_path(mailbox, file))
    }

    fn seq_hold(&self, sender: &AgentName) -> Result<Box<dyn SeqHold + '_>> {
        Ok(Box::new(self.store.seq_hold(sender)?))
    }

    fn seq_update(
        &self,
        sender: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        self.store.seq_update(sender, change)
    }

    fn seq_counters(&self) -> Result<Vec<(AgentName, Counter)>> {
        self.store.seq_counters()
    }

    fn seq_seen(&self, agent: &AgentName) -> Result<Receiver> {
        self.store.read_seen(agent)
    }

    fn seq_see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        self.store.see(agent, change)
    }

    fn seq_receivers(&self) -> Result<Vec<(AgentName, Receiver)>> {
        self.store.receivers()
    }

    fn snapshot(&self) -> Result<crate::engine::Snapshot> {
        crate::engine::Snapshot::read(self)
    }

    fn config_text(&self) -> Result<String> {
        self.store.read_config()
    }

    fn set_config(&self, text: &str) -> Result<()> {
        self.store.write_config(text)
    }

    fn damaged_agents(&self) -> Result<Vec<AgentName>> {
        self.store.damaged_agents()
    }

    fn granted(&self, agent: &AgentName, request: &str) -> Result<Option<(TaskId, u64)>> {
        requests::find(&self.store, agent, request)
    }

    fn doctor(&self, repair: bool) -> Result<Vec<Violation>> {
        doctor::run(self, repair)
    }

    fn archive(
        &self,
        req: &crate::archive::Request,
        progress: &mut dyn FnMut(crate::archive::Progress),
    ) -> Result<crate::archive::Report> {
        archive::run(self, req, progress)
    }

    fn archived_task(&self, task: &TaskId) -> Result<Option<crate::archive::Tombstone>> {
        self.store.tombstone(task)
    }

    fn archived_bundle(&self, task: &TaskId) -> Result<Option<crate::archive::Bundle>> {
        self.store.bundle(task)
    }

    fn archived_tasks(&self) -> Result<Vec<crate::archive::Tombstone>> {
        let dir = self.store.archive_dir().join("tombstones");
        if !dir.is_dir() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for name in root::list_names(&dir)? {
            // A name that is no task id is no tombstone circe wrote (doctor looks at them).
            let Ok(task) = TaskId::new(&name) else { continue };
            out.extend(self.store.tombstone(&task)?);
        }
        out.sort_by(|a, b| a.task.cmp(&b.task));
        Ok(out)
    }

    fn archived_member(&self, hit: &crate::archive::Hit) -> Result<Option<Vec<u8>>> {
        self.store.member(hit)
    }

    fn archived_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        self.store.archived_events(from, max)
    }

    fn archived_messages(
        &self,
        each: &mut dyn FnMut(&crate::archive::Entry, Vec<u8>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.store.messages(each)
    }

    fn keeps_archive(&self) -> bool {
        true
    }

    fn archive_search(
        &self,
        q: &crate::archive::query::Query,
        each: &mut dyn FnMut(crate::archive::Hit) -> Result<bool>,
    ) -> Result<Vec<String>> {
        self.store.search(q, each)
    }

    fn archive_verify(&self) -> Result<Vec<(String, Option<String>)>> {
        Ok(archive_commit::verify_all(self)?
            .into_iter()
            .map(|(s, r)| (s, r.err().map(|e| e.chain())))
            .collect())
    }
}
