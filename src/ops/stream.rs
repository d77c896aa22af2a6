//! Following the event log: from a cursor, in id order, waking on the engine's feed (never
//! polling when idle), with the position saved once events were handed on.
//!
//! Delivery is at least once: the cursor moves only past events the caller says were
//! handled (printed, or their hook exited 0), so a consumer killed in between sees those
//! events again, and nothing is ever skipped: reads go by id, which survives rotation, and a
//! wake-up (including an inotify overflow) only means "read again from the cursor".
//!
//! A printing consumer saves its place when it has caught up, when it stops, and at least
//! every [`SAVE_EVERY`] events or second while it catches up (a save is a file's create and
//! rename, far dearer than printing a line); one with a hook saves after every event, as a
//! hook's run is not to be repeated lightly.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::{CursorHold, EventFeed};
use crate::error::{Error, Result};
use crate::event::{Cursor, Event, EventKind};
use crate::names::{AgentName, CursorName, TaskId};
use crate::task::Status;
use crate::workspace::Workspace;

/// The cursor kind of event-log consumers (`.circe/cursors/events/<name>`).
pub const KIND: &str = crate::engine::EVENTS_CURSORS;

/// A consumer's saved place (format version 1): the id of the last event it handed on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedCursor {
    pub v: u32,
    pub after: u64,
    /// When it last moved.
    pub saved_at: String,
}

/// How a consumer's cursor is started afresh: removed.
pub fn afresh(name: &str) -> String {
    format!("`circe cursors --remove {name}` starts it afresh (from now, or with --from-start)")
}

impl SavedCursor {
    pub fn parse(name: &CursorName, bytes: &[u8]) -> Result<SavedCursor> {
        let c: SavedCursor = serde_json::from_slice(bytes).map_err(|e| {
            Error::internal(format!("cursor {name} is damaged: {e}")).hint(afresh(name.as_str()))
        })?;
        if c.v > 1 {
            return Err(Error::refused(format!(
                "cursor {name} is of format {}; this circe reads format 1",
                c.v
            ))
            .hint("upgrade circe"));
        }
        Ok(c)
    }
}

/// Where a stream starts when its cursor has no saved place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// After the newest event: only what happens from now on.
    Now,
    /// From the first event in the log.
    FromStart,
    /// After this event id.
    After(u64),
    /// A stream going on after a reconnection: after this event (the last it handed on),
    /// or after the cursor's saved place when that is further.
    Resume(u64),
}

/// Which events a consumer wants.
#[derive(Debug, Default)]
pub struct Filter {
    /// What concerns this agent: its boxes, what it did, tasks it holds, tasks it may take.
    pub agent: Option<(AgentName, String)>,
    pub task: Option<TaskId>,
    pub kinds: Vec<EventKind>,
    /// Who holds which task, as far as the stream has seen (asked of the engine once).
    owners: HashMap<TaskId, Option<AgentName>>,
    /// Who opened which task (asked of the engine once per task; `None`: not known, an
    /// archived task).
    openers: HashMap<TaskId, Option<String>>,
}

impl Filter {
    pub fn new(
        agent: Option<(AgentName, String)>,
        task: Option<TaskId>,
        kinds: Vec<EventKind>,
    ) -> Filter {
        Filter { agent, task, kinds, owners: HashMap::new(), openers: HashMap::new() }
    }

    /// Does `e` pass? Keeps track of task owners on the way.
    pub fn wants(&mut self, ws: &Workspace, e: &Event) -> bool {
        if !self.kinds.is_empty() && !self.kinds.contains(&e.event) {
            return false;
        }
        if self.task.as_ref().is_some_and(|t| e.task.as_ref() != Some(t)) {
            return false;
        }
        let Some((me, role)) = self.agent.clone() else { return true };
        let held_before = e.task.as_ref().is_some_and(|t| self.owner(ws, t).as_ref() == Some(&me));
        if let (Some(t), Some(to)) = (&e.task, e.to) {
            let owner = match (e.event, to.is_owned()) {
                (EventKind::Claim, _) => AgentName::new(e.agent.as_str()).ok(),
                (_, true) => self.owners.get(t).cloned().flatten(),
                (_, false) => None,
            };
            self.owners.insert(t.clone(), owner);
        }
        let waiting_for_me = e.to == Some(Status::New)
            && e.task.as_ref().is_some_and(|t| {
                ws.engine.peek(t).ok().flatten().is_some_and(|st| {
                    st.rec.status == Status::New
                        && ws.may_take(&me, &role, &st.rec.to, &st.rec.intent)
                })
            });
        // The fate of a task it opened: every move of its status (claimed, completed,
        // handed on, parked, ...), so an opener follows its tasks without `--all`.
        let opened_by_me = e.to.is_some()
            && e.task.as_ref().is_some_and(|t| self.opener(ws, t) == Some(me.as_str()));
        held_before || e.concerns_agent(&me) || waiting_for_me || opened_by_me
    }

    fn owner(&mut self, ws: &Workspace, task: &TaskId) -> Option<AgentName> {
        if !self.owners.contains_key(task) {
            self.learn(ws, task);
        }
        self.owners.get(task).cloned().flatten()
    }

    fn opener(&mut self, ws: &Workspace, task: &TaskId) -> Option<&str> {
        if !self.openers.contains_key(task) {
            self.learn(ws, task);
        }
        self.openers.get(task).and_then(Option::as_deref)
    }

    /// Ask the engine once about `task`: who holds it (unless the stream knows better
    /// already) and who opened it.
    fn learn(&mut self, ws: &Workspace, task: &TaskId) {
        let st = ws.engine.peek(task).ok().flatten();
        let owner = st
            .as_ref()
            .and_then(|st| st.rec.status.is_owned().then(|| st.rec.owner.clone()).flatten());
        self.owners.entry(task.clone()).or_insert(owner);
        self.openers.insert(task.clone(), st.map(|st| st.rec.opened_by));
    }
}

/// An open stream over the event log.
pub struct Follow<'a> {
    ws: &'a Workspace,
    feed: Box<dyn EventFeed + 'a>,
    at: Cursor,
    cursor: Option<(CursorName, CursorHold)>,
    /// The place saved last, when it was saved, and whether each event is saved at once.
    saved: u64,
    saved_when: std::time::Instant,
    save_each: bool,
    /// When it last looked for cut-off commands' events (`settle_left`), and whether a
    /// failure to log them was said.
    settled: std::time::Instant,
    said: bool,
}

impl<'a> Follow<'a> {
    /// Subscribe (first, so nothing appended from here on is missed), take the cursor when
    /// one is named (one consumer per cursor: exit 4 when another holds it), and find the
    /// place to start: the cursor's saved place, else `start`.
    pub fn open(
        ws: &'a Workspace,
        cursor: Option<CursorName>,
        start: Start,
        poll: Option<Duration>,
    ) -> Result<Follow<'a>> {
        let feed = ws.engine.subscribe(poll)?;
        let mut said = false;
        settle_left(ws, &mut said);
        let mut saved = None;
        let cursor = match cursor {
            Some(name) => {
                let hold = ws.engine.hold_cursor(KIND, &name)?.ok_or_else(|| {
                    Error::conflict(format!("cursor `{name}` is in use by another consumer"))
                        .detail("cursor", name.to_string())
                        .hint("each consumer needs its own --cursor name (on a database root, one whose host the network cut off holds it until the server finds its connection dead, within about 15 s)")
                })?;
                if let Some(bytes) = ws.engine.read_cursor(KIND, &name)? {
                    saved = Some(SavedCursor::parse(&name, &bytes)?.after);
                }
                // A place past the newest event hears nothing until the log gets there: said,
                // as doctor says it, rather than left to look like a quiet log.
                if let Some(s) = saved {
                    let last = ws.engine.last_event_id()?;
                    if s > last {
                        crate::error::warn(&format!(
                            "cursor {name} has passed event {s}, but the log's newest is {last}: the events up to {s} will not be handed on (a cursor edited by hand, or a log put back from an older copy): {}; `circe doctor` reports it",
                            afresh(name.as_str())
                        ));
                    }
                }
                Some((name, hold))
            }
            None => None,
        };
        if let (None, Start::After(a) | Start::Resume(a)) = (saved, start) {
            // Past the newest event, the ids in between would be skipped when they come.
            let last = ws.engine.last_event_id()?;
            if a > last {
                return Err(Error::usage(format!(
                    "--after {a} is past the newest event ({last}): the events in between would never be handed on"
                ))
                .hint(format!("start at an event that was logged (`--after {last}` for what comes next, or leave --after out)")));
            }
        }
        let after = match (saved, start) {
            (Some(s), Start::Resume(a)) => s.max(a),
            (Some(a), _) | (None, Start::After(a) | Start::Resume(a)) => a,
            // From the oldest event kept (the archive may have moved the first ones).
            (None, Start::FromStart) => ws
                .engine
                .read_events(Cursor::after(0), 1)?
                .first()
                .map_or(0, |e| e.id.saturating_sub(1)),
            (None, Start::Now) => ws.engine.last_event_id()?,
        };
        let mut follow = Follow {
            ws,
            feed,
            at: Cursor::after(after),
            cursor,
            saved: after,
            saved_when: std::time::Instant::now(),
            save_each: false,
            settled: std::time::Instant::now(),
            said,
        };
        // A new cursor keeps its starting place at once: a consumer stopped before its first
        // event resumes there, rather than after whatever came meanwhile.
        if saved.is_none_or(|s| s < after) {
            follow.save(after)?;
        }
        Ok(follow)
    }

    /// Save the cursor after every event handed on (a consumer with a hook), not only when
    /// caught up or every [`SAVE_EVERY`] events.
    pub fn save_each(&mut self) {
        self.save_each = true;
    }

    /// The id of the last event handed on.
    pub fn position(&self) -> u64 {
        self.at.after
    }

    /// The next events after the position (at most `max`), waiting on the feed while there
    /// are none. `None` when `timeout` passed first.
    pub fn next(&mut self, max: usize, timeout: Option<Duration>) -> Result<Option<Vec<Event>>> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            let events = self.ws.engine.read_events(self.at, max)?;
            if !events.is_empty() {
                // The workspace's list of agents is read again when next needed.
                if events.iter().any(|e| e.event == crate::event::EventKind::AgentAdd) {
                    self.ws.agents_changed();
                }
                return Ok(Some(events));
            }
            // Caught up: the place is saved before waiting.
            self.flush()?;
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
                    Some(l) if !l.is_zero() => Some(l),
                    _ => return Ok(None),
                },
            };
            let nap = left.map_or(SETTLE_EVERY, |l| l.min(SETTLE_EVERY));
            if self.feed.wait(Some(nap))? {
                continue;
            }
            // Quiet for a while: log what a command cut off before its events left behind.
            if self.settled.elapsed() >= SETTLE_EVERY {
                self.settled = std::time::Instant::now();
                if settle_left(self.ws, &mut self.said) > 0 {
                    continue;
                }
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                // The wait timed out; read once more (an append may race the timeout).
                let last = self.ws.engine.read_events(self.at, max)?;
                return Ok((!last.is_empty()).then_some(last));
            }
        }
    }

    /// Event `id` was handed on (or skipped by the filter): move the position past it, and
    /// the saved cursor too when one is named and it is time (see the module's words).
    pub fn handed(&mut self, id: u64) -> Result<()> {
        self.at = Cursor::after(id);
        let due = self.save_each
            || id.saturating_sub(self.saved) >= SAVE_EVERY
            || self.saved_when.elapsed() >= Duration::from_secs(1);
        if due { self.save(id) } else { Ok(()) }
    }

    /// Save the position when it moved since the last save.
    pub fn flush(&mut self) -> Result<()> {
        if self.at.after == self.saved { Ok(()) } else { self.save(self.at.after) }
    }

    /// Save the cursor (when there is one) as past event `id`.
    fn save(&mut self, id: u64) -> Result<()> {
        if let Some((name, _)) = &self.cursor {
            let c =
                SavedCursor { v: 1, after: id, saved_at: crate::clock::stamp_ms(self.ws.now()) };
            let bytes = serde_json::to_vec(&c).unwrap_or_default();
            self.ws.engine.write_cursor(KIND, name, &bytes)?;
        }
        self.saved = id;
        self.saved_when = std::time::Instant::now();
        Ok(())
    }
}

/// A stream that ends (its reader gone, told to stop, `--once`, an error) saves how far it
/// handed events on; a failure here is said, as nothing can be returned.
impl Drop for Follow<'_> {
    fn drop(&mut self) {
        // A lost connection is said by the reconnection; the stream resumes from where it
        // handed on (`Start::Resume`).
        if let Err(e) = self.flush()
            && !e.is_transient()
        {
            eprintln!("circe: the cursor's place was not saved: {}", e.message);
        }
    }
}

/// How many events a printing consumer hands on, at most, between two saves of its cursor
/// (and so, at most, how many it prints again after being killed).
pub const SAVE_EVERY: u64 = 256;

/// How often, at most, a follower on a quiet log looks for deliveries and moves whose
/// events a command cut off left unlogged (`settle_left`).
const SETTLE_EVERY: Duration = Duration::from_secs(2);

/// Log the events of deliveries and moves whose commands were cut off before they logged
/// them (`Engine::log_cut_off_events`): no follower waits for ever on a command that died.
/// Best effort: what fails is said once on stderr, and doctor reports what is left.
fn settle_left(ws: &Workspace, said: &mut bool) -> usize {
    match ws.engine.log_cut_off_events() {
        Ok(n) => n,
        Err(e) => {
            if !std::mem::replace(said, true) {
                eprintln!(
                    "circe: could not look for the events of cut-off commands (`circe doctor` reports any left): {}",
                    e.message
                );
            }
            0
        }
    }
}

/// One line for people: `#12 17:05:00 claim AUTH-012 new -> claimed by engineer (epoch 1)
/// inbox:engineer/<file>`. An owner other than the actor is named (`(epoch 2, owner qa)`:
/// whose lease ran out, whose task was released by force), and a reason or note closes the
/// line, on one line and cut at 120 characters.
pub fn human_line(e: &Event) -> String {
    let mut s = format!("#{} {} {}", e.id, e.ts, e.event.as_str());
    if let Some(t) = &e.task {
        s.push(' ');
        s.push_str(t);
    }
    match (e.from, e.to) {
        (Some(f), Some(t)) => s.push_str(&format!(" {} -> {}", f.as_str(), t.as_str())),
        (None, Some(t)) => s.push_str(&format!(" -> {}", t.as_str())),
        _ => {}
    }
    s.push_str(&format!(" by {}", e.agent));
    let mut about = Vec::new();
    if let Some(ep) = e.epoch {
        about.push(format!("epoch {ep}"));
    }
    if let Some(o) = e.owner.as_deref().filter(|o| *o != e.agent) {
        about.push(format!("owner {o}"));
    }
    if e.forced {
        about.push("forced".to_string());
    }
    if !about.is_empty() {
        s.push_str(&format!(" ({})", about.join(", ")));
    }
    if let (Some(c), Some(p)) = (&e.check, e.passed) {
        s.push_str(&format!(" {c}={p}"));
    }
    if let Some(i) = &e.intent {
        s.push_str(&format!(" {i}"));
    }
    for f in &e.files {
        s.push_str(&format!(" {}/{}", f.mailbox, f.file));
    }
    if let Some(w) = &e.what {
        s.push_str(&format!(": {w}"));
    }
    for text in [&e.reason, &e.note].into_iter().flatten() {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        s.push_str(&format!(": {}", crate::message::clip(&flat, 120)));
    }
    s
}
