//! `circe cursors`.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::names::CursorName;
use crate::ops::stream::{KIND, SavedCursor};

/// The consumers' saved places: each cursor's kind, name, the last event it handed on, how
/// far behind the log it is, when it last moved, and its dead letters. `--remove NAME`
/// forgets a consumer that is gone for good (its cursor and dead letters), so the archive
/// may take the events it had not read.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe cursors\n  circe cursors --json\n  circe cursors --remove old-notifier\n  circe cursors --remove team-feed --kind chat"
)]
pub struct CursorsArgs {
    /// Forget this consumer: remove its cursor (and dead letters). A running consumer holds
    /// its cursor: exit 4 until it stops.
    #[arg(long, value_name = "NAME")]
    pub remove: Option<String>,
    /// With --remove: the cursor's kind, `events` (watch) or `chat` (chat watch).
    #[arg(long, value_name = "KIND", default_value = KIND, requires = "remove", value_parser = [KIND, "chat"])]
    pub kind: String,
}

pub fn run(ctx: &Ctx, a: &CursorsArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    if let Some(name) = &a.remove {
        return remove(&ws, &a.kind, &CursorName::new(name.as_str())?);
    }
    let newest = ws.engine.last_event_id()?;
    let mut rows = Vec::new();
    let mut list = Vec::new();
    for (kind, name) in consumers(&ws)? {
        let raw = ws.engine.read_cursor(&kind, &name)?;
        let (mut after, mut saved_at, mut problem) = (None, None, None);
        match (kind.as_str(), raw) {
            (KIND, Some(raw)) => match SavedCursor::parse(&name, &raw) {
                Ok(c) => (after, saved_at) = (Some(c.after), Some(c.saved_at)),
                Err(e) => problem = Some(e.message),
            },
            (_, Some(raw)) => match chat_line(&raw) {
                Ok((l, at)) => (after, saved_at) = (Some(l), at),
                Err(why) => problem = Some(why),
            },
            (_, None) => {}
        }
        let dead = if kind == KIND { ws.engine.dead_letters(&name)?.len() } else { 0 };
        let behind = if kind == KIND { after.map(|a| newest.saturating_sub(a)) } else { None };
        rows.push(vec![
            kind.clone(),
            name.to_string(),
            after.map_or_else(
                || if problem.is_some() { "damaged" } else { "-" }.into(),
                |a| a.to_string(),
            ),
            behind.map_or("-".into(), |b| b.to_string()),
            saved_at.clone().unwrap_or_else(|| "-".into()),
            dead.to_string(),
        ]);
        list.push(json!({"kind": kind, "name": name, "after": after, "behind": behind, "saved_at": saved_at, "dead_letters": dead, "problem": problem}));
    }
    let mut human = if rows.is_empty() {
        "no cursors\n".to_string()
    } else {
        table(&["KIND", "NAME", "AFTER", "BEHIND", "SAVED", "DEAD"], &rows)
    };
    if list.iter().any(|c| !c["problem"].is_null()) {
        human.push_str("a damaged cursor: `circe cursors --json` says why; `circe cursors --remove NAME` starts it afresh\n");
    }
    Ok(Report::new(human, json!({"last_event_id": newest, "cursors": list})))
}

/// The last channel line a chat cursor handed on, and when it was saved. Both engines' chat
/// cursors keep the line to read on from (`line`, section 13) and the time (`saved_at`,
/// absent in one an older circe saved).
fn chat_line(raw: &[u8]) -> std::result::Result<(u64, Option<String>), String> {
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    let line = v
        .get("line")
        .and_then(serde_json::Value::as_u64)
        .map(|l| l.saturating_sub(1))
        .ok_or_else(|| "no line number".to_string())?;
    Ok((line, v.get("saved_at").and_then(serde_json::Value::as_str).map(str::to_string)))
}

/// Every saved cursor, and each consumer that has dead letters but never saved a cursor
/// (it died before its first save): (kind, name), sorted.
fn consumers(ws: &crate::workspace::Workspace) -> Result<Vec<(String, CursorName)>> {
    let mut all = ws.engine.cursors()?;
    for name in ws.engine.dead_letter_consumers()? {
        let key = (KIND.to_string(), name);
        if !all.contains(&key) {
            all.push(key);
        }
    }
    all.sort();
    Ok(all)
}

/// `--remove`: hold the cursor (no consumer is running on it), then forget it.
fn remove(ws: &crate::workspace::Workspace, kind: &str, name: &CursorName) -> Result<Report> {
    // A name that is no cursor is said before anything is held (no lock file is made for it).
    let known = consumers(ws)?;
    if !known.iter().any(|(k, n)| k == kind && n == name) {
        return Err(no_cursor(kind, name, &known));
    }
    let Some(_hold) = ws.engine.hold_cursor(kind, name)? else {
        return Err(Error::conflict(format!(
            "cursor `{name}` ({kind}) is in use by a running consumer"
        ))
        .hint("stop that consumer first (SIGINT or SIGTERM ends it), then remove it"));
    };
    let dead = if kind == KIND { ws.engine.dead_letters(name)?.len() } else { 0 };
    // A cursor that does not read (damaged, a planted link) is still one to remove.
    let had_cursor = ws.engine.read_cursor(kind, name).map_or(true, |c| c.is_some());
    if !ws.engine.remove_cursor(kind, name)? {
        return Err(no_cursor(kind, name, &consumers(ws)?));
    }
    let human = match (had_cursor, dead) {
        (_, 0) => format!("removed cursor `{name}` ({kind})\n"),
        (true, n) => format!("removed cursor `{name}` ({kind}) and its {n} dead letter(s)\n"),
        (false, n) => format!("removed the {n} dead letter(s) of `{name}` (it had no cursor)\n"),
    };
    Ok(Report::new(human, json!({"removed": {"kind": kind, "name": name, "dead_letters": dead}})))
}

/// No cursor `name` of `kind`: exit 5, naming the cursors there are.
fn no_cursor(kind: &str, name: &CursorName, known: &[(String, CursorName)]) -> Error {
    let known: Vec<String> = known.iter().map(|(k, n)| format!("{n} ({k})")).collect();
    let other = if kind == "chat" { "events" } else { "chat" };
    let hint = if known.is_empty() {
        "there are no cursors".to_string()
    } else if known.iter().any(|k| k == &format!("{name} ({other})")) {
        format!(
            "the cursors are: {}; for the {other} cursor: `circe cursors --remove {name} --kind {other}`",
            known.join(", ")
        )
    } else {
        format!("the cursors are: {}", known.join(", "))
    };
    Error::not_found(format!("no {kind} cursor `{name}`")).hint(hint)
}
