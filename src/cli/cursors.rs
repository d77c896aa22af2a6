//! `circe cursors`.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::error::Result;
use crate::ops::stream::{KIND, SavedCursor};

/// The consumers' saved places: each cursor's kind, name, the last event it handed on, how
/// far behind the log it is, when it last moved, and its dead letters.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  circe cursors\n  circe cursors --json")]
pub struct CursorsArgs {}

pub fn run(ctx: &Ctx, _a: &CursorsArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let newest = ws.engine.last_event_id()?;
    let mut rows = Vec::new();
    let mut list = Vec::new();
    for (kind, name) in ws.engine.cursors()? {
        let raw = ws.engine.read_cursor(&kind, &name)?.unwrap_or_default();
        let (after, saved_at) = if kind == KIND {
            match SavedCursor::parse(&name, &raw) {
                Ok(c) => (Some(c.after), Some(c.saved_at)),
                Err(_) => (None, None),
            }
        } else {
            (None, None)
        };
        let dead = if kind == KIND { ws.engine.dead_letters(&name)?.len() } else { 0 };
        let behind = after.map(|a| newest.saturating_sub(a));
        rows.push(vec![
            kind.clone(),
            name.to_string(),
            after.map_or("-".into(), |a| a.to_string()),
            behind.map_or("-".into(), |b| b.to_string()),
            saved_at.clone().unwrap_or_else(|| "-".into()),
            dead.to_string(),
        ]);
        list.push(json!({"kind": kind, "name": name, "after": after, "behind": behind, "saved_at": saved_at, "dead_letters": dead}));
    }
    let human = if rows.is_empty() {
        "no cursors\n".to_string()
    } else {
        table(&["KIND", "NAME", "AFTER", "BEHIND", "SAVED", "DEAD"], &rows)
    };
    Ok(Report::new(human, json!({"last_event_id": newest, "cursors": list})))
}
