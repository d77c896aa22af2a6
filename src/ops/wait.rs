//! `circe wait`: block until something happens, then say what.
//!
//! Subscribe first, then look: a condition that already holds answers at once (unless only
//! a fresh one will do), one that can no longer happen is refused at once, and otherwise the
//! first event after the subscription that meets it ends the wait. Many waiters may wait at
//! once; each reads the log on its own.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::stream::{Follow, Start};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::{AgentName, TaskId};
use crate::task::Status;
use crate::task::lifecycle::{ALL_STATUSES, TABLE};
use crate::workspace::Workspace;

/// What to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// A message in my INBOX.
    Inbox,
    /// A waiting task I may claim.
    Claimable,
    /// A message answering message `msg_id` (`in_reply_to`).
    Reply(String),
    /// Task `task` reaching `status`.
    Status(TaskId, Status),
}

impl Condition {
    /// `inbox`, `claimable`, `reply:MSGID`, `status:TASK=STATUS`.
    pub fn parse(s: &str) -> Result<Condition> {
        let bad = || {
            Error::usage(format!("`{s}` is not something to wait for"))
                .hint("use inbox, claimable, reply:MSGID or status:TASK=STATUS")
        };
        match s {
            "inbox" => return Ok(Condition::Inbox),
            "claimable" => return Ok(Condition::Claimable),
            _ => {}
        }
        if let Some(id) = s.strip_prefix("reply:") {
            crate::names::check_msg_id(id).map_err(|e| {
                e.hint("name the message whose reply to wait for: `--for reply:MSGID` (its `msg_id`; `circe --agent NAME inbox --json` and `circe show` give them)")
            })?;
            return Ok(Condition::Reply(id.to_string()));
        }
        let (task, status) =
            s.strip_prefix("status:").and_then(|r| r.split_once('=')).ok_or_else(bad)?;
        let status = crate::message::status::normalize(status)
            .and_then(Status::parse)
            .or_else(|| Status::parse(status))
            .ok_or_else(|| {
                let all: Vec<&str> = ALL_STATUSES.iter().map(|s| s.as_str()).collect();
                Error::usage(format!("`{status}` is not a task status")).hint(all.join(", "))
            })?;
        Ok(Condition::Status(TaskId::new(task)?, status))
    }
}

/// How the wait ended.
#[derive(Debug, Clone, Serialize)]
pub struct Met {
    /// The event that met the condition; `None` when it held already.
    pub event: Option<Event>,
    /// It held when the wait began.
    pub already: bool,
    pub task_id: Option<TaskId>,
    /// The message concerned (box and file), when there is one.
    #[serde(rename = "box")]
    pub mailbox: Option<String>,
    pub file: Option<String>,
    /// What `--claim` took.
    pub claimed: Option<super::ClaimOutcome>,
}

impl Met {
    fn by_event(e: &Event, me: &AgentName) -> Met {
        let f = e.file_for(Some(me.as_str()));
        Met {
            event: Some(e.clone()),
            already: false,
            task_id: e.task.clone(),
            mailbox: f.map(|f| f.mailbox.clone()),
            file: f.map(|f| f.file.clone()),
            claimed: None,
        }
    }

    fn already(task_id: Option<TaskId>, at: Option<(&Mailbox, &str)>) -> Met {
        Met {
            event: None,
            already: true,
            task_id,
            mailbox: at.map(|(b, _)| b.label()),
            file: at.map(|(_, f)| f.to_string()),
            claimed: None,
        }
    }
}

/// The statuses a task in `from` can still reach by the lifecycle table: `from` itself, and
/// those one or more moves away.
fn reachable(from: Status) -> Vec<Status> {
    let mut seen = vec![from];
    seen.extend(moves_away(from));
    seen
}

/// The statuses a task in `from` can reach by one or more moves (`from` among them only
/// when a way leads back to it: `--new` waits for that).
fn moves_away(from: Status) -> Vec<Status> {
    let mut seen: Vec<Status> = Vec::new();
    for r in TABLE.iter().filter(|r| r.from.contains(&from)) {
        if !seen.contains(&r.to) {
            seen.push(r.to);
        }
    }
    let mut i = 0;
    while i < seen.len() {
        let s = seen[i];
        for r in TABLE.iter().filter(|r| r.from.contains(&s)) {
            if !seen.contains(&r.to) {
                seen.push(r.to);
            }
        }
        i += 1;
    }
    seen.retain(|s| ALL_STATUSES.contains(s));
    seen
}

/// Does the condition hold now? `Err` when it never can.
fn holds_now(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    c: &Condition,
    fresh: bool,
) -> Result<Option<Met>> {
    match c {
        Condition::Inbox => {
            // A stale message (numbered at or below what `me` saw of its sender) is not new.
            let inbox = Mailbox::Inbox(me.clone());
            let first = super::seq::first_fresh(ws, me)?;
            Ok(first.map(|f| Met::already(None, Some((&inbox, &f)))))
        }
        Condition::Claimable => {
            let mut best: Option<(crate::task::Row<'static>, TaskId)> = None;
            // As `claim --next` sees it: a task past its deadline is not taken, and the best
            // in its order is the one it takes.
            let who = ws.eligibility_by_root_clock(me, role)?;
            ws.engine.board(&mut |row| {
                if row.status == Status::New
                    && ws.may_take(me, role, &row.to, &row.intent)
                    && who.in_time(row.deadline.as_deref())
                    && best.as_ref().is_none_or(|(b, _)| row.next_order() < b.next_order())
                    && let Ok(t) = TaskId::new(row.task.as_ref())
                {
                    best = Some((row.into_owned(), t));
                }
                Ok(())
            })?;
            let found = best.map(|(_, t)| t);
            // None waits: a task whose lease ran out, as `claim --next` would take it over.
            let found = match found {
                Some(t) => Some(t),
                None => ws.engine.lapsed_leases(&who, &HashSet::new())?.into_iter().next(),
            };
            let Some(t) = found else { return Ok(None) };
            // Its message, for a hook (CIRCE_BOX, CIRCE_FILE) as the event would name it.
            let at = ws
                .engine
                .peek(&t)?
                .map(|st| (st.location.unwrap_or(Mailbox::NewMessages), st.rec.message));
            Ok(Some(Met::already(Some(t), at.as_ref().map(|(b, f)| (b, f.as_str())))))
        }
        Condition::Reply(id) => reply_holds(ws, me, id, fresh),
        Condition::Status(t, want) => {
            let now = match ws.engine.peek(t)? {
                Some(st) => st.rec.status,
                // An archived task ended as its tombstone says: the wait is met, or never is.
                None => match ws.engine.archived_task(t)? {
                    Some(a) if a.status == want.as_str() && !fresh => {
                        return Ok(Some(Met::already(Some(t.clone()), None)));
                    }
                    Some(a) => {
                        let never = if a.status == want.as_str() {
                            format!("; it stays {}: a new one will never come", a.status)
                        } else {
                            format!("; it stays {}, never {}", a.status, want.as_str())
                        };
                        return Err(
                            super::missing_task(ws, t).map_message(|m| format!("{m}{never}"))
                        );
                    }
                    // Not opened yet: `--new` waits for it to be opened and reach `want`.
                    None if fresh => return Ok(None),
                    None => {
                        return Err(crate::engine::no_task(t).hint_more(format!(
                            "with --new the wait waits for a task {t} opened later"
                        )));
                    }
                },
            };
            if now == *want && !fresh {
                return Ok(Some(Met::already(Some(t.clone()), None)));
            }
            if now == *want && !moves_away(now).contains(want) {
                return Err(Error::refused(format!(
                    "task {t} is {} already, and no move leads back to it: a new one will never come",
                    now.as_str()
                ))
                .hint(format!("without --new the wait answers at once; `circe show {t}` tells its story")));
            }
            if !reachable(now).contains(want) {
                return Err(Error::refused(format!(
                    "task {t} is {}: it will never be {}",
                    now.as_str(),
                    want.as_str()
                ))
                .hint(format!("`circe show {t}` tells its story")));
            }
            Ok(None)
        }
    }
}

/// Does event `e` meet the condition?
fn meets(ws: &Workspace, me: &AgentName, role: &str, c: &Condition, e: &Event) -> Result<bool> {
    Ok(match c {
        Condition::Inbox => {
            e.files.iter().any(|f| f.mailbox == format!("inbox:{me}"))
                && !super::seq::only_stale(ws, me, e)?
        }
        Condition::Claimable => {
            e.to == Some(Status::New)
                && match &e.task {
                    Some(t) => match ws.engine.peek(t)? {
                        Some(st) => {
                            st.rec.status == Status::New
                                && ws.may_take(me, role, &st.rec.to, &st.rec.intent)
                                && ws
                                    .eligibility_by_root_clock(me, role)?
                                    .in_time(st.rec.deadline.as_deref())
                        }
                        None => false,
                    },
                    None => false,
                }
        }
        Condition::Reply(id) => {
            e.event == EventKind::Send
                && e.in_reply_to.as_deref() == Some(id.as_str())
                && (e.intent.as_deref() == Some("ask-response") || ask_of(ws, id)?.is_none())
        }
        Condition::Status(t, want) => e.task.as_ref() == Some(t) && e.to == Some(*want),
    })
}

/// How to wait.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Only an event after the wait began counts.
    pub fresh: bool,
    /// For `claimable`: claim the task in the same call (a lost race waits on).
    pub claim: bool,
    /// Give up after this long (from the first call, across reconnections): exit 7.
    pub timeout: Option<Duration>,
    /// Check on a timer instead of being told by the engine's feed.
    pub poll: Option<Duration>,
}

/// Where a wait cut off by a broken connection goes on (`wait` keeps it up to date).
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// The last event read: the wait goes on after it (else from now).
    pub at: Option<u64>,
    /// A claim whose outcome is unknown: its retry with this request id returns the task
    /// if it got one (else it claims as the wait would have).
    pub request: Option<String>,
    /// When the wait gives up: set by the first call from `Options::timeout`.
    pub deadline: Option<Instant>,
}

/// Wait for `c` as `me`. A wait whose connection broke (a transient error) goes on after
/// `resume`, in a workspace opened again.
pub fn wait(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    c: &Condition,
    o: Options,
    resume: &mut Resume,
) -> Result<Met> {
    if resume.deadline.is_none() {
        resume.deadline = o.timeout.map(|t| Instant::now() + t);
    }
    let request = std::cell::RefCell::new(resume.request.take());
    let met = wait_in(ws, me, role, c, o, resume, &request);
    resume.request = request.into_inner();
    met
}

fn wait_in(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    c: &Condition,
    o: Options,
    resume: &mut Resume,
    request: &std::cell::RefCell<Option<String>>,
) -> Result<Met> {
    let Options { fresh, claim, timeout, poll } = o;
    let (at, deadline) = (&mut resume.at, resume.deadline);
    let mut follow = Follow::open(ws, None, at.map_or(Start::Now, Start::After), poll)?;
    *at = Some(follow.position());
    let busy = std::cell::Cell::new(false);
    let try_claim = |met: Met| -> Result<Option<Met>> {
        if !(claim && c == &Condition::Claimable) {
            return Ok(Some(met));
        }
        let asked = request.borrow().clone();
        let tried = super::claim_with(ws, me, role, None, None, asked.as_deref());
        remember_request(request, &tried);
        match tried {
            // What it reports is the task it took (the best it may take, which need not be
            // the one whose event woke it) and where that task's message is now.
            Ok(o) => Ok(Some(Met {
                task_id: Some(o.task.clone()),
                mailbox: Some(o.location.clone()),
                file: Some(o.message.clone()),
                claimed: Some(o),
                ..met
            })),
            Err(e) if e.kind == crate::error::Kind::NothingToClaim => Ok(None),
            // Every task it could take is held by another command (a lock held past its
            // wait, a stopped process): a lost race, so it waits on, and looks again soon.
            Err(e) if e.kind == crate::error::Kind::Conflict => {
                busy.set(true);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    };
    // A claim cut off before its reply: its retry returns the task if it got one.
    if request.borrow().is_some()
        && let Some(done) = try_claim(Met { already: false, ..Met::already(None, None) })?
    {
        return Ok(done);
    }
    // A status that can never come, a reply to no message: refused at once (by the same
    // look that answers a wait already met: one look, not two).
    if !fresh {
        if let Some(met) = holds_now(ws, me, role, c, false)?
            && let Some(done) = try_claim(met)?
        {
            return Ok(done);
        }
    } else if let Condition::Status(..) | Condition::Reply(_) = c {
        holds_now(ws, me, role, c, true)?;
    }
    // A lease running out is no event: waiting for a claimable task, look again when the
    // first lease of a task this agent could take over runs out.
    let lapses = c == &Condition::Claimable && !fresh;
    let next_wake = |after| wake_at(ws, (me, role), lapses, poll.filter(|_| !fresh), after);
    let mut wake = next_wake(Duration::ZERO)?;
    loop {
        let now = Instant::now();
        if busy.take() {
            let soon = now + Duration::from_secs(1);
            wake = Some(wake.map_or(soon, |w| w.min(soon)));
        }
        let left = deadline.map(|d| d.saturating_duration_since(now));
        let nap = wake.map(|w| w.saturating_duration_since(now));
        let Some(events) = follow.next(256, [left, nap].into_iter().flatten().min())? else {
            if wake.is_some_and(|w| Instant::now() >= w)
                && deadline.is_none_or(|d| Instant::now() < d)
            {
                // Found by a later look (a lease ran out, a poll), not as the wait began.
                if let Some(met) = holds_now(ws, me, role, c, false)?
                    && let Some(done) = try_claim(Met { already: false, ..met })?
                {
                    return Ok(done);
                }
                // Not yet (a heartbeat, a clock ahead of the engine's): not before a second.
                wake = next_wake(Duration::from_secs(1))?;
                continue;
            }
            return Err(Error::timed_out(format!(
                "nothing came within {}",
                timeout.map_or_else(String::new, |t| format!("{:.1}s", t.as_secs_f64()))
            ))
            .hint("wait longer with --timeout, or `circe log` to see what did happen"));
        };
        // A claim made a lease that may run out before the one looked for.
        let leased = lapses && events.iter().any(|e| e.to.is_some_and(Status::is_owned));
        for e in events {
            if meets(ws, me, role, c, &e)?
                && let Some(done) = try_claim(Met::by_event(&e, me))?
            {
                return Ok(done);
            }
            never_met(ws, me, c, &e)?;
            follow.handed(e.id)?;
            *at = Some(e.id);
        }
        if leased {
            wake = next_wake(Duration::ZERO)?;
        }
    }
}

/// Does a reply to `id` hold now (`wait --for reply:`)? Refused when none can come.
fn reply_holds(ws: &Workspace, me: &AgentName, id: &str, fresh: bool) -> Result<Option<Met>> {
    // An ask is answered by its ask-response alone (an `update` in reply, circe's
    // notice of its expiry, answer nothing), and one that expired never will be.
    if let Some(ask) = ask_of(ws, id)? {
        return match ask.state {
            crate::tx::AskState::Expired => Err(expired_ask(me, id)),
            crate::tx::AskState::Answered if !fresh => {
                let answer = ask.answer.clone().unwrap_or_default();
                let at = ws.engine.find_msg_id(&answer)?.into_iter().next();
                let task = ask.task.clone();
                Ok(Some(Met::already(task, at.as_ref().map(|(b, f)| (b, f.as_str())))))
            }
            _ => Ok(None),
        };
    }
    let mut asked = false;
    // circe's notice that it was filed unread ends the wait only when no answer came.
    let mut filed = false;
    // A reply is read whole; of any other message its gist says enough.
    let whole = |g: &super::seq::Gist| g.reply_to.as_deref() == Some(id);
    for b in ws.engine.boxes()? {
        let met = super::seq::each_message(ws, &b, None, &whole, |name, g, m| {
            asked |= g.id.as_deref() == Some(id);
            let Some(m) = m.filter(|m| m.in_reply_to.as_deref() == Some(id)) else {
                return ControlFlow::Continue(());
            };
            if is_filed_unread_notice(&m) {
                filed = true;
            } else if !fresh {
                let task = m.task_id.and_then(|t| TaskId::new(t).ok());
                return ControlFlow::Break(Met::already(task, Some((&b, name))));
            }
            ControlFlow::Continue(())
        })?;
        if met.is_some() {
            return Ok(met);
        }
    }
    if filed {
        return Err(filed_unread(me, id));
    }
    // What a reply may answer, as `send` sees it: an ask, a task named by the id, a
    // message here, or one in the archive.
    let here = asked || super::thread::parent(ws, id, &[])?.is_some();
    let archived = !here && super::find::in_archive(ws, id)?;
    // Archived, its thread is history (its replies went with it): waiting for what
    // already happened would wait for ever; only a new reply (--new) can come.
    if archived && !fresh {
        return Err(Error::refused(format!(
            "`{id}` was archived with its thread: a reply it had is in the archive"
        ))
        .hint(format!("`circe show {id}` shows it; `--new` waits for a reply sent from now on")));
    }
    let exists = here || archived;
    if !exists {
        return Err(Error::not_found(format!("no message `{id}`: nothing can answer it")).hint(
            "wait for the full msg_id of a message that was sent (`circe show KEY` finds it)",
        ));
    }
    Ok(None)
}

/// An event after which the condition can never hold: the ask waited for expired, or the
/// task became a status from which the awaited one cannot be reached (exit 3).
fn never_met(ws: &Workspace, me: &AgentName, c: &Condition, e: &Event) -> Result<()> {
    // The ask waited for expired: no answer will come.
    if let Condition::Reply(id) = c
        && e.event == EventKind::Lapse
        && e.msg_id.as_deref() == Some(id.as_str())
        && ask_of(ws, id)?.is_some()
    {
        return Err(expired_ask(me, id));
    }
    // The question waited for was filed unread past its deadline, its asker told.
    if let Condition::Reply(id) = c
        && e.event == EventKind::Lapse
        && e.in_reply_to.as_deref() == Some(id.as_str())
    {
        return Err(filed_unread(me, id));
    }
    if let Condition::Status(t, want) = c
        && e.task.as_ref() == Some(t)
        && let Some(now) = e.to
        && !reachable(now).contains(want)
    {
        return Err(Error::refused(format!(
            "task {t} became {}: it will never be {}",
            now.as_str(),
            want.as_str()
        ))
        .hint(format!("`circe show {t}` tells its story")));
    }
    Ok(())
}

/// The ask `id` names, if it is one.
fn ask_of(ws: &Workspace, id: &str) -> Result<Option<crate::tx::AskRecord>> {
    match crate::names::MsgId::new(id) {
        Ok(m) => ws.engine.ask(&m),
        Err(_) => Ok(None),
    }
}

/// A wait for the answer of an ask that expired unanswered: it can never come (exit 3).
fn expired_ask(me: &AgentName, id: &str) -> Error {
    Error::refused(format!("ask {id} expired unanswered: no answer will come")).hint(format!(
        "ask again (`circe --agent {me} send --intent ask ...`), with a later --deadline"
    ))
}

/// circe's notice to an asker that its question was filed unread past its deadline (an
/// ask's expiry is read from its record).
fn is_filed_unread_notice(m: &crate::message::Message) -> bool {
    m.from_agent() == Some(crate::event::CIRCE) && m.intent.as_deref() == Some("update")
}

/// A wait for the answer of a question filed unread past its deadline (exit 3).
fn filed_unread(me: &AgentName, id: &str) -> Error {
    Error::refused(format!("{id} passed its deadline unread and was filed: no answer will come"))
        .hint(format!(
            "ask again (`circe --agent {me} send --intent question ...`), with a later --deadline or none"
        ))
}

/// When the wait looks at its condition again though no event came: when the first lease
/// it could take over runs out (`lapses`, not before `after`), and each `recheck` period
/// (`--poll`: what happened without an event in the log, such as an older circe's change
/// whose line has no id, still ends the wait).
fn wake_at(
    ws: &Workspace,
    (me, role): (&AgentName, &str),
    lapses: bool,
    recheck: Option<Duration>,
    after: Duration,
) -> Result<Option<Instant>> {
    let lapse = if lapses { next_lapse(ws, me, role, after)? } else { None };
    let tick = recheck.map(|p| Instant::now() + p);
    Ok([lapse, tick].into_iter().flatten().min())
}

/// The reply to a claim's commit never came: its retry (after connecting again) carries
/// its request id. Any other answer ends what that id stood for.
fn remember_request(
    request: &std::cell::RefCell<Option<String>>,
    tried: &Result<super::ClaimOutcome>,
) {
    match tried {
        Err(e) if e.is_transient() => {}
        Err(e) => {
            *request.borrow_mut() = e
                .details
                .iter()
                .find(|(k, _)| *k == "request_id")
                .and_then(|(_, r)| r.as_str().map(str::to_string));
        }
        Ok(_) => *request.borrow_mut() = None,
    }
}

/// When the first lease of a task another agent holds that `me` may take over runs out (by
/// the clock that decides leases, a little after, and not before `at_least` from now). `None`: no such
/// task.
fn next_lapse(
    ws: &Workspace,
    me: &AgentName,
    role: &str,
    at_least: Duration,
) -> Result<Option<Instant>> {
    let who = ws.eligibility_by_root_clock(me, role)?;
    let mut first = None;
    ws.engine.board(&mut |row| {
        if let Some(t) = who.lease_to_take_over(&row) {
            first = Some(first.map_or(t, |f: chrono::DateTime<chrono::Utc>| f.min(t)));
        }
        Ok(())
    })?;
    let Some(first) = first else { return Ok(None) };
    let after = (first - who.at).to_std().unwrap_or_default() + Duration::from_millis(20);
    Ok(Some(Instant::now() + after.max(at_least)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        assert_eq!(Condition::parse("inbox").unwrap(), Condition::Inbox);
        assert_eq!(
            Condition::parse("status:T-1=complete").unwrap(),
            Condition::Status(TaskId::new("T-1").unwrap(), Status::Completed)
        );
        assert_eq!(Condition::parse("reply:abc-1").unwrap(), Condition::Reply("abc-1".into()));
        for bad in ["", "inbox2", "status:T-1", "status:T-1=done", "reply:a/b", "status:../x=new"] {
            assert!(Condition::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_can_still_happen() {
        assert!(reachable(Status::New).contains(&Status::Completed));
        assert_eq!(reachable(Status::Failed), [Status::Failed]);
        assert!(!reachable(Status::Completed).contains(&Status::New));
        assert!(reachable(Status::Parked).contains(&Status::Completed), "requeued, then done");
    }
}
