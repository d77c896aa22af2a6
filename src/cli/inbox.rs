//! `circe inbox`: what waits for the acting agent, and the tasks it may take.

use std::collections::HashMap;

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::output::table;
use super::{Ctx, Report};
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::message;
use crate::names::AgentName;
use crate::ops;
use crate::task::Row;
use crate::workspace::Workspace;

/// What is waiting for the acting agent: its INBOX, oldest first (id, sender, intent, task,
/// priority, summary, what it answers), then how many waiting tasks it may take, with the
/// best few (the order `claim --next` takes them in).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer inbox\n  circe --agent engineer inbox --workspace --json"
)]
pub struct InboxArgs {
    /// Also list the WORKSPACE.
    #[arg(long)]
    pub workspace: bool,
    /// One line per message, `(ROLE #N): text`: the sender in upper case, its sequence
    /// number, and the message's headline or summary.
    #[arg(long)]
    pub oneline: bool,
}

/// `circe inbox --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxJson {
    pub agent: String,
    pub role: String,
    /// Oldest first; absent fields are null.
    pub messages: Vec<InboxMessage>,
    /// Messages numbered at or below what this agent last saw of their sender: not new,
    /// kept (PROTOCOLS.md section 14). Each has `seq` and `last_seen`.
    pub stale: Vec<InboxMessage>,
    /// Waiting tasks this agent may take.
    pub claimable: Claimable,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxMessage {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    pub msg_id: Option<String>,
    pub created_at: Option<String>,
    pub from: Option<String>,
    pub intent: Option<String>,
    pub task_id: Option<String>,
    /// Its `priority` header, else, for a message of a task, the task's priority (the one
    /// `claim --next` and the board go by).
    pub priority: Option<String>,
    pub summary: Option<String>,
    pub in_reply_to: Option<String>,
    /// false: the file does not read as a message (`problem` says why).
    pub valid: bool,
    pub problem: Option<String>,
    /// The sender's sequence number (null for a message that has none).
    pub seq: Option<u64>,
    /// The highest number this agent had seen of the sender (stale messages only).
    pub last_seen: Option<u64>,
    /// `(ROLE #N): text` (with `--oneline`).
    pub line: Option<String>,
}

/// How many waiting tasks the agent may take, and the best few.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Claimable {
    pub count: usize,
    /// At most three, best first, in `claim --next`'s order: priority, then deadline (none:
    /// last), then time waiting.
    pub best: Vec<Waiting>,
    /// How many tasks other agents hold whose lease ran out that the agent may take over:
    /// when no task waits, `claim --next` takes one over.
    pub lapsed: usize,
}

/// A waiting task.
#[expect(clippy::struct_field_names, reason = "`waiting_since` says what the time is")]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Waiting {
    pub task_id: String,
    pub intent: String,
    pub to: String,
    #[schemars(with = "super::schema_defs::PriorityDef")]
    pub priority: String,
    /// When it started waiting (its last change of status).
    pub waiting_since: String,
    pub summary: Option<String>,
}

/// A waiting task's place in `claim --next`'s order: (priority rank, no deadline, deadline),
/// then its time waiting.
type Key = (u8, bool, Option<String>);

/// How many waiting tasks `me` may take, and the best `keep` of them in `claim --next`'s
/// order (priority, then deadline, none last, then time waiting; a task past its deadline
/// is not taken), streamed from the board; every row of the board is also handed to `also`
/// in the same pass (what a caller wants of the board besides: one read of it serves
/// both); an error from `also` ends the pass.
pub fn claimable_and(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    keep: usize,
    also: &mut dyn FnMut(&Row<'_>) -> Result<()>,
) -> Result<Claimable> {
    let who = ws.eligibility_by_root_clock(me, role)?;
    let (mut count, mut lapsed) = (0, 0);
    let mut best: Vec<(Key, Waiting)> = Vec::with_capacity(keep + 1);
    ws.engine.board(&mut |r| {
        also(&r)?;
        lapsed += usize::from(who.may_take_over(&r));
        if r.status != crate::task::Status::New
            || !who.admits(&r.to, &r.intent)
            || !who.in_time(r.deadline.as_deref())
        {
            return Ok(());
        }
        count += 1;
        let (rank, none, deadline, _) = r.next_order();
        let k: Key = (rank, none, deadline.map(str::to_string));
        let better =
            |(bk, b): &(Key, Waiting)| (&k, &*r.updated_at) < (bk, b.waiting_since.as_str());
        if best.len() < keep || best.last().is_some_and(&better) {
            let w = Waiting {
                task_id: r.task.to_string(),
                intent: r.intent.to_string(),
                to: r.to.to_string(),
                priority: r.priority.to_string(),
                waiting_since: r.updated_at.to_string(),
                summary: None,
            };
            let at = best.iter().position(&better).unwrap_or(best.len());
            best.insert(at, (k, w));
            best.truncate(keep);
        }
        Ok(())
    })?;
    let best = best
        .into_iter()
        .map(|(_, mut w)| {
            w.summary = task_summary(ws, &w.task_id);
            w
        })
        .collect();
    Ok(Claimable { count, best, lapsed })
}

/// The summary of a waiting task's message.
pub fn task_summary(ws: &Workspace, task: &str) -> Option<String> {
    let id = crate::names::TaskId::new(task).ok()?;
    let st = ws.engine.peek(&id).ok()??;
    let b = st.location.unwrap_or(Mailbox::NewMessages);
    ops::read(ws, &b, &st.rec.message).ok()?.summary()
}

/// The lines `inbox` and `prime` print under a claimable list.
pub fn claimable_text(me: &AgentName, c: &Claimable) -> String {
    let lapsed = match c.lapsed {
        0 => String::new(),
        n => format!(
            "{n} task{s} held by others whose lease ran out{took}\n",
            s = if n == 1 { "" } else { "s" },
            took = if c.count == 0 {
                format!(": take one over with circe --agent {me} claim --next")
            } else {
                ": claim --next takes one over once none waits".to_string()
            },
        ),
    };
    if c.count == 0 {
        return format!("no waiting task that you may take\n{lapsed}");
    }
    let mut s = format!(
        "{} task{} waiting that you may take{}:\n",
        c.count,
        if c.count == 1 { "" } else { "s" },
        if c.count > c.best.len() { " (the best first)" } else { "" }
    );
    let rows: Vec<Vec<String>> = c
        .best
        .iter()
        .map(|w| {
            vec![
                format!("  {}", w.task_id),
                w.priority.clone(),
                format!("{} -> {}", w.intent, w.to),
                w.summary.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let t = table(&["", "", "", ""], &rows);
    s.push_str(t.split_once('\n').map_or("", |(_, rest)| rest));
    s.push_str(&format!(
        "take the best: circe --agent {me} claim --next (--dry-run to look first)\n"
    ));
    s.push_str(&lapsed);
    s
}

pub fn run(ctx: &Ctx, a: &InboxArgs) -> Result<Report> {
    let (ws, me, role) = ctx.acting()?;
    let mut boxes = vec![Mailbox::Inbox(me.clone())];
    if a.workspace {
        boxes.push(Mailbox::Workspace(me.clone()));
    }
    let mut list = Vec::new();
    let mut warnings = Vec::new();
    for b in &boxes {
        // The agent's own box missing (a clone of a committed root) is said, with how to
        // mend it: nothing can be delivered to it meanwhile.
        ws.engine.check_box(b, "list")?;
        for name in ws.engine.list_box(b)? {
            // Within the root's limits: a huge or planted file is reported, not read whole.
            let read = ops::read(&ws, b, &name);
            let problem = read.as_ref().err().map(|p| ops::first_problem(p));
            if let Some(p) = &problem {
                warnings.push(format!("{}/{name}: {p}", b.label()));
            }
            let parsed = read.ok();
            let get = |f: fn(&message::Message) -> Option<String>| parsed.as_ref().and_then(f);
            let row = InboxMessage {
                mailbox: b.label(),
                file: name.clone(),
                msg_id: get(|m| m.msg_id.clone()),
                created_at: get(|m| m.created_at.map(clock::format)),
                from: get(|m| m.from.clone()),
                intent: get(|m| m.intent.clone()),
                task_id: get(|m| m.task_id.clone()),
                // Without a header of its own, the task's (filled in below, from the board).
                priority: get(|m| m.priority.map(|p| p.as_str().to_string())),
                summary: get(message::Message::summary),
                in_reply_to: get(|m| m.in_reply_to.clone()),
                valid: parsed.is_some(),
                problem,
                seq: parsed.as_ref().and_then(|m| m.seq),
                last_seen: None,
                line: if a.oneline { parsed.as_ref().map(ops::seq::oneline) } else { None },
            };
            list.push((row, b.clone(), parsed));
        }
    }
    // Oldest first: file names begin with the creation time, but sort by the header's time
    // (as a time: its text drops `.000`, so `…00.500Z` would sort before `…00Z`).
    let at = |m: &Option<crate::message::Message>| m.as_ref().and_then(|m| m.created_at);
    list.sort_by(|(x, _, xm), (y, _, ym)| at(xm).cmp(&at(ym)).then(x.file.cmp(&y.file)));
    let stale = stale_marks(&ws, &me, &list)?;
    let (mut fresh, mut old) = (Vec::new(), Vec::new());
    for ((mut row, _, _), mark) in list.into_iter().zip(stale) {
        match mark {
            None => fresh.push(row),
            Some(seen) => {
                row.last_seen = Some(seen);
                old.push(row);
            }
        }
    }
    // A message without a priority of its own shows its task's: taken from the board in the
    // pass that counts the claimable tasks (a record read per task would cost a task's
    // three records, and where its message lies, for each task named). A task the board
    // does not show (none, archived, a damaged record it passes over) gives none.
    let mut wanted: HashMap<String, Option<String>> = fresh
        .iter()
        .chain(&old)
        .filter(|m| m.priority.is_none())
        .filter_map(|m| Some((m.task_id.clone()?, None)))
        .collect();
    let claim = claimable_and(&ws, &me, &role, 3, &mut |r| {
        if let Some(p) = wanted.get_mut(r.task.as_ref()) {
            *p = Some(r.priority.to_string());
        }
        Ok(())
    })?;
    for m in fresh.iter_mut().chain(&mut old).filter(|m| m.priority.is_none()) {
        m.priority = m.task_id.as_ref().and_then(|t| wanted.get(t)?.clone());
    }
    warnings.extend(super::passed_over_warnings(&ws));
    let mut human = if fresh.is_empty() && old.is_empty() {
        format!("{me}: inbox empty\n")
    } else if a.oneline {
        let lines = |l: &[InboxMessage]| -> String {
            l.iter().filter_map(|m| m.line.as_ref()).map(|t| format!("{t}\n")).collect()
        };
        with_stale(lines(&fresh), &lines(&old))
    } else {
        with_stale(rows_text(&fresh, a.workspace), &rows_text(&old, a.workspace))
    };
    // `--oneline` is the reference's lines and nothing else.
    if !a.oneline {
        human.push('\n');
        human.push_str(&claimable_text(&me, &claim));
    }
    let out =
        InboxJson { agent: me.to_string(), role, messages: fresh, stale: old, claimable: claim };
    Ok(Report::new(human, out).warnings(warnings))
}

const STALE_HEADING: &str =
    "\nstale (numbered at or below what you last saw of the sender: not new, kept):\n";

/// The fresh part, then the stale part under its heading (when there is one).
fn with_stale(mut fresh: String, old: &str) -> String {
    if !old.is_empty() {
        fresh.push_str(STALE_HEADING.trim_start_matches(|c| fresh.is_empty() && c == '\n'));
        fresh.push_str(old);
    }
    fresh
}

/// The table of messages (empty text for none).
fn rows_text(list: &[InboxMessage], workspace: bool) -> String {
    if list.is_empty() {
        return String::new();
    }
    let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut header = vec!["MSG_ID", "CREATED", "FROM", "INTENT", "TASK", "PRI", "SUMMARY"];
    let replies = list.iter().any(|m| m.in_reply_to.is_some());
    if replies {
        header.push("ANSWERS");
    }
    if workspace {
        header.push("BOX");
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|m| {
            // A message without an id (or unreadable) is named by its file.
            let mut r = vec![
                m.msg_id.clone().unwrap_or_else(|| m.file.clone()),
                cell(&m.created_at),
                cell(&m.from),
                cell(&m.intent),
                cell(&m.task_id),
                cell(&m.priority),
                cell(&m.summary),
            ];
            if replies {
                r.push(cell(&m.in_reply_to));
            }
            if workspace {
                r.push(m.mailbox.clone());
            }
            r
        })
        .collect();
    table(&header, &rows)
}

/// For each INBOX message, `Some(lastSeen)` when it is stale (PROTOCOLS.md section 14);
/// WORKSPACE messages are being worked on and never stale.
fn stale_marks(
    ws: &Workspace,
    me: &AgentName,
    list: &[(InboxMessage, Mailbox, Option<message::Message>)],
) -> Result<Vec<Option<u64>>> {
    let inbox: Vec<(&str, &message::Message)> = list
        .iter()
        .filter_map(|(row, b, m)| match (b, m) {
            (Mailbox::Inbox(_), Some(m)) => Some((row.file.as_str(), m)),
            _ => None,
        })
        .collect();
    // What arrived stale and was never logged is logged now (a listing is where it is met).
    let logged = ops::seq::log_stale(ws, me, &inbox);
    let judge = ops::seq::Staleness::of(ws, me)?;
    let marks: Vec<Option<u64>> = list
        .iter()
        .map(|(row, b, m)| match (b, m) {
            (Mailbox::Inbox(_), Some(m)) => judge.stale(ws, m, &row.file),
            _ => None,
        })
        .collect();
    // A reader who may not write has nothing to log while nothing is stale.
    if let Err(e) = logged
        && !(e.is_not_writable() && marks.iter().all(Option::is_none))
    {
        crate::error::warn(&format!("stale messages not logged: {}", e.chain()));
    }
    Ok(marks)
}
