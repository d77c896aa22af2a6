//! What the live board shows, kept up to date from the event log: the board is read once,
//! then each new event re-reads only what it names (its task's record, the inboxes of the
//! agents whose boxes it touched). A heartbeat logs no event, so the held tasks' leases are
//! read again on a timer (`leases`).

use std::collections::{BTreeMap, VecDeque};

use super::AgentInbox;
use crate::error::Result;
use crate::event::{Cursor, Event, EventKind};
use crate::names::AgentName;
use crate::task::{Row, row_of};
use crate::workspace::Workspace;

/// How many recent events the board keeps.
pub const RECENT: usize = 200;

/// The board's state.
pub struct Model {
    pub tasks: BTreeMap<String, Row<'static>>,
    /// Each agent, its role, how many messages its INBOX holds, new and stale, as `prime`
    /// counts them (`None`: it cannot be read, e.g. a link stands where its folder belongs:
    /// doctor says what to do), and whether it is retired.
    pub agents: Vec<AgentInbox>,
    pub events: VecDeque<Event>,
    /// The id of the last event applied.
    pub cursor: u64,
    /// The clock that decides leases (`Workspace::root_now`) less this host's, when loaded.
    pub skew: chrono::TimeDelta,
}

impl Model {
    /// Read the whole board once, the agents' inboxes and the latest events.
    pub fn load(ws: &Workspace) -> Result<Model> {
        let mut tasks = BTreeMap::new();
        ws.engine.board(&mut |r| {
            tasks.insert(r.task.to_string(), ws.demanded_row(r.into_owned()));
            Ok(())
        })?;
        let last = ws.engine.last_event_id()?;
        let events: VecDeque<Event> =
            ws.engine.read_events(Cursor::after(last.saturating_sub(20)), 20)?.into();
        let skew = ws.root_now()? - crate::clock::now();
        let mut m = Model { tasks, agents: Vec::new(), events, cursor: last, skew };
        m.load_agents(ws)?;
        Ok(m)
    }

    /// The time now by the clock that decides leases (lease ages are shown by it).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        crate::clock::now() + self.skew
    }

    fn load_agents(&mut self, ws: &Workspace) -> Result<()> {
        self.agents.clear();
        ws.forget_retired();
        for (a, role) in ws.engine.agents()? {
            let (inbox_count, stale_count) = counts(ws, &a);
            let retired = ws.is_retired(&a);
            self.agents.push(AgentInbox {
                agent: a.to_string(),
                role,
                inbox_count,
                stale_count,
                retired,
            });
        }
        Ok(())
    }

    /// Read again the records of the tasks held now: a heartbeat moves a lease without an
    /// event. Returns how many changed.
    pub fn leases(&mut self, ws: &Workspace) -> Result<usize> {
        let held: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, r)| r.status.is_owned())
            .map(|(t, _)| t.clone())
            .collect();
        let mut changed = 0;
        for t in held {
            let Ok(id) = crate::names::TaskId::new(t.as_str()) else { continue };
            let Some(st) = ws.engine.peek(&id)? else { continue };
            let row = ws.demanded_row(row_of(&st.rec, &st.checks));
            if self.tasks.get(&t).is_none_or(|r| r.lease_expires_at != row.lease_expires_at) {
                changed += 1;
            }
            self.tasks.insert(t, row);
        }
        Ok(changed)
    }

    /// Apply every event after the cursor; returns how many there were.
    pub fn follow(&mut self, ws: &Workspace) -> Result<usize> {
        let mut n = 0;
        loop {
            let batch = ws.engine.read_events(Cursor::after(self.cursor), 1000)?;
            if batch.is_empty() {
                return Ok(n);
            }
            for ev in batch {
                self.apply(ws, &ev)?;
                self.cursor = ev.id;
                self.events.push_back(ev);
                if self.events.len() > RECENT {
                    self.events.pop_front();
                }
                n += 1;
            }
        }
    }

    fn apply(&mut self, ws: &Workspace, ev: &Event) -> Result<()> {
        if let Some(t) = &ev.task {
            match ws.engine.peek(t)? {
                Some(st) => {
                    self.tasks.insert(t.to_string(), ws.demanded_row(row_of(&st.rec, &st.checks)));
                }
                None => {
                    self.tasks.remove(t.as_str());
                }
            }
        }
        if matches!(ev.event, EventKind::AgentAdd | EventKind::Retire) {
            return self.load_agents(ws);
        }
        // A message arrived in or left an agent's box: count that agent's INBOX again. A
        // move out of an INBOX (take, done, claim from NEW) names only where it went.
        let mut touched: Vec<&str> =
            ev.files.iter().filter_map(|f| f.mailbox.split_once(':').map(|(_, a)| a)).collect();
        if matches!(ev.event, EventKind::Take | EventKind::Done | EventKind::Handoff) {
            touched.push(&ev.agent);
        }
        if let Some(o) = &ev.owner {
            touched.push(o);
        }
        for a in touched {
            if let Some(entry) = self.agents.iter_mut().find(|e| e.agent == a)
                && let Ok(name) = AgentName::new(a)
            {
                (entry.inbox_count, entry.stale_count) = counts(ws, &name);
            }
        }
        Ok(())
    }
}

/// An agent's INBOX counted as `prime` counts it: the new messages and the stale ones
/// (`ops::seq::inbox_counts`); both `None` when it cannot be read.
fn counts(ws: &Workspace, a: &AgentName) -> (Option<usize>, Option<usize>) {
    crate::ops::seq::inbox_counts(ws, a)
        .map_or((None, None), |(new, stale)| (Some(new), Some(stale)))
}

/// One event as a line of the board.
pub fn event_line(e: &Event) -> String {
    let time = e.ts.get(11..19).unwrap_or(&e.ts);
    let mut s = format!("{:>5} {time} {:<12} {:<9}", e.id, e.agent, serde_name(e));
    if let Some(t) = &e.task {
        s.push(' ');
        s.push_str(t.as_str());
    }
    if let (Some(f), Some(t)) = (e.from, e.to) {
        s.push_str(&format!(" {} -> {}", f.as_str(), t.as_str()));
    } else if let Some(t) = e.to {
        s.push_str(&format!(" -> {}", t.as_str()));
    }
    if let Some(c) = &e.check {
        s.push_str(&format!(" {c}={}", e.passed.unwrap_or(false)));
        if let Some(h) = &e.how {
            s.push_str(&format!(" ({h})"));
        }
    }
    if let Some(i) = &e.intent
        && e.event == EventKind::Send
    {
        s.push_str(&format!(" {i} -> {}", e.addressed_to.as_deref().unwrap_or("?")));
    }
    s
}

fn serde_name(e: &Event) -> String {
    serde_json::to_value(e.event)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::Model;
    use crate::config::{Config, DEFAULT_CONFIG};
    use crate::engine::memory::MemoryEngine;
    use crate::message::{Format, Message};
    use crate::names::{AgentName, TaskId};
    use crate::workspace::Workspace;

    /// A heartbeat logs no event: the live board reads the held tasks' leases again.
    #[test]
    fn a_heartbeat_reaches_the_board_on_its_timer() {
        let config = Config::parse(DEFAULT_CONFIG).unwrap();
        let ws = Workspace::with_engine(Box::new(MemoryEngine::new()), config).unwrap();
        let (boss, eng) =
            (AgentName::new("coordinator").unwrap(), AgentName::new("engineer").unwrap());
        ws.engine.add_agent(&boss, "coordinator").unwrap();
        ws.engine.add_agent(&eng, "engineer").unwrap();
        let ws = Workspace::with_engine(ws.engine, Config::parse(DEFAULT_CONFIG).unwrap()).unwrap();
        ws.pin_clock(crate::clock::parse("2025-11-21T17:00:00Z").unwrap());
        let mut m = Message::new(Format::Circe);
        m.to = Some("all".into());
        m.intent = Some("implement_feature".into());
        m.task_id = Some("T-1".into());
        m.body = "## Summary\ndo it\n".into();
        crate::ops::send(&ws, &boss, m).unwrap();
        let t = TaskId::new("T-1").unwrap();
        crate::ops::claim(&ws, &eng, "engineer", &t, None).unwrap();
        let mut model = Model::load(&ws).unwrap();
        let before = model.tasks["T-1"].lease_expires_at.clone();
        ws.pin_clock(crate::clock::parse("2025-11-21T17:20:00Z").unwrap());
        crate::ops::heartbeat(&ws, &eng, &t, None, None).unwrap();
        assert_eq!(model.follow(&ws).unwrap(), 0, "a heartbeat logs no event");
        assert_eq!(model.tasks["T-1"].lease_expires_at, before);
        assert_eq!(model.leases(&ws).unwrap(), 1);
        assert_ne!(model.tasks["T-1"].lease_expires_at, before);
    }
}
