//! The local engine's invariants, checked (and mended) for `circe doctor`.
//!
//! The invariants (PROTOCOLS.md "Invariants"):
//! 1. nothing is left in tmp/ (a staged file that never reached a box), and no numbered
//!    send is left half-way in `seq/`;
//! 2. boxes hold only regular `*.md` message files (no links, FIFOs, folders, strays), and
//!    circe's own files (TASKS/, locks/, LOGS/events.jsonl) are regular files;
//! 3. every message file parses, within the limits of circe.yaml;
//! 4. every task's message lies in exactly one box, and that box agrees with its status:
//!    new/parked -> NEW_MESSAGES, claimed/in_progress/blocked -> the owner's INBOX or
//!    WORKSPACE, completed/failed -> anywhere (LOGS once handled);
//! 5. `.owner` agrees with `.status`;
//! 6. every message in NEW_MESSAGES is the current message of its task;
//! 7. the event log's ids rise through its current file (and, checked by `ops::doctor`:
//!    every event-log cursor can read on);
//! 8. the archive's index agrees with its segments, and no archive run was left half-way.

use super::root::is_message_name;
use super::{LocalEngine, lanes, reconcile};
use crate::boxes::Mailbox;
use crate::engine::{Engine, Fix, Violation};
use crate::error::Result;
use crate::message::{self, Mode};
use crate::names::{AgentName, TaskId};
use crate::task::{Status, StatusRecord, TaskState};

/// Load and reconcile `task` under its lock (what every command does on entry).
/// `reconciled`, for doctor's repairs: a repair this task refuses (a box behind a link, a
/// full disk) is said, not an error, so doctor goes on with the others.
fn mended(eng: &LocalEngine, task: &TaskId) -> std::result::Result<Option<TaskState>, String> {
    reconciled(eng, task).map_err(|e| format!("not repaired: {}", e.message))
}

/// Move `name` out of box `b` into `LOGS/quarantine/`: where it went, or `None` when it is
/// gone already (a command moved it since doctor listed the box).
fn move_aside(eng: &LocalEngine, b: &Mailbox, name: &str) -> Result<Option<String>> {
    match eng.store.quarantine(b, name) {
        Ok(dest) => Ok(Some(dest)),
        Err(_) if std::fs::symlink_metadata(eng.store.box_dir(b).join(name)).is_err() => Ok(None),
        Err(e) => Err(e),
    }
}

fn reconciled(eng: &LocalEngine, task: &TaskId) -> Result<Option<TaskState>> {
    let lock = eng.store.lock_task(task)?;
    let st = reconcile::settled(eng, task, &lock)?;
    eng.store.unlock_task(task, lock);
    Ok(st)
}

/// Invariant 1: nothing left in tmp/ by a process that is gone. A committed fan-out batch
/// (`tmp/batch-<pid>-<id>/`) passed its commit point: repair delivers the copies it holds;
/// anything else never reached a box and is removed.
fn check_staging(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    match eng.store.seq_doctor(repair, v) {
        // Those settled but not logged are said among the violations.
        Ok(_unlogged) => {}
        // A box behind a link, say: said, and the numbered send waits for the next run.
        Err(e) => {
            let what = format!("a numbered send left half-way was not settled: {}", e.message);
            v(1, what, Fix::Hand);
        }
    }
    let mut journals = Vec::new();
    for name in eng.store.tmp_leftovers()? {
        if name.starts_with("archive-") {
            continue; // an archive run's staging: invariant 8 (archive_doctor)
        }
        let committed_batch = name.starts_with("batch-") && !name.contains(".part");
        if committed_batch {
            let what = format!(
                "tmp/{name}: a send to several boxes was interrupted after its commit point"
            );
            match repair.then(|| eng.store.finish_batch(&name)) {
                Some(Ok(n)) => v(1, format!("{what} ({} copies delivered)", n.len()), Fix::Done),
                Some(Err(e)) => v(1, format!("{what} (not finished: {})", e.message), Fix::Hand),
                None => v(1, what, Fix::Repair),
            }
            continue;
        }
        if name.starts_with(super::journal::PREFIX) {
            journals.push(name);
            continue;
        }
        if repair && !eng.store.remove_leftover(&name)? {
            continue;
        }
        v(1, format!("tmp/{name} was staged but never delivered"), Fix::done_if(repair));
    }
    // After the deliveries above: a journal whose copies are still staged waits for them.
    for name in journals {
        check_journal(eng, &name, repair, v);
    }
    Ok(())
}

/// A delivery's events kept by a command that is gone (`journal.rs`): repair logs them when
/// the delivery was made and they are not in the log yet.
fn check_journal(eng: &LocalEngine, name: &str, repair: bool, v: &mut dyn FnMut(u8, String, Fix)) {
    use super::journal::Settled;
    let what =
        format!("tmp/{name}: a send or a move left the journal of its events (cut off, or failed)");
    match repair.then(|| eng.store.settle_journal(name)) {
        Some(Ok(s)) => {
            let done = match s {
                Settled::Logged(n) => format!("{n} events logged"),
                Settled::AlreadyLogged => "they were logged already".into(),
                Settled::NotDelivered => "the message was never delivered".into(),
                Settled::Gone => "settled by another command".into(),
                Settled::Waiting => {
                    let what = format!("{what} (waits: copies of its message are still staged)");
                    v(1, what, Fix::Hand);
                    return;
                }
            };
            v(1, format!("{what} ({done})"), Fix::Done);
        }
        Some(Err(e)) => v(1, format!("{what} (not settled: {})", e.message), Fix::Hand),
        None => v(1, what, Fix::Repair),
    }
}

/// The events of task changes cut off before they logged them, kept in their tasks' lock
/// files (`task_journal.rs`) and no command at work on them: repair settles each as the
/// task's next command would (logged when the change stands).
fn check_task_journals(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    for (name, links) in eng.store.linked_task_locks()? {
        // Never replaced (a lock file replaced while held lets two holders in): said only.
        v(
            2,
            format!(
                "locks/{name} has {links} links: its task's changes keep no journal of their events while another link stands (circe never writes into a file it shares); remove the other link, or put a copy in its place"
            ),
            Fix::Hand,
        );
    }
    for (task, lock) in eng.store.task_journals_left()? {
        let what = format!(
            "locks/task-{task}.lock: a change of task {task} was cut off before logging its events"
        );
        if !repair {
            v(1, what, Fix::Repair);
            continue;
        }
        match reconcile::settled(eng, &task, &lock) {
            Ok(_) => v(1, format!("{what} (settled)"), Fix::Done),
            Err(e) => v(1, format!("{what} (not repaired: {})", e.message), Fix::Hand),
        }
    }
    Ok(())
}

/// Invariant 4: what a task's change cut off left in its record (an outbox not yet
/// delivered, a handoff's mark), finished or undone by reconciling it.
fn check_cut_off(
    eng: &LocalEngine,
    repair: bool,
    st: &TaskState,
    v: &mut dyn FnMut(u8, String, Fix),
) {
    let id = &st.rec.task_id;
    // A repair this task refuses is said on its line, and doctor goes on.
    let said = |r: &std::result::Result<Option<TaskState>, String>| match r {
        Err(why) => format!(" ({why})"),
        Ok(_) => String::new(),
    };
    if !st.rec.outbox.is_empty() {
        // A change that sends messages was cut off before delivering them all.
        let after = if repair { mended(eng, id) } else { Ok(None) };
        let fixed = matches!(&after, Ok(Some(s)) if s.rec.outbox.is_empty());
        let n = st.rec.outbox.len();
        let why = said(&after);
        let what = format!("task {id}: {n} message(s) of its last change not yet delivered{why}");
        v(4, what, Fix::done_if(fixed));
    }
    if let Some(h) = &st.rec.handoff {
        // A handoff cut off between its mark and its end: finished or undone.
        let after = if repair { mended(eng, id) } else { Ok(None) };
        let fixed = matches!(&after, Ok(Some(s)) if s.rec.handoff.is_none());
        let why = said(&after);
        v(
            4,
            format!("task {id}: a handoff (message {h}) was cut off; its mark is left{why}"),
            Fix::done_if(fixed),
        );
    }
}

/// Invariant 2 for circe's own files: strays in TASKS/, and links, FIFOs or folders where
/// circe keeps lock files or the event log. Returns the planted lock files left in place
/// (without `repair`): their tasks cannot be locked, so they are not checked further.
fn check_own_files(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<Vec<String>> {
    for name in eng.store.task_strays()? {
        let dest = if repair { Some(eng.store.quarantine_task_file(&name)?) } else { None };
        let moved = dest.map(|d| format!(" (moved to {d})")).unwrap_or_default();
        v(2, format!("TASKS/{name} is not a task record{moved}"), Fix::done_if(repair));
    }
    let mut left = Vec::new();
    for rel in eng.store.planted_own_files()? {
        if repair && rel == "LOGS/events.jsonl" {
            super::event_log::keep_floor_of_current(&eng.store)?;
        }
        let dest = if repair { Some(eng.store.quarantine_own_file(&rel)?) } else { None };
        let moved = dest.map(|d| format!(" (moved to {d})")).unwrap_or_default();
        v(2, format!("{rel} is not a regular file{moved}"), Fix::done_if(repair));
        if !repair {
            left.push(rel);
        }
    }
    Ok(left)
}

/// The tasks in TASKS, each to be looked at under its lock.
fn listed_tasks(eng: &LocalEngine) -> Result<Vec<TaskId>> {
    let tasks = eng.store.list_tasks()?;
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=doctor-slow-tasks): a scene, not a fault: a pause
    // between the listing of TASKS and the first task's lock, for a command to come between.
    if crate::fault::test_break("doctor-slow-tasks") {
        std::thread::sleep(std::time::Duration::from_millis(1500));
    }
    Ok(tasks)
}

/// Task `id` read under its lock, or `None`: a damaged record, or one (or a lock file) this
/// user cannot read, said as a violation (invariant 4); or a record removed since doctor
/// listed TASKS, said as nothing. A lock another command holds too long is no violation:
/// doctor stops, as before, to be run again (exit 4).
fn locked_task(
    eng: &LocalEngine,
    id: &TaskId,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<Option<(TaskState, super::lock::Lock)>> {
    let loaded = eng.store.lock_task(id).and_then(|lock| Ok((reconcile::load(eng, id)?, lock)));
    Ok(match loaded {
        Ok((Some(st), lock)) => Some((st, lock)),
        // `.status` was listed and is gone now: a command removed the task meanwhile (an
        // archive run, which removes `.status` last, or the roll-back of a send that never
        // delivered). Nothing is damaged; a `.owner` left without it is said by
        // `check_lost_status`, which runs after. Its lock file, made again by this lock
        // after an archive removed it, goes too.
        Ok((None, lock)) => {
            eng.store.unlock_task(id, lock);
            None
        }
        Err(e) if e.kind == crate::error::Kind::Conflict => return Err(e),
        Err(e) => {
            // Beyond --repair: what the record held is not known for sure (or its lock
            // file cannot be opened: its records are not looked at).
            let how = e.hint.as_deref().map(|h| format!(": {h}")).unwrap_or_default();
            v(4, format!("{}{how}", e.message), Fix::Hand);
            None
        }
    })
}

/// Invariant 6: every message in NEW_MESSAGES is the current message of its task.
fn check_new_messages(
    eng: &LocalEngine,
    repair: bool,
    tickets: &std::collections::BTreeMap<String, TaskId>,
    unread: &std::collections::BTreeSet<TaskId>,
    not_messages: &[String],
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    for name in eng.store.list_box(&Mailbox::NewMessages)? {
        // A link or a pipe so named is no message: invariant 2 said it (`check_boxes`).
        if !tickets.contains_key(&name) && !not_messages.contains(&name) {
            // A handoff that failed after delivering its message: reconciling the task
            // finishes it (the message becomes the ticket).
            // A name circe did not write (renamed by hand): its header names the task.
            let task = message::parse_file_name(&name).and_then(|f| f.task_id).or_else(|| {
                let bytes = eng.store.read_message(&Mailbox::NewMessages, &name).ok()?;
                message::parse_bytes(&bytes, message::Mode::Draft).ok()?.task_id
            });
            let id = task.and_then(|t| TaskId::new(t).ok());
            // The message of a task whose record could not be read (reported above): not
            // known to be a stray.
            if id.as_ref().is_some_and(|i| unread.contains(i)) {
                continue;
            }
            // A task opened (or put back) since doctor read the tasks: its record names this
            // message now, and nothing is wrong.
            if let Some(id) = &id
                && eng.peek(id).ok().flatten().is_some_and(|s| s.rec.message == name)
            {
                continue;
            }
            let after = match &id {
                Some(id) if repair => Some(mended(eng, id)),
                _ => None,
            };
            let fixed = matches!(&after, Some(Ok(Some(s))) if s.rec.message == name);
            if let Some(Err(why)) = &after {
                // Its task could not be looked at: left where it is, for the next run.
                let what = format!("NEW_MESSAGES/{name} is no task's current message ({why})");
                v(6, what, Fix::Hand);
                continue;
            }
            // Its task's `.status` is gone while its other records stay (removed by hand: no
            // command writes `.checks` or `.owner` without it): the message is that task's,
            // left where it is for the record to be put back.
            if let Some(id) = id.as_ref().filter(|id| {
                !fixed
                    && !eng.store.has_record(id, "status")
                    && (eng.store.has_record(id, "checks") || eng.store.has_record(id, "owner"))
            }) {
                v(
                    6,
                    format!(
                        "NEW_MESSAGES/{name} is the message of task {id}, whose TASKS/{id}.status is missing (its other records are there): put it back from a backup; `circe log --task {id}` lists its events (its last status, owner and epoch)"
                    ),
                    Fix::Hand,
                );
                continue;
            }
            // Still no task's message (a copy or a hard link planted there): move it aside
            // for a person to look at; nothing is deleted.
            let moved = if repair && !fixed {
                match move_aside(eng, &Mailbox::NewMessages, &name)? {
                    Some(dest) => format!(" (moved to {dest})"),
                    None => continue, // taken meanwhile by a command
                }
            } else {
                String::new()
            };
            let what = format!("NEW_MESSAGES/{name} is no task's current message{moved}");
            v(6, what, Fix::done_if(repair));
        }
    }
    Ok(())
}

/// How many boxes hold each message file, from the listings doctor took (not a `stat` per
/// task and box: at 100,000 tasks that was 2.6 million `statx` per doctor run).
fn copies_listed(listings: &[Vec<(String, bool)>]) -> std::collections::HashMap<String, usize> {
    let mut listed = std::collections::HashMap::new();
    for (name, _) in listings.iter().flatten().filter(|(n, regular)| *regular && is_message_name(n))
    {
        *listed.entry(name.clone()).or_insert(0) += 1;
    }
    listed
}

/// What `check_boxes` leaves to be told once the tasks are known.
#[derive(Default)]
struct Found {
    /// Messages waiting in NEW_MESSAGES whose header says another status: (file, what). A
    /// file that is no task's message is invariant 6's, which `--repair` moves away.
    says_otherwise: Vec<(String, String)>,
    /// Messages that do not parse: (box, file, why). One that is a task's current message
    /// stays where it is; any other is moved aside by `--repair`.
    unparsed: Vec<(Mailbox, String, String)>,
    /// Entries of NEW_MESSAGES named like messages that are none (a link, a FIFO, a
    /// folder): said under invariant 2, not again as no task's message.
    not_messages: Vec<String>,
}

/// Invariants 2 and 3 for the boxes: only message files, each of which parses within the
/// limits, and nothing waiting in NEW_MESSAGES claims to be anything but new (the last two
/// are returned, to be told once the tasks are known).
fn check_boxes(
    eng: &LocalEngine,
    repair: bool,
    all: &[Mailbox],
    listings: &[Vec<(String, bool)>],
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<Found> {
    let mut found = Found::default();
    for (b, listing) in all.iter().zip(listings) {
        for name in eng.store.undecodable_in(b)? {
            let dest =
                if repair { Some(eng.store.quarantine_undecodable(b, &name)?) } else { None };
            v(
                2,
                format!(
                    "{b}/{} has a name that is not UTF-8 (no command can name it){}",
                    name.to_string_lossy(),
                    dest.map(|d| format!("; moved to {d}")).unwrap_or_default()
                ),
                Fix::done_if(repair),
            );
        }
        let foreign = eng.store.foreign_in(b, listing);
        for name in &foreign {
            let dest = if repair { Some(eng.store.quarantine(b, name)?) } else { None };
            v(
                2,
                format!(
                    "{b}/{name} is not a message file{}",
                    dest.map(|d| format!(" (moved to {d})")).unwrap_or_default()
                ),
                Fix::done_if(repair),
            );
        }
        // A foreign entry (a link, a FIFO, a folder) is reported once, above.
        let foreign_name = |n: &String| foreign.contains(n);
        if *b == Mailbox::NewMessages {
            found.not_messages.clone_from(&foreign);
        }
        for name in
            listing.iter().map(|(n, _)| n).filter(|n| is_message_name(n) && !foreign_name(n))
        {
            let name = name.clone();
            let limits = &eng.settings.limits;
            let c = match eng.store.read_message_capped(b, &name, limits.message_bytes) {
                Ok(c) => c,
                // Moved by a command since the listing.
                Err(e) if e.kind == crate::error::Kind::NotFound => continue,
                // Not read is not broken (this user's permissions, a failing disk): left
                // where it is.
                Err(e) => {
                    let hint = e.hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default();
                    v(
                        3,
                        format!(
                            "{b}/{name} cannot be read ({}): repair leaves it{hint}",
                            e.chain()
                        ),
                        Fix::Hand,
                    );
                    continue;
                }
            };
            let read = message::parse_limited(&c.bytes, c.size, Mode::Draft, limits);
            // Over a limit is too big, not broken: reported, and left for a person to
            // move or for a higher limit in circe.yaml (repair never moves it).
            if let Some(p) = read.as_ref().err().and_then(|p| p.iter().find(|p| p.limit.is_some()))
            {
                let what =
                    format!("{b}/{name}: {p} (repair leaves it: move it away, or raise the limit)");
                v(3, what, Fix::Hand);
                continue;
            }
            let why = read.as_ref().err().and_then(|p| p.first()).map(ToString::to_string);
            let parsed = read.ok();
            // A message waiting in NEW_MESSAGES is a task waiting as new: its header must
            // not say otherwise (what circe records is in TASKS/).
            let said = parsed.as_ref().and_then(|m| m.status.clone());
            if *b == Mailbox::NewMessages
                && let Some(s) = said.filter(|s| {
                    message::status::normalize(s) != Some("new") && s.as_str() != "pending"
                })
            {
                let what = format!("{b}/{name} says `status: {s}` but waits in NEW_MESSAGES");
                found.says_otherwise.push((name.clone(), what));
            }
            if parsed.is_none() {
                let why = why.unwrap_or_else(|| "unreadable".into());
                found.unparsed.push((b.clone(), name, why));
            }
        }
    }
    Ok(found)
}

/// Invariant 2 for the agents' folders and boxes: missing ones (made again with `repair`),
/// and those a link or a file stands at.
fn check_agent_boxes(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    for f in eng.store.missing_agent_boxes(repair)? {
        let what = match (f.made, f.stands.is_some()) {
            (true, true) => "what stood there moved to LOGS/quarantine/, and made again",
            (true, false) => "made again",
            // An agent's folder: nothing is made through it.
            (false, _) if f.agent_folder => {
                "circe neither reads nor delivers through it: put the agent's folder itself there"
            }
            (false, _) => "`circe init` or `--repair` makes it again",
        };
        let is =
            f.stands.map_or_else(|| "is missing".to_string(), |s| format!("is {s}, not a folder"));
        let fix = match (f.made, f.agent_folder) {
            (true, _) => Fix::Done,
            (false, true) => Fix::Hand,
            (false, false) => Fix::Repair,
        };
        v(2, format!("{} {is} ({what})", f.path), fix);
    }
    Ok(())
}

/// An agent's folder whose agent.yaml is missing or does not parse: the agent drops out of
/// every list (it is sent nothing, and what it holds looks like nobody's). The repair writes
/// it again from the log: the role its `agent_add` event names, and the time of a `retire`
/// of it since.
fn check_agent_files(
    eng: &LocalEngine,
    repair: bool,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    let damaged = eng.store.damaged_agents()?;
    if damaged.is_empty() {
        return Ok(());
    }
    let mut found: std::collections::BTreeMap<String, (Option<String>, Option<String>)> =
        damaged.iter().map(|a| (a.to_string(), (None, None))).collect();
    // Read with or without `--repair`: the report says what the repair would do.
    let mut at = crate::event::Cursor::after(0);
    loop {
        // A log that does not read (a link in its place: invariant 2, which `--repair`
        // moves aside) names no role: said as such below, and doctor goes on.
        let Ok(batch) = super::event_log::read(&eng.store, at, 4096) else { break };
        let Some(last) = batch.last() else { break };
        at = crate::event::Cursor::after(last.id);
        for e in &batch {
            let (name, role) = match e.event {
                crate::event::EventKind::AgentAdd => {
                    // `role R`, or `role R (imported from TX)`.
                    let role = e.note.as_deref().and_then(|n| n.strip_prefix("role "));
                    let role = role.and_then(|r| r.split_whitespace().next());
                    (e.agent.clone(), role.filter(|r| crate::names::check_role(r).is_ok()))
                }
                crate::event::EventKind::Retire => (e.owner.clone().unwrap_or_default(), None),
                _ => continue,
            };
            if let Some((r, retired)) = found.get_mut(&name) {
                match role {
                    Some(role) => (*r, *retired) = (Some(role.to_string()), None),
                    None => *retired = Some(e.ts.clone()),
                }
            }
        }
    }
    for agent in damaged {
        let path = format!("AGENTS/{agent}/agent.yaml");
        let (role, retired) = found.remove(agent.as_str()).unwrap_or_default();
        match role {
            Some(role) if repair => {
                eng.store.rewrite_agent(&agent, &role, retired.as_deref())?;
                let what = format!("{path} was missing or damaged (written again: role {role})");
                v(2, what, Fix::Done);
            }
            Some(role) => v(
                2,
                format!(
                    "{path} is missing or damaged: {agent} is in no list of agents (`--repair` writes it again: role {role}, from its `agent_add` event)"
                ),
                Fix::Repair,
            ),
            None => {
                let named = if eng.registry.is_role(agent.as_str()) {
                    format!(
                        " (an agent `circe init` made is named after its role: `role: {agent}`)"
                    )
                } else {
                    String::new()
                };
                v(
                    2,
                    format!(
                        "{path} is missing or damaged: {agent} is in no list of agents, and the log names no role for it: write `role: ROLE` into it{named}"
                    ),
                    Fix::Hand,
                );
            }
        }
    }
    Ok(())
}

/// Invariant 2: git does not track the root (a `git stash`, `checkout` or `merge` would
/// rewrite its live records). Reported only.
fn check_tracked(eng: &LocalEngine, v: &mut dyn FnMut(u8, String, Fix)) {
    if let Some(top) = super::root::tracked_by_git(&eng.store.root) {
        v(
            2,
            format!(
                "the root is tracked by git (in {}): a `git stash`, `checkout` or `merge` there rewrites its live records, and two agents may then hold one task; take it out of git in that worktree: `git rm -r --cached {}` and commit (the files stay; `.circe/.gitignore` keeps git away from them)",
                top.display(),
                eng.store.root.strip_prefix(&top).unwrap_or(&eng.store.root).display()
            ),
            Fix::Hand,
        );
    }
}

/// Check (and with `repair`, mend) the root. Returns what was found.
pub(super) fn run(eng: &LocalEngine, repair: bool) -> Result<Vec<Violation>> {
    // A report on a root this user may not write goes on without the lock (only a repair
    // needs it, and it could not repair).
    let _guard = match eng.store.lock_named("doctor") {
        Err(e) if !repair && e.is_not_writable() => None,
        r => Some(r?),
    };
    let mut out = Vec::new();
    let mut v = |invariant: u8, what: String, fix: Fix| {
        out.push(Violation::new(invariant, what, fix, repair));
    };

    check_staging(eng, repair, &mut v)?;
    check_agent_boxes(eng, repair, &mut v)?;
    check_agent_files(eng, repair, &mut v)?;
    let all = eng.boxes()?;
    let listings = all.iter().map(|b| eng.store.list_box_typed(b)).collect::<Result<Vec<_>>>()?;
    let mut found = check_boxes(eng, repair, &all, &listings, &mut v)?;
    let not_messages = std::mem::take(&mut found.not_messages);

    let planted = check_own_files(eng, repair, &mut v)?;
    // A log that is no regular file is reported above (invariant 2), and not read.
    if !planted.iter().any(|p| p == "LOGS/events.jsonl") {
        check_event_ids(eng, &mut v)?;
    }
    check_seen(eng, repair, &mut v)?;
    check_asks(eng, &mut v)?;
    check_tracked(eng, &mut v);
    check_task_journals(eng, repair, &mut v)?;

    let listed = copies_listed(&listings);
    // Each task's current message, and its task.
    let mut tickets = std::collections::BTreeMap::new();
    let mut waiting: Vec<StatusRecord> = Vec::new();
    // Tasks whose record could not be read: their messages are not taken for strays.
    let mut unread = std::collections::BTreeSet::new();
    for id in listed_tasks(eng)? {
        if planted.contains(&format!("locks/task-{id}.lock")) {
            unread.insert(id);
            continue; // reported above; its lock cannot be taken until it is moved away
        }
        let Some((st, lock)) = locked_task(eng, &id, &mut v)? else {
            unread.insert(id);
            continue;
        };
        tickets.insert(st.rec.message.clone(), id.clone());
        if st.rec.status == Status::New {
            waiting.push(st.rec.clone());
        }
        // Listed in more than one box: checked again under the task's lock (a command may
        // have moved the message between two listings).
        let copies: Vec<&Mailbox> = if listed.get(&st.rec.message).is_some_and(|n| *n > 1) {
            all.iter().filter(|b| eng.store.has_message(b, &st.rec.message)).collect()
        } else {
            Vec::new()
        };
        if copies.len() > 1 {
            v(
                4,
                format!(
                    "task {id}: its message lies in {} boxes: {}; it belongs in the one its status names (new: NEW_MESSAGES; held: its owner's INBOX or WORKSPACE): compare the copies and move the others out of the boxes by hand (into LOGS/quarantine/)",
                    copies.len(),
                    copies.iter().map(|b| b.label()).collect::<Vec<_>>().join(", ")
                ),
                Fix::Hand,
            );
        }
        drop(lock);
        // A repair this task refuses is said on its line, and doctor goes on.
        let said = |r: &std::result::Result<Option<TaskState>, String>| match r {
            Err(why) => format!(" ({why})"),
            Ok(_) => String::new(),
        };
        check_cut_off(eng, repair, &st, &mut v);
        if let Some(mut problem) = disagreement(&st) {
            problem = explained(eng, &st, problem);
            let after = if repair { mended(eng, &id) } else { Ok(None) };
            if let Ok(Some(s)) = &after {
                tickets.insert(s.rec.message.clone(), id.clone());
            }
            let fixed = repair
                && after
                    .as_ref()
                    .is_ok_and(|a| a.as_ref().is_none_or(|s| disagreement(s).is_none()));
            if !fixed {
                problem.push_str(&move_back(eng, &st, repair));
            }
            // `--repair` reconciles every task, which mends only some of these.
            let fix = if fixed {
                Fix::Done
            } else if reconcile::would_mend(eng, &st) {
                Fix::Repair
            } else {
                Fix::Hand
            };
            v(4, format!("task {id}: {problem}{}", said(&after)), fix);
        } else {
            check_owner(eng, repair, &st, &mut v)?;
        }
        if let Some(what) = lease_unknown(&st) {
            v(5, what, Fix::Hand);
        }
    }
    check_lost_status(eng, &mut v)?;
    check_lanes(eng, repair, &waiting, &mut v)?;
    check_board(eng, repair, &mut v)?;
    report_found(eng, repair, found, &tickets, &mut v)?;
    check_new_messages(eng, repair, &tickets, &unread, &not_messages, &mut v)?;
    super::archive_doctor::check(eng, repair, &mut v)?;
    if repair {
        lanes::rebuild(&eng.store)?;
    }
    Ok(out)
}

/// The board index shows each task as its records say (invariant 6: it is derived; a record
/// edited by hand leaves its row behind). `--repair` builds it again from the records.
fn check_board(eng: &LocalEngine, repair: bool, v: &mut dyn FnMut(u8, String, Fix)) -> Result<()> {
    // A command between its record and its row would look stale: each one found is looked
    // at again holding its task's lock (the first five; the rest are counted).
    let found = super::board::stale_rows(eng)?;
    let mut stale = Vec::new();
    for t in found.iter().take(5) {
        let Ok(id) = TaskId::new(t) else { continue };
        let lock = eng.store.lock_task(&id)?;
        if super::board::stale_rows(eng)?.contains(t) {
            stale.push(t.clone());
        }
        eng.store.unlock_task(&id, lock);
    }
    if stale.is_empty() {
        return Ok(());
    }
    stale.extend(found.into_iter().skip(5));
    if repair {
        super::board::rebuild_locked(eng)?;
    }
    let shown: Vec<&str> = stale.iter().take(5).map(String::as_str).collect();
    let more = stale.len().saturating_sub(shown.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let then = if repair { "; built again from the records" } else { "" };
    v(
        6,
        format!(
            "the board index disagrees with the records of {}{more} (edited by hand?): `tasks` and `board` showed them as they were{then}",
            shown.join(", ")
        ),
        Fix::done_if(repair),
    );
    Ok(())
}

/// Every waiting task is found by `claim --next` (invariant 6): the lanes are derived, and
/// `--repair` rebuilds them from the records at its end.
fn check_lanes(
    eng: &LocalEngine,
    repair: bool,
    waiting: &[StatusRecord],
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    let unlisted = lanes::unlisted(eng, waiting)?;
    if !unlisted.is_empty() {
        let ids: Vec<String> = unlisted.iter().map(ToString::to_string).collect();
        let how = if repair {
            "; rebuilt from the records"
        } else {
            " (`--repair` rebuilds it from the records)"
        };
        v(
            6,
            format!(
                "the claim --next index (queue/) does not name waiting task(s) {}: `claim --next` passes them over{how}",
                ids.join(", ")
            ),
            Fix::done_if(repair),
        );
    }
    Ok(())
}

/// What `check_boxes` left to be told once the tasks are known (`tickets`: each task's
/// current message, and its task).
fn report_found(
    eng: &LocalEngine,
    repair: bool,
    found: Found,
    tickets: &std::collections::BTreeMap<String, TaskId>,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    for (name, what) in found.says_otherwise {
        // A task's message stays for a person to mend; any other is moved away by
        // `--repair` (invariant 6).
        if tickets.contains_key(&name) {
            v(3, what, Fix::Hand);
        } else if !repair {
            v(3, what, Fix::Repair);
        }
    }
    for (b, name, why) in found.unparsed {
        let what = format!("{b}/{name} does not parse as a message ({why})");
        if let Some(id) = tickets.get(&name) {
            // Moving it away would leave its task without its message, which a repair
            // then takes for a send that never delivered: it stays for a person to mend.
            v(
                3,
                format!(
                    "{what}: it is task {id}'s message, so repair leaves it: mend that line by hand, then run `circe doctor` again"
                ),
                Fix::Hand,
            );
        } else if !repair {
            v(3, what, Fix::Repair);
        } else if let Some(dest) = move_aside(eng, &b, &name)? {
            v(3, format!("{what}; moved to {dest}"), Fix::Done);
        }
    }
    Ok(())
}

/// Invariant 2 for the receivers' lastSeen files (`seen/`): each reads. One that does not
/// stops its agent's `inbox`; `--repair` moves it aside (its lastSeen starts again from
/// nothing, which shows messages as new again, never hides one).
fn check_seen(eng: &LocalEngine, repair: bool, v: &mut dyn FnMut(u8, String, Fix)) -> Result<()> {
    for (name, why) in eng.store.damaged_seen()? {
        let dest = if repair { Some(eng.store.quarantine_seen(&name)?) } else { None };
        let moved = dest.map(|d| format!(" (moved to {d})")).unwrap_or_default();
        v(2, format!("seen/{name} does not read ({why}){moved}"), Fix::done_if(repair));
    }
    Ok(())
}

/// Invariant 2 for the ask records (`ASKS/`): each reads. One that does not is left out
/// of `asks` and cannot be answered; reported, for a person to mend (what it held, who
/// answered and when, is nowhere else).
fn check_asks(eng: &LocalEngine, v: &mut dyn FnMut(u8, String, Fix)) -> Result<()> {
    for (name, why) in eng.store.damaged_asks()? {
        v(
            2,
            format!(
                "ASKS/{name} does not read ({why}): `asks` leaves it out and it cannot be answered; put it back from a backup or mend it by hand"
            ),
            Fix::Hand,
        );
    }
    Ok(())
}

/// Invariant 7 for the event log: ids rise through its current file (a line with a lower
/// id was added by hand; reported, for a person to remove).
fn check_event_ids(eng: &LocalEngine, v: &mut dyn FnMut(u8, String, Fix)) -> Result<()> {
    let day_ago = crate::clock::now() - chrono::Duration::days(1);
    let scan = super::event_log::out_of_order(&eng.store, 5, day_ago)?;
    if let Some((line, n)) = scan.older {
        v(
            7,
            format!(
                "LOGS/events.jsonl has {n} event line(s) of the last day without an id after this circe's own, the first at line {line}: an older circe writes to this root; `watch`, `wait` and `log` do not see its events, and it misreads what this circe writes (addresses, deadlines, records); every agent of a root must run the same circe: stop the older one and give its agents this binary (README, Upgrading)"
            ),
            Fix::Hand,
        );
    }
    for (line, id, format) in scan.newer {
        v(
            7,
            format!(
                "LOGS/events.jsonl line {line} (event {id}) is of format {format}, newer than this circe reads ({}): `watch` and `log` stop at it; a newer circe wrote it (upgrade every agent's circe: README, Upgrading) or it was added by hand (remove that line)",
                crate::event::FORMAT
            ),
            Fix::Hand,
        );
    }
    for (line, id, high) in scan.lower {
        let said = if id == high {
            format!(
                "LOGS/events.jsonl line {line} has id {id}, as the event before it: an id given twice (the log was edited by hand; a reader by cursor passes the second over); look at both in `circe log`, and keep the log as circe writes it"
            )
        } else {
            format!(
                "LOGS/events.jsonl line {line} has id {id}, lower than {high} before it: a line added by hand (circe gives each event a higher id, and a reader by cursor may pass events over it); remove that line"
            )
        };
        v(7, said, Fix::Hand);
    }
    Ok(())
}

/// Invariant 4 for a held task whose `.status` is gone while its `.owner` stays: no command
/// leaves that (an archive removes `.owner` first, `.status` last; a send rolled back never
/// wrote `.owner`), so the record was removed by hand. Reported, not repaired: what it said
/// (owner, epoch, lease) is in the event log, not here.
fn check_lost_status(eng: &LocalEngine, v: &mut dyn FnMut(u8, String, Fix)) -> Result<()> {
    for id in eng.store.without_status("owner")? {
        // Looked at again under the task's lock: a command may have been half-way.
        let lock = eng.store.lock_task(&id)?;
        let lost = !eng.store.has_record(&id, "status") && eng.store.has_record(&id, "owner");
        eng.store.unlock_task(&id, lock);
        if !lost {
            continue;
        }
        v(
            4,
            format!(
                "TASKS/{id}.status is missing while TASKS/{id}.owner is there: the record of a held task was removed by hand; put it back from a backup (`circe log --task {id}` lists its events: its last status, owner and epoch); until then the task is in no list and its message stays in its owner's box"
            ),
            Fix::Hand,
        );
    }
    Ok(())
}

/// What doctor says of a task whose message is not where its record says (`problem`):
/// where it may be when it is in no box, and why it is no claim in the box of an agent that
/// may not take the task (moved there by hand).
fn explained(eng: &LocalEngine, st: &TaskState, mut problem: String) -> String {
    if st.location.is_none() {
        return where_it_may_be(eng, st, problem);
    }
    if let Some(Mailbox::Inbox(a) | Mailbox::Workspace(a)) = &st.location
        && let Some(why) = no_claim(eng, st, a)
    {
        let back = home(st).map_or_else(|| "its box".to_string(), |h| h.rel_path());
        problem.push_str(&format!(" ({why}), so it is no claim: move the message back to {back}"));
    }
    problem
}

/// Why a message moved by hand into `a`'s box is no claim by `a`, when it is none
/// (`reconcile` leaves it).
fn no_claim(eng: &LocalEngine, st: &TaskState, a: &AgentName) -> Option<String> {
    let rec = &st.rec;
    if rec.owner.as_ref() == Some(a) || rec.status.is_terminal() {
        return None;
    }
    reconcile::no_claim(eng, rec, a)
}

/// Where the record of a task not finished says its message is: its owner's INBOX while it
/// is held, NEW_MESSAGES while it waits.
fn home(st: &TaskState) -> Option<Mailbox> {
    match (&st.rec.owner, st.rec.status) {
        (_, s) if s.is_terminal() => None,
        (Some(o), s) if s.is_owned() => Some(Mailbox::Inbox(o.clone())),
        (_, Status::New | Status::Parked) => Some(Mailbox::NewMessages),
        _ => None,
    }
}

/// What mends a task whose message a person moved, when `--repair` did not: moving it back
/// to where its record says it is makes the task as it was. A move into the box of an
/// agent that may take the task is that agent's claim, which `--repair` makes (said, when
/// it has not run). Empty when there is nothing to say.
fn move_back(eng: &LocalEngine, st: &TaskState, repair: bool) -> String {
    let (Some(home), Some(b)) = (home(st), &st.location) else { return String::new() };
    let root = &eng.store.root;
    let back = format!(
        "move it back, `mv {} {}/`, where its record says it is",
        root.join(b.rel_path()).join(&st.rec.message).display(),
        root.join(home.rel_path()).display()
    );
    match b {
        Mailbox::Inbox(a) | Mailbox::Workspace(a) if no_claim(eng, st, a).is_some() => {
            String::new() // said by `explained`
        }
        Mailbox::Inbox(a) | Mailbox::Workspace(a)
            if !repair && st.rec.owner.as_ref() != Some(a) =>
        {
            format!(": `--repair` takes the move as {a}'s claim; to undo it instead, {back}")
        }
        _ => format!(": {back}"),
    }
}

/// What doctor says of a task whose message is in no box (`problem`): where it may be.
fn where_it_may_be(eng: &LocalEngine, st: &TaskState, mut problem: String) -> String {
    // Behind its owner's folder that is a link.
    if let Some(o) = &st.rec.owner
        && let Some(why) = eng.store.unreadable_agent(o)
    {
        problem.push_str(&format!(
            " ({why}: the message may lie behind it, where circe does not follow)"
        ));
    }
    // Under a hidden name, which every listing passes over.
    if let Ok(Some((b, name))) =
        eng.store.hidden_message_of(st.rec.task_id.as_str(), &st.rec.message)
    {
        problem = format!(
            "its message lies hidden as {}/{name} (a name starting with `.`, which circe passes over): rename it back to {} and the task is as it was",
            b.rel_path(),
            st.rec.message
        );
    }
    problem
}

fn disagreement(st: &TaskState) -> Option<String> {
    let r: &StatusRecord = &st.rec;
    match (&st.location, r.status) {
        (None, s) if s.is_terminal() => None,
        (None, Status::New) if r.attempts == 0 => Some(format!(
            "its message {} is in no box (a send that never delivered it, or the message renamed or taken out of the root by hand)",
            r.message
        )),
        (None, _) => {
            Some(format!("it is {} but its message {} is in no box", r.status.as_str(), r.message))
        }
        (Some(Mailbox::NewMessages), Status::New | Status::Parked) => None,
        (Some(b @ (Mailbox::Inbox(a) | Mailbox::Workspace(a))), s)
            if s.is_owned() || s.is_terminal() =>
        {
            (r.owner.as_deref() != Some(a.as_str()) && !s.is_terminal()).then(|| {
                format!(
                    "it is held by {} but its message is in {b}",
                    r.owner.as_deref().unwrap_or("nobody")
                )
            })
        }
        (Some(_), s) if s.is_terminal() => None,
        (Some(b), s) => Some(format!("it is {} but its message is in {b}", s.as_str())),
    }
}

/// A held task whose lease is no time (edited by hand): it never runs out, so no reap
/// returns it. Reported, not repaired (what it should be is not known).
fn lease_unknown(st: &TaskState) -> Option<String> {
    let r = &st.rec;
    let lease = r.lease_expires_at.as_deref();
    if !r.status.is_owned() || lease.and_then(crate::clock::parse).is_some() {
        return None;
    }
    let (id, owner) = (&r.task_id, r.owner.as_deref().unwrap_or("nobody"));
    Some(format!(
        "task {id}: held by {owner} with a lease that is no time ({}): it never runs out, and no reap returns it; its owner renews it (`circe --agent {owner} heartbeat {id}`), or a coordinator releases it (`circe release {id} --force`)",
        lease.map_or_else(|| "none".to_string(), |l| format!("`{l}`"))
    ))
}

/// `.owner` exists exactly while the task is held, and matches `.status` (invariant 5).
fn check_owner(
    eng: &LocalEngine,
    repair: bool,
    st: &TaskState,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    let id = &st.rec.task_id;
    if !st.rec.status.is_owned() && st.owner.is_none() && eng.store.has_record(id, "owner") {
        return unparsed_owner(eng, repair, id, v);
    }
    if owner_mismatch(st) {
        let after = if repair { mended(eng, id) } else { Ok(None) };
        let why = match &after {
            Err(why) => format!(" ({why})"),
            Ok(_) => String::new(),
        };
        let what = format!("task {id}: .owner does not match .status{why}");
        v(5, what, Fix::done_if(repair && after.is_ok()));
    }
    Ok(())
}

/// A `.owner` that does not parse beside a task nobody holds (invariant 5): `--repair`
/// moves it aside, under the task's lock (a claim may be writing one meanwhile).
fn unparsed_owner(
    eng: &LocalEngine,
    repair: bool,
    id: &TaskId,
    v: &mut dyn FnMut(u8, String, Fix),
) -> Result<()> {
    let lock = eng.store.lock_task(id)?;
    // Still there, still unread, still nobody's (a claim and a release may have come and
    // gone since the first look).
    let still = eng.store.has_record(id, "owner")
        && reconcile::load(eng, id)?.is_some_and(|s| !s.rec.status.is_owned() && s.owner.is_none());
    let moved = if repair && still {
        Some(eng.store.quarantine_task_file(&format!("{id}.owner"))?)
    } else {
        None
    };
    eng.store.unlock_task(id, lock);
    if still {
        let what =
            format!("task {id}: a .owner that does not parse lies beside a task nobody holds");
        match moved {
            Some(dest) => v(5, format!("{what}; moved to {dest}"), Fix::Done),
            None => v(5, what, Fix::Repair),
        }
    }
    Ok(())
}

/// `.owner` exists exactly while the task is held, and then matches `.status`.
fn owner_mismatch(st: &TaskState) -> bool {
    match (st.rec.status.is_owned(), &st.rec.owner, &st.owner) {
        (true, Some(a), Some(o)) => a != &o.owner || o.epoch != st.rec.epoch,
        (false, _, None) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Root, id};
    use super::locked_task;

    #[test]
    fn a_task_removed_since_the_listing_is_no_violation() {
        // An archive run (or a send's roll-back) removed the task between doctor's listing
        // of TASKS and its lock: its `.status` is gone, which is no damage.
        let (_d, r) = Root::new(&["coordinator", "engineer"]);
        let mut found = Vec::new();
        let got =
            locked_task(&r.eng, &id("GONE-1"), &mut |i, what, _| found.push((i, what))).unwrap();
        assert!(got.is_none());
        assert!(found.is_empty(), "{found:?}");
    }

    /// A task's lock file is removed only by the holder of the file at its path: one whose
    /// file was removed already and the name made again leaves the new file to its holder.
    #[test]
    fn only_the_lock_file_held_is_removed() {
        let (_d, r) = Root::new(&["coordinator", "engineer"]);
        let t = id("GONE-1");
        let path = r.eng.store.root().join("locks/task-GONE-1.lock");
        let first = r.eng.store.lock_task(&t).unwrap();
        std::fs::remove_file(&path).unwrap();
        let second = r.eng.store.lock_task(&t).unwrap();
        r.eng.store.remove_task_lock(&t, &first).unwrap();
        assert!(path.exists());
        r.eng.store.remove_task_lock(&t, &second).unwrap();
        assert!(!path.exists());
    }

    /// A waiter on a lock file its holder removes gets a lock that guards nothing: it lets
    /// it go and waits for the file at the path, which another took meanwhile.
    #[test]
    fn a_lock_is_that_of_the_file_at_its_path() {
        use std::os::unix::fs::MetadataExt;
        let (_d, r) = Root::new(&["coordinator", "engineer"]);
        let (t, store) = (id("GONE-1"), &r.eng.store);
        let path = store.root().join("locks/task-GONE-1.lock");
        let first = store.lock_task(&t).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| store.lock_task(&t).unwrap());
            std::thread::sleep(std::time::Duration::from_millis(100));
            store.remove_task_lock(&t, &first).unwrap();
            let other = store.lock_task(&t).unwrap();
            drop(first);
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!waiter.is_finished(), "two holders at once");
            drop(other);
            let got = waiter.join().unwrap();
            let at = std::fs::metadata(&path).unwrap();
            assert_eq!(got.file().metadata().unwrap().ino(), at.ino());
        });
    }
}
