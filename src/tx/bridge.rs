//! The bridge to a TX message folder (`.ai/tx/msgs/`), pure parts: reading a TX file into a
//! message circe can store, and giving the original back for `export tx`.
//!
//! An imported file is kept byte for byte. What circe needs and the file leaves out (TX's
//! optional-in-practice `status` and `timestamp`, a task's `task-id`, ...) is added as lines
//! just before the closing `---`, after a marker line `circe-import: "<original name>"`.
//! Export cuts from the marker to the closing `---` and writes the original name, so an
//! imported folder exports byte for byte.

use chrono::{DateTime, Datelike, Utc};

use super::filename::{TxName, parse_tx_name};
use super::semantics::{Semantics, semantics};
use crate::message::{self, Message, Mode};

/// The marker key.
pub const MARK: &str = "circe-import";

/// A TX file made ready for a circe box.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The message as stored (it parses in `Stored` mode).
    pub message: Message,
    /// The original bytes with the added lines.
    pub content: Vec<u8>,
    /// The fields circe added (front-matter keys), in order.
    pub filled: Vec<String>,
}

/// The status TX leaves out, by type: a request starts, a report is complete.
fn default_status(intent: &str) -> &'static str {
    match semantics(intent) {
        Semantics::ClosesAsk | Semantics::CompletesTask => "complete",
        Semantics::Plain if intent == "update" => "complete",
        _ => "start",
    }
}

/// The first problem of a parse, for a report line.
fn first(problems: &[message::Problem]) -> String {
    problems.first().map_or_else(|| "does not parse".into(), ToString::to_string)
}

/// Read TX file `name` (its `bytes`) as a circe message. `year`: TX names carry none, so a
/// missing `timestamp` is the name's time in this year (else `now`). `task_of`: the task a
/// replied-to message belongs to (a `task-complete` without `task-id` inherits it).
pub fn import_file(
    name: &str,
    bytes: &[u8],
    now: DateTime<Utc>,
    task_of: &dyn Fn(&str) -> Option<String>,
) -> Result<Imported, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let opening = text.trim_start_matches('\u{feff}').split('\n').next().unwrap_or_default();
    if opening.trim_end() != "---" {
        if opening.starts_with("---\r") {
            return Err(
                "its lines end with a lone CR (classic Mac OS): save it with LF line ends".into()
            );
        }
        return Err("not a TX message: it does not start with a `---` front matter".into());
    }
    let tx = parse_tx_name(name);
    // `to` or `type` left out: the file name says them (front matter wins where present).
    let mut pre: Vec<(String, String)> = Vec::new();
    let draft = match message::parse(text, Mode::Draft) {
        Ok(m) => m,
        Err(p) if p.iter().all(|p| p.message == "missing required header") => {
            let Some(n) = &tx else { return Err(first(&p)) };
            for field in p.iter().filter_map(|p| p.field.as_deref()) {
                match field {
                    "to" => pre.push(("to".into(), n.split(None).0)),
                    "type" => pre.push(("type".into(), n.kind.clone())),
                    _ => {}
                }
            }
            let m = message::parse(&with_lines(text, name, &pre), Mode::Draft)
                .map_err(|p| first(&p))?;
            // With the msg-id known, the name splits `to` from it exactly.
            if let (Some(id), Some(to)) =
                (m.msg_id.as_deref(), pre.iter_mut().find(|(k, _)| k == "to"))
            {
                to.1 = n.split(Some(id)).0;
            }
            m
        }
        Err(p) => return Err(first(&p)),
    };
    let mut fills_all = pre;
    fills_all.extend(fills(&draft, tx.as_ref(), now, task_of)?);
    let fills = fills_all;
    let content = with_lines(text, name, &fills);
    let message = message::parse(&content, Mode::Stored).map_err(|p| first(&p))?;
    let filled = fills.into_iter().map(|(k, _)| k).collect();
    Ok(Imported { message, content: content.into_bytes(), filled })
}

/// The lines to add: every field circe needs that the file lacks.
fn fills(
    m: &Message,
    tx: Option<&TxName>,
    now: DateTime<Utc>,
    task_of: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let msg_id = m.msg_id.clone().or_else(|| {
        let id = tx?.split(None).1;
        crate::names::check_msg_id(&id).is_ok().then_some(id)
    });
    let Some(msg_id) = msg_id else {
        return Err("no msg-id, and the file name holds none".into());
    };
    if m.from.is_none() {
        let from = tx.map(|n| n.from.clone()).ok_or("no `from`, and the file name holds none")?;
        out.push(("from".into(), from));
    }
    let intent = m.intent.clone().unwrap_or_default();
    if m.task_id.is_none() {
        let task = match semantics(&intent) {
            Semantics::OpensTask => {
                crate::names::check_task_id(&msg_id).map_err(|_| {
                    format!(
                        "a task needs a task id, and its msg-id `{msg_id}` is not one (A-Z a-z 0-9 - _)"
                    )
                })?;
                Some(msg_id.clone())
            }
            _ => m.in_reply_to.as_deref().and_then(task_of),
        };
        if let Some(t) = task {
            out.push(("task-id".into(), t));
        }
    }
    if m.status.is_none() {
        out.push(("status".into(), default_status(&intent).into()));
    }
    if m.created_at.is_none() {
        // A name holds no year: this year's, unless that lies ahead by more than a day (a
        // file of 31 December imported on 1 January is last year's).
        let at = tx
            .and_then(|n| {
                n.time_in(now.year())
                    .filter(|t| *t <= now + chrono::Duration::days(1))
                    .or_else(|| n.time_in(now.year() - 1))
            })
            .unwrap_or(now);
        out.push(("timestamp".into(), crate::clock::format(at)));
    }
    if m.msg_id.is_none() {
        out.push(("msg-id".into(), msg_id));
    }
    Ok(out)
}

/// `text` with the marker and `fills` added before the closing `---` (in the file's own line
/// ending).
fn with_lines(text: &str, name: &str, fills: &[(String, String)]) -> String {
    let Some((close, eol)) = closing_line(text) else { return text.to_string() };
    let mut out = String::with_capacity(text.len() + 64 * (fills.len() + 1));
    out.push_str(&text[..close]);
    let quoted = serde_json::to_string(name).unwrap_or_default();
    out.push_str(&format!("{MARK}: {quoted}{eol}"));
    for (k, v) in fills {
        out.push_str(&format!("{k}: {v}{eol}"));
    }
    out.push_str(&text[close..]);
    out
}

/// The byte offset of the front matter's closing `---` line, and the line ending to use.
fn closing_line(text: &str) -> Option<(usize, &'static str)> {
    let mut start = 0;
    let mut first = true;
    for line in text.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        if !first && bare.trim_end() == "---" {
            let eol = if bare.ends_with('\r') { "\r\n" } else { "\n" };
            return Some((start, eol));
        }
        first = false;
        start += line.len();
    }
    None
}

/// A stored message as TX wrote it: for an imported one, its original name and bytes (the
/// added lines cut); `None` for any other, and for one whose mark names no plain file name
/// (any agent can write the mark: it is exported as circe's own then).
pub fn original(content: &[u8]) -> Option<(String, Vec<u8>)> {
    let text = std::str::from_utf8(content).ok()?;
    let (close, _) = closing_line(text)?;
    let head = &text[..close];
    let mark = format!("{MARK}: ");
    let at = head
        .match_indices(&mark)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || head.as_bytes()[i - 1] == b'\n')?;
    let line = head[at..].split('\n').next()?.trim_end_matches('\r');
    let name: String = serde_json::from_str(&line[mark.len()..]).ok()?;
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control);
    if !plain {
        return None;
    }
    let mut bytes = Vec::with_capacity(content.len());
    bytes.extend_from_slice(&content[..at]);
    bytes.extend_from_slice(&content[close..]);
    Some((name, bytes))
}

/// Where an imported message lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// History: LOGS (answered asks, completed tasks, responses, updates, prompts).
    History,
    /// An ask still waiting: its recipient's INBOX and an open ask.
    OpenAsk,
    /// A task nobody completed: a waiting task in NEW_MESSAGES.
    OpenTask,
}

/// Where each message lands, from the whole folder (in time order): an ask is answered when
/// an `ask-response` replies to it, a task completed when a `task-complete` does. A task
/// message is one whose intent `opens_task` says so (TX's `task`, and every CIRCE intent
/// that opens a task); of several naming one task (a task handed on), the last one is the
/// task's ticket and the earlier ones are history.
pub fn landings(msgs: &[&Message], opens_task: &dyn Fn(&str) -> bool) -> Vec<Landing> {
    use std::collections::{HashMap, HashSet};
    // One pass for what the later messages say (a folder of thousands stays linear): the
    // ids replied to by each kind of reply, the tasks a `task-complete` names (by
    // `in-reply-to` or by `task-id` alone), and each task's last task message.
    let opens = |m: &Message| m.intent.as_deref().is_some_and(opens_task);
    let mut replied: HashSet<(&str, Semantics)> = HashSet::new();
    let mut completed: HashSet<&str> = HashSet::new();
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (at, r) in msgs.iter().enumerate() {
        let kind = r.intent.as_deref().map(semantics);
        if let (Some(id), Some(k)) = (r.in_reply_to.as_deref(), kind) {
            replied.insert((id, k));
        }
        if let (Some(t), Some(Semantics::CompletesTask)) = (r.task_id.as_deref(), kind) {
            completed.insert(t);
        }
        if let Some(t) = r.task_id.as_deref().filter(|_| opens(r)) {
            last.insert(t, at);
        }
    }
    let replied =
        |id: Option<&str>, kind: Semantics| id.is_some_and(|id| replied.contains(&(id, kind)));
    msgs.iter()
        .enumerate()
        .map(|(at, m)| {
            let id = m.msg_id.as_deref();
            let task = m.task_id.as_deref();
            // A later task message of the same task: this one was handed on.
            let handed_on = task.is_some_and(|t| last.get(t).is_some_and(|&l| l > at));
            match m.intent.as_deref().map(semantics) {
                Some(Semantics::OpensAsk) if !replied(id, Semantics::ClosesAsk) => Landing::OpenAsk,
                _ if opens(m)
                    && !replied(id, Semantics::CompletesTask)
                    && !task.is_some_and(|t| completed.contains(t))
                    && !handed_on =>
                {
                    Landing::OpenTask
                }
                _ => Landing::History,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
