//! `circe tasks`: the board.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::clock;
use crate::error::{Error, Result};
use crate::task::{Status, board};

/// The board: every task with status, owner, age, lease left and checks passed/total.
#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Only tasks with this status.
    #[arg(long)]
    pub status: Option<String>,
    /// Only tasks held by this agent.
    #[arg(long)]
    pub owner: Option<String>,
}

/// `95s` -> `1m35s`-style short durations (negative: `-`).
pub fn short(secs: i64) -> String {
    if secs < 0 {
        return "expired".into();
    }
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d{:02}h", secs / 86_400, (secs % 86_400) / 3600),
    }
}

pub fn run(ctx: &Ctx, a: &TasksArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let want = match &a.status {
        Some(s) => Some(Status::parse(s).ok_or_else(|| {
            Error::usage(format!("unknown status `{s}`"))
                .hint("new, claimed, in_progress, blocked, completed, failed, parked")
        })?),
        None => None,
    };
    let now = clock::now();
    let mut rows = Vec::new();
    let mut list = Vec::new();
    // One file read for the whole board (task::board), not two per task.
    for r in board::rows(&ws)? {
        if want.is_some_and(|w| w != r.status)
            || a.owner.as_deref().is_some_and(|o| r.owner.as_deref() != Some(o))
        {
            continue;
        }
        let age =
            clock::parse(&r.created_at).map_or("-".into(), |t| short((now - t).num_seconds()));
        let lease = match (&r.lease_expires_at, r.status.is_owned()) {
            (Some(l), true) => {
                clock::parse(l).map_or("-".into(), |t| short((t - now).num_seconds()))
            }
            _ => "-".into(),
        };
        if ctx.json {
            list.push(r);
            continue;
        }
        rows.push(vec![
            r.task,
            r.status.as_str().into(),
            r.owner.unwrap_or_else(|| "-".into()),
            age,
            lease,
            format!("{}/{}", r.checks_passed, r.checks_total),
            format!("{} -> {}", r.intent, r.to),
        ]);
    }
    let human = if ctx.json {
        String::new()
    } else if rows.is_empty() {
        "no tasks\n".to_string()
    } else {
        table(&["TASK", "STATUS", "OWNER", "AGE", "LEASE", "CHECKS", "INTENT"], &rows)
    };
    Ok(Report::new(human, json!({"tasks": list})))
}
