//! Open asks (TX `ask`, `ask-human`): recorded when delivered, closed by the one
//! `ask-response` that answers them, listed by `circe asks`, expired by `circe reap` once
//! their deadline passed.

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::names::{AgentName, MsgId, TaskId};
use crate::tx::{ASK_FORMAT, AskRecord, AskState, Semantics, semantics};
use crate::workspace::Workspace;

/// The record of an ask just delivered to `recipients` (kept as it is when a retry finds it).
pub fn record(
    ws: &Workspace,
    me: &AgentName,
    msg: &Message,
    recipients: &[AgentName],
) -> Result<AskRecord> {
    let id = MsgId::new(msg.msg_id.clone().unwrap_or_default())?;
    if let Some(r) = ws.engine.ask(&id)? {
        return Ok(r);
    }
    let rec = AskRecord {
        v: ASK_FORMAT,
        msg_id: id,
        intent: msg.intent.clone().unwrap_or_else(|| "ask".into()),
        from: me.clone(),
        to: msg.to.clone().unwrap_or_default(),
        recipients: recipients.to_vec(),
        task: msg.task_id.as_deref().and_then(|t| TaskId::new(t).ok()),
        // What the ask is about: its headline, else its summary (an ask sent with flags).
        headline: msg
            .headline
            .clone()
            .or_else(|| Some(super::seq::summary(msg)).filter(|s| !s.is_empty())),
        asked_at: clock::stamp(msg.created_at.unwrap_or_else(|| ws.now())),
        deadline: msg.deadline.map(clock::stamp),
        state: AskState::Open,
        answer: None,
        answered_by: None,
        answered_at: None,
        rev: 0,
    };
    ws.engine.put_ask(&rec, None)
}

/// Is message `id` in one of the asker's boxes (where its answer lands)?
fn answer_delivered(ws: &Workspace, rec: &AskRecord, id: &str) -> Result<bool> {
    let boxes =
        [Mailbox::Inbox(rec.from.clone()), Mailbox::Workspace(rec.from.clone()), Mailbox::Logs];
    let found = super::find_in(ws, &boxes, id)?;
    Ok(found.iter().any(|f| f.message.as_ref().and_then(|m| m.msg_id.as_deref()) == Some(id)))
}

/// Hold the answering of ask `id` (waiting for another answer under way): see
/// `Engine::hold_ask`.
pub fn hold<'a>(ws: &'a Workspace, id: &MsgId) -> Result<Option<crate::engine::Held<'a>>> {
    // TEST BUILDS ONLY (CIRCE_TEST_BREAK=ask-unheld): an answer holds nothing.
    if crate::fault::test_break("ask-unheld") {
        return Ok(None);
    }
    ws.engine.hold_ask(id, true)
}

/// TEST BUILDS ONLY (CIRCE_TEST_BREAK=ask-slow-answer): a pause between an answer's mark and
/// its delivery, so a race test meets it under way.
pub fn slow_answer() {
    if crate::fault::test_break("ask-slow-answer") {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// An ask left `answering` by a crash: answered if its answer was delivered, else open again.
/// One still under way (its answerer holds it) is left as it is.
pub fn settle(ws: &Workspace, rec: AskRecord) -> Result<AskRecord> {
    if rec.state != AskState::Answering {
        return Ok(rec);
    }
    let Some(_held) = ws.engine.hold_ask(&rec.msg_id, false)? else { return Ok(rec) };
    // Read again under the hold: the answer may have closed it meanwhile.
    let Some(rec) = ws.engine.ask(&rec.msg_id)? else { return Ok(rec) };
    if rec.state != AskState::Answering {
        return Ok(rec);
    }
    let delivered = match &rec.answer {
        Some(a) => answer_delivered(ws, &rec, a)?,
        None => false,
    };
    let next = if delivered {
        AskRecord { state: AskState::Answered, ..rec.clone() }
    } else {
        AskRecord {
            state: AskState::Open,
            answer: None,
            answered_by: None,
            answered_at: None,
            ..rec.clone()
        }
    };
    ws.engine.put_ask(&next, Some(rec.rev))
}

/// The ask `id` names, settled; recovered from the ask message itself when a crash left it
/// delivered but unrecorded (found in `me`'s boxes, where it was delivered).
fn load(ws: &Workspace, me: &AgentName, id: &MsgId) -> Result<Option<AskRecord>> {
    if let Some(r) = ws.engine.ask(id)? {
        return settle(ws, r).map(Some);
    }
    let mine = [Mailbox::Inbox(me.clone()), Mailbox::Workspace(me.clone()), Mailbox::Logs];
    let found = super::find_in(ws, &mine, id.as_str())?;
    let ask = found.into_iter().filter_map(|f| f.message).find(|m| {
        m.msg_id.as_deref() == Some(id.as_str())
            && m.intent.as_deref().map(semantics) == Some(Semantics::OpensAsk)
    });
    let Some(m) = ask else { return Ok(None) };
    let Some(from) = m.from_agent().and_then(|f| AgentName::new(f).ok()) else { return Ok(None) };
    record(ws, &from, &m, std::slice::from_ref(me)).map(Some)
}

/// The open asks addressed to `me`, for a refusal's hint.
fn open_for(ws: &Workspace, me: &AgentName) -> Result<Vec<String>> {
    Ok(ws
        .engine
        .asks()?
        .into_iter()
        .filter(|a| a.is_open() && a.recipients.contains(me))
        .map(|a| format!("{} from {}", a.msg_id, a.from))
        .collect())
}

/// The open ask an `ask-response` from `me` answers (`in_reply_to`), or the refusal: no
/// in-reply-to, no such ask, not addressed to `me`, answered already (by another message
/// than `own`, the response's msg id: a retry of the same answer passes), past its deadline.
pub fn answered_by(
    ws: &Workspace,
    me: &AgentName,
    in_reply_to: Option<&str>,
    own: Option<&str>,
) -> Result<AskRecord> {
    let hint = |ws: &Workspace| -> String {
        match open_for(ws, me) {
            Ok(v) if !v.is_empty() => format!("open asks for {me}: {}", v.join("; ")),
            _ => format!("{me} has no open ask to answer; `circe asks` lists them"),
        }
    };
    let Some(id) = in_reply_to else {
        return Err(Error::refused("an ask-response must name the ask it answers (in-reply-to)")
            .hint(hint(ws)));
    };
    let rec = match MsgId::new(id) {
        Ok(mid) => load(ws, me, &mid)?,
        Err(_) => None,
    };
    let Some(rec) = rec else {
        return Err(Error::refused(format!("in-reply-to `{id}` names no ask")).hint(hint(ws)));
    };
    if !rec.recipients.contains(me) {
        return Err(Error::refused(format!(
            "ask {id} was addressed to {}, not to {me}",
            rec.recipients.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ))
        .hint(hint(ws)));
    }
    match rec.state {
        AskState::Open => {}
        AskState::Answered | AskState::Answering
            if own.is_some() && rec.answer.as_deref() == own =>
        {
            return Ok(rec);
        }
        AskState::Answered | AskState::Answering => {
            return Err(Error::refused(format!(
                "ask {id} was answered already by {} ({})",
                rec.answer.as_deref().unwrap_or("-"),
                rec.answered_by.as_ref().map_or("-", AgentName::as_str)
            ))
            .hint("an ask takes one answer; say more with an `update` in reply to it"));
        }
        AskState::Expired => {
            return Err(Error::refused(format!(
                "ask {id} expired: its deadline passed unanswered"
            ))
            .hint(format!("{} was told; send an `update` if the answer still matters", rec.from)));
        }
    }
    let due = rec.deadline.as_deref().and_then(clock::parse);
    if let Some(d) = due
        && d <= ws.root_now()?
    {
        return Err(Error::refused(format!(
            "ask {id} is past its deadline {}",
            rec.deadline.as_deref().unwrap_or("-")
        ))
        .hint("`circe reap` expires it and tells the asker"));
    }
    Ok(rec)
}

/// Mark `rec` as being answered by `answer` (before the answer is delivered).
pub fn answering(
    ws: &Workspace,
    me: &AgentName,
    rec: &AskRecord,
    answer: &str,
) -> Result<AskRecord> {
    let next = AskRecord {
        state: AskState::Answering,
        answer: Some(answer.to_string()),
        answered_by: Some(me.clone()),
        answered_at: Some(clock::stamp(ws.now())),
        ..rec.clone()
    };
    ws.engine.put_ask(&next, Some(rec.rev))
}

/// The answer was delivered: the ask is closed.
pub fn answered(ws: &Workspace, rec: &AskRecord) -> Result<AskRecord> {
    ws.engine.put_ask(&AskRecord { state: AskState::Answered, ..rec.clone() }, Some(rec.rev))
}

/// One ask as `circe asks` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct AskRow {
    #[serde(flatten)]
    pub ask: AskRecord,
    /// Seconds since it was asked.
    pub age_seconds: i64,
}

/// Every ask (settled), open ones only unless `all`, oldest first.
pub fn list(ws: &Workspace, all: bool) -> Result<Vec<AskRow>> {
    let now = ws.now().timestamp();
    let mut rows = Vec::new();
    for r in ws.engine.asks()? {
        let r = settle(ws, r)?;
        if all || r.is_open() {
            let age = clock::epoch_secs(&r.asked_at).map_or(0, |t| now - t);
            rows.push(AskRow { ask: r, age_seconds: age });
        }
    }
    rows.sort_by(|a, b| a.ask.asked_at.cmp(&b.ask.asked_at).then(a.ask.msg_id.cmp(&b.ask.msg_id)));
    Ok(rows)
}

/// An overdue ask left open (its msg id), and why its asker could not be told.
pub type KeptOpen = (String, crate::error::Error);

/// Expire the open asks whose deadline passed (`circe reap`), each after `tell` has told
/// its asker. Returns them, and those kept open with why.
///
/// Held while it is told and expired: an answer under way (holding the ask) finishes first,
/// and one that comes after finds it expired. Told first, then expired: an ask whose asker
/// cannot be told stays open (the next run tries again) rather than expire unsaid, and a
/// run cut off between the two leaves it open, for the next run (whose `tell` finds the
/// notice there already).
pub fn expire(
    ws: &Workspace,
    tell: &dyn Fn(&AskRecord) -> Result<()>,
) -> Result<(Vec<AskRecord>, Vec<KeptOpen>)> {
    // The root's clock decides a deadline (a database server's), as it does a task's.
    let now = ws.root_now()?;
    let (mut out, mut kept) = (Vec::new(), Vec::new());
    for r in ws.engine.asks()? {
        let r = settle(ws, r)?;
        let due = |r: &AskRecord| {
            r.state == AskState::Open
                && r.deadline.as_deref().and_then(clock::parse).is_some_and(|d| d <= now)
        };
        if !due(&r) {
            continue;
        }
        let Some(_held) = ws.engine.hold_ask(&r.msg_id, false)? else { continue };
        // Read again under the hold: an answer may have closed it meanwhile.
        let Some(r) = ws.engine.ask(&r.msg_id)?.filter(due) else { continue };
        if let Err(e) = tell(&r) {
            kept.push((r.msg_id.to_string(), e));
            continue;
        }
        crate::fault::crash_point("ask.told");
        out.push(
            ws.engine.put_ask(&AskRecord { state: AskState::Expired, ..r.clone() }, Some(r.rev))?,
        );
    }
    Ok((out, kept))
}
