//! The archive of the in-memory engine: the same selection rules as every engine
//! (`crate::archive::select`), finished tasks moved whole (records, messages, events,
//! summary) into a map, in one step under the engine's mutex. No segments, no journal:
//! nothing can be interrupted half-way.

use std::collections::BTreeMap;

use super::Inner;
use crate::archive::query::Query;
use crate::archive::select::{self, Fate, MessageFacts};
use crate::archive::summary::{self, ThreadItem};
use crate::archive::{
    Bundle, Entry, EntryKind, FORMAT, Hit, Report, Request, Tombstone, period_of,
};
use crate::boxes::Mailbox;
use crate::error::Result;
use crate::message::{self, Mode};
use crate::names::TaskId;

/// What the in-memory archive holds.
#[derive(Default)]
pub(super) struct Archived {
    pub tasks: BTreeMap<TaskId, Bundle>,
    /// Loose messages: (period, origin, bytes).
    pub loose: Vec<(String, String, Vec<u8>)>,
}

const SEGMENT: &str = "memory";

fn parsed(bytes: &[u8]) -> Option<message::Message> {
    message::parse_bytes(bytes, Mode::Draft).ok()
}

pub(super) fn run(g: &mut Inner, req: &Request) -> Report {
    let goes: Vec<TaskId> = g
        .tasks
        .iter()
        .filter(|(_, st)| select::task_goes(&st.rec, req.cutoff))
        .map(|(id, _)| id.clone())
        .collect();
    let mut report = Report { dry_run: req.dry_run, tasks: goes.len() as u64, ..Report::default() };
    let now = crate::clock::stamp(req.now);
    // Which message belongs to which task (its header), for every box but NEW_MESSAGES.
    let mut of_task: BTreeMap<String, Vec<(Mailbox, String)>> = BTreeMap::new();
    let mut loose = Vec::new();
    for (b, files) in &g.boxes {
        for (name, bytes) in files {
            let m = parsed(bytes);
            let task = m.as_ref().and_then(|m| m.task_id.clone());
            if *b == Mailbox::NewMessages {
                continue;
            }
            if let Some(t) = task.as_deref().filter(|t| goes.iter().any(|g| g.as_str() == *t)) {
                of_task.entry(t.to_string()).or_default().push((b.clone(), name.clone()));
                continue;
            }
            if *b != Mailbox::Logs {
                continue;
            }
            let facts = MessageFacts {
                task: task.as_deref(),
                created_at: m.as_ref().and_then(|m| m.created_at),
                is_live_ticket: g.tasks.values().any(|st| st.rec.message == *name),
            };
            let stays = |t: &str| g.tasks.keys().any(|k| k.as_str() == t);
            if select::message_fate(&facts, req.cutoff, &|_| false, &stays) == Fate::Loose {
                loose.push((period_of(facts.created_at.unwrap_or_default()), name.clone()));
            }
        }
    }
    report.messages = of_task.values().map(|v| v.len() as u64).sum::<u64>() + loose.len() as u64;
    report.records = 2 * goes.len() as u64;
    if req.dry_run {
        return report;
    }
    for id in goes {
        let Some(st) = g.tasks.remove(&id) else { continue };
        let period = select::task_period(&st.rec);
        let mut files = vec![
            (format!("TASKS/{id}.status"), st.rec.render().into_bytes()),
            (
                format!("TASKS/{id}.checks"),
                crate::task::record::render_checks(&st.checks).into_bytes(),
            ),
        ];
        let mut thread = Vec::new();
        for (b, name) in of_task.remove(id.as_str()).unwrap_or_default() {
            let Some(bytes) = g.boxes.get_mut(&b).and_then(|f| f.remove(&name)) else { continue };
            if let Some(m) = parsed(&bytes) {
                thread.push(ThreadItem {
                    created_at: m.created_at.map(crate::clock::format).unwrap_or_default(),
                    from: m.from.clone().unwrap_or_default(),
                    to: m.to.clone().unwrap_or_default(),
                    intent: m.intent.clone().unwrap_or_default(),
                    summary: summary::summary_line(m.headline.as_deref(), &m.body),
                });
            }
            report.bytes += bytes.len() as u64;
            files.push((format!("LOGS/{name}"), bytes));
        }
        thread.sort_by(|a, b| summary::by_time(&a.created_at, &b.created_at));
        let events: Vec<_> =
            g.events.iter().filter(|e| e.task.as_ref() == Some(&id)).cloned().collect();
        let text = summary::render(&st.rec, &st.checks, &events, &thread, &now);
        let tombstone = Tombstone {
            v: FORMAT,
            task: id.clone(),
            period,
            segment: SEGMENT.into(),
            archived_at: now.clone(),
            status: st.rec.status.as_str().into(),
        };
        let mut e = crate::event::Event::new(
            crate::event::EventKind::Archive,
            crate::event::CIRCE,
            crate::clock::stamp_ms(req.now),
        )
        .task(&id);
        e.what = Some("archived".into());
        g.append(&mut [e]);
        g.archive
            .tasks
            .insert(id, Bundle { tombstone, manifest: None, files, events, summary: text });
    }
    for (period, name) in loose {
        if let Some(bytes) = g.boxes.get_mut(&Mailbox::Logs).and_then(|f| f.remove(&name)) {
            report.bytes += bytes.len() as u64;
            g.archive.loose.push((period, format!("LOGS/{name}"), bytes));
        }
    }
    report
}

fn entry(task: Option<String>, origin: &str, bytes: &[u8]) -> Entry {
    let m = parsed(bytes);
    Entry {
        kind: EntryKind::Message,
        member: origin.to_string(),
        task: task.or_else(|| m.as_ref().and_then(|m| m.task_id.clone())),
        origin: Some(origin.to_string()),
        bytes: bytes.len() as u64,
        sha256: String::new(),
        msg_id: m.as_ref().and_then(|m| m.msg_id.clone()),
        created_at: m.as_ref().and_then(|m| m.created_at).map(crate::clock::format),
        from: m.as_ref().and_then(|m| m.from.clone()),
        to: m.as_ref().and_then(|m| m.to.clone()),
        intent: m.as_ref().and_then(|m| m.intent.clone()),
        summary: m.as_ref().map(|m| summary::summary_line(m.headline.as_deref(), &m.body)),
        mtime_ns: None,
        first_event: None,
        last_event: None,
    }
}

pub(super) fn search(
    g: &Inner,
    q: &Query,
    each: &mut dyn FnMut(Hit) -> Result<bool>,
) -> Result<()> {
    let tasks = g.archive.tasks.values().flat_map(|b| {
        b.files.iter().filter(|(o, _)| o.starts_with("LOGS/")).map(move |(o, bytes)| {
            (b.tombstone.period.clone(), entry(Some(b.tombstone.task.to_string()), o, bytes), bytes)
        })
    });
    let loose =
        g.archive.loose.iter().map(|(p, o, bytes)| (p.clone(), entry(None, o, bytes), bytes));
    for (period, e, bytes) in tasks.chain(loose) {
        if !q.period_may_match(&period) || !q.matches(&e) {
            continue;
        }
        let line = if q.in_text {
            let words = q.text.clone().unwrap_or_default();
            match String::from_utf8_lossy(bytes)
                .lines()
                .find(|l| crate::archive::query::words_in(&words, l))
            {
                Some(l) => Some(l.to_string()),
                None => continue,
            }
        } else {
            None
        };
        if !each(Hit { period, segment: SEGMENT.into(), entry: e, line })? {
            break;
        }
    }
    Ok(())
}
