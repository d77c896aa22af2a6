//! The in-memory engine: a root kept in a map behind a mutex. It proves the seam: the
//! operation tests run against it as well as against the local engine, and it has no notion
//! of paths, renames or lock files. Nothing survives the process.
//!
//! A task transaction marks its task as taken (others wait on a condition variable), works
//! on a snapshot, and commits the change in one step under the mutex; a commit whose ticket
//! is no longer where the snapshot saw it is refused as a conflict, like a lost rename.

mod archive;
mod chat;
mod seq;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{Capped, CursorHold, Engine, EventFeed, Parcel, SeqHold, TaskTx, Violation};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};
use crate::message::numbered;
use crate::names::{AgentName, CursorName, MsgId, TaskId};
use crate::seq::{Counter, Receiver};
use crate::task::{Eligibility, Row, Status, TaskState, row_of};
use crate::tx::AskRecord;

mod tx;
mod tx_state;
use tx::MemTx;

#[derive(Default)]
struct Inner {
    agents: BTreeMap<AgentName, String>,
    tasks: BTreeMap<TaskId, TaskState>,
    boxes: BTreeMap<Mailbox, BTreeMap<String, Vec<u8>>>,
    events: Vec<Event>,
    busy: HashSet<TaskId>,
    cursors: BTreeMap<(String, CursorName), Vec<u8>>,
    held: HashSet<(String, CursorName)>,
    archive: archive::Archived,
    asks: BTreeMap<MsgId, AskRecord>,
    /// What is held until a guard drops: `ask/<id>` for an answer under way
    /// (`Engine::hold_ask`), `send/<id>` for a send of a message id (`Engine::hold_msg_id`).
    answering: HashSet<String>,
    prompts: BTreeMap<AgentName, Vec<u8>>,
    retired: BTreeMap<AgentName, String>,
    dead: BTreeMap<CursorName, Vec<Event>>,
    seq: seq::SeqState,
    chat: chat::ChatState,
    grants: BTreeMap<(AgentName, String), (TaskId, u64)>,
    config: String,
}

#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
    freed: Condvar,
}

/// A root in memory.
#[derive(Default)]
pub struct MemoryEngine {
    shared: Arc<Shared>,
}

/// A held cursor: released when dropped.
struct Held {
    shared: Arc<Shared>,
    key: (String, CursorName),
}

impl Drop for Held {
    fn drop(&mut self) {
        lock(&self.shared).held.remove(&self.key);
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MemoryEngine {
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.shared)
    }

    /// Mark `task` taken by a transaction, waiting while another has it.
    fn take(&self, task: &TaskId) -> Option<TaskState> {
        let mut g = self.lock();
        while g.busy.contains(task) {
            g = self.shared.freed.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        g.busy.insert(task.clone());
        g.tasks.get(task).cloned()
    }
}

impl Inner {
    fn free_name(&self, b: &Mailbox, base: &str) -> String {
        let taken = self.boxes.get(b);
        (1..10_000)
            .map(|n| numbered(base, n))
            .find(|n| taken.is_none_or(|m| !m.contains_key(n)))
            .unwrap_or_else(|| base.to_string())
    }

    fn append(&mut self, events: &mut [Event]) {
        for e in events.iter_mut() {
            e.id = self.events.len() as u64 + 1;
            self.events.push(e.clone());
        }
    }
}

/// Woken by the condition variable every append and every commit notifies.
struct MemFeed<'a> {
    eng: &'a MemoryEngine,
    seen: usize,
}

impl EventFeed for MemFeed<'_> {
    fn wait(&mut self, timeout: Option<std::time::Duration>) -> Result<bool> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        let mut g = self.eng.lock();
        while g.events.len() <= self.seen {
            let left = match deadline {
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(false),
                },
                None => None,
            };
            g = match left {
                Some(l) => self
                    .eng
                    .shared
                    .freed
                    .wait_timeout(g, l)
                    .map_or_else(|e| e.into_inner().0, |r| r.0),
                None => {
                    self.eng.shared.freed.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner)
                }
            };
        }
        self.seen = g.events.len();
        Ok(true)
    }
}

fn rank(priority: &str) -> u8 {
    crate::message::rank_of(priority)
}

impl Engine for MemoryEngine {
    fn location(&self) -> String {
        "memory".into()
    }

    fn agents(&self) -> Result<Vec<(AgentName, String)>> {
        Ok(self.lock().agents.iter().map(|(a, r)| (a.clone(), r.clone())).collect())
    }

    fn agent_role(&self, name: &AgentName) -> Result<Option<String>> {
        Ok(self.lock().agents.get(name).cloned())
    }

    fn add_agent(&self, name: &AgentName, role: &str) -> Result<bool> {
        let mut g = self.lock();
        if g.agents.contains_key(name) {
            return Ok(false);
        }
        g.agents.insert(name.clone(), role.to_string());
        Ok(true)
    }

    fn begin<'a>(&'a self, task: &TaskId, create: bool) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        if !create && !self.lock().tasks.contains_key(task) {
            return Ok(None);
        }
        let st = self.take(task);
        let tx = MemTx { eng: self, task: task.clone(), st };
        if tx.st.is_none() && !create {
            return Ok(None);
        }
        Ok(Some(Box::new(tx)))
    }

    fn begin_next<'a>(
        &'a self,
        who: &Eligibility,
        skip: &HashSet<TaskId>,
    ) -> Result<Option<Box<dyn TaskTx + 'a>>> {
        let best = {
            let g = self.lock();
            g.tasks
                .iter()
                .filter(|(id, st)| {
                    st.rec.status == Status::New
                        && !skip.contains(*id)
                        && who.admits(&st.rec.to, &st.rec.intent)
                        && who.in_time(st.rec.deadline.as_deref())
                })
                // Priority, then deadline (none: last), then time waiting.
                .min_by(|(ia, a), (ib, b)| {
                    let key = |st: &TaskState| {
                        (rank(&st.rec.priority), st.rec.deadline.is_none(), st.rec.deadline.clone())
                    };
                    (key(a), &a.rec.updated_at, ia).cmp(&(key(b), &b.rec.updated_at, ib))
                })
                .map(|(id, _)| id.clone())
        };
        // No task waits: one whose lease ran out.
        let lapsed = || self.lapsed_leases(who, skip).map(|l| l.into_iter().next());
        let Some(task) = best.map_or_else(lapsed, |t| Ok(Some(t)))? else { return Ok(None) };
        let st = self.take(&task);
        Ok(Some(Box::new(MemTx { eng: self, task, st })))
    }

    fn task_ids(&self) -> Result<Vec<TaskId>> {
        Ok(self.lock().tasks.keys().cloned().collect())
    }

    fn board(&self, each: &mut dyn FnMut(Row<'_>) -> Result<()>) -> Result<()> {
        let rows: Vec<Row<'static>> =
            self.lock().tasks.values().map(|st| row_of(&st.rec, &st.checks)).collect();
        for r in rows {
            each(r)?;
        }
        Ok(())
    }

    fn peek(&self, task: &TaskId) -> Result<Option<TaskState>> {
        Ok(self.lock().tasks.get(task).cloned())
    }

    fn deliver(&self, content: &[u8], name: &str, to: &[Mailbox]) -> Result<Vec<String>> {
        let mut g = self.lock();
        let mut out = Vec::with_capacity(to.len());
        for b in to {
            let n = g.free_name(b, name);
            g.boxes.entry(b.clone()).or_default().insert(n.clone(), content.to_vec());
            out.push(n);
        }
        g.use_number(content);
        Ok(out)
    }

    fn deliver_batch(&self, parcels: &[Parcel]) -> Result<Vec<Vec<String>>> {
        let mut g = self.lock();
        let mut out = Vec::with_capacity(parcels.len());
        for p in parcels {
            let mut names = Vec::with_capacity(p.to.len());
            for b in &p.to {
                let n = g.free_name(b, &p.name);
                g.boxes.entry(b.clone()).or_default().insert(n.clone(), p.content.clone());
                names.push(n);
            }
            out.push(names);
            g.use_number(&p.content);
        }
        Ok(out)
    }

    fn finish_deliveries(&self, _held: Option<&str>) -> Result<usize> {
        // Every delivery is one step under the mutex: none is ever left half-way.
        Ok(0)
    }

    fn ask(&self, id: &MsgId) -> Result<Option<AskRecord>> {
        Ok(self.lock().asks.get(id).cloned())
    }

    fn asks(&self) -> Result<Vec<AskRecord>> {
        Ok(self.lock().asks.values().cloned().collect())
    }

    fn put_ask(&self, rec: &AskRecord, seen: Option<u64>) -> Result<AskRecord> {
        self.store_ask(rec, seen)
    }

    fn hold_ask(&self, id: &MsgId, wait: bool) -> Result<Option<super::Held<'_>>> {
        self.hold_answer(id, wait)
    }

    fn hold_msg_id(&self, id: &str) -> Result<super::Held<'_>> {
        self.hold_sending(id)
    }

    fn hold_filing(&self) -> Result<super::Held<'_>> {
        self.hold_sending("\u{0}filing")
    }

    fn hold_import(&self) -> Result<Option<super::Held<'_>>> {
        // One process holds this engine: no other import can run beside this one.
        Ok(Some(Box::new(())))
    }

    fn set_prompt(&self, agent: &AgentName, message: &[u8]) -> Result<()> {
        self.store_prompt(agent, message)
    }

    fn prompt(&self, agent: &AgentName) -> Result<Option<Vec<u8>>> {
        Ok(self.lock().prompts.get(agent).cloned())
    }

    fn retire_agent(&self, agent: &AgentName, at: &str) -> Result<bool> {
        self.mark_retired(agent, at)
    }

    fn retired_now(&self, agent: &AgentName) -> Result<Option<bool>> {
        Ok(Some(self.lock().retired.contains_key(agent)))
    }

    fn retirements(&self) -> Result<Vec<(AgentName, String)>> {
        Ok(self.lock().retired.iter().map(|(a, t)| (a.clone(), t.clone())).collect())
    }

    fn move_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<bool> {
        let mut g = self.lock();
        if g.boxes.get(to).is_some_and(|b| b.contains_key(file)) {
            return Err(Error::conflict(format!("{to}/{file} exists already; not replacing it"))
                .hint(format!("nothing moved: `circe show {file}` shows both")));
        }
        let Some(body) = g.boxes.get_mut(from).and_then(|b| b.remove(file)) else {
            return Ok(false);
        };
        g.boxes.entry(to.clone()).or_default().insert(file.to_string(), body);
        Ok(true)
    }

    fn file_message(&self, from: &Mailbox, to: &Mailbox, file: &str) -> Result<Option<String>> {
        let mut g = self.lock();
        let taken = |g: &Inner, n: &str| g.boxes.get(to).is_some_and(|b| b.contains_key(n));
        let Some(used) =
            (1..10_000).map(|n| crate::message::numbered(file, n)).find(|n| !taken(&g, n))
        else {
            return Ok(None);
        };
        let Some(body) = g.boxes.get_mut(from).and_then(|b| b.remove(file)) else {
            return Ok(None);
        };
        g.boxes.entry(to.clone()).or_default().insert(used.clone(), body);
        Ok(Some(used))
    }

    fn list_box(&self, mailbox: &Mailbox) -> Result<Vec<String>> {
        Ok(self.lock().boxes.get(mailbox).map(|b| b.keys().cloned().collect()).unwrap_or_default())
    }

    fn read_message(&self, mailbox: &Mailbox, file: &str) -> Result<Vec<u8>> {
        self.lock()
            .boxes
            .get(mailbox)
            .and_then(|b| b.get(file).cloned())
            .ok_or_else(|| Error::not_found(format!("no message {file} in {mailbox}")))
    }

    fn read_message_capped(&self, mailbox: &Mailbox, file: &str, cap: usize) -> Result<Capped> {
        let bytes = self.read_message(mailbox, file)?;
        let size = Some(bytes.len() as u64);
        Ok(Capped { bytes: bytes.into_iter().take(cap.saturating_add(1)).collect(), size })
    }

    fn append_events(&self, mut events: Vec<Event>) -> Result<Vec<Event>> {
        self.lock().append(&mut events);
        self.shared.freed.notify_all();
        Ok(events)
    }

    fn read_events(&self, from: Cursor, max: usize) -> Result<Vec<Event>> {
        let g = self.lock();
        let start = usize::try_from(from.after).unwrap_or(usize::MAX).min(g.events.len());
        Ok(g.events[start..].iter().take(max).cloned().collect())
    }

    fn read_events_back(&self, before: Option<u64>, max: usize) -> Result<Vec<Event>> {
        let g = self.lock();
        let end = before.map_or(g.events.len(), |b| {
            usize::try_from(b.saturating_sub(1)).unwrap_or(usize::MAX).min(g.events.len())
        });
        Ok(g.events[..end].iter().rev().take(max).cloned().collect())
    }

    fn last_event_id(&self) -> Result<u64> {
        Ok(self.lock().events.len() as u64)
    }

    fn subscribe(&self, _poll: Option<std::time::Duration>) -> Result<Box<dyn EventFeed + '_>> {
        let seen = self.lock().events.len();
        Ok(Box::new(MemFeed { eng: self, seen }))
    }

    fn rotate_events(&self) -> Result<Option<String>> {
        // One list in memory: there is nothing to rotate.
        Ok(None)
    }

    fn local_folder(&self) -> Option<std::path::PathBuf> {
        None
    }

    fn chat_log(&self) -> Option<&dyn crate::engine::ChatLog> {
        Some(self)
    }

    fn hold_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<CursorHold>> {
        let key = (kind.to_string(), name.clone());
        let mut g = self.lock();
        if !g.held.insert(key.clone()) {
            return Ok(None);
        }
        Ok(Some(Box::new(Held { shared: Arc::clone(&self.shared), key })))
    }

    fn read_cursor(&self, kind: &str, name: &CursorName) -> Result<Option<Vec<u8>>> {
        Ok(self.lock().cursors.get(&(kind.to_string(), name.clone())).cloned())
    }

    fn write_cursor(&self, kind: &str, name: &CursorName, value: &[u8]) -> Result<()> {
        self.lock().cursors.insert((kind.to_string(), name.clone()), value.to_vec());
        Ok(())
    }

    fn cursors(&self) -> Result<Vec<(String, CursorName)>> {
        Ok(self.lock().cursors.keys().cloned().collect())
    }

    fn remove_cursor(&self, kind: &str, name: &CursorName) -> Result<bool> {
        let mut g = self.lock();
        let dead = kind == crate::engine::EVENTS_CURSORS && g.dead.remove(name).is_some();
        let had = g.cursors.remove(&(kind.to_string(), name.clone())).is_some();
        Ok(had || dead)
    }

    fn dead_letter_consumers(&self) -> Result<Vec<CursorName>> {
        Ok(self.lock().dead.keys().cloned().collect())
    }

    fn dead_letter(&self, consumer: &CursorName, event: &Event) -> Result<()> {
        self.lock().dead.entry(consumer.clone()).or_default().push(event.clone());
        Ok(())
    }

    fn dead_letters(&self, consumer: &CursorName) -> Result<Vec<Event>> {
        Ok(self.lock().dead.get(consumer).cloned().unwrap_or_default())
    }

    fn message_path(&self, _mailbox: &Mailbox, _file: &str) -> Option<std::path::PathBuf> {
        None
    }

    fn seq_hold(&self, sender: &AgentName) -> Result<Box<dyn SeqHold + '_>> {
        self.hold(sender)
    }

    fn seq_update(
        &self,
        sender: &AgentName,
        change: &mut dyn FnMut(&mut Counter) -> Result<()>,
    ) -> Result<Counter> {
        self.update(sender, change)
    }

    fn seq_counters(&self) -> Result<Vec<(AgentName, Counter)>> {
        Ok(self.counters())
    }

    fn seq_seen(&self, agent: &AgentName) -> Result<Receiver> {
        Ok(self.lock().seq.seen.get(agent).cloned().unwrap_or_default())
    }

    fn seq_see(
        &self,
        agent: &AgentName,
        change: &mut dyn FnMut(&mut Receiver) -> Result<()>,
    ) -> Result<(Receiver, Receiver)> {
        self.see(agent, change)
    }

    fn seq_receivers(&self) -> Result<Vec<(AgentName, Receiver)>> {
        Ok(self.receivers())
    }

    fn snapshot(&self) -> Result<crate::engine::Snapshot> {
        crate::engine::Snapshot::read(self)
    }

    fn config_text(&self) -> Result<String> {
        let g = self.lock();
        Ok(if g.config.is_empty() {
            crate::config::DEFAULT_CONFIG.to_string()
        } else {
            g.config.clone()
        })
    }

    fn set_config(&self, text: &str) -> Result<()> {
        text.clone_into(&mut self.lock().config);
        Ok(())
    }

    fn granted(&self, agent: &AgentName, request: &str) -> Result<Option<(TaskId, u64)>> {
        Ok(self.lock().grants.get(&(agent.clone(), request.to_string())).cloned())
    }

    fn doctor(&self, _repair: bool) -> Result<Vec<Violation>> {
        // Every change is one step under the mutex: nothing can be half-done.
        Ok(Vec::new())
    }

    fn archive(
        &self,
        req: &crate::archive::Request,
        _progress: &mut dyn FnMut(crate::archive::Progress),
    ) -> Result<crate::archive::Report> {
        let report = archive::run(&mut self.lock(), req);
        self.shared.freed.notify_all();
        Ok(report)
    }

    fn archived_task(&self, task: &TaskId) -> Result<Option<crate::archive::Tombstone>> {
        Ok(self.lock().archive.tasks.get(task).map(|b| b.tombstone.clone()))
    }

    fn archived_bundle(&self, task: &TaskId) -> Result<Option<crate::archive::Bundle>> {
        Ok(self.lock().archive.tasks.get(task).cloned())
    }

    fn archived_tasks(&self) -> Result<Vec<crate::archive::Tombstone>> {
        let mut out: Vec<_> =
            self.lock().archive.tasks.values().map(|b| b.tombstone.clone()).collect();
        out.sort_by(|a, b| a.task.cmp(&b.task));
        Ok(out)
    }

    fn archived_events(&self, _from: Cursor, _max: usize) -> Result<Vec<Event>> {
        // The log is never rotated in memory: every event stays readable by `read_events`.
        Ok(Vec::new())
    }

    fn keeps_archive(&self) -> bool {
        true
    }

    fn archive_search(
        &self,
        q: &crate::archive::query::Query,
        each: &mut dyn FnMut(crate::archive::Hit) -> Result<bool>,
    ) -> Result<Vec<String>> {
        archive::search(&self.lock(), q, each).map(|()| Vec::new())
    }

    fn archive_verify(&self) -> Result<Vec<(String, Option<String>)>> {
        Ok(Vec::new())
    }
}
