//! The engine seam: everything circe's domain code asks of the place a root is kept.
//!
//! Domain code (tasks, boxes, events, the CLI) speaks in tasks, messages, boxes and events
//! through these traits, never in paths, lanes, locks or record files. Two engines implement
//! them: `local` (the `.circe/` folder: renames, flock, fsync; the only code that touches the
//! filesystem) and `memory` (a map in a mutex, which the operation tests run against too, to
//! prove the seam). Each operation is shaped so a database engine can do it in one or two
//! round trips: a task transaction loads the task, the domain decides in Rust what the move
//! changes (`task::effects`), and the engine commits that `Change` if nothing else changed
//! the task meanwhile (the local engine holds the task's lock for the whole transaction; a
//! database would update `WHERE epoch = $seen`).

mod chat_log;
pub mod local;
pub mod memory;
pub mod postgres;
mod snapshot;

pub use chat_log::{
    ChatArchived, ChatEntry, ChatLog, cut as chat_cut, entries_of as chat_entries_of,
    free_name as chat_free_name,
};
pub use snapshot::{ChatCopy, Snapshot};

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::boxes::Mailbox;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};
use crate::names::{AgentName, CursorName, MsgId, TaskId};
use crate::seq::{Counter, Receiver};
use crate::task::{Change, Eligibility, Row, TaskState};
use crate::tx::AskRecord;

/// One message of a batch delivery (`Engine::deliver_batch`): its text, its file name, and
/// the boxes it goes to.
#[derive(Debug, Clone)]
pub struct Parcel {
    pub content: Vec<u8>,
    pub name: String,
    pub to: Vec<Mailbox>,
}

/// What a reader made of a message (`Engine::box_digests`): a JSON text, kept as written.
pub type Digest = Box<serde_json::value::RawValue>;

/// What a capped read got: at most the cap and one byte more, and the size of the whole
/// input when it is known (a file's length; `None` for a stream cut at the cap).
#[derive(Debug, Clone)]
pub struct Capped {
    pub bytes: Vec<u8>,
    pub size: Option<u64>,
}

/// Where a root is: a folder today (`--root`, `CIRCE_ROOT`, or found by walking up), a URL
/// for a remote engine.
#[derive(Debug, Clone)]
pub enum RootSpec {
    /// Search upwards from the current folder for `.circe/circe.yaml`.
    Search,
    /// A folder holding circe.yaml, or holding `.circe/`.
    Path(PathBuf),
    /// A database: `postgres://host/db?schema=team_a`.
    Url(String),
}

impl RootSpec {
    /// What `--root`/`CIRCE_ROOT` names: a URL when it starts with `postgres://` or
    /// `postgresql://`, else a folder.
    pub fn parse(s: &std::ffi::OsStr) -> RootSpec {
        match s.to_str() {
            Some(u) if postgres::is_url(u) => RootSpec::Url(u.to_string()),
            _ => RootSpec::Path(PathBuf::from(s)),
        }
    }
}

/// What the engine needs from the configuration to finish crashed work on its own.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The default lease (a reconciled claim gets it).
    pub lease: Duration,
    pub max_attempts: u32,
    /// The largest message the engine reads whole (doctor's checks).
    pub limits: crate::message::Limits,
}

/// The engine behind a root, and what the root's configuration says. A folder whose
/// circe.yaml names an engine (`engine: {kind: postgres, ...}`) opens that engine.
pub fn open(spec: &RootSpec) -> Result<(Box<dyn Engine>, Config)> {
    open_inner(spec, None)
}

/// `open`, with the durability forced (bulk loading for benchmarks: `Relaxed`).
pub fn open_with(
    spec: &RootSpec,
    durability: crate::config::Durability,
) -> Result<(Box<dyn Engine>, Config)> {
    open_inner(spec, Some(durability))
}

fn open_inner(
    spec: &RootSpec,
    durability: Option<crate::config::Durability>,
) -> Result<(Box<dyn Engine>, Config)> {
    match spec {
        RootSpec::Url(url) => postgres::open(&postgres::Target::from_url(url)?),
        RootSpec::Path(_) | RootSpec::Search => match local::open(spec, durability)? {
            local::Opened::Local(engine, config) => Ok((engine, config)),
            local::Opened::Pointer(target) => postgres::open(&target),
        },
    }
}

/// The root's configuration as stored, unparsed, for a root that did not open: `circe
/// config` prints a broken one for mending. With it, whether `config --set` may replace it
/// (`false`: the file of a folder pointing at a database, mended by hand). `None`: no
/// configuration could be read (the opening's own error says why).
pub fn stored_config(spec: &RootSpec) -> Result<Option<(String, bool)>> {
    let stored =
        |target: &postgres::Target| postgres::stored_config(target).map(|t| Some((t, true)));
    match spec {
        RootSpec::Url(url) => stored(&postgres::Target::from_url(url)?),
        RootSpec::Path(_) | RootSpec::Search => match local::open(spec, None) {
            Ok(local::Opened::Pointer(target)) => stored(&target),
            _ => Ok(local::stored_config(spec)),
        },
    }
}

/// Replace the configuration of a root it keeps from opening (`broken` says so of a
/// text) with `text`: `config --set`'s way out. Returns where it was replaced; `None` when
/// the root's configuration is not what keeps it from opening.
pub fn replace_broken_config(
    spec: &RootSpec,
    text: &str,
    broken: impl Fn(&str) -> bool,
) -> Result<Option<String>> {
    let target = match spec {
        RootSpec::Url(url) => postgres::Target::from_url(url)?,
        RootSpec::Path(_) | RootSpec::Search => {
            if let Ok(local::Opened::Pointer(target)) = local::open(spec, None) {
                target
            } else {
                let replaced = local::replace_broken_config(spec, text)?;
                return Ok(replaced.map(|root| root.display().to_string()));
            }
        }
    };
    Ok(postgres::replace_broken_config(&target, text, broken)?.then(|| target.location()))
}

/// Everything the domain asks of a root.
pub trait Engine {
    /// Where the root is (a path or a URL), for people.
    fn location(&self) -> String;

    /// One name for the root however it was reached (a mirror's marker names it): the
    /// canonical path of a folder, the server, database and schema of a database.
    fn identity(&self) -> String {
        self.location()
    }

    /// The root as `--root` takes it again, with no password (a mirror's marker names it
    /// so): the canonical path of a folder, the URL and schema of a database.
    fn root_to_pass(&self) -> String {
        self.identity()
    }

    // ---- agents --------------------------------------------------------------------

    /// Every agent and its role, sorted by name.
    fn agents(&self) -> Result<Vec<(AgentName, String)>>;
    /// One agent's role; `None` when there is no such agent.
    fn agent_role(&self, name: &AgentName) -> Result<Option<String>>;
    /// Add an agent; `false` (and nothing changed) when it exists already.
    fn add_agent(&self, name: &AgentName, role: &str) -> Result<bool>;

    // ---- tasks ---------------------------------------------------------------------

    /// The transaction on one task: the only way to read a task for a change and the only
    /// way to change it. Finishes first what a crashed command left on it. `None` when the
    /// task does not exist (and then nothing was created for it); `create` opens the
    /// transaction on a task that does not exist yet (opening it).
    fn begin<'a>(&'a self, task: &TaskId, create: bool) -> Result<Option<Box<dyn TaskTx + 'a>>>;

    /// The transaction on the best waiting task `who` may take, skipping `skip` (tasks it
    /// just lost): priority, then deadline (none last), then time waiting. When no task
    /// waits, the transaction on a held task whose lease ran out that `who` may take over
    /// (`lapsed_leases`'s order). `None` when there is neither.
    fn begin_next<'a>(
        &'a self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<Box<dyn TaskTx + 'a>>>;

    /// The held tasks `who` may take over (`Eligibility::may_take_over`) but `skip`, as the
    /// board has them, best first: priority, then the lease that ran out first, then task
    /// id. Candidates for `begin_next` when no task waits: the claim's transaction decides.
    fn lapsed_leases(&self, who: &Eligibility, skip: &HashSet<TaskId>) -> Result<Vec<TaskId>> {
        let mut found = Vec::new();
        self.board(&mut |row| {
            if who.may_take_over(&row) && !skip.contains(row.task.as_ref()) {
                let rank = crate::message::Priority::parse(&row.priority)
                    .map_or(1, crate::message::Priority::rank);
                let lease = row.lease_expires_at.as_deref().and_then(crate::clock::parse);
                found.push((rank, lease, TaskId::new(row.task.as_ref())?));
            }
            Ok(())
        })?;
        found.sort_unstable();
        Ok(found.into_iter().map(|(_, _, t)| t).collect())
    }

    /// Every task id, sorted.
    fn task_ids(&self) -> Result<Vec<TaskId>>;

    /// The time now by the clock that decides leases and deadlines when it is not this
    /// host's (a database server's); `None` when this host's clock decides. Reports (lease
    /// ages, the tasks one may take over) read it so that a host whose clock is off shows
    /// what a claim would decide.
    fn root_clock(&self) -> Result<Option<DateTime<Utc>>> {
        Ok(None)
    }

    /// The board: one row per task, in task id order, handed over one at a time.
    fn board(&self, each: &mut dyn FnMut(Row<'_>) -> Result<()>) -> Result<()>;

    /// The tasks the last `board` passed over because their records are damaged by hand (a
    /// `.status` that does not parse, or one removed while the task's other records stay):
    /// a report says so rather than dropping them without a word. An engine whose records cannot be
    /// damaged that way has none.
    fn passed_over(&self) -> Vec<PassedOver> {
        Vec::new()
    }

    /// A task's state as last committed, read without a transaction (for reports: it may be
    /// outdated by the time it is printed, never half-written).
    fn peek(&self, task: &TaskId) -> Result<Option<TaskState>>;

    // ---- messages ------------------------------------------------------------------

    /// Deliver one message to several boxes, all or none across a crash; each copy under
    /// `name` or the first free `name.N.md` in its box. Returns the names used.
    fn deliver(&self, content: &[u8], name: &str, to: &[Mailbox]) -> Result<Vec<String>>;

    /// Deliver several messages, each to its boxes, all or none across a crash (a message and
    /// what a routing rule sends with it). Returns the names used, per parcel and box.
    fn deliver_batch(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>>;

    /// Finish the deliveries that a crashed command left past their commit point (a batch
    /// committed but not yet landed), so that a retry finds what was sent. `held`: a message
    /// id this command holds (`hold_msg_id`), so any journal of it is an earlier try's,
    /// however recent. Returns how many.
    fn finish_deliveries(&self, _held: Option<&str>) -> Result<usize> {
        Ok(0)
    }

    /// Log the events of deliveries and moves whose commands were cut off before they logged
    /// them (their journals), and nothing else: what a follower does while the log is quiet,
    /// so that no follower waits for ever on a command that died. Returns how many.
    fn log_cut_off_events(&self) -> Result<usize> {
        self.finish_deliveries(None)
    }

    /// Keep `events`, those of a delivery of `msg_id` about to be made, until
    /// `close_journal`: a command cut off between the delivery and its events leaves them to
    /// be logged by the next settling (`finish_deliveries`, doctor's repair). Returns the
    /// journal's name; `None` when the engine keeps none (a database: PROTOCOLS.md section
    /// 18).
    fn journal_events(&self, _msg_id: &str, _events: &[Event]) -> Result<Option<String>> {
        Ok(None)
    }

    /// Keep `event`, that of a move of message `msg_id` (no task's ticket) from `from`/`file`
    /// about to be made, until `close_journal`, as `journal_events` keeps a delivery's: the
    /// next settling logs it when the message left `from` and lies where the event says.
    fn journal_move(
        &self,
        _msg_id: &str,
        _from: &Mailbox,
        _file: &str,
        _event: &Event,
    ) -> Result<Option<String>> {
        Ok(None)
    }

    /// Close a journal: `logged`, its events are in the log; otherwise (the delivery or its
    /// events failed on the way) its events are logged now if the delivery was made.
    /// Returns whether the delivery stands (was made, or may have been).
    fn close_journal(&self, _journal: &str, _logged: bool) -> Result<bool> {
        Ok(true)
    }

    /// Move a message that is no task's ticket (tickets move inside their task's
    /// transaction). `Ok(false)` when it is gone from `from` (someone else moved it).
    fn move_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<bool>;

    /// File a message that is no task's ticket into `to` (LOGS, a WORKSPACE) under its name
    /// or, when that is taken there (a copy of the same delivery filed before, one copy per
    /// receiver; another message of the same second), under the first free numbered name
    /// (`name.2.md`, ...): every message keeps its place.
    /// Returns the name used; `None` when it is gone from `from` (someone else moved it).
    fn file_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<Option<String>>;

    /// The message files of a box, sorted by name.
    fn list_box(&self, mailbox: &Mailbox) -> Result<Vec<String>>;

    /// Refuse to `doing` (`list`, `deliver into`) a box that cannot be used: missing, or a
    /// link or a file where an agent's box or folder belongs (circe never reads or writes
    /// through one). A database's boxes are rows: always usable.
    fn check_box(&self, _mailbox: &Mailbox, _doing: &str) -> Result<()> {
        Ok(())
    }

    /// A message's bytes.
    fn read_message(&self, mailbox: &Mailbox, file: &str) -> Result<Vec<u8>>;

    /// At most `cap + 1` bytes of a message (enough to tell it is over `cap`), and its size:
    /// a listing never reads a huge or planted file whole.
    fn read_message_capped(&self, mailbox: &Mailbox, file: &str, cap: usize) -> Result<Capped>;

    /// `read_message_capped` of each of `files` of `mailbox`, handed to `each` in their
    /// order, each read on its own (one missing or unreadable is that file's error): a
    /// database reads many in one statement, a bounded number of bytes at a time, instead
    /// of one round trip each. An error returned is of the whole read (the database gone).
    fn read_messages_capped(
        &self,
        mailbox: &Mailbox,
        files: &[String],
        cap: usize,
        each: &mut dyn FnMut(&str, Result<Capped>),
    ) -> Result<()> {
        for f in files {
            each(f, self.read_message_capped(mailbox, f, cap));
        }
        Ok(())
    }

    /// Each message of `mailbox` (sorted by name) with what `digest` makes of it: of its
    /// name and its capped read (`read_message_capped`, at most `cap + 1` bytes), a JSON
    /// text (`Digest`), or `None` for no message at all. What `digest` makes of a read that worked must
    /// depend on the bytes alone and on `kind`, which names the digest and how it is made (a
    /// reader's version and limits): an engine may remember it by file identity (the local
    /// engine's `locks/inbox-<agent>.digests`) and not call `digest` for that file again
    /// while it stays the same (a caller keeping more of some reads learns by the calls
    /// which files were read).
    fn box_digests(
        &self,
        mailbox: &Mailbox,
        cap: usize,
        kind: &str,
        digest: &mut dyn FnMut(&str, Result<Capped>) -> Option<Digest>,
    ) -> Result<Vec<(String, Option<Digest>)>> {
        let _ = kind;
        let names = self.list_box(mailbox)?;
        let mut out = Vec::with_capacity(names.len());
        self.read_messages_capped(mailbox, &names, cap, &mut |n, read| {
            out.push((n.to_string(), digest(n, read)));
        })?;
        Ok(out)
    }

    /// Does `box_digests` remember what it made of a file (and so spare reads a reader
    /// would make)? Else a reader of a box may as well read each message itself.
    fn remembers_digests(&self) -> bool {
        false
    }

    /// Where messages with id `msg_id` lie (every box; none when it was never delivered).
    /// The default reads the head of every message (the id is a header line, in its first
    /// 64 KiB) and parses only those that hold the id; a database looks it up by an index.
    fn find_msg_id(&self, msg_id: &str) -> Result<Vec<(Mailbox, String)>> {
        const HEAD: usize = 64 * 1024;
        let holds = |b: &[u8]| b.windows(msg_id.len()).any(|w| w == msg_id.as_bytes());
        let listed: Vec<(Mailbox, Vec<String>)> = self
            .boxes()?
            .into_iter()
            .map(|b| Ok((b.clone(), self.list_box(&b)?)))
            .collect::<Result<_>>()?;
        // The names its id says first (`name_stamp_of_id`), every other name only when none
        // of those holds it.
        let stamp = crate::message::name_stamp_of_id(msg_id);
        let pass = |first: bool| {
            let mut out = Vec::new();
            for (b, names) in &listed {
                let taken = names
                    .iter()
                    .filter(|n| stamp.as_ref().is_none_or(|s| n.starts_with(s.as_str()) == first));
                for name in taken {
                    let Ok(head) = self.read_message_capped(b, name, HEAD) else { continue };
                    if !holds(&head.bytes) {
                        continue;
                    }
                    let Ok(bytes) = self.read_message(b, name) else { continue };
                    let parsed = crate::message::parse_bytes(&bytes, crate::message::Mode::Draft);
                    if parsed.is_ok_and(|m| m.msg_id.as_deref() == Some(msg_id)) {
                        out.push((b.clone(), name.clone()));
                    }
                }
            }
            out
        };
        let out = pass(true);
        if !out.is_empty() || stamp.is_none() {
            return Ok(out);
        }
        Ok(pass(false))
    }

    /// Every box: NEW_MESSAGES, each agent's INBOX and WORKSPACE, LOGS.
    fn boxes(&self) -> Result<Vec<Mailbox>> {
        let mut v = vec![Mailbox::NewMessages];
        for (a, _) in self.agents()? {
            v.push(Mailbox::Inbox(a.clone()));
            v.push(Mailbox::Workspace(a));
        }
        v.push(Mailbox::Logs);
        Ok(v)
    }

    // ---- TX: asks, prompts, retirement -------------------------------------------------

    /// The record of ask `id`; `None` when there is none.
    fn ask(&self, id: &MsgId) -> Result<Option<AskRecord>>;

    /// Every ask record, by msg id.
    fn asks(&self) -> Result<Vec<AskRecord>>;

    /// Store an ask record if the stored one is still at revision `seen` (`None`: there is
    /// none yet); a conflict otherwise. Returns it as stored, its `rev` = seen + 1.
    fn put_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord>;

    /// Hold the answering of ask `id` until the guard drops: one answer under way at a time,
    /// and while one is held the ask's `answering` state is an answer under way, not one a
    /// crash left (`ops::asks::settle`). A holder that dies lets go. `wait`: wait for it (at
    /// most the lock wait, then a conflict); else `None` when another holds it now.
    fn hold_ask(&self, id: &MsgId, wait: bool) -> Result<Option<Held<'_>>>;

    /// Hold the sending of message id `id` until the guard drops, so that two sends naming
    /// one id, by any senders, go one after the other and the later finds the earlier's
    /// delivery. Waits at most the lock wait (then a conflict). Ids may share a hold.
    fn hold_msg_id(&self, id: &str) -> Result<Held<'_>>;

    /// Hold the importing into this root until the guard drops: one import at a time, so a
    /// second finds what the first brought in. `None` when another holds it now. A holder
    /// that dies lets go.
    fn hold_import(&self) -> Result<Option<Held<'_>>>;

    /// Hold the filing of questions' copies (`done`) until the guard drops: two holders
    /// filing copies of one question at once go one after the other, so the second sees
    /// whether it holds the last. Taken with a task's lock held, and nothing is taken while
    /// it is held but the filing's own move. Waits at most the lock wait (then a conflict).
    fn hold_filing(&self) -> Result<Held<'_>>;

    /// Make `message` (a whole prompt message) `agent`'s current prompt.
    fn set_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()>;

    /// `agent`'s current prompt message, if it has one.
    fn prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>>;

    /// Retire an agent at `at` (a time stamp): it acts no more, and what reaches it is kept
    /// as an orphan. `false` when it was retired already.
    fn retire_agent(&self, agent: &AgentName, at: &str) -> Result<bool>;

    /// The retired agents and when each was retired, sorted by name.
    fn retirements(&self) -> Result<Vec<(AgentName, String)>>;

    /// Is `agent` retired, read now (not from what this process read before)? Asked inside
    /// a claim's task transaction, under the task's lock, so a retirement racing the claim
    /// refuses it. `None`: the engine reads it in the claim's commit itself, without a
    /// round trip of its own, and refuses that commit with `retired_claimer` (the database
    /// engine).
    fn retired_now(&self, agent: &AgentName) -> Result<Option<bool>>;

    /// Agents whose record is there but does not read (a folder's agent.yaml missing or
    /// damaged): in no list of agents until it is mended (`doctor` says how).
    fn damaged_agents(&self) -> Result<Vec<AgentName>> {
        Ok(Vec::new())
    }

    /// The retired agents, sorted.
    fn retired(&self) -> Result<Vec<AgentName>> {
        Ok(self.retirements()?.into_iter().map(|(a, _)| a).collect())
    }

    // ---- the event log -------------------------------------------------------------

    /// Append events that are not part of a task's change (a delivery, a take), giving each
    /// the next id. Returns them with their ids. Called after the change they tell of: a
    /// failure says the change stands (detail `committed`).
    fn append_events(&self, events: Vec<Event>) -> Result<Vec<Event>>;

    /// Up to `max` events after `from`, oldest first; fewer (or none) at the end of the log.
    /// A line still being written is not read.
    fn read_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>>;

    /// Every event of `task` after `from`, oldest first (`show TASK`). An engine may pass
    /// over the lines that cannot be the task's without parsing them.
    fn task_events(&self, task: &TaskId, from: Cursor) -> Result<Vec<Event>> {
        let (mut out, mut at) = (Vec::new(), from);
        loop {
            let batch = self.read_events(at, 4096)?;
            let Some(last) = batch.last() else { return Ok(out) };
            at = Cursor::after(last.id);
            out.extend(batch.into_iter().filter(|e| e.task.as_ref() == Some(task)));
        }
    }

    /// Up to `max` events of `task` with ids below `before`, newest first (`log --task`):
    /// the lines that name it (`names_task`, through `read_events_back_naming`), parsed and
    /// filtered, read back until `max` are found or the log's start.
    fn task_events_back(
        &self,
        task: &TaskId,
        before: Option<u64>,
        max: usize,
    ) -> Result<Vec<Event>> {
        let naming = [names_task(task)];
        let mut out = Vec::new();
        let mut at = before;
        while out.len() < max {
            let batch = self.read_events_back_naming(at, max, &naming)?;
            let Some(oldest) = batch.last() else { break };
            at = Some(oldest.id);
            // A batch comes short only once the log's start was reached.
            let start_reached = batch.len() < max;
            out.extend(batch.into_iter().filter(|e| e.task.as_ref() == Some(task)));
            if start_reached {
                break;
            }
        }
        out.truncate(max);
        Ok(out)
    }

    /// `read_events_back`, where an engine may pass over, unparsed and uncounted, the lines
    /// that hold none of `naming` (text each of the wanted events' lines holds, such as
    /// `"event":"claim"`). A hint: the default reads them all, and the caller filters.
    fn read_events_back_naming(
        &self,
        before: Option<u64>,
        max: usize,
        naming: &[String],
    ) -> Result<Vec<Event>> {
        let _ = naming;
        self.read_events_back(before, max)
    }

    /// The id of the newest event (0 when there is none).
    fn last_event_id(&self) -> Result<u64>;

    /// Up to `max` events with ids below `before` (`None`: from the newest), newest first,
    /// read from the end of the log without scanning it whole (`circe log --limit`).
    fn read_events_back(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>>;

    /// A subscription to the log: `EventFeed::wait` returns once new events may have been
    /// appended. Subscribe first, then read: an event appended between the two is still
    /// seen (no lost wake-up). `poll`: wake on a timer instead of on change (filesystems
    /// where change notification sees nothing).
    fn subscribe(&self, poll: Option<Duration>) -> Result<Box<dyn EventFeed + '_>>;

    /// Close the log's current segment and start a new one (the archive does this; readers and
    /// cursors go on across it). Returns the closed segment's name, `None` when it was empty.
    fn rotate_events(&self) -> Result<Option<String>>;

    // ---- consumers' cursors ---------------------------------------------------------

    /// The folder this host keeps the root in (the local engine's `.circe/`); `None` for an
    /// engine that keeps it elsewhere. Files that live beside a root (the chat channel) need
    /// one.
    fn local_folder(&self) -> Option<PathBuf>;

    /// The chat channel when this engine keeps it (section 13); `None` when the channel is
    /// a file beside the root (the local engine's, which `chat::channel` opens).
    fn chat_log(&self) -> Option<&dyn ChatLog>;

    /// Hold cursor `name` of `kind` (`events`, `chat`): one consumer per cursor at a time,
    /// for as long as the returned guard lives. `None` when another consumer holds it.
    fn hold_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>>;

    /// A cursor's saved value (its format is its kind's); `None` when never saved.
    fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>>;

    /// Save a cursor's value, replacing the old one whole.
    fn write_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()>;

    /// Every saved cursor: (kind, name), sorted.
    fn cursors(&self) -> Result<Vec<(String, CursorName)>>;

    /// Forget a consumer: its saved cursor and, for an `events` cursor, the events it set
    /// aside. Hold the cursor first. Returns whether there was either (a name with neither
    /// changes nothing).
    fn remove_cursor(&self, kind: &str, name: &CursorName) -> Result<bool>;

    // ---- the archive (PROTOCOLS.md section 17) ---------------------------------------

    /// Does this engine keep an archive? Without one, `show` and `log` find nothing there,
    /// and the archive's own commands refuse.
    fn keeps_archive(&self) -> bool {
        false
    }

    /// Move what finished long enough ago out of the hot boxes into the archive (or, for a
    /// dry run, count it). `progress` hears how far the run got. An engine without an
    /// archive yet refuses (exit 2).
    fn archive(
        &self,
        _req: &crate::archive::Request,
        _progress: &mut dyn FnMut(crate::archive::Progress),
    ) -> Result<crate::archive::Report> {
        Err(no_archive(&self.location()))
    }

    /// The tombstone of an archived task (`None`: it was never archived). Cheap: opening a
    /// task asks it, so an archived id is never used again.
    fn archived_task(&self, _task: &TaskId) -> Result<Option<crate::archive::Tombstone>> {
        Ok(None)
    }

    /// Every archived task's tombstone, in task id order (a snapshot carries them: a root
    /// moved elsewhere still never opens an archived id again).
    fn archived_tasks(&self) -> Result<Vec<crate::archive::Tombstone>> {
        Ok(Vec::new())
    }

    /// An archived task's bundle: its files byte for byte, its events and its summary.
    fn archived_bundle(&self, _task: &TaskId) -> Result<Option<crate::archive::Bundle>> {
        Ok(None)
    }

    /// One archived file, as a search found it (`Hit`): its bytes (`None` when the segment
    /// no longer holds it).
    fn archived_member(&self, _hit: &crate::archive::Hit) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Every archived message (a task's, or a loose one), segment by segment: its line of
    /// the member list and its bytes, handed over until `each` says stop. Returns the
    /// segments passed over because they could not be read (each with why).
    fn archived_messages(
        &self,
        _each: &mut dyn FnMut(&crate::archive::Entry, Vec<u8>) -> Result<bool>,
    ) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Events that left the hot log (`read_events` reads the rest): up to `max` after `from`.
    fn archived_events(&self, _from: Cursor, _max: usize) -> Result<Vec<Event>> {
        Ok(Vec::new())
    }

    /// Everything archived that the query matches, handed over one at a time until `each`
    /// says stop. Returns the segments passed over because they could not be read (each
    /// with why); the others were searched.
    fn archive_search(
        &self,
        _q: &crate::archive::query::Query,
        _each: &mut dyn FnMut(crate::archive::Hit) -> Result<bool>,
    ) -> Result<Vec<String>> {
        Err(no_archive(&self.location()))
    }

    /// Check every archived segment against its checksums: (segment, what is wrong).
    fn archive_verify(&self) -> Result<Vec<(String, Option<String>)>> {
        Err(no_archive(&self.location()))
    }

    /// Keep an event a consumer's hook kept failing on (its dead letters), in order.
    fn dead_letter(&self, consumer: &CursorName, event: &Event) -> Result<()>;

    /// A consumer's dead letters, oldest first.
    fn dead_letters(&self, consumer: &CursorName) -> Result<Vec<Event>>;

    /// Every consumer that has dead letters, sorted (with or without a saved cursor: one
    /// that died before it first saved has only these).
    fn dead_letter_consumers(&self) -> Result<Vec<CursorName>>;

    /// Where a person or a hook can open a message, when the engine keeps it as a file.
    fn message_path(&self, mailbox: &Mailbox, file: &str) -> Option<PathBuf>;
    /// The whole root as of one moment (`circe mirror`, `circe migrate`). The default reads
    /// it part by part (exact when nothing runs meanwhile); a database reads it in one
    /// snapshot.
    fn snapshot(&self) -> Result<Snapshot>;

    /// Wait until an event after `after` exists or `timeout` passes; returns the newest id.
    /// Engines that can be woken (LISTEN in a database) override this polling default.
    fn wait_events(&self, after: u64, timeout: Duration) -> Result<u64> {
        let until = std::time::Instant::now() + timeout;
        loop {
            let last = self.last_event_id()?;
            if last > after || std::time::Instant::now() >= until {
                return Ok(last);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // ---- configuration and requests --------------------------------------------------

    /// The root's configuration as text (circe.yaml of a local root; the stored copy in a
    /// database, which every host reads).
    fn config_text(&self) -> Result<String>;

    /// Replace the configuration (checked by the caller).
    fn set_config(&self, text: &str) -> Result<()>;

    /// The grant a claim with request id `request` by `agent` made: the task and the epoch
    /// the claim gave it. `None` when no such claim committed.
    fn granted(&self, agent: &AgentName, request: &str) -> Result<Option<(TaskId, u64)>>;

    /// Tasks whose lease may have run out (`reap` checks each in its transaction). The
    /// default is every task; a database selects them by an index on the lease.
    fn lease_candidates(&self) -> Result<Vec<TaskId>> {
        self.task_ids()
    }

    // ---- sequence numbers (PROTOCOLS.md section 14) -----------------------------------

    /// Hold `sender`'s counter (one numbered send per sender at a time), after finishing or
    /// undoing a numbered send of that sender that a crash interrupted. While the hold lives,
    /// the first message this engine delivers on this thread (`deliver`, or the new ticket a
    /// `TaskTx` commits) is the numbered one: its number (`SeqHold::next`) and its delivery
    /// commit together, so a number is never given twice and never skipped. Dropped without
    /// a delivery, the hold uses no number.
    fn seq_hold(&self, sender: &AgentName) -> Result<Box<dyn SeqHold + '_>>;

    /// Change `sender`'s counter under its hold (a reset, an import): `change` sees the
    /// counter as it stands and edits it; an error from it changes nothing. Returns the new
    /// counter.
    fn seq_update(
        &self,
        sender: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter>;

    /// Every sender that has a counter, sorted by name (interrupted sends settled first).
    fn seq_counters(&self) -> Result<Vec<(AgentName, Counter)>>;

    /// What `agent` last saw of each sender (its `lastSeen`; empty when nothing yet).
    fn seq_seen(&self, agent: &AgentName) -> Result<Receiver>;

    /// Change what `agent` last saw, one change per agent at a time: `change` edits the
    /// state as it stands; an error from it changes nothing. Returns (before, after).
    fn seq_see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)>;

    /// Every agent that has a `lastSeen` state, sorted by name.
    fn seq_receivers(&self) -> Result<Vec<(AgentName, Receiver)>>;

    // ---- upkeep --------------------------------------------------------------------

    /// Check the engine's invariants (and with `repair`, mend what can be mended).
    fn doctor(&self, repair: bool) -> Result<Vec<Violation>>;
}

/// One transaction on one task (see `Engine::begin`). Dropping it without a commit changes
/// nothing.
pub trait TaskTx {
    fn task_id(&self) -> &TaskId;
    /// The task as it is now; `None` for a task that does not exist yet.
    fn state(&self) -> Option<&TaskState>;
    /// Did opening this transaction finish a change a command cut off on the task (a local
    /// root rolls it forward from the task's journal)? For `claim --next`, only such a task
    /// held by the agent already is its answer (its own cut-off claim, told to its retry);
    /// one another command of the same agent took meanwhile is passed over.
    fn finished_cut_off(&self) -> bool {
        false
    }
    /// The time this transaction decides by (leases, `updated_at`): the local clock
    /// (`CIRCE_NOW` when pinned), or a database server's clock.
    fn now(&self) -> DateTime<Utc> {
        crate::clock::now()
    }
    /// Commit one change: its commit point (the ticket's move or delivery, else the record
    /// write), then the records, then its events (given their ids, returned). Afterwards
    /// `state()` is the new state.
    fn commit(&mut self, change: Change) -> Result<Vec<Event>>;
}

/// The right to number one message of a sender (see `Engine::seq_hold`), held until dropped.
pub trait SeqHold {
    /// Whose counter this is.
    fn sender(&self) -> &AgentName;
    /// What the numbered message takes: `last` is its number, `epoch` its counter's epoch.
    fn next(&self) -> Counter;
    /// Whether the numbered message was delivered (its number is used).
    fn used(&self) -> bool;
}

/// Is `content` the message numbered by `sender`'s hold, `next` (its `from`, `seq` and
/// `seq_epoch`)? An engine routes only that delivery through the number: anything else it
/// delivers while a hold lives (a leftover it finishes for another task) keeps its own.
pub fn carries_number(content: &[u8], sender: &AgentName, next: Counter) -> bool {
    crate::message::parse_bytes(content, crate::message::Mode::Draft).is_ok_and(|m| {
        m.from_agent() == Some(sender.as_str())
            && m.seq == Some(next.last)
            && m.seq_epoch.unwrap_or(0) == next.epoch
    })
}

/// A subscription to the event log (see `Engine::subscribe`).
pub trait EventFeed {
    /// Sleep until new events may have been appended (`true`), or `timeout` passed with no
    /// sign of any (`false`; `None`: no limit). A wake-up is a hint: read to see.
    fn wait(&mut self, timeout: Option<Duration>) -> Result<bool>;
}

/// The right to move one cursor, held until dropped.
pub type CursorHold = Box<dyn std::any::Any>;

/// Something held (a lock, a claim on a name) until dropped.
pub trait Guard {}
impl<T> Guard for T {}

/// The cursor kind of event-log consumers (`.circe/cursors/events/<name>`; `cursors` rows
/// of kind `events`).
pub const EVENTS_CURSORS: &str = "events";

/// A held right that may borrow its engine (`Engine::hold_ask`).
pub type Held<'a> = Box<dyn Guard + 'a>;

/// A task the board passed over (`Engine::passed_over`), and what is wrong with its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassedOver {
    pub task: TaskId,
    /// What is wrong, naming the record: `TASKS/T-1.status does not parse`.
    pub problem: String,
}

/// Something `doctor` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Violation {
    pub invariant: u8,
    pub what: String,
    pub repaired: bool,
    /// Still open, and `circe doctor --repair` acts on it. Only a run without `--repair`
    /// says so: what a repair leaves open is for a person, as its line says.
    pub repairable: bool,
}

/// What a check says became of a violation it found (`Violation::new`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// Mended by this run.
    Done,
    /// Left open: `doctor --repair` acts on it.
    Repair,
    /// Left open for a person: the line says what to do.
    Hand,
}

impl Fix {
    /// `Done` when `repaired`, else `Repair`: a check that mends only when asked to.
    pub fn done_if(repaired: bool) -> Fix {
        if repaired { Fix::Done } else { Fix::Repair }
    }
}

impl Violation {
    /// A violation a run (with `--repair` when `repair_run`) found, and what became of it.
    /// Its text is kept on one line (`error::one_line`): a file name holding a line break
    /// cannot make a line of doctor's report (a forged `ok: 0 repaired, 0 violations`).
    pub fn new(invariant: u8, what: String, fix: Fix, repair_run: bool) -> Violation {
        let what = match crate::error::one_line(&what) {
            std::borrow::Cow::Borrowed(_) => what,
            std::borrow::Cow::Owned(o) => o,
        };
        Violation {
            invariant,
            what,
            repaired: fix == Fix::Done,
            repairable: fix == Fix::Repair && !repair_run,
        }
    }

    /// One only a person can mend (its line says how).
    pub fn by_hand(invariant: u8, what: String) -> Violation {
        Violation::new(invariant, what, Fix::Hand, false)
    }
}

/// What every event line of `task` holds: its id in quotes (ids need no escaping). A line
/// without it is not the task's, so an engine may pass it over unparsed.
pub(crate) fn names_task(task: &TaskId) -> String {
    format!("\"{task}\"")
}

/// The error for a task that does not exist.
pub fn no_task(task: &TaskId) -> Error {
    Error::not_found(format!("no task `{task}`")).hint("`circe tasks` lists the tasks")
}

/// The refusal of a claim by an agent retired after the command looked (`agent retire`
/// racing the claim): exit 3, detail `retired`, which ends `claim --next` and `wait
/// --claim` too.
pub fn retired_claimer(agent: &AgentName) -> Error {
    Error::refused(format!("agent {agent} is retired")).detail("retired", true).hint(
        "a retired agent acts no more; `circe agent add NEW-NAME --role ROLE` makes a new one",
    )
}

/// What an engine without an archive says to `circe archive` (run, search, verify): refused
/// (exit 3), nothing changed; its finished work stays where it is (PROTOCOLS.md section 17,
/// "Engines").
fn no_archive(location: &str) -> Error {
    Error::refused(format!("the engine at {location} keeps no archive: its finished work stays in the database"))
        .hint("nothing was changed; the finished work stays readable where it is (`circe show TASK`, `circe log`), and `circe mirror DIR` writes it all as files; archiving needs a root in a folder, and `circe migrate --to-local DIR` would move the whole team's root there (every host must then reach that folder)")
}
