//! The reference's `message-state.json` (shared/reference 003, "State Storage") over a
//! root: `circe seq state` prints it, `circe seq import` takes one, and `circe seq reset`
//! starts a sender's new epoch (PROTOCOLS.md section 14).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::AgentName;
use crate::seq::state_file::Ordered;
use crate::seq::{Counter, MessageState, Seen};
use crate::workspace::Workspace;

/// Every sender's counter and every receiver's lastSeen, in the reference's shape: names
/// in upper case (`coordinator` is `COORDINATOR`), numbers without their epochs.
pub fn state(ws: &Workspace) -> Result<(MessageState, Vec<(AgentName, Counter)>)> {
    let counters = ws.engine.seq_counters()?;
    let mut s = MessageState::default();
    for (a, c) in &counters {
        s.counters.0.push((a.as_str().to_ascii_uppercase(), c.last));
    }
    for (a, r) in ws.engine.seq_receivers()? {
        let seen = r.senders.iter().map(|(k, v)| (k.clone(), v.last_seen)).collect();
        s.last_seen.0.push((a.as_str().to_ascii_uppercase(), Ordered(seen)));
    }
    Ok((s, counters))
}

/// Start a new epoch of `agent`'s counter: its next message is #1 again, and receivers take
/// it as new (a newer epoch), while its older messages stay stale.
pub fn reset(ws: &Workspace, agent: &AgentName) -> Result<Counter> {
    let c = ws.engine.seq_update(agent, &mut |c| {
        c.reset().ok_or_else(|| {
            crate::error::Error::refused(format!(
                "{agent}'s counter is in its last epoch ({}): there is no next one to start",
                c.epoch
            ))
            .hint("no run of circe resets that often: the counter was edited by hand; its numbering goes on as it is")
        })
    })?;
    let mut e = Event::now(EventKind::Seq, agent);
    e.what = Some(format!("reset: epoch {}, numbering starts again at #1", c.epoch));
    e.sender = Some(agent.to_string());
    e.seq_epoch = Some(c.epoch);
    ws.engine.append_events(vec![e])?;
    Ok(c)
}

/// A receiver and what the file says it saw of each sender.
type Receiving = (AgentName, Vec<(AgentName, u64)>);

/// What an import changed.
#[derive(Debug, Clone, Serialize)]
pub struct Imported {
    /// How many counters moved up.
    pub counters_moved: usize,
    /// How many lastSeen entries moved up.
    pub last_seen_moved: usize,
    /// How many lastSeen entries were left as they are: of a sender reset since, numbers
    /// above what it has numbered in its new epoch (of its earlier one).
    pub earlier_epoch_count: usize,
}

/// The agent a name of the file means (`WORKER-A` -> `worker-a`), or `None`.
fn agent_named(ws: &Workspace, name: &str) -> Option<AgentName> {
    let a = AgentName::new(name.to_ascii_lowercase()).ok()?;
    (ws.is_agent(&a) || a.as_str() == crate::event::CIRCE).then_some(a)
}

/// Take a `message-state.json`: counters move up to the file's numbers (in their current
/// epoch), and each receiver's lastSeen up to the file's. Nothing goes back: a number below
/// what circe has is refused (exit 3) and nothing is changed, as for a name that is no
/// agent of the root (exit 5).
pub fn import(ws: &Workspace, s: &MessageState) -> Result<Imported> {
    let names = s.counters.0.iter().map(|(k, _)| k).chain(
        s.last_seen
            .0
            .iter()
            .flat_map(|(k, m)| std::iter::once(k).chain(m.0.iter().map(|(s, _)| s))),
    );
    let mut unknown: Vec<&str> = Vec::new();
    for n in names {
        if agent_named(ws, n).is_none() && !unknown.contains(&n.as_str()) {
            unknown.push(n);
        }
    }
    if !unknown.is_empty() {
        return Err(Error::not_found(format!("no agent {} in this root", unknown.join(", ")))
            .hint("names are agents in upper case: `circe agent add NAME --role ROLE` first"));
    }
    let known = |(k, n): &(String, u64)| agent_named(ws, k).map(|a| (a, *n));
    let counters: Vec<(AgentName, u64)> = s.counters.0.iter().filter_map(known).collect();
    let have: BTreeMap<AgentName, Counter> = ws.engine.seq_counters()?.into_iter().collect();
    let epoch_of = |a: &AgentName| have.get(a).map_or(0, |c| c.epoch);
    // A sender reset since numbers anew: a lastSeen above what it has numbered in its new
    // epoch (after this import) is of its earlier one, and moving it into the new epoch
    // would make the sender's next messages stale. Such entries are left as they are.
    let numbered = |a: &AgentName| {
        let file = counters.iter().filter(|(c, _)| c == a).map(|(_, n)| *n).max();
        have.get(a).map_or(0, |c| c.last).max(file.unwrap_or(0))
    };
    let mut earlier_epoch_count = 0;
    let seen: Vec<Receiving> = s
        .last_seen
        .0
        .iter()
        .filter_map(|(k, m)| Some((agent_named(ws, k)?, m.0.iter().filter_map(known).collect())))
        .map(|(r, m): Receiving| {
            let (now, earlier): (Vec<_>, Vec<_>) =
                m.into_iter().partition(|(s, n)| epoch_of(s) == 0 || *n <= numbered(s));
            earlier_epoch_count += earlier.len();
            (r, now)
        })
        .collect();
    let mut back = Vec::new();
    for (a, n) in &counters {
        if let Some(c) = have.get(a).filter(|c| c.last > *n) {
            back.push(format!("{a}'s counter is at #{}, the file says {n}", c.last));
        }
    }
    for (r, m) in &seen {
        let now = ws.engine.seq_seen(r)?;
        for (s, n) in m {
            let key = s.as_str().to_ascii_uppercase();
            if let Some(v) =
                now.senders.get(&key).filter(|v| v.epoch == epoch_of(s) && v.last_seen > *n)
            {
                back.push(format!("{r} has seen {s} #{}, the file says {n}", v.last_seen));
            }
        }
    }
    if !back.is_empty() {
        return Err(Error::refused(format!(
            "the import would move numbers back: {}",
            back.join("; ")
        ))
        .hint("numbers only go up; `circe seq reset --agent A` starts a sender's new epoch"));
    }
    let mut out = Imported { counters_moved: 0, last_seen_moved: 0, earlier_epoch_count };
    for (a, n) in counters {
        let c = ws.engine.seq_update(&a, &mut |c| {
            c.last = c.last.max(n);
            Ok(())
        })?;
        out.counters_moved += usize::from(have.get(&a).is_none_or(|h| *h != c));
    }
    for (r, m) in seen {
        let (before, after) = ws.engine.seq_see(&r, &mut |rec| {
            for (s, n) in &m {
                let n = *n;
                let key = s.as_str().to_ascii_uppercase();
                let e = epoch_of(s);
                let v = rec.senders.entry(key).or_default();
                if v.epoch < e || (v.epoch == e && v.last_seen < n) {
                    *v = Seen { epoch: e, last_seen: n, msg_id: None };
                }
            }
            Ok(())
        })?;
        out.last_seen_moved +=
            after.senders.iter().filter(|(k, v)| before.senders.get(*k) != Some(*v)).count();
        super::seq::log_after_import(ws, &r)?;
    }
    let mut e = Event::now(EventKind::Seq, crate::event::CIRCE);
    e.what = Some(format!(
        "import: {} counters and {} lastSeen entries moved up",
        out.counters_moved, out.last_seen_moved
    ));
    ws.engine.append_events(vec![e])?;
    Ok(out)
}
